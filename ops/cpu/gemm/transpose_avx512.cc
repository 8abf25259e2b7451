// AVX-512 16 x 16 block transpose (see transpose.h). Built with
// -mavx512f; only called after the CPU check (ActiveGemmIsa).
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "ops/cpu/gemm/conv_direct.h"
#include "ops/cpu/gemm/transpose.h"

namespace orrery::ops::cpu::gemm_internal {
namespace {

using V16 = float __attribute__((vector_size(64)));

// The shuffles of _mm512_unpacklo / hi_ps, _mm512_shuffle_ps (0x44, 0xEE)
// and _mm512_shuffle_f32x4 (0x88, 0xDD) as constant shuffles (GCC 12's
// intrinsics trip -Wmaybe-uninitialized on their _mm512_undefined_ps).
inline V16 UnpackLo(V16 a, V16 b) {
  return __builtin_shufflevector(a, b, 0, 16, 1, 17, 4, 20, 5, 21, 8, 24, 9, 25, 12, 28, 13, 29);
}
inline V16 UnpackHi(V16 a, V16 b) {
  return __builtin_shufflevector(a, b, 2, 18, 3, 19, 6, 22, 7, 23, 10, 26, 11, 27, 14, 30, 15,
                                 31);
}
inline V16 Pairs01(V16 a, V16 b) {
  return __builtin_shufflevector(a, b, 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29);
}
inline V16 Pairs23(V16 a, V16 b) {
  return __builtin_shufflevector(a, b, 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30,
                                 31);
}
inline V16 LanesEven(V16 a, V16 b) {
  return __builtin_shufflevector(a, b, 0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27);
}
inline V16 LanesOdd(V16 a, V16 b) {
  return __builtin_shufflevector(a, b, 4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30,
                                 31);
}

// r[i] (row i, 16 columns) -> r[j] (column j, 16 rows), in three rounds of
// shuffles: 2 x 2 within 128-bit lanes, 4 x 4 within lanes, then lanes.
inline void Transpose16(V16 (&r)[16]) {
  V16 t[16];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = UnpackLo(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = UnpackHi(r[2 * i], r[2 * i + 1]);
  }
  // u[4 * i + c], lane l: rows 4i..4i+3 of column 4l + c.
  V16 u[16];
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    u[4 * i + 0] = Pairs01(t[4 * i], t[4 * i + 2]);
    u[4 * i + 1] = Pairs23(t[4 * i], t[4 * i + 2]);
    u[4 * i + 2] = Pairs01(t[4 * i + 1], t[4 * i + 3]);
    u[4 * i + 3] = Pairs23(t[4 * i + 1], t[4 * i + 3]);
  }
#pragma GCC unroll 4
  for (int c = 0; c < 4; ++c) {
    const V16 x0 = LanesEven(u[c], u[4 + c]);
    const V16 x1 = LanesEven(u[8 + c], u[12 + c]);
    const V16 y0 = LanesOdd(u[c], u[4 + c]);
    const V16 y1 = LanesOdd(u[8 + c], u[12 + c]);
    r[c] = LanesEven(x0, x1);
    r[8 + c] = LanesOdd(x0, x1);
    r[4 + c] = LanesEven(y0, y1);
    r[12 + c] = LanesOdd(y0, y1);
  }
}

// [a.0, a.1, b.0, b.1] and [a.2, a.3, b.2, b.3] in 128-bit lanes.
inline V16 LanesLow(V16 a, V16 b) {
  return __builtin_shufflevector(a, b, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
}
inline V16 LanesHigh(V16 a, V16 b) {
  return __builtin_shufflevector(a, b, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30,
                                 31);
}

// r[i] (row i, columns k..k+16) -> o[j] = columns k + 2j and k + 2j + 1,
// each as its 8 rows: the panel's next 16 k steps in order.
inline void Transpose8x16(const V16 (&r)[8], V16 (&o)[8]) {
  V16 t[8];
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = UnpackLo(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = UnpackHi(r[2 * i], r[2 * i + 1]);
  }
  // u[4 h + c], 128-bit lane l: rows 4h..4h+3 of column 4l + c.
  V16 u[8];
#pragma GCC unroll 2
  for (int h = 0; h < 2; ++h) {
    u[4 * h + 0] = Pairs01(t[4 * h], t[4 * h + 2]);
    u[4 * h + 1] = Pairs23(t[4 * h], t[4 * h + 2]);
    u[4 * h + 2] = Pairs01(t[4 * h + 1], t[4 * h + 3]);
    u[4 * h + 3] = Pairs23(t[4 * h + 1], t[4 * h + 3]);
  }
  // lo[c]: column c and 4 + c (rows 0-3, 4-7 each); hi[c]: 8 + c, 12 + c.
  V16 lo[4], hi[4];
#pragma GCC unroll 4
  for (int c = 0; c < 4; ++c) {
    lo[c] = LanesLow(u[c], u[4 + c]);
    hi[c] = LanesHigh(u[c], u[4 + c]);
  }
#pragma GCC unroll 2
  for (int c = 0; c < 4; c += 2) {
    o[c / 2] = LanesEven(lo[c], lo[c + 1]);      // columns c, c + 1
    o[2 + c / 2] = LanesOdd(lo[c], lo[c + 1]);   // 4 + c, 5 + c
    o[4 + c / 2] = LanesEven(hi[c], hi[c + 1]);  // 8 + c, 9 + c
    o[6 + c / 2] = LanesOdd(hi[c], hi[c + 1]);   // 12 + c, 13 + c
  }
}

}  // namespace

void PackLeftRowsAvx512(const float* a, int64_t lda, int64_t rows, int64_t kc, float* dst) {
  for (int64_t k = 0; k < kc; k += 16) {
    const int n = static_cast<int>(std::min<int64_t>(16, kc - k));
    const __mmask16 m = static_cast<__mmask16>((1u << n) - 1);
    V16 r[8];
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) {
      r[i] = i < rows ? V16(_mm512_maskz_loadu_ps(m, a + i * lda + k)) : V16{};
    }
    V16 o[8];
    Transpose8x16(r, o);
    float* d = dst + k * 8;
    if (n == 16) {
#pragma GCC unroll 8
      for (int j = 0; j < 8; ++j) _mm512_storeu_ps(d + 16 * j, __m512(o[j]));
    } else {
      // The first n columns: o[j] holds columns 2j and 2j + 1.
      for (int j = 0; 2 * j < n; ++j) {
        const __mmask16 sm = 2 * j + 1 < n ? __mmask16{0xffff} : __mmask16{0x00ff};
        _mm512_mask_storeu_ps(d + 16 * j, sm, __m512(o[j]));
      }
    }
  }
}

