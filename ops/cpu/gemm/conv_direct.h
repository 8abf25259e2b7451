// Internal to ops/cpu: convolution GEMM operands without im2col, for 1-D /
// 2-D convolutions. With stride 1 and an output plane of the input's size
// (3x3 pad 1, 5x5 pad 2, dilated equivalents: most KxK layers of ResNet,
// GoogLeNet and SqueezeNet), flattened over the plane, output position p
// and tap (kh, kw) read input p + (kh * dh - ph) * w + (kw * dw - pw): the B
// operand of Y = W * im2col(X) is the input itself at a per-tap offset, with
// lane masks for the taps that fall into the padding (the "linear" plan).
// The tile kernel (ConvTileFn, AVX-512 only) loads those rows directly, so
// nothing is packed; for more channels (where reloading the rows per 8
// channels costs more than packing them once) ConvDirectPanel makes Sgemm's
// right panels with the same masked loads, and ConvDirectLeftPanel the
// left panels of the transposed GEMM (few positions). Other geometries
// (strides, smaller outputs) use the same panels by masked gathers at a
// per-position base offset plus the tap's. The weights are the usual packed
// operand (PackedMatrix, K in (c, kh, kw) order, layout unchanged) and the
// epilogue is the GEMM's.
#pragma once

#include <cstdint>
#include <vector>

#include "ops/cpu/gemm/kernels.h"
#include "ops/cpu/gemm/sgemm.h"
#include "ops/parallel.h"

namespace orrery::ops::cpu::gemm_internal {

// Per-shape tables, built once in Conv's Prepare.
struct ConvDirectPlan {
  int64_t h = 0, w = 0;  // the output plane (linear: the input's too)
  int64_t k_vol = 0;
  std::vector<int64_t> off;     // [k_vol]: input offset of each tap
  std::vector<uint16_t> masks;  // [panel][k_vol][3]: lanes of each 48-column panel
  // Empty for the linear plan (stride 1, output plane == input plane:
  // position p reads p + off[tap]); otherwise [panels * 48]: the input
  // offset of each output position (oh * sh * w_in + ow * sw; 0 past the
  // end), read by gathers at base + off[tap].
  std::vector<int32_t> base;

