// The transforms of conv_winograd.h on 16 tiles at a time; built with
// -mavx512f. F(2x2, 3x3): a row of 16 tiles reads 34 consecutive padded
// columns; their even and odd columns (the tiles' columns 0 / 1, and 2 / 3
// from two columns on) come out of two loads by one permutation each.
// F(4x4, 3x3): 68 columns; column j of the 16 tiles (every fourth from j)
// comes out of four loads by two permutations and a shuffle.
#include <immintrin.h>

#include <cstdint>

#include "ops/cpu/gemm/conv_winograd.h"
#include "ops/cpu/gemm/conv_winograd_f4.h"

// For FirstLanes (the AVX-512 lane masks the GEMM files use).
#define ORRERY_GEMM_NS winograd_avx512
#define ORRERY_GEMM_WIDTH 16
#include "ops/cpu/gemm/epilogue_impl.h"

namespace orrery::ops::cpu::gemm_internal {

using winograd_avx512::FirstLanes;

namespace {

void InputF2(const WinogradGeometry& g, int64_t ty0, int64_t ty1, float* v, int64_t ldv_term,
             const float* rows) {
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

void OutputF2(const WinogradGeometry& g, const float* prod, int64_t ld_term, int64_t ty0, int64_t ty1,
              float* y) {
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

// Elements j, j + 4, .., j + 60 of the 64 floats in a0..a3.
__m512 EveryFourth(__m512 a0, __m512 a1, __m512 a2, __m512 a3, int j) {
  const __m512i idx = _mm512_add_epi32(_mm512_set_epi32(60, 56, 52, 48, 44, 40, 36, 32, 28, 24, 20, 16, 12, 8, 4, 0),
                                       _mm512_set1_epi32(j));
  // Lanes 0..7 of each hold the picks from its pair (indices 32.. wrap).
  const __m512 lo = _mm512_permutex2var_ps(a0, idx, a1);
  const __m512 hi = _mm512_permutex2var_ps(a2, idx, a3);
  // (The maskz form: GCC 12 warns that the plain one reads an undefined
  // vector.)
  return _mm512_maskz_shuffle_f32x4(0xffff, lo, hi, _MM_SHUFFLE(1, 0, 1, 0));
}

void InputF4(const WinogradGeometry& g, int64_t ty0, int64_t ty1, float* v, int64_t ldv_term,
             const float* rows) {
  for (int64_t ty = ty0; ty < ty1; ++ty) {
    const float* base = rows + 4 * (ty - ty0) * g.padded_w;
    for (int64_t tx0 = 0; tx0 < g.tiles_w; tx0 += 16) {
      __m512 d[6][6];  // d[i][j]: row i, column j of the 16 tiles
      for (int i = 0; i < 6; ++i) {
        const float* p = base + i * g.padded_w + 4 * tx0;
        const __m512 a0 = _mm512_loadu_ps(p), a1 = _mm512_loadu_ps(p + 16);
        const __m512 a2 = _mm512_loadu_ps(p + 32), a3 = _mm512_loadu_ps(p + 48);
        for (int j = 0; j < 4; ++j) d[i][j] = EveryFourth(a0, a1, a2, a3, j);
        const __m512 b0 = _mm512_loadu_ps(p + 4), b1 = _mm512_loadu_ps(p + 20);
        const __m512 b2 = _mm512_loadu_ps(p + 36), b3 = _mm512_loadu_ps(p + 52);
        d[i][4] = EveryFourth(b0, b1, b2, b3, 0);
        d[i][5] = EveryFourth(b0, b1, b2, b3, 1);
      }
      __m512 e[6][6];  // e[r][j] = (B^T d)[r][j]
      for (int j = 0; j < 6; ++j) {
        const __m512 col[6] = {d[0][j], d[1][j], d[2][j], d[3][j], d[4][j], d[5][j]};
        __m512 out[6];
        WinogradInputF4(col, out);
        for (int r = 0; r < 6; ++r) e[r][j] = out[r];
      }
      const __mmask16 mask = FirstLanes(g.tiles_w - tx0);
      float* vq = v + (ty - ty0) * g.tiles_w + tx0;
      for (int r = 0; r < 6; ++r) {
        __m512 out[6];
        WinogradInputF4(e[r], out);
        for (int k = 0; k < 6; ++k) _mm512_mask_storeu_ps(vq + (r * 6 + k) * ldv_term, mask, out[k]);
      }
    }
  }
}

void OutputF4(const WinogradGeometry& g, const float* prod, int64_t ld_term, int64_t ty0, int64_t ty1,
              float* y) {
  // Interleave pairs of floats (lo / hi: tiles 0..7 / 8..15), then pairs
  // of those pairs (as doubles: lo / hi of 4 tiles each).
  const __m512i lo_idx = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  const __m512i hi_idx = _mm512_set_epi32(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8);
  const __m512i lo64 = _mm512_set_epi64(11, 3, 10, 2, 9, 1, 8, 0);
  const __m512i hi64 = _mm512_set_epi64(15, 7, 14, 6, 13, 5, 12, 4);
  for (int64_t ty = ty0; ty < ty1; ++ty) {
    for (int64_t tx0 = 0; tx0 < g.tiles_w; tx0 += 16) {
      const __mmask16 mask = FirstLanes(g.tiles_w - tx0);
      const float* pq = prod + (ty - ty0) * g.tiles_w + tx0;
      __m512 e[4][6];  // e[r][j] = (A^T p)[r][j]
      for (int j = 0; j < 6; ++j) {
        __m512 col[6];
        for (int i = 0; i < 6; ++i) col[i] = _mm512_maskz_loadu_ps(mask, pq + (i * 6 + j) * ld_term);
        __m512 out[4];
        WinogradOutputF4(col, out);
        for (int r = 0; r < 4; ++r) e[r][j] = out[r];
      }
      const int64_t ow0 = 4 * tx0;
      for (int r = 0; r < 4; ++r) {
        const int64_t oh = 4 * ty + r;
        if (oh >= g.h_out) break;
        __m512 o[4];
        WinogradOutputF4(e[r], o);
        const __m512d a_lo = _mm512_castps_pd(_mm512_permutex2var_ps(o[0], lo_idx, o[1]));
        const __m512d a_hi = _mm512_castps_pd(_mm512_permutex2var_ps(o[0], hi_idx, o[1]));
        const __m512d b_lo = _mm512_castps_pd(_mm512_permutex2var_ps(o[2], lo_idx, o[3]));
        const __m512d b_hi = _mm512_castps_pd(_mm512_permutex2var_ps(o[2], hi_idx, o[3]));
        const __m512 out[4] = {_mm512_castpd_ps(_mm512_permutex2var_pd(a_lo, lo64, b_lo)),
                               _mm512_castpd_ps(_mm512_permutex2var_pd(a_lo, hi64, b_lo)),
                               _mm512_castpd_ps(_mm512_permutex2var_pd(a_hi, lo64, b_hi)),
                               _mm512_castpd_ps(_mm512_permutex2var_pd(a_hi, hi64, b_hi))};
        float* yr = y + oh * g.w_out + ow0;
        for (int k = 0; k < 4; ++k) _mm512_mask_storeu_ps(yr + 16 * k, FirstLanes(g.w_out - ow0 - 16 * k), out[k]);
      }
    }
  }
}

}  // namespace

WinogradTransforms WinogradTransformsAvx512(const WinogradGeometry& g) {
  return g.tile == 4 ? WinogradTransforms{InputF4, OutputF4} : WinogradTransforms{InputF2, OutputF2};
}

}  // namespace orrery::ops::cpu::gemm_internal
