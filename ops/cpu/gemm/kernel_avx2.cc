// AVX2/FMA micro-kernel: 4 rows x 24 columns at a time (12 ymm accumulators);
// an 8 x 48 tile is covered in up to four passes. Compiled with -mavx2 -mfma;
// only called after dispatch.cc has checked the CPU.
#include <immintrin.h>

#include <cstdint>

#include "ops/cpu/gemm/kernels.h"

#define ORRERY_GEMM_NS avx2
#define ORRERY_GEMM_WIDTH 8
#include "ops/cpu/gemm/epilogue_impl.h"

namespace orrery::ops::cpu::avx2 {
namespace {

using gemm_internal::TileArgs;

ORRERY_GEMM_INLINE __m256i ColumnMask(int n) {
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), lanes);
}

// Rows [0, R) of the A panel at `a` times columns [0, 8 NV) of the B panel
// at `b` (row stride w); `cols` of them are stored.
template <int R, int NV>
void Block(const TileArgs& t, const float* a, const float* b, float* c, int cols) {
  __m256 acc[R][NV];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 3
    for (int v = 0; v < NV; ++v) acc[r][v] = _mm256_setzero_ps();
  }
  const int64_t ldb = t.ldb;
  for (int64_t k = 0; k < t.kc; ++k) {
    __m256 bv[NV];
#pragma GCC unroll 3
    for (int v = 0; v < NV; ++v) bv[v] = _mm256_loadu_ps(b + v * 8);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const __m256 av = _mm256_broadcast_ss(a + r);
#pragma GCC unroll 3
      for (int v = 0; v < NV; ++v) acc[r][v] = _mm256_fmadd_ps(av, bv[v], acc[r][v]);
    }
    a += kPanelRows;
    b += ldb;
  }
  const __m256 alpha = _mm256_set1_ps(t.alpha);
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
    float* cr = c + r * t.ldc;
#pragma GCC unroll 3
    for (int v = 0; v < NV; ++v) {
      const int n = cols - v * 8;
      if (n <= 0) break;
      __m256 y = _mm256_mul_ps(acc[r][v], alpha);
      if (n >= 8) {
        if (t.load_c) y = _mm256_add_ps(y, _mm256_loadu_ps(cr + v * 8));
        _mm256_storeu_ps(cr + v * 8, y);
      } else {
        const __m256i m = ColumnMask(n);
        if (t.load_c) y = _mm256_add_ps(y, _mm256_maskload_ps(cr + v * 8, m));
        _mm256_maskstore_ps(cr + v * 8, m, y);
      }
    }
  }
}

template <int NV>
void BlockRows(const TileArgs& t, int rows, const float* a, const float* b, float* c, int cols) {
  switch (rows) {
    case 1: return Block<1, NV>(t, a, b, c, cols);
    case 2: return Block<2, NV>(t, a, b, c, cols);
    case 3: return Block<3, NV>(t, a, b, c, cols);
    default: return Block<4, NV>(t, a, b, c, cols);
  }
}

void TileAny(const TileArgs& t) {
  for (int r0 = 0; r0 < t.rows; r0 += 4) {
    const int rows = t.rows - r0 < 4 ? t.rows - r0 : 4;
    for (int j0 = 0; j0 < t.cols; j0 += 24) {
      const int cols = t.cols - j0 < 24 ? t.cols - j0 : 24;
      const float* a = t.a + r0;
      const float* b = t.b + j0;
      float* c = t.c + r0 * t.ldc + j0;
      switch ((cols + 7) / 8) {
        case 1: BlockRows<1>(t, rows, a, b, c, cols); break;
        case 2: BlockRows<2>(t, rows, a, b, c, cols); break;
        default: BlockRows<3>(t, rows, a, b, c, cols); break;
      }
    }
  }
}

}  // namespace
}  // namespace orrery::ops::cpu::avx2

namespace orrery::ops::cpu::gemm_internal {

const GemmKernels& Avx2Kernels() {
  static const GemmKernels k{avx2::TileAny, avx2::ApplyEpilogueImpl, avx2::DepthwisePlanesImpl,
                             avx2::Im2ColPanelImpl, /*conv_tile=*/nullptr,
                             /*conv_panel=*/nullptr, /*conv_rows=*/nullptr,
                             avx2::PackRightRowsImpl,
                             /*tile_post=*/false};
  return k;
}

}  // namespace orrery::ops::cpu::gemm_internal
