// Internal to ops/cpu/gemm: the per-ISA micro-kernels behind Sgemm.
// Each kernel_<isa>.cc is compiled with its own -m flags and is only called
// after the CPU has been checked for that ISA (dispatch.cc).
#pragma once

#include <cstdint>

#include "ops/cpu/gemm/sgemm.h"

namespace orrery::ops::cpu::gemm_internal {

// One output tile: C[rows x cols] (=|+=) alpha * A_panel * B_panel over kc.
struct TileArgs {
  int64_t kc = 0;
  const float* a = nullptr;  // a[k * kPanelRows + i]
  const float* b = nullptr;  // b[k * ldb + j]
  int64_t w = 0;             // B panel width: 16, 32 or 48 (readable columns)
  int64_t ldb = 0;           // B row stride: w when packed, more when read in place
  int rows = 0;              // 1..kPanelRows
  int cols = 0;              // 1..w
  float* c = nullptr;
  int64_t ldc = 0;
  float alpha = 1.0f;
  bool load_c = false;  // add to C's content (later K blocks, accumulate)
  // Set on the last K block when GemmKernels::tile_post and PostInTile(*post):
  // the tile applies the post-GEMM epilogue to its registers before the
  // store (C's rows i0.., columns j0.. of the whole product).
  const Epilogue* post = nullptr;
  int64_t i0 = 0, j0 = 0;
  // Cache lines [prefetch, prefetch + 16 * prefetch_lines) to bring into L2
  // while the tile runs (at most one per k step; kernels may ignore it): the
  // driver spreads the next weight panel over the tiles of the current one,
  // so that weights streamed from memory arrive before they are needed.
  const float* prefetch = nullptr;
  int64_t prefetch_lines = 0;
};

// Epilogues a tile can apply in registers: biases, residual and an
// activation that is a clamp (none, Relu, Clip).
inline bool PostInTile(const Epilogue& ep) {
  return ep.act == Activation::kNone || ep.act == Activation::kRelu ||
         ep.act == Activation::kClip;
}

using TileFn = void (*)(const TileArgs& t);

// A 2-D depthwise (one channel in, one out) convolution plane; padding is
// resolved by `inner` (per kernel column: the output columns whose taps are
// inside the input) and ValidTaps-style row clipping, never in the inner loop.
struct DepthwiseGeometry {
  int64_t h_in = 0, w_in = 0, h_out = 0, w_out = 0;
  int64_t kh = 0, kw = 0, sh = 1, sw = 1, dh = 1, dw = 1, ph = 0, pw = 0;
  const int64_t* inner_begin = nullptr;  // [kw]
  const int64_t* inner_end = nullptr;    // [kw]
  // Optional lane table of the flat kernel for small planes (see
  // depthwise_flat.h); flat_vectors == 0 when absent. Kernels that do not
  // use it ignore it.
  int64_t flat_vectors = 0;
  const uint16_t* flat_mask = nullptr;
  const int32_t* flat_base = nullptr;
  const int32_t* flat_slot = nullptr;
  const int32_t* flat_gather = nullptr;
};
// Whether the AVX-512 depthwise row kernel (kernel_avx512.cc) takes the
// plane with its stride-2 path that loads each input row once and splits it
// into even / odd lanes: 3-wide window, stride 2 and left pad 1 along rows,
// no dilation there, w_out <= 128 (any window height, stride or padding).
inline bool RowsSplitStride2Taps3(const DepthwiseGeometry& g) {
  return g.sw == 2 && g.kw == 3 && g.dw == 1 && g.pw == 1 && g.w_out >= 1 && g.w_out <= 128;
}

// Planes [p0, p1) of a stack of N * c depthwise planes: plane p reads
// x + p * h_in * w_in and filter w + (p % c) * kh * kw, overwrites
// y + p * h_out * w_out, then gets the epilogue as row p % c of its image's
// [c x h_out * w_out] output matrix (ld_residual = h_out * w_out).
using DepthwiseFn = void (*)(const DepthwiseGeometry& g, const float* x, const float* w,
                             float* y, int64_t c, int64_t p0, int64_t p1, const Epilogue& ep);
// The post-GEMM epilogue on a block of C (see ApplyEpilogue in sgemm.h).
using EpilogueFn = void (*)(const Epilogue& ep, float* c, int64_t ldc, int64_t i0, int64_t j0,
                            int64_t rows, int64_t cols);

// im2col for a 2-D convolution (see Im2ColPanelImpl in epilogue_impl.h).
struct Im2ColGeometry {
  int64_t h_in = 0, w_in = 0, w_out = 0;
  int64_t kh = 0, kw = 0, sh = 1, sw = 1, dh = 1, dw = 1, ph = 0, pw = 0;
  int64_t in_vol = 0;                    // h_in * w_in
  const int64_t* inner_begin = nullptr;  // [kw]: output columns whose tap is inside
  const int64_t* inner_end = nullptr;
};
// dst[k * w + j] = im2col(x)[k0 + k][j0 + j] for k < kc, j < cols.
using Im2ColFn = void (*)(const Im2ColGeometry& g, const float* x, int64_t k0, int64_t kc,
                          int64_t j0, int64_t cols, int64_t w, float* dst);

// One output tile of a stride-1 convolution whose output plane has the
// input's size (see conv_direct.h), read straight from the input instead of
// im2col panels: C[rows x cols] (=|+) A_panel * B over depth [k0, k0 + kc),
// where B[k][j] = x[c * in_vol + j + off[t]] for k = c * k_vol + t, masked
// by masks[t * 3 + v] for the columns [16 v, 16 v + 16) of the tile (taps in
// the padding and columns past the plane are masked off and read as zero).
struct ConvTileArgs {
  int64_t kc = 0, k0 = 0;
  const float* a = nullptr;  // packed left panel at depth k0: a[k * kPanelRows + i]
  const float* x = nullptr;  // the group's input plus the tile's first column
  int64_t in_vol = 0, k_vol = 0;
  const int64_t* off = nullptr;     // [k_vol]
  const uint16_t* masks = nullptr;  // [k_vol][3] for this tile's columns
  int rows = 0;                     // 1..kPanelRows
  int cols = 0;                     // 1..kPanelCols
  float* c = nullptr;
  int64_t ldc = 0;
  bool load_c = false;
  const Epilogue* post = nullptr;  // as TileArgs::post
  int64_t i0 = 0, j0 = 0;
};
using ConvTileFn = void (*)(const ConvTileArgs& t);

// The last column panel of a small plane when it holds at most
// kConvTailMaxCols positions (14x14: 196 = 4 x 48 + 4), at full depth: the
// tile would run 16-lane vectors of positions over 1..4 of them, while the
// channels fill every lane here. `b` holds those columns of B compact
// (their im2col, or for a pointwise layer a copy of them):
// B[kk][j] at b[kk * cols + j] for kk < k.
// One 16-float load of a packed 8-row panel at depth 2i holds its rows at
// 2i (lanes 0-7) and 2i + 1 (8-15); B[2i][j] and B[2i + 1][j] broadcast
// into the same halves multiply it lane for lane. Writes C[i][j] = sum over
// k of A[i][k] B[k][j] for i < rows, j < cols, summing even and odd depths
// apart, then adding them; no epilogue.
inline constexpr int64_t kConvTailMaxCols = 4;
struct ConvTailArgs {
  const float* a = nullptr;  // packed left operand: the panel of row 0
  int64_t k = 0;             // depth, whole
  const float* b = nullptr;  // [k][cols], see above
  int cols = 0;              // 1..kConvTailMaxCols
  int64_t rows = 0;
  float* c = nullptr;
  int64_t ldc = 0;
};
using ConvTailFn = void (*)(const ConvTailArgs& t);

// Right panels of the same convolutions for Sgemm's PanelSource, by the
// same masked loads: dst[k * w + j] = B[k0 + k][j] for k < kc and j < w
// (w = 16, 32 or 48), with B as in ConvTileArgs for a panel starting at a
// multiple of kPanelCols (`x` the group's input plus that column, `masks`
// the panel's [k_vol][3] lanes; masked-off lanes are stored as zero).
// Other geometries (strides, output plane smaller than the input) pass
// `base`, the panel's per-column input offsets: B[k][j] = x[c * in_vol +
// base[j] + off[tap]] by masked gathers, with `x` the group's input itself.
using ConvPanelFn = void (*)(const float* x, int64_t in_vol, int64_t k_vol, const int64_t* off,
                             const uint16_t* masks, const int32_t* base, int64_t k0, int64_t kc,
                             int64_t w, float* dst);

// Left panels of the same convolutions for the transposed GEMM (output
// positions as rows): dst[k * kPanelRows + i] = B[k0 + k][i] for i < 8,
// with B as in ConvTileArgs for the 8 positions starting at a multiple of
// 8 (`x` the group's input plus that position), `masks` the [k_vol][3]
// lanes of the 48-column panel holding them and `lane` (0, 8, .., 40) their
// first lane in it. One masked 8-lane load per row; or, with `base` (the 8
// positions' input offsets, see ConvPanelFn), one masked 8-lane gather from
// `x` the group's input itself.
using ConvRowsFn = void (*)(const float* x, int64_t in_vol, int64_t k_vol, const int64_t* off,
                            const uint16_t* masks, const int32_t* base, int lane, int64_t k0,
                            int64_t kc, float* dst);

// The right panels of columns [j0, j1) of a row-major operand with n
// columns (see PackRightRowsImpl).
using PackRightFn = void (*)(const float* b, int64_t ldb, int64_t n, int64_t k0, int64_t kc,
                             int64_t j0, int64_t j1, float* dst);

// Convolutions on AVX-512 whose depth K is at most this run it as one K
// block, both in the im2col-free tile (RunConvDirect) and in Sgemm over
// panels made on demand against prepacked weights of <= 256 rows: the
// tile's accumulators stay in registers over all of K (no pass over C per
// block), and the two paths sum in the same order (the same bits
// whichever runs, on any thread count). 1152: 3x3 over 128 channels;
// a full-depth panel is then <= 216 KiB of scratch, read from L2.
inline constexpr int64_t kConvFullDepthMax = 1152;

struct GemmKernels {
  TileFn tile;
  EpilogueFn epilogue;
  DepthwiseFn depthwise;
  Im2ColFn im2col;
  ConvTileFn conv_tile;    // null: the ISA has none (conv.cc uses im2col panels)
  ConvPanelFn conv_panel;  // null: the ISA has none (conv.cc uses im2col panels)
  ConvRowsFn conv_rows;    // null: the ISA has none (conv.cc uses im2col panels)
  PackRightFn pack_right;
  bool tile_post;          // tile / conv_tile apply TileArgs::post
  ConvTailFn conv_tail;    // null: the ISA has none (the tile runs the tail too)
};

const GemmKernels& PortableKernels();
const GemmKernels& Avx2Kernels();
const GemmKernels& Avx512Kernels();

// The kernels of the active ISA (dispatch.cc).
const GemmKernels& ActiveKernels();

// Width of the right-operand panel that starts `remaining` columns before
// the end: kPanelCols, or the remainder rounded up to 16.
inline int64_t PanelWidth(int64_t remaining) {
  return remaining >= kPanelCols ? kPanelCols : (remaining + 15) / 16 * 16;
}

// Packs rows [i0, i0 + rows) (rows <= kPanelRows) and depth [k0, k0 + kc)
// of op(A) into dst[k * kPanelRows + i]; missing rows are zero.
void PackLeftPanel(const float* a, int64_t lda, bool trans, int64_t i0, int64_t rows, int64_t k0,
                   int64_t kc, float* dst);
// Packs depth [k0, k0 + kc) and columns [j0, j0 + cols) (cols <= w) of
// op(B) into dst[k * w + j]; missing columns are zero.
void PackRightPanel(const float* b, int64_t ldb, bool trans, int64_t k0, int64_t kc, int64_t j0,
                    int64_t cols, int64_t w, float* dst);

}  // namespace orrery::ops::cpu::gemm_internal
