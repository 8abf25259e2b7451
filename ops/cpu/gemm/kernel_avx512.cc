// AVX-512 micro-kernel: up to 8 rows x 48 columns (24 zmm accumulators, one
// broadcast of A and three loads of B per k). Compiled with -mavx512f
// -mavx512bw -mavx512vl -mfma; only called after dispatch.cc has checked the
// CPU.
#include <immintrin.h>

#include <cstdint>

#include "ops/cpu/gemm/kernels.h"

#define ORRERY_GEMM_NS avx512
#define ORRERY_GEMM_WIDTH 16
#include "ops/cpu/gemm/epilogue_impl.h"

namespace orrery::ops::cpu::avx512 {
namespace {

using gemm_internal::TileArgs;

template <int R, int NV>
void Tile(const TileArgs& t) {
  __m512 acc[R][NV];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 3
    for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_setzero_ps();
  }
  const float* a = t.a;
  const float* b = t.b;
  const int64_t w = t.w;
  for (int64_t k = 0; k < t.kc; ++k) {
    __m512 bv[NV];
#pragma GCC unroll 3
    for (int v = 0; v < NV; ++v) bv[v] = _mm512_loadu_ps(b + v * 16);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512 av = _mm512_set1_ps(a[r]);
#pragma GCC unroll 3
      for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_fmadd_ps(av, bv[v], acc[r][v]);
    }
    a += kPanelRows;
    b += w;
  }
  const __m512 alpha = _mm512_set1_ps(t.alpha);
  __mmask16 masks[NV];
#pragma GCC unroll 3
  for (int v = 0; v < NV; ++v) {
    const int n = t.cols - v * 16;
    masks[v] = n >= 16 ? __mmask16(0xffff) : n <= 0 ? __mmask16(0) : __mmask16((1u << n) - 1);
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    float* c = t.c + r * t.ldc;
#pragma GCC unroll 3
    for (int v = 0; v < NV; ++v) {
      __m512 y = _mm512_mul_ps(acc[r][v], alpha);
      if (t.load_c) y = _mm512_add_ps(y, _mm512_maskz_loadu_ps(masks[v], c + v * 16));
      _mm512_mask_storeu_ps(c + v * 16, masks[v], y);
    }
  }
}

template <int NV>
void TileRows(const TileArgs& t) {
  switch (t.rows) {
    case 1: return Tile<1, NV>(t);
    case 2: return Tile<2, NV>(t);
    case 3: return Tile<3, NV>(t);
    case 4: return Tile<4, NV>(t);
    case 5: return Tile<5, NV>(t);
    case 6: return Tile<6, NV>(t);
    case 7: return Tile<7, NV>(t);
    default: return Tile<8, NV>(t);
  }
}

void TileAny(const TileArgs& t) {
  // Narrow the vector count to the columns in use (a 48-wide panel with 20
  // valid columns needs two vectors, not three).
  const int64_t used = (t.cols + 15) / 16;
  switch (used) {
    case 1: return TileRows<1>(t);
    case 2: return TileRows<2>(t);
    default: return TileRows<3>(t);
  }
}

}  // namespace
}  // namespace orrery::ops::cpu::avx512

namespace orrery::ops::cpu::gemm_internal {

const GemmKernels& Avx512Kernels() {
  static const GemmKernels k{avx512::TileAny, avx512::ApplyEpilogueImpl, avx512::DepthwisePlaneImpl};
  return k;
}

}  // namespace orrery::ops::cpu::gemm_internal