  bool linear() const { return base.empty(); }
  int64_t positions() const { return h * w; }
  int64_t panels() const { return (positions() + kPanelCols - 1) / kPanelCols; }
};

// The linear plan when the geometry fits (stride 1, output size == input
// size); else, when `gather`, the gather plan (any 2-D geometry whose
// plane offsets fit int32); else false, also when the tables would exceed
// 8 MiB (huge planes keep im2col). `g` is the convolution's im2col
// geometry, h_out its output height.
bool BuildConvDirectPlan(const Im2ColGeometry& g, int64_t h_out, bool gather,
                         ConvDirectPlan* plan);

// Stride-2 convolutions whose input plane is twice the output along both
// axes (3x3 pad 1 or 1x1 pad 0 on an even plane: ResNet's downsampling
// layers), undilated: split into its (row, column) parity planes, each the
// output's size, the input makes every tap a shifted read of one of them,
// i.e. the linear plan over those planes (masked loads, the im2col-free
// tile), where the gather plan read each position's inputs by stride-2
// runs. The planes of each channel (only the parities some tap reads) are
// stored consecutively: channel c's plane `slot` at (c * phases + slot) *
// h_out * w_out.
struct PhaseSplit {
  int64_t phases = 0;                // parity planes per channel (1..4)
  int8_t slot[4] = {-1, -1, -1, -1};  // plane index of parity 2 * (row odd) + (col odd)
  int64_t h_in = 0, w_in = 0, h_out = 0, w_out = 0;
  int64_t plane_vol() const { return phases * h_out * w_out; }  // per channel
  // Bytes of the planes of `channels` channels, rounded up to 64 (the
  // scratch a convolution sets aside for them).
  int64_t bytes(int64_t channels) const {
    return (channels * plane_vol() * static_cast<int64_t>(sizeof(float)) + 63) / 64 * 64;
  }
};
// The plan over the parity planes (a linear plan: read with plane_vol() as
// the channel stride) and the split, when the geometry fits; else false.
bool BuildConvPhasePlan(const Im2ColGeometry& g, int64_t h_out, ConvDirectPlan* plan,
                        PhaseSplit* split);
// dst[(c * phases + slot) * h_out * w_out + i * w_out + j] = x[c * h_in *
// w_in + (2 i + row parity) * w_in + 2 j + column parity] for c < channels.
// Portable, and AVX-512 (transpose_avx512.cc; only when ActiveGemmIsa() is
// kAvx512): one pass over the input, two loads and a permute per 16 outputs.
void SplitPhases(const PhaseSplit& s, const float* x, int64_t channels, float* dst);
void SplitPhasesAvx512(const PhaseSplit& s, const float* x, int64_t channels, float* dst);
// The walk both share: row_fn(row, out) for every output row of every
// stored parity plane, `row` the input row's first element of that parity
// (read every other element), `out` the plane's row of w_out floats.
template <class RowFn>
void ForEachPhaseRow(const PhaseSplit& s, const float* x, int64_t channels, float* dst, RowFn row_fn) {
  const int64_t in_vol = s.h_in * s.w_in, vol = s.h_out * s.w_out;
  for (int64_t c = 0; c < channels; ++c) {
    for (int par = 0; par < 4; ++par) {
      if (s.slot[par] < 0) continue;
      const float* src = x + c * in_vol + (par / 2) * s.w_in + par % 2;
      float* d = dst + (c * s.phases + s.slot[par]) * vol;
      for (int64_t i = 0; i < s.h_out; ++i) row_fn(src + 2 * i * s.w_in, d + i * s.w_out);
    }
  }
}

// Whether the tile (RunConvDirect; linear plans only) beats Sgemm over
// ConvDirectPanel for `channels` output channels per group (measured; see
// conv_direct.cc).
bool PreferConvDirectTile(const ConvDirectPlan& plan, int64_t channels);
// Same-size planes a little under the tile's minimum (14x14, 13x13) with
// 64..256 channels (512 when the tail kernel takes the last panel:
// ConvTailCols) and the depth in one block: the tile on any thread count
// (rows outer; two threads split the rows), instead of the transposed GEMM.
bool PreferConvDirectTileSmallPlane(const ConvDirectPlan& plan, int64_t channels,
                                    int64_t depth);
// A pointwise layer at most kConvDirectShallowMaxDepth deep on a plane of
// at least the tile's minimum: the tile reading X in place at any width
// (conv.cc runs it on one thread), instead of Sgemm packing X's panels.
inline constexpr int64_t kConvDirectShallowMaxDepth = 64;
bool PreferConvDirectTileShallow(const ConvDirectPlan& plan, int64_t depth);
// Like PreferConvDirectTile, for more channels when the depth (channels
// per group x window) is one K block (kConvFullDepthMax), on any thread
// count (column chunks per thread, see RunConvDirect).
bool PreferConvDirectTileFullDepth(const ConvDirectPlan& plan, int64_t channels,
                                   int64_t depth);

// One right panel for Sgemm's PanelSource (kern.conv_panel must be set):
// dst[k * w + j] = im2col(x)[k0 + k][j0 + j] for k < kc, j < w, zero past
// the plane; j0 must be a multiple of kPanelCols (Sgemm's panels are).
// Three masked loads and stores per row, where im2col copies row runs.
void ConvDirectPanel(const ConvDirectPlan& plan, const float* x, int64_t in_vol, int64_t k0,
                     int64_t kc, int64_t j0, int64_t w, float* dst, const GemmKernels& kern);

// One left panel of the transposed GEMM (positions as rows, see conv.cc)
// for Sgemm's PanelSource (kern.conv_rows must be set): dst[k * kPanelRows
// + i] = im2col(x)[k0 + k][i0 + i] for i < kPanelRows, zero past the plane;
// i0 a multiple of kPanelRows, or any when the window has at most
// kConvLeftPanelMaxTaps taps (LeftOperand::panel_rows < 8).
inline constexpr int64_t kConvLeftPanelMaxTaps = 64;
void ConvDirectLeftPanel(const ConvDirectPlan& plan, const float* x, int64_t in_vol, int64_t k0,
                         int64_t kc, int64_t i0, float* dst, const GemmKernels& kern);

// Columns of the plan's last panel that RunConvDirect gives kern.conv_tail
// instead of the tile (kernels.h): 1..kConvTailMaxCols for a small linear
// plane (RunConvDirect's rows-outer case) at full depth k whose last panel
// holds that few positions, when the ISA has the kernel; else 0.
int64_t ConvTailCols(const ConvDirectPlan& plan, int64_t k, const GemmKernels& kern);
// The same for a GEMM of n > kPanelCols columns (a pointwise convolution's
// positions, B read in place): n's last panel when it holds 1..4 columns
// and the ISA has conv_tail, else 0.
int64_t GemmTailCols(int64_t n, const GemmKernels& kern);
// Floats of conv_tail's B (ConvTailArgs::b) for `cols` columns at depth k.
inline int64_t ConvTailFloats(int64_t k, int64_t cols) { return k * cols; }

// Y[m x positions] = epilogue(W * im2col(X)) for one image and group: W is
// packed (m x k, k = channels * k_vol), x the group's channels. Splits tiles
// over `threads` like Sgemm; allocates nothing. `kern.conv_tile` must be set.
// `prefetch`: prefetch the input ahead in software (for inputs likely not in
// L2: a batch's planes, or channels over 1 MiB; see conv_direct.cc).
// `tail`: the B of kern.conv_tail for the last ConvTailCols(plan, k, kern)
// columns (their im2col, compact: kern.im2col with w = cols), filled by the
// caller, or null (the tile runs that panel too).
void RunConvDirect(const ConvDirectPlan& plan, const PackedMatrix& w, int64_t m, int64_t k,
                   int64_t in_vol, const float* x, float* y, const Epilogue& ep,
                   ThreadGroup* threads, const GemmKernels& kern, bool prefetch = false,
                   const float* tail = nullptr);

}  // namespace orrery::ops::cpu::gemm_internal
