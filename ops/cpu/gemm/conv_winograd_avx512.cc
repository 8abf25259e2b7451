// The transforms of conv_winograd.h on 16 tiles at a time; built with
// -mavx512f. A row of 16 tiles reads 34 consecutive padded columns; their
// even and odd columns (the tiles' columns 0 / 1, and 2 / 3 from two
// columns on) come out of two loads by one permutation each.
#include <immintrin.h>

#include <cstdint>

#include "ops/cpu/gemm/conv_winograd.h"

// For FirstLanes (the AVX-512 lane masks the GEMM files use).
#define ORRERY_GEMM_NS winograd_avx512
#define ORRERY_GEMM_WIDTH 16
#include "ops/cpu/gemm/epilogue_impl.h"

namespace orrery::ops::cpu::gemm_internal {

using winograd_avx512::FirstLanes;

void WinogradInputAvx512(const WinogradGeometry& g, const float* x, int64_t ty0, int64_t ty1, float* v,
                         int64_t ldv_term, float* rows) {
  WinogradPadRows(g, x, ty0, ty1, rows);
  const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  const __m512i odd = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
  for (int64_t ty = ty0; ty < ty1; ++ty) {
    const float* base = rows + 2 * (ty - ty0) * g.padded_w;
    for (int64_t tx0 = 0; tx0 < g.tiles_w; tx0 += 16) {
      __m512 e[4][4];
      {
        __m512 d[4][4];
        for (int i = 0; i < 4; ++i) {
          const float* p = base + i * g.padded_w + 2 * tx0;
          const __m512 a = _mm512_loadu_ps(p), b = _mm512_loadu_ps(p + 16);
          const __m512 a2 = _mm512_loadu_ps(p + 2), b2 = _mm512_loadu_ps(p + 18);
          d[i][0] = _mm512_permutex2var_ps(a, even, b);
          d[i][1] = _mm512_permutex2var_ps(a, odd, b);
          d[i][2] = _mm512_permutex2var_ps(a2, even, b2);
          d[i][3] = _mm512_permutex2var_ps(a2, odd, b2);
        }
        for (int j = 0; j < 4; ++j) {
          e[0][j] = _mm512_sub_ps(d[0][j], d[2][j]);
          e[1][j] = _mm512_add_ps(d[1][j], d[2][j]);
          e[2][j] = _mm512_sub_ps(d[2][j], d[1][j]);
          e[3][j] = _mm512_sub_ps(d[1][j], d[3][j]);
        }
      }
      const __mmask16 mask = FirstLanes(g.tiles_w - tx0);
      float* vq = v + (ty - ty0) * g.tiles_w + tx0;
      for (int i = 0; i < 4; ++i) {
        float* vi = vq + i * 4 * ldv_term;
        _mm512_mask_storeu_ps(vi, mask, _mm512_sub_ps(e[i][0], e[i][2]));
        _mm512_mask_storeu_ps(vi + ldv_term, mask, _mm512_add_ps(e[i][1], e[i][2]));
        _mm512_mask_storeu_ps(vi + 2 * ldv_term, mask, _mm512_sub_ps(e[i][2], e[i][1]));
        _mm512_mask_storeu_ps(vi + 3 * ldv_term, mask, _mm512_sub_ps(e[i][1], e[i][3]));
      }
    }
  }
}

void WinogradOutputAvx512(const WinogradGeometry& g, const float* prod, int64_t ld_term, int64_t ty0,
                          int64_t ty1, float* y) {
  // Interleaves two vectors: lo = a0 b0 a1 b1 .. a7 b7, hi = a8 b8 .. a15 b15.
  const __m512i lo_idx = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  const __m512i hi_idx = _mm512_set_epi32(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8);
  for (int64_t ty = ty0; ty < ty1; ++ty) {
    for (int64_t tx0 = 0; tx0 < g.tiles_w; tx0 += 16) {
      const __mmask16 mask = FirstLanes(g.tiles_w - tx0);
      const float* pq = prod + (ty - ty0) * g.tiles_w + tx0;
      __m512 r[2][4];
      for (int j = 0; j < 4; ++j) {
        const __m512 p0 = _mm512_maskz_loadu_ps(mask, pq + j * ld_term);
        const __m512 p1 = _mm512_maskz_loadu_ps(mask, pq + (4 + j) * ld_term);
        const __m512 p2 = _mm512_maskz_loadu_ps(mask, pq + (8 + j) * ld_term);
        const __m512 p3 = _mm512_maskz_loadu_ps(mask, pq + (12 + j) * ld_term);
        r[0][j] = _mm512_add_ps(_mm512_add_ps(p0, p1), p2);
        r[1][j] = _mm512_sub_ps(_mm512_sub_ps(p1, p2), p3);
      }
      const int64_t ow0 = 2 * tx0;
      for (int i = 0; i < 2; ++i) {
        const int64_t oh = 2 * ty + i;
        if (oh >= g.h_out) break;
        const __m512 o0 = _mm512_add_ps(_mm512_add_ps(r[i][0], r[i][1]), r[i][2]);
        const __m512 o1 = _mm512_sub_ps(_mm512_sub_ps(r[i][1], r[i][2]), r[i][3]);
        float* yr = y + oh * g.w_out + ow0;
        _mm512_mask_storeu_ps(yr, FirstLanes(g.w_out - ow0), _mm512_permutex2var_ps(o0, lo_idx, o1));
        _mm512_mask_storeu_ps(yr + 16, FirstLanes(g.w_out - ow0 - 16), _mm512_permutex2var_ps(o0, hi_idx, o1));
      }
    }
  }
}

}  // namespace orrery::ops::cpu::gemm_internal
