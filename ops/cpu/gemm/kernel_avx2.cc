// AVX2/FMA micro-kernel: 4 rows x 24 columns at a time (12 ymm accumulators);
// an 8 x 48 tile is covered in up to four passes. Depthwise 3x3 planes with
// each output row's chunk held in registers over the taps. Compiled with -mavx2 -mfma;
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

// Lanes [idx, idx + 8) of an input row of w_in floats, zero where outside
// it (the padding). Only the row's edges take the masked load.
ORRERY_GEMM_INLINE __m256 LoadRowLanes(const float* xr, int64_t idx, int64_t w_in) {
  if (idx >= 0 && idx + 8 <= w_in) return _mm256_loadu_ps(xr + idx);
  const __m256i lanes =
      _mm256_add_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
                       _mm256_set1_epi32(static_cast<int32_t>(idx)));
  const __m256i inside = _mm256_andnot_si256(_mm256_cmpgt_epi32(_mm256_setzero_si256(), lanes),
                                             _mm256_cmpgt_epi32(_mm256_set1_epi32(
                                                 static_cast<int32_t>(w_in)), lanes));
  return _mm256_maskload_ps(xr + idx, inside);
}

// Input columns s * (o + l) + off for the 8 outputs o + l of one vector:
// stride 1 one load, stride 2 two loads with their even lanes kept.
template <int S>
ORRERY_GEMM_INLINE __m256 LoadTapLanes(const float* xr, int64_t idx, int64_t w_in) {
  if constexpr (S == 1) {
    return LoadRowLanes(xr, idx, w_in);
  } else {
    const __m256 a = LoadRowLanes(xr, idx, w_in), b = LoadRowLanes(xr, idx + 8, w_in);
    // [a0 a2 b0 b2 | a4 a6 b4 b6] -> [a0 a2 a4 a6 b0 b2 b4 b6]
    const __m256 ev = _mm256_shuffle_ps(a, b, 0x88);
    return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(ev), 0xd8));
  }
}

// NV vectors of one output row of a 3x3, undilated-along-rows, stride-S
// depthwise plane starting at output column o0, every tap accumulated in
// registers (the plain loop reads and writes the row once per tap), then
// + row bias, + residual row and a clamp when `post` is set (the order of
// EpilogueRows), and one store.
template <int S, int NV>
ORRERY_GEMM_INLINE void DepthwiseRowChunk(const gemm_internal::DepthwiseGeometry& g,
                                          const float* x, const __m256 (&wv)[9], int64_t oh,
                                          int64_t o0, float* yr, const float* zr, __m256 rb,
                                          bool post, bool clamp, VF lo, VF hi) {
  __m256 acc[NV];
#pragma GCC unroll 4
  for (int v = 0; v < NV; ++v) acc[v] = _mm256_setzero_ps();
  const int64_t top = oh * g.sh - g.ph;
#pragma GCC unroll 3
  for (int kh = 0; kh < 3; ++kh) {
    const int64_t ih = top + kh * g.dh;
    if (ih < 0 || ih >= g.h_in) continue;
    const float* xr = x + ih * g.w_in;
#pragma GCC unroll 3
    for (int kw = 0; kw < 3; ++kw) {
      const int64_t base = o0 * S + kw - g.pw;
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) {
        acc[v] = _mm256_fmadd_ps(wv[kh * 3 + kw], LoadTapLanes<S>(xr, base + v * 8 * S, g.w_in),
                                 acc[v]);
      }
    }
  }
#pragma GCC unroll 4
  for (int v = 0; v < NV; ++v) {
    __m256 r = acc[v];
    const int64_t n = g.w_out - o0 - v * 8;
    const __m256i m = ColumnMask(n >= 8 ? 8 : static_cast<int>(n));
    if (post) {
      r = _mm256_add_ps(r, rb);
      if (zr != nullptr) {
        r = _mm256_add_ps(r, n >= 8 ? _mm256_loadu_ps(zr + o0 + v * 8)
                                    : _mm256_maskload_ps(zr + o0 + v * 8, m));
      }
      if (clamp) r = (__m256)Min(Max((VF)r, lo), hi);
    }
    if (n >= 8) {
      _mm256_storeu_ps(yr + o0 + v * 8, r);
    } else {
      _mm256_maskstore_ps(yr + o0 + v * 8, m, r);
    }
  }
}

