// AVX2/FMA micro-kernel: 4 rows x 24 columns at a time (12 ymm accumulators);
// an 8 x 48 tile is covered in up to four passes. Convolution panels without
// im2col (conv_direct.h): masked loads at per-tap offsets, and for strided
// geometries loads of whole output rows (stride 1 or 2) or masked gathers.
// Depthwise 3x3 planes with each output row's chunk held in registers over
// the taps; planes of at most 8 columns (7x7) with the flat lane table.
// Compiled with -mavx2 -mfma; only called after dispatch.cc has checked the
// CPU.
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

// The lanes of an 8-bit lane mask as a vector mask (all ones where set).
ORRERY_GEMM_INLINE __m256i LaneMask(unsigned bits) {
  const __m256i bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
  return _mm256_cmpeq_epi32(
      _mm256_and_si256(_mm256_set1_epi32(static_cast<int32_t>(bits)), bit), bit);
}

// Bits [8 h, 8 h + 8) of a 48-column panel's three 16-lane masks.
ORRERY_GEMM_INLINE unsigned PanelByte(const uint16_t* m, int h) {
  return (static_cast<unsigned>(m[h / 2]) >> (8 * (h % 2))) & 0xffu;
}

// The 8 floats at b, zero in the lanes whose bit is clear (never read):
// a plain load when every lane is inside (interior taps), no load when none.
ORRERY_GEMM_INLINE __m256 MaskedLanes(const float* b, unsigned bits) {
  if (bits == 0xffu) return _mm256_loadu_ps(b);
  if (bits == 0) return _mm256_setzero_ps();
  return _mm256_maskload_ps(b, LaneMask(bits));
}

// x[idx[l]] for the lanes whose bit is set, zero elsewhere.
ORRERY_GEMM_INLINE __m256 GatherLanes(const float* x, __m256i idx, unsigned bits) {
  if (bits == 0xffu) return _mm256_i32gather_ps(x, idx, 4);
  if (bits == 0) return _mm256_setzero_ps();
  return _mm256_mask_i32gather_ps(_mm256_setzero_ps(), x, idx,
                                  _mm256_castsi256_ps(LaneMask(bits)), 4);
}

// Lanes 0, 2, .., 14 of the 15 floats at b (one output row read at stride
// 2), zero in the lanes whose bit is clear: two loads, the second masked so
// that nothing past b[14] is read, and the even lanes shuffled together.
ORRERY_GEMM_INLINE __m256 Stride2Lanes(const float* b, unsigned bits) {
  if (bits == 0) return _mm256_setzero_ps();
  // Bit l of `bits` selects input 2 l: lanes 2 l of the first load (l < 4)
  // and 2 (l - 4) of the second; bit 8 is never set, so odd lanes are off.
  const __m256i lo_bit = _mm256_setr_epi32(1, 256, 2, 256, 4, 256, 8, 256);
  const __m256i hi_bit = _mm256_setr_epi32(16, 256, 32, 256, 64, 256, 128, 256);
  const __m256i v = _mm256_set1_epi32(static_cast<int32_t>(bits));
  const __m256i lo_mask = _mm256_cmpeq_epi32(_mm256_and_si256(v, lo_bit), lo_bit);
  const __m256 a = bits == 0xffu ? _mm256_loadu_ps(b) : _mm256_maskload_ps(b, lo_mask);
  const __m256 c =
      _mm256_maskload_ps(b + 8, _mm256_cmpeq_epi32(_mm256_and_si256(v, hi_bit), hi_bit));
  // [a0 a2 c0 c2 | a4 a6 c4 c6] -> [a0 a2 a4 a6 c0 c2 c4 c6]
  const __m256 ev = _mm256_shuffle_ps(a, c, 0x88);
  return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(ev), 0xd8));
}

// How the 8 gather offsets at `base` step: 1 or 2 when base[i] = base[0] +
// step * i (positions of one output row at stride 1 or 2: plain loads
// instead of a gather; with gathers only, ResNet-18's 7x7 stride-2 stem was
// 5-15% slower than im2col panels, with row loads 7% faster), else 0.
ORRERY_GEMM_INLINE int GatherStep(const int32_t* base) {
  const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(base));
  const __m256i d = _mm256_sub_epi32(b, _mm256_set1_epi32(base[0]));
  const __m256i one = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  if (_mm256_movemask_epi8(_mm256_cmpeq_epi32(d, one)) == -1) return 1;
  if (_mm256_movemask_epi8(_mm256_cmpeq_epi32(d, _mm256_add_epi32(one, one))) == -1) return 2;
  return 0;
}

