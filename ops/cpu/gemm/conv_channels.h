// Internal to ops/cpu: a direct AVX-512 convolution with the output
// channels across the lanes, for strided 2-D layers (ResNet's 3x3 / 2).
//
// The GEMM kernels put output positions across the lanes, so a stride-2
// window needs its input gathered or de-interleaved first (the im2col
// panels or the gathering tile of conv_direct.h); ONNX Runtime's NCHWc
// kernels put channels across the lanes and run those layers ~15% faster.
// Here each FMA multiplies one input value, broadcast from the input
// itself (the stride costs nothing), into 16 output channels of packed
// weights: a tile of kConvChannelsPositions consecutive output positions x
// 64 channels is 24 accumulators, 6 broadcasts and 4 weight loads per input
// tap. Padding is resolved per group of output rows: the input rows its
// windows read are copied into a zero-bordered row buffer (per thread, tens
// of KB), so no tap is ever tested. The epilogue runs on a group's tiles (a
// residual transposed to match), which then go out through one
// transposition (gemm/transpose.h).
#pragma once

#include <cstdint>
#include <vector>

#include "ops/cpu/gemm/sgemm.h"

namespace orrery::ops::cpu::gemm_internal {

inline constexpr int64_t kConvChannelsBlock = 64;    // output channels per packed block
inline constexpr int64_t kConvChannelsPositions = 6;  // output positions per tile (at most)
// Output rows go in groups of at least kConvChannelsMinGroup positions (one
// row of >= 24, two of 14, four of 7), at most kConvChannelsMaxGroup (a
// group's tiles go through stack buffers of that many x 64 floats).
inline constexpr int64_t kConvChannelsMinGroup = 24;
inline constexpr int64_t kConvChannelsMaxGroup = 128;

struct ConvChannelsGeometry {
  int64_t cg = 0, m = 0;  // input / output channels (one group)
  int64_t h_in = 0, w_in = 0, h_out = 0, w_out = 0;
  int64_t kh = 0, kw = 0, sh = 1, sw = 1, ph = 0, pw = 0;  // undilated
  int64_t group_rows = 1;  // output rows per group
  // The row buffer of a group: its windows' input rows (rows_in of them,
  // from the first's top) x columns [-pw, w_pad - pw), per channel.
  int64_t rows_in = 0, w_pad = 0;
  int64_t depth() const { return cg * kh * kw; }
  int64_t blocks() const { return (m + kConvChannelsBlock - 1) / kConvChannelsBlock; }
  int64_t groups() const { return (h_out + group_rows - 1) / group_rows; }
  int64_t row_buffer_floats() const { return cg * rows_in * w_pad; }
};

// The geometry of a layer with 1 <= w_out <= kConvChannelsMaxGroup.
ConvChannelsGeometry MakeConvChannelsGeometry(int64_t cg, int64_t m, int64_t h_in, int64_t w_in,
                                              int64_t h_out, int64_t w_out, int64_t kh, int64_t kw,
                                              int64_t sh, int64_t sw, int64_t ph, int64_t pw);

// Weights W [m][cg][kh][kw] as [blocks][depth][64] (channels past m zero).
std::vector<float> PackConvChannelsWeights(const ConvChannelsGeometry& g, const float* w);
// Per depth index k = (c * kh + r) * kw + s: its input's offset in the
// row buffer from a window's top-left corner in the group's first row.
std::vector<int32_t> ConvChannelsOffsets(const ConvChannelsGeometry& g);

// The input rows the windows of the group from output row oh read, for
// every channel, into `rows` (row_buffer_floats()), zeros where they reach
// outside x.
void ConvChannelsRows(const ConvChannelsGeometry& g, const float* x, int64_t oh, float* rows);

// Row groups [group0, group1) of all channels of one image x: y[m][oh][ow]
// = epilogue(sum x * w) with the epilogue's row bias, residual (row m,
// ld_residual) and Relu / Clip; `ep` must pass PostInTile with no column
// bias. `rows`: row_buffer_floats() of scratch. AVX-512 only
// (conv_channels_avx512.cc); any stride (conv.cc takes it for stride 2).
void ConvChannelsAvx512(const ConvChannelsGeometry& g, const float* x, const float* packed,
                        const int32_t* offsets, float* y, int64_t group0, int64_t group1, const Epilogue& ep,
                        float* rows);

}  // namespace orrery::ops::cpu::gemm_internal