// Depthwise planes of 3x3 windows with stride 1 or 2 along rows and no
// dilation there (MobileNet's layers; any row stride, dilation and
// padding): each output row in chunks of up to 4 vectors held in
// registers over the 9 taps. Bias, residual and Relu / Clip are applied in
// registers; other epilogues run on the plane afterwards.
template <int S>
void DepthwiseRows3x3(const gemm_internal::DepthwiseGeometry& g, const float* x, const float* w,
                      float* y, int64_t c, int64_t p0, int64_t p1, const Epilogue& ep) {
  const int64_t in_vol = g.h_in * g.w_in, out_vol = g.h_out * g.w_out;
  const bool in_regs = ep.col_bias == nullptr && gemm_internal::PostInTile(ep);
  const bool post = in_regs && ep.has_post();
  const bool clamp = in_regs && ep.act != Activation::kNone;
  const VF lo = Splat(ep.act == Activation::kClip ? ep.act_alpha : 0.0f);
  const VF hi = Splat(ep.act == Activation::kClip ? ep.act_beta : __builtin_huge_valf());
  for (int64_t p = p0; p < p1; ++p) {
    const int64_t ch = p % c;
    const float* xp = x + p * in_vol;
    float* yp = y + p * out_vol;
    __m256 wv[9];
#pragma GCC unroll 9
    for (int t = 0; t < 9; ++t) wv[t] = _mm256_set1_ps(w[ch * 9 + t]);
    const __m256 rb = _mm256_set1_ps(post && ep.row_bias != nullptr ? ep.row_bias[ch] : 0.0f);
    // The residual's plane: row ch of image (p - ch) / c's [c x out_vol] matrix.
    const float* zp = post && ep.residual != nullptr
                          ? ep.residual + (p - ch) * out_vol + ch * ep.ld_residual
                          : nullptr;
    for (int64_t oh = 0; oh < g.h_out; ++oh) {
      float* yr = yp + oh * g.w_out;
      const float* zr = zp != nullptr ? zp + oh * g.w_out : nullptr;
      for (int64_t o0 = 0; o0 < g.w_out; o0 += 32) {
        const int64_t left = g.w_out - o0;
        const int nv = left >= 32 ? 4 : static_cast<int>((left + 7) / 8);
        switch (nv) {
          case 1:
            DepthwiseRowChunk<S, 1>(g, xp, wv, oh, o0, yr, zr, rb, post, clamp, lo, hi);
            break;
          case 2:
            DepthwiseRowChunk<S, 2>(g, xp, wv, oh, o0, yr, zr, rb, post, clamp, lo, hi);
            break;
          case 3:
            DepthwiseRowChunk<S, 3>(g, xp, wv, oh, o0, yr, zr, rb, post, clamp, lo, hi);
            break;
          default:
            DepthwiseRowChunk<S, 4>(g, xp, wv, oh, o0, yr, zr, rb, post, clamp, lo, hi);
            break;
        }
      }
    }
    if (ep.has_post() && !in_regs) {
      Epilogue e = ep;
      if (e.residual != nullptr) e.residual += (p - ch) * out_vol;
      ApplyEpilogueImpl(e, yp, out_vol, ch, 0, 1, out_vol);
    }
  }
}

void DepthwisePlanes(const gemm_internal::DepthwiseGeometry& g, const float* x, const float* w,
                     float* y, int64_t c, int64_t p0, int64_t p1, const Epilogue& ep) {
  if (g.kh == 3 && g.kw == 3 && g.dw == 1 && g.w_in < (int64_t{1} << 30)) {
    if (g.sw == 1) return DepthwiseRows3x3<1>(g, x, w, y, c, p0, p1, ep);
    if (g.sw == 2) return DepthwiseRows3x3<2>(g, x, w, y, c, p0, p1, ep);
  }
  DepthwisePlanesImpl(g, x, w, y, c, p0, p1, ep);
}

}  // namespace
}  // namespace orrery::ops::cpu::avx2

namespace orrery::ops::cpu::gemm_internal {

const GemmKernels& Avx2Kernels() {
  static const GemmKernels k{avx2::TileAny, avx2::ApplyEpilogueImpl, avx2::DepthwisePlanes,
                             avx2::Im2ColPanelImpl, /*conv_tile=*/nullptr,
                             /*conv_panel=*/nullptr, /*conv_rows=*/nullptr,
                             avx2::PackRightRowsImpl,
                             /*tile_post=*/false};
  return k;
}

}  // namespace orrery::ops::cpu::gemm_internal