void TransposeAvx512(const float* src, int64_t lds, int64_t rows, int64_t cols, float* dst,
                     int64_t ldd) {
  for (int64_t j0 = 0; j0 < cols; j0 += 16) {
    const int nc = static_cast<int>(std::min<int64_t>(16, cols - j0));
    const __mmask16 cmask = static_cast<__mmask16>((1u << nc) - 1);
    for (int64_t i0 = 0; i0 < rows; i0 += 16) {
      const int nr = static_cast<int>(std::min<int64_t>(16, rows - i0));
      V16 r[16];
#pragma GCC unroll 16
      for (int i = 0; i < 16; ++i) {
        r[i] = i < nr ? V16(_mm512_maskz_loadu_ps(cmask, src + (i0 + i) * lds + j0)) : V16{};
      }
      Transpose16(r);
      const __mmask16 rmask = static_cast<__mmask16>((1u << nr) - 1);
      for (int j = 0; j < nc; ++j) _mm512_mask_storeu_ps(dst + (j0 + j) * ldd + i0, rmask, __m512(r[j]));
    }
  }
}

void SplitPhasesAvx512(const PhaseSplit& s, const float* x, int64_t channels, float* dst) {
  const __m512i evens =
      _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  ForEachPhaseRow(s, x, channels, dst, [&](const float* row, float* out) {
    for (int64_t j = 0; j < s.w_out; j += 16) {
      // Outputs j.. read inputs 2 j .. 2 j + 2 n - 2 of the row.
      const int64_t n = std::min<int64_t>(16, s.w_out - j);
      const int64_t in = 2 * n - 1;
      const __mmask16 lo = static_cast<__mmask16>(in >= 16 ? 0xffff : (1u << in) - 1);
      const __mmask16 hi = static_cast<__mmask16>(in <= 16 ? 0 : (1u << (in - 16)) - 1);
      const __m512 a = _mm512_maskz_loadu_ps(lo, row + 2 * j);
      const __m512 b = _mm512_maskz_loadu_ps(hi, row + 2 * j + 16);
      _mm512_mask_storeu_ps(out + j, static_cast<__mmask16>((1u << n) - 1),
                            _mm512_permutex2var_ps(a, evens, b));
    }
  });
}

}  // namespace orrery::ops::cpu::gemm_internal
