#include "ops/cpu/gemm/conv_stem.h"

namespace orrery::ops::cpu::gemm_internal {

std::vector<float> PackConvStemWeights(const ConvStemGeometry& g, const float* w) {
  const int64_t blocks = (g.m + 15) / 16;
  const int64_t taps = g.cg * g.kh * g.kw;
  std::vector<float> packed(static_cast<size_t>(blocks * taps * 16), 0.0f);
  for (int64_t m = 0; m < g.m; ++m) {
    for (int64_t t = 0; t < taps; ++t) {  // t = (c * kh + row) * kw + col, W's own order
      packed[static_cast<size_t>(((m / 16) * taps + t) * 16 + m % 16)] = w[m * taps + t];
    }
  }
  return packed;
}

}  // namespace orrery::ops::cpu::gemm_internal
