// The kernel of conv_channels.h; built with -mavx512f.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "ops/cpu/gemm/conv_channels.h"
#include "ops/cpu/gemm/transpose.h"

#define ORRERY_GEMM_NS channels_avx512
#define ORRERY_GEMM_WIDTH 16
#include "ops/cpu/gemm/epilogue_impl.h"

namespace orrery::ops::cpu::gemm_internal {
namespace {

// P positions (their windows' top-left corners in the row buffer at
// base[i]) x NV vectors of 16 channels: the sums over the whole depth into
// buf[i][16 v + lane]. (Measured and not kept: depth chunks held in L1
// across a group's tiles, 2-4% slower, the weights stream from L2 fast
// enough; a row's positions as displacements from one base instead of six
// base registers, even.)
template <int P, int NV>
inline __attribute__((always_inline)) void ChannelsTile(const float* const* base, const int32_t* off,
                                                        int64_t depth, const float* wb, float* buf) {
  const float* b[P];
#pragma GCC unroll 6
  for (int i = 0; i < P; ++i) b[i] = base[i];
  __m512 acc[P][NV];
#pragma GCC unroll 6
  for (int i = 0; i < P; ++i) {
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_setzero_ps();
  }
  for (int64_t k = 0; k < depth; ++k, wb += kConvChannelsBlock) {
    const int64_t o = off[k];
    __m512 w[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) w[v] = _mm512_loadu_ps(wb + v * 16);
#pragma GCC unroll 6
    for (int i = 0; i < P; ++i) {
      const __m512 x = _mm512_set1_ps(b[i][o]);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_fmadd_ps(x, w[v], acc[i][v]);
    }
  }
#pragma GCC unroll 6
  for (int i = 0; i < P; ++i) {
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) _mm512_store_ps(buf + i * kConvChannelsBlock + v * 16, acc[i][v]);
  }
}

template <int NV>
void ChannelsTileP(int p, const float* const* base, const int32_t* off, int64_t depth, const float* wb,
                   float* buf) {
  switch (p) {
    case 1: return ChannelsTile<1, NV>(base, off, depth, wb, buf);
    case 2: return ChannelsTile<2, NV>(base, off, depth, wb, buf);
    case 3: return ChannelsTile<3, NV>(base, off, depth, wb, buf);
    case 4: return ChannelsTile<4, NV>(base, off, depth, wb, buf);
    case 5: return ChannelsTile<5, NV>(base, off, depth, wb, buf);
    default: return ChannelsTile<6, NV>(base, off, depth, wb, buf);
  }
}

using ChannelsTileFn = void (*)(int p, const float* const* base, const int32_t* off, int64_t depth,
                                const float* wb, float* buf);

ChannelsTileFn ChannelsTileFor(int nv) {
  switch (nv) {
    case 1: return ChannelsTileP<1>;
    case 2: return ChannelsTileP<2>;
    case 3: return ChannelsTileP<3>;
    default: return ChannelsTileP<4>;
  }
}

// The epilogue on a group's tiles, still positions x channels in `buf`:
// the generic one (EpilogueRows) with rows and columns swapped, so the
// channels' row bias is the tile's column bias and the residual is
// transposed into `res` first. Bitwise what it would give on the
// transposed output (+ bias, + residual, activation), while the tile is
// still in L1: on the output after the transposition it took 67% of the
// layer.
void ChannelsPost(const Epilogue& ep, int64_t m0, int64_t channels, int64_t positions,
                  const float* residual, int64_t ld_residual, float* buf, float* res) {
  Epilogue t = ep;
  t.row_bias = nullptr;
  t.col_bias = ep.row_bias != nullptr ? ep.row_bias + m0 : nullptr;
  t.residual = nullptr;
  if (residual != nullptr) {
    TransposeAvx512(residual, ld_residual, channels, positions, res, kConvChannelsBlock);
    t.residual = res;
    t.ld_residual = kConvChannelsBlock;
  }
  channels_avx512::ApplyEpilogueImpl(t, buf, kConvChannelsBlock, 0, 0, positions, channels);
}

}  // namespace

void ConvChannelsAvx512(const ConvChannelsGeometry& g, const float* x, const float* packed,
                        const int32_t* offsets, float* y, int64_t group0, int64_t group1, const Epilogue& ep,
                        float* rows) {
  alignas(64) float buf[kConvChannelsMaxGroup * kConvChannelsBlock];
  alignas(64) float res[kConvChannelsMaxGroup * kConvChannelsBlock];
  const float* base[kConvChannelsMaxGroup];
  const int64_t depth = g.depth();
  const int64_t out_vol = g.h_out * g.w_out;
  const bool post = ep.has_post();
  for (int64_t gi = group0; gi < group1; ++gi) {
    const int64_t oh = gi * g.group_rows;
    const int64_t positions = std::min(g.group_rows, g.h_out - oh) * g.w_out;
    ConvChannelsRows(g, x, oh, rows);
    for (int64_t j = 0; j < positions; ++j) {
      base[j] = rows + (j / g.w_out) * g.sh * g.w_pad + (j % g.w_out) * g.sw;
    }
    for (int64_t mb = 0; mb < g.blocks(); ++mb) {
      const int64_t m0 = mb * kConvChannelsBlock;
      const int64_t channels = std::min(kConvChannelsBlock, g.m - m0);
      const ChannelsTileFn tile = ChannelsTileFor(static_cast<int>((channels + 15) / 16));
      const float* wb = packed + mb * depth * kConvChannelsBlock;
      for (int64_t j = 0; j < positions; j += kConvChannelsPositions) {
        const int p = static_cast<int>(std::min(kConvChannelsPositions, positions - j));
        tile(p, base + j, offsets, depth, wb, buf + j * kConvChannelsBlock);
      }
      const int64_t j0 = oh * g.w_out;  // the group's first output position
      if (post) {
        const float* z = ep.residual != nullptr ? ep.residual + m0 * ep.ld_residual + j0 : nullptr;
        ChannelsPost(ep, m0, channels, positions, z, ep.ld_residual, buf, res);
      }
      TransposeAvx512(buf, kConvChannelsBlock, positions, channels, y + m0 * out_vol + j0, out_vol);
    }
  }
}

}  // namespace orrery::ops::cpu::gemm_internal
