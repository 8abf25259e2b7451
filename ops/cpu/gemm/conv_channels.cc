#include "ops/cpu/gemm/conv_channels.h"

#include <algorithm>
#include <cstring>

namespace orrery::ops::cpu::gemm_internal {

ConvChannelsGeometry MakeConvChannelsGeometry(int64_t cg, int64_t m, int64_t h_in, int64_t w_in,
                                              int64_t h_out, int64_t w_out, int64_t kh, int64_t kw,
                                              int64_t sh, int64_t sw, int64_t ph, int64_t pw) {
  ConvChannelsGeometry g{.cg = cg, .m = m, .h_in = h_in, .w_in = w_in, .h_out = h_out, .w_out = w_out,
                         .kh = kh, .kw = kw, .sh = sh, .sw = sw, .ph = ph, .pw = pw};
  g.group_rows =
      std::min<int64_t>((kConvChannelsMinGroup + w_out - 1) / w_out, kConvChannelsMaxGroup / w_out);
  g.rows_in = (g.group_rows - 1) * sh + kh;
  // What the last window reaches, not the input's far side.
  g.w_pad = (w_out - 1) * sw + kw;
  return g;
}

std::vector<float> PackConvChannelsWeights(const ConvChannelsGeometry& g, const float* w) {
  const int64_t depth = g.depth();
  std::vector<float> packed(static_cast<size_t>(g.blocks() * depth * kConvChannelsBlock), 0.0f);
  for (int64_t m = 0; m < g.m; ++m) {
    const int64_t b = m / kConvChannelsBlock, lane = m % kConvChannelsBlock;
    for (int64_t k = 0; k < depth; ++k) {
      packed[static_cast<size_t>((b * depth + k) * kConvChannelsBlock + lane)] = w[m * depth + k];
    }
  }
  return packed;
}

std::vector<int32_t> ConvChannelsOffsets(const ConvChannelsGeometry& g) {
  std::vector<int32_t> off;
  off.reserve(static_cast<size_t>(g.depth()));
  for (int64_t c = 0; c < g.cg; ++c) {
    for (int64_t r = 0; r < g.kh; ++r) {
      for (int64_t s = 0; s < g.kw; ++s) {
        off.push_back(static_cast<int32_t>((c * g.rows_in + r) * g.w_pad + s));
      }
    }
  }
  return off;
}

void ConvChannelsRows(const ConvChannelsGeometry& g, const float* x, int64_t oh, float* rows) {
  // Input columns [0, q1) land at buffer columns [pw, q1 + pw).
  const int64_t q1 = std::min(g.w_in, g.w_pad - g.pw);
  const int64_t right = q1 + g.pw;
  float* dst = rows;
  for (int64_t c = 0; c < g.cg; ++c) {
    for (int64_t r = 0; r < g.rows_in; ++r, dst += g.w_pad) {
      const int64_t ih = oh * g.sh - g.ph + r;
      if (ih < 0 || ih >= g.h_in || q1 <= 0) {
        std::memset(dst, 0, static_cast<size_t>(g.w_pad) * sizeof(float));
        continue;
      }
      if (g.pw > 0) std::memset(dst, 0, static_cast<size_t>(g.pw) * sizeof(float));
      std::memcpy(dst + g.pw, x + (c * g.h_in + ih) * g.w_in, static_cast<size_t>(q1) * sizeof(float));
      if (right < g.w_pad) {
        std::memset(dst + right, 0, static_cast<size_t>(g.w_pad - right) * sizeof(float));
      }
    }
  }
}

}  // namespace orrery::ops::cpu::gemm_internal