// ConvPanelFn for a panel of H 8-lane vectors (w = 8 H): masked loads, or
// with Gather the lanes base[j] + off[tap], by loads where GatherStep finds
// a row at stride 1 or 2, masked gathers elsewhere. Every lane is stored
// (masked-off ones as zero): the panel is full-width, and masked stores
// are slow on AMD.
template <int H, bool Gather>
void ConvPanelRows(const float* x, int64_t in_vol, int64_t k_vol, const int64_t* off,
                   const uint16_t* masks, const int32_t* base, int64_t k0, int64_t kc,
                   float* dst) {
  __m256i bv[H];
  int step[H];
#pragma GCC unroll 6
  for (int h = 0; h < H; ++h) {
    bv[h] = Gather ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(base + h * 8))
                   : _mm256_setzero_si256();
    step[h] = Gather ? GatherStep(base + h * 8) : 1;
  }
  int64_t tap = k0 % k_vol;
  const float* xc = x + (k0 / k_vol) * in_vol;
  for (int64_t k = 0; k < kc; ++k) {
    const uint16_t* m = masks + tap * 3;
    if (Gather) {
      const int32_t o = static_cast<int32_t>(off[tap]);
#pragma GCC unroll 6
      for (int h = 0; h < H; ++h) {
        const unsigned bits = PanelByte(m, h);
        __m256 r;
        if (step[h] == 1) {
          r = MaskedLanes(xc + base[h * 8] + o, bits);
        } else if (step[h] == 2) {
          r = Stride2Lanes(xc + base[h * 8] + o, bits);
        } else {
          r = GatherLanes(xc, _mm256_add_epi32(bv[h], _mm256_set1_epi32(o)), bits);
        }
        _mm256_storeu_ps(dst + h * 8, r);
      }
    } else {
      const float* b = xc + off[tap];
#pragma GCC unroll 6
      for (int h = 0; h < H; ++h) {
        _mm256_storeu_ps(dst + h * 8, MaskedLanes(b + h * 8, PanelByte(m, h)));
      }
    }
    dst += H * 8;
    if (++tap == k_vol) {
      tap = 0;
      xc += in_vol;
    }
  }
}

template <bool Gather>
void ConvPanelAny(const float* x, int64_t in_vol, int64_t k_vol, const int64_t* off,
                  const uint16_t* masks, const int32_t* base, int64_t k0, int64_t kc, int64_t w,
                  float* dst) {
  switch (w / 16) {
    case 1: return ConvPanelRows<2, Gather>(x, in_vol, k_vol, off, masks, base, k0, kc, dst);
    case 2: return ConvPanelRows<4, Gather>(x, in_vol, k_vol, off, masks, base, k0, kc, dst);
    default: return ConvPanelRows<6, Gather>(x, in_vol, k_vol, off, masks, base, k0, kc, dst);
  }
}

void ConvPanel(const float* x, int64_t in_vol, int64_t k_vol, const int64_t* off,
               const uint16_t* masks, const int32_t* base, int64_t k0, int64_t kc, int64_t w,
               float* dst) {
  if (base != nullptr) {
    return ConvPanelAny<true>(x, in_vol, k_vol, off, masks, base, k0, kc, w, dst);
  }
  ConvPanelAny<false>(x, in_vol, k_vol, off, masks, base, k0, kc, w, dst);
}

