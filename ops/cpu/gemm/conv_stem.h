// Internal to ops/cpu: a direct AVX-512 convolution for layers with few
// input channels and a window of <= 7 columns at stride 2 along rows: image
// stems such as MobileNet's 3 -> 32 3x3 / 2 pad 1, ResNet's and GoogLeNet's
// 3 -> 64 7x7 / 2 pad 3 and SqueezeNet's 3 -> 64 3x3 / 2 pad 0, where the
// GEMM over gathered panels spent its time in the gathers (K = 27 or 147).
// Here the input rows a window reads are split once per output row into
// their even and odd columns, so each tap is one unaligned load multiplied
// into 16 output channels' accumulators with broadcast weights: K * 16 FMAs
// per 16 outputs and 16 channels, the epilogue (bias, residual, Relu /
// Clip) in registers.
#pragma once

#include <cstdint>
#include <vector>

#include "ops/cpu/gemm/sgemm.h"

namespace orrery::ops::cpu::gemm_internal {

// Input channels at most this take the stem kernel (K = 3 * kh * cg).
inline constexpr int64_t kConvStemMaxChannels = 4;
inline constexpr int64_t kConvStemMaxKh = 7;
inline constexpr int64_t kConvStemMaxKw = 7;

struct ConvStemGeometry {
  int64_t cg = 0, m = 0;  // input / output channels (one group)
  int64_t h_in = 0, w_in = 0, h_out = 0, w_out = 0;
  int64_t kh = 0, sh = 1, ph = 0, dh = 1;
  int64_t kw = 3, pw = 1;  // along rows: stride 2, undilated, pw < kw
};

// Weights W [m][cg][kh][kw] as [m / 16 blocks][cg][kh][kw][16] (channels
// past m are zero).
std::vector<float> PackConvStemWeights(const ConvStemGeometry& g, const float* w);

// Output rows [oh0, oh1) of channel blocks [mb0, mb1) (16 channels each) of
// one image: y[m][oh][ow] = epilogue(sum x * w), with the epilogue's row
// bias, residual (row m, ld_residual) and Relu / Clip; `ep` must pass
// PostInTile with no column bias. AVX-512 only (kernel_avx512.cc).
void ConvStemAvx512(const ConvStemGeometry& g, const float* x, const float* packed, float* y,
                    int64_t oh0, int64_t oh1, int64_t mb0, int64_t mb1, const Epilogue& ep);

}  // namespace orrery::ops::cpu::gemm_internal
