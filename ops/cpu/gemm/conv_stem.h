// Internal to ops/cpu: a direct AVX-512 convolution for layers with few
// input channels and a 3-wide, stride-2, left-pad-1 window along rows: an
// image stem such as MobileNet's 3 -> 32 3x3 / 2 at 224x224, where the
// GEMM over gathered panels has K = 27 only and spent its time in the
// gathers (one thread, 60 GFLOP/s). Here every 32 input columns of an input
// row are loaded once and split into the window's three taps (even / odd
// lanes, as the depthwise stride-2 rows), and each tap is multiplied into 16
// output channels' accumulators with broadcast weights: K * 16 FMAs per 16
// outputs and 16 channels, the epilogue (bias, residual, Relu / Clip) in
// registers.
#pragma once

#include <cstdint>
#include <vector>

#include "ops/cpu/gemm/sgemm.h"

namespace orrery::ops::cpu::gemm_internal {

// Input channels at most this take the stem kernel (K = 3 * kh * cg).
inline constexpr int64_t kConvStemMaxChannels = 4;
inline constexpr int64_t kConvStemMaxKh = 7;

struct ConvStemGeometry {
  int64_t cg = 0, m = 0;  // input / output channels (one group)
  int64_t h_in = 0, w_in = 0, h_out = 0, w_out = 0;
  int64_t kh = 0, sh = 1, ph = 0, dh = 1;  // along columns: 3 wide, stride 2, pad 1
};

// Weights W [m][cg][kh][3] as [m / 16 blocks][cg][kh][3][16] (channels
// past m are zero).
std::vector<float> PackConvStemWeights(const ConvStemGeometry& g, const float* w);

// Output rows [oh0, oh1) of channel blocks [mb0, mb1) (16 channels each) of
// one image: y[m][oh][ow] = epilogue(sum x * w), with the epilogue's row
// bias, residual (row m, ld_residual) and Relu / Clip; `ep` must pass
// PostInTile with no column bias. AVX-512 only (kernel_avx512.cc).
void ConvStemAvx512(const ConvStemGeometry& g, const float* x, const float* packed, float* y,
                    int64_t oh0, int64_t oh1, int64_t mb0, int64_t mb1, const Epilogue& ep);

}  // namespace orrery::ops::cpu::gemm_internal