// ConvRowsFn: one 8-lane masked load or gather per row.
template <bool Gather>
void ConvRowsAny(const float* x, int64_t in_vol, int64_t k_vol, const int64_t* off,
                 const uint16_t* masks, const int32_t* base, int lane, int64_t k0, int64_t kc,
                 float* dst) {
  const int v = lane / 16, shift = lane % 16;
  const __m256i b8 = Gather ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(base))
                            : _mm256_setzero_si256();
  int64_t tap = k0 % k_vol;
  const float* xc = x + (k0 / k_vol) * in_vol;
  for (int64_t k = 0; k < kc; ++k) {
    const unsigned bits = (static_cast<unsigned>(masks[tap * 3 + v]) >> shift) & 0xffu;
    __m256 r;
    if (Gather) {
      r = GatherLanes(xc, _mm256_add_epi32(b8, _mm256_set1_epi32(static_cast<int32_t>(off[tap]))),
                      bits);
    } else {
      r = MaskedLanes(xc + off[tap], bits);
    }
    _mm256_storeu_ps(dst + k * kPanelRows, r);
    if (++tap == k_vol) {
      tap = 0;
      xc += in_vol;
    }
  }
}

void ConvRows(const float* x, int64_t in_vol, int64_t k_vol, const int64_t* off,
              const uint16_t* masks, const int32_t* base, int lane, int64_t k0, int64_t kc,
              float* dst) {
  if (base != nullptr) {
    return ConvRowsAny<true>(x, in_vol, k_vol, off, masks, base, lane, k0, kc, dst);
  }
  ConvRowsAny<false>(x, in_vol, k_vol, off, masks, base, lane, k0, kc, dst);
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

// What a depthwise plane kernel applies in registers: the post epilogue
// (row bias, residual, Relu / Clip) when it can run on each output vector
// (`in_regs`; otherwise on the finished plane), and the clamp bounds.
struct PlanePost {
  bool in_regs, post, clamp;
  VF lo, hi;
};

ORRERY_GEMM_INLINE PlanePost PlanePostFor(const Epilogue& ep) {
  const bool in_regs = ep.col_bias == nullptr && gemm_internal::PostInTile(ep);
  return {in_regs, in_regs && ep.has_post(), in_regs && ep.act != Activation::kNone,
          Splat(ep.act == Activation::kClip ? ep.act_alpha : 0.0f),
          Splat(ep.act == Activation::kClip ? ep.act_beta : __builtin_huge_valf())};
}

// Depthwise planes of 3x3 windows with stride 1 or 2 along rows and no
// dilation there (MobileNet's layers; any row stride, dilation and
// padding): each output row in chunks of up to 4 vectors held in
// registers over the 9 taps. Bias, residual and Relu / Clip are applied in
// registers; other epilogues run on the plane afterwards.
// Blocks of several rows (8 x 1, 4 x 2, 2 x 4 vectors: ~8 FMA chains
// instead of 1-4) measured slower or even on MobileNet-v2's planes (one
// thread, AMD Zen 3): with the 9 weights in registers GCC spilled the
// accumulators (14x14 0.127 -> 0.217 ms); with broadcast weights 56x56 and
// 28x28 gained 10-15% but 112x112 and 14x14 lost 20-25%, 7x7 even.
template <int S>
void DepthwiseRows3x3(const gemm_internal::DepthwiseGeometry& g, const float* x, const float* w,
                      float* y, int64_t c, int64_t p0, int64_t p1, const Epilogue& ep) {
  const int64_t in_vol = g.h_in * g.w_in, out_vol = g.h_out * g.w_out;
  const auto [in_regs, post, clamp, lo, hi] = PlanePostFor(ep);
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

// Depthwise planes with a flat lane table (depthwise_flat.h) and rows of at
// most 8 outputs (7x7): the plane as one flattened row, each 16-lane table
// vector as two ymm halves, up to 8 halves accumulated in
// registers over all taps (independent FMA chains; the row kernel's 7-wide
// rows are one chain each). Masks come from the table; the lanes of a tap
// are one load (masked at the padding) or a gather. MobileNet-v2's 7x7 x
// 960 3x3 layers, one thread, AMD Zen 3, best of 3 alternated rounds:
// 0.137 -> 0.087 ms; its 14x14 layers measured even (0.99), so wider rows
// keep the row kernel.
void DepthwiseFlat(const gemm_internal::DepthwiseGeometry& g, const float* x, const float* w,
                   float* y, int64_t c, int64_t p0, int64_t p1, const Epilogue& ep) {
  const int64_t in_vol = g.h_in * g.w_in, out_vol = g.h_out * g.w_out;
  const int64_t taps = g.kh * g.kw, vectors = g.flat_vectors;
  const auto [in_regs, post, clamp, lo, hi] = PlanePostFor(ep);
  for (int64_t p = p0; p < p1; ++p) {
    const int64_t ch = p % c;
    const float* xp = x + p * in_vol;
    const float* wp = w + ch * taps;
    float* yp = y + p * out_vol;
    const __m256 rb = _mm256_set1_ps(post && ep.row_bias != nullptr ? ep.row_bias[ch] : 0.0f);
    const float* zp = post && ep.residual != nullptr
                          ? ep.residual + (p - ch) * out_vol + ch * ep.ld_residual
                          : nullptr;
    for (int64_t v0 = 0; v0 < vectors; v0 += 4) {
      const int halves = static_cast<int>(2 * (vectors - v0 < 4 ? vectors - v0 : 4));
      __m256 acc[8];
#pragma GCC unroll 8
      for (int h = 0; h < 8; ++h) acc[h] = _mm256_setzero_ps();
      for (int64_t t = 0; t < taps; ++t) {
        const __m256 wt = _mm256_broadcast_ss(wp + t);
        const int64_t e0 = t * vectors + v0;
#pragma GCC unroll 8
        for (int h = 0; h < 8; ++h) {
          if (h >= halves) break;
          const int64_t e = e0 + h / 2;
          const unsigned bits = (static_cast<unsigned>(g.flat_mask[e]) >> (8 * (h % 2))) & 0xffu;
          if (bits == 0) continue;
          __m256 xv;
          if (g.flat_slot[e] < 0) {
            xv = MaskedLanes(xp + g.flat_base[e] + 8 * (h % 2), bits);
          } else {
            const __m256i idx = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(
                g.flat_gather + g.flat_slot[e] * 16 + 8 * (h % 2)));
            xv = GatherLanes(xp, idx, bits);
          }
          acc[h] = _mm256_fmadd_ps(wt, xv, acc[h]);
        }
      }
#pragma GCC unroll 8
      for (int h = 0; h < 8; ++h) {
        if (h >= halves) break;
        const int64_t q = v0 * 16 + h * 8;
        const int64_t n = out_vol - q;
        if (n <= 0) break;
        const __m256i m = ColumnMask(n >= 8 ? 8 : static_cast<int>(n));
        __m256 o = acc[h];
        if (post) {
          o = _mm256_add_ps(o, rb);
          if (zp != nullptr) {
            o = _mm256_add_ps(o, n >= 8 ? _mm256_loadu_ps(zp + q) : _mm256_maskload_ps(zp + q, m));
          }
          if (clamp) o = (__m256)Min(Max((VF)o, lo), hi);
        }
        if (n >= 8) {
          _mm256_storeu_ps(yp + q, o);
        } else {
          _mm256_maskstore_ps(yp + q, m, o);
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
  if (g.flat_vectors > 0 && g.w_out <= 8) return DepthwiseFlat(g, x, w, y, c, p0, p1, ep);
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
  // No conv_tile: a tile reading B from the input reloads each row once per
  // 4 x 24 pass (four per 8 x 48 tile, where the AVX-512 tile is one), and
  // lost to Sgemm over the masked-load panels (GoogLeNet's 28x28 16 -> 32
  // 3x3: 0.152 vs 0.099 ms) and over packed X (MobileNet-v2's 112x112 32 ->
  // 16 1x1: 0.43 vs 0.27 ms), one thread, best of 5.
  // No tile_post: the post epilogue (bias, residual, Relu / Clip) applied
  // in each 4 x 24 block's registers before its store (as the AVX-512 tile
  // does) made every GEMM step of MobileNet-v2 and SqueezeNet 4-12% slower
  // than EpilogueRows on the finished 8 x 48 tile in L1 (per-step minima of
  // 3 alternated rounds, one thread, AMD Zen 3; the K loop compiled the
  // same, the store path spilled accumulators).
  static const GemmKernels k{avx2::TileAny, avx2::ApplyEpilogueImpl, avx2::DepthwisePlanes,
                             avx2::Im2ColPanelImpl, /*conv_tile=*/nullptr, avx2::ConvPanel,
                             avx2::ConvRows, avx2::PackRightRowsImpl,
                             /*tile_post=*/false, /*conv_tail=*/nullptr};
  return k;
}

}  // namespace orrery::ops::cpu::gemm_internal
