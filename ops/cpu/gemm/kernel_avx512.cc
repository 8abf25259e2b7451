// AVX-512 micro-kernel: up to 8 rows x 48 columns (24 zmm accumulators, one
// broadcast of A and three loads of B per k), with the bias / residual /
// clamp epilogue applied in registers; the same tile reading B straight from
// a convolution's input (conv_direct.h); depthwise rows and flat planes
// (depthwise_flat.h). Compiled with -mavx512f -mavx512bw -mavx512vl -mfma;
// only called after dispatch.cc has checked the CPU.
#include <immintrin.h>

#include <cstdint>
#include <numeric>

#include "ops/cpu/gemm/conv_stem.h"
#include "ops/cpu/gemm/kernels.h"

#define ORRERY_GEMM_NS avx512
#define ORRERY_GEMM_WIDTH 16
#include "ops/cpu/gemm/epilogue_impl.h"

namespace orrery::ops::cpu::avx512 {
namespace {

using gemm_internal::TileArgs;

// Stores a tile's accumulators: * alpha, + C when load_c, then the post
// epilogue in registers when `post` is set (the order of EpilogueRows:
// + row bias, + column bias, + residual, clamp).
template <int R, int NV>
ORRERY_GEMM_INLINE void StoreTile(__m512 (&acc)[R][NV], float* c0, int64_t ldc, int cols,
                                  float alpha, bool load_c, const Epilogue* post, int64_t i0,
                                  int64_t j0) {
  const __m512 va = _mm512_set1_ps(alpha);
  __mmask16 masks[NV];
#pragma GCC unroll 3
  for (int v = 0; v < NV; ++v) masks[v] = FirstLanes(cols - v * 16);
  __m512 cb[NV];
  const float* cbias = post != nullptr && post->col_bias != nullptr ? post->col_bias + j0 : nullptr;
#pragma GCC unroll 3
  for (int v = 0; v < NV; ++v) {
    cb[v] = cbias != nullptr ? _mm512_maskz_loadu_ps(masks[v], cbias + v * 16)
                             : _mm512_setzero_ps();
  }
  const bool clamp = post != nullptr && post->act != Activation::kNone;
  const VF lo = Splat(post != nullptr && post->act == Activation::kClip ? post->act_alpha : 0.0f);
  const VF hi = Splat(post != nullptr && post->act == Activation::kClip ? post->act_beta
                                                                         : __builtin_huge_valf());
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    float* c = c0 + r * ldc;
    const float* z = post != nullptr && post->residual != nullptr
                         ? post->residual + (i0 + r) * post->ld_residual + j0
                         : nullptr;
    const __m512 rb = _mm512_set1_ps(post != nullptr && post->row_bias != nullptr
                                         ? post->row_bias[i0 + r]
                                         : 0.0f);
#pragma GCC unroll 3
    for (int v = 0; v < NV; ++v) {
      __m512 y = alpha == 1.0f ? acc[r][v] : _mm512_mul_ps(acc[r][v], va);
      if (load_c) y = _mm512_add_ps(y, _mm512_maskz_loadu_ps(masks[v], c + v * 16));
      if (post != nullptr) {
        y = _mm512_add_ps(y, rb);
        if (cbias != nullptr) y = _mm512_add_ps(y, cb[v]);
        if (z != nullptr) y = _mm512_add_ps(y, _mm512_maskz_loadu_ps(masks[v], z + v * 16));
        if (clamp) y = (__m512)Min(Max((VF)y, lo), hi);
      }
      _mm512_mask_storeu_ps(c + v * 16, masks[v], y);
    }
  }
}

// Brings the lines of C (when the tile adds to it) and of the residual that
// the tile's store will read into L2 while the k loop runs: at batch 8 these
// planes come from memory, where each row of a tile is its own short stream
// that the hardware prefetcher does not pick up.
template <int R, int NV>
ORRERY_GEMM_INLINE void PrefetchEpilogue(const float* c0, int64_t ldc, bool load_c,
                                         const Epilogue* post, int64_t i0, int64_t j0) {
  if (load_c) {
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
#pragma GCC unroll 3
      for (int v = 0; v < NV; ++v) __builtin_prefetch(c0 + r * ldc + v * 16, 0, 2);
    }
  }
  if (post != nullptr && post->residual != nullptr) {
    const float* z = post->residual + i0 * post->ld_residual + j0;
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
#pragma GCC unroll 3
      for (int v = 0; v < NV; ++v) {
        __builtin_prefetch(z + r * post->ld_residual + v * 16, 0, 2);
      }
    }
  }
}

// The direct convolution tile (ConvTileArgs): Tile's register blocking, with
// each B row made of masked loads from the input plane at the tap's offset.
template <int R, int NV>
void ConvTile(const gemm_internal::ConvTileArgs& t) {
  __m512 acc[R][NV];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 3
    for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_setzero_ps();
  }
  PrefetchEpilogue<R, NV>(t.c, t.ldc, t.load_c, t.post, t.i0, t.j0);
  const float* a = t.a;
  const int64_t k_vol = t.k_vol;
  int64_t tap = t.k0 % k_vol;
  const float* xc = t.x + (t.k0 / k_vol) * t.in_vol;
  for (int64_t k = 0; k < t.kc; ++k) {
    const float* b = xc + t.off[tap];
    const uint16_t* m = t.masks + tap * 3;
    __m512 bv[NV];
#pragma GCC unroll 3
    for (int v = 0; v < NV; ++v) bv[v] = _mm512_maskz_loadu_ps(m[v], b + v * 16);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512 av = _mm512_set1_ps(a[r]);
#pragma GCC unroll 3
      for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_fmadd_ps(av, bv[v], acc[r][v]);
    }
    a += kPanelRows;
    if (++tap == k_vol) {
      tap = 0;
      xc += t.in_vol;
    }
  }
  StoreTile<R, NV>(acc, t.c, t.ldc, t.cols, 1.0f, t.load_c, t.post, t.i0, t.j0);
}

// Indices 0, 2, ..., 30 for _mm512_permutex2var_ps: the even lanes of two
// vectors a:b (the inputs of a stride-2 row, 32 loaded as two vectors).
ORRERY_GEMM_INLINE __m512i EvenIndices() {
  return _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
}

// Output lanes l < 8 (lo) or l >= 8 (hi) of a 16-lane mask as input lanes
// 2 (l % 8) of the 32 inputs a stride-2 vector reads: SpreadEven(m) puts bit
// i of the byte m at bit 2 i.
constexpr uint16_t SpreadEven(uint32_t m) {
  uint16_t r = 0;
  for (int i = 0; i < 8; ++i) r = static_cast<uint16_t>(r | (((m >> i) & 1u) << (2 * i)));
  return r;
}
struct SpreadTable {
  uint16_t v[256];
  constexpr SpreadTable() : v() {
    for (uint32_t m = 0; m < 256; ++m) v[m] = SpreadEven(m);
  }
};
constexpr SpreadTable kSpreadEven;

// How a gather panel's vector of 16 output positions reads its inputs
// (from its input offsets base[0..16)): as one or two runs of positions
// with a fixed step of 1 or 2 inputs (the rows of a strided plane, a run
// ending where an output row does), so that each run is one masked load,
// or two and an even-lane permute for stride 2, instead of a 16-lane
// gather; or, with more runs (output rows under 16 wide) or other steps,
// by the gather. Lanes past the plane (base 0 after lane 0) take no part.
struct VectorRuns {
  int step = 0;              // 1 or 2; 0: gather
  int32_t first = 0;         // lane l < split reads first + step * l
  int32_t second = 0;        // lane l >= split reads second + step * l
  __mmask16 low = 0xffff;    // the first run's lanes
};

inline VectorRuns FindRuns(const int32_t* base) {
  VectorRuns r;
  const int32_t step = base[1] - base[0];
  if (base[1] == 0 || (step != 1 && step != 2)) return r;
  r.first = base[0];
  int split = 16;
  for (int l = 1; l < 16; ++l) {
    if (base[l] == 0) break;
    if (base[l] == base[l - 1] + step) continue;
    if (split != 16) return r;  // a third run
    split = l;
    r.second = base[l] - step * l;
  }
  r.step = step;
  r.low = FirstLanes(split);
  return r;
}

// One run's lanes `m` of a vector starting at input p (step S).
template <int S>
ORRERY_GEMM_INLINE __m512 LoadRun(const float* p, __mmask16 m) {
  if (S == 1) return _mm512_maskz_loadu_ps(m, p);
  const __m512i evens = EvenIndices();
  const __m512 lo = _mm512_maskz_loadu_ps(kSpreadEven.v[m & 0xff], p);
  const __m512 hi = _mm512_maskz_loadu_ps(kSpreadEven.v[m >> 8], p + 16);
  return _mm512_permutex2var_ps(lo, evens, hi);
}

template <int S>
ORRERY_GEMM_INLINE __m512 LoadRuns(const float* xt, const VectorRuns& r, __mmask16 m) {
  const __m512 a = LoadRun<S>(xt + r.first, m & r.low);
  if (r.low == 0xffff) return a;
  const __mmask16 high = m & static_cast<__mmask16>(~r.low);
  return _mm512_mask_blend_ps(high, a, LoadRun<S>(xt + r.second, high));
}

// ConvPanelFn with NV vectors per panel row: masked loads, or masked
// gathers at base[j] + off[tap] when Gather (runs of positions whose
// inputs are evenly spaced by masked loads instead: VectorRuns).
template <int NV, bool Gather>
void ConvPanelRows(const float* x, int64_t in_vol, int64_t k_vol, const int64_t* off,
                   const uint16_t* masks, const int32_t* base, int64_t k0, int64_t kc,
                   float* dst) {
  __m512i bv[NV];
  VectorRuns runs[NV];
#pragma GCC unroll 3
  for (int v = 0; v < NV; ++v) {
    bv[v] = Gather ? _mm512_loadu_si512(base + v * 16) : _mm512_setzero_si512();
    if (Gather) runs[v] = FindRuns(base + v * 16);
  }
  int64_t tap = k0 % k_vol;
  const float* xc = x + (k0 / k_vol) * in_vol;
  for (int64_t k = 0; k < kc; ++k) {
    const uint16_t* m = masks + tap * 3;
    if (Gather) {
      const __m512i o = _mm512_set1_epi32(static_cast<int32_t>(off[tap]));
      const float* xt = xc + off[tap];
#pragma GCC unroll 3
      for (int v = 0; v < NV; ++v) {
        __m512 r;
        if (runs[v].step == 2) {
          r = LoadRuns<2>(xt, runs[v], m[v]);
        } else if (runs[v].step == 1) {
          r = LoadRuns<1>(xt, runs[v], m[v]);
        } else {
          r = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m[v], _mm512_add_epi32(bv[v], o),
                                       xc, 4);
        }
        _mm512_storeu_ps(dst + v * 16, r);
      }
    } else {
      // The next panel's inputs (48 positions on) are prefetched while
      // this one is made: at batch 8 the planes come from memory (ResNet's
      // 3x3 64 -> 64 at 56x56, 8 images: 8.9 -> 8.3 ms).
      const float* b = xc + off[tap];
#pragma GCC unroll 3
      for (int v = 0; v < NV; ++v) {
        __builtin_prefetch(b + kPanelCols + v * 16, 0, 3);
        _mm512_storeu_ps(dst + v * 16, _mm512_maskz_loadu_ps(m[v], b + v * 16));
      }
    }
    dst += NV * 16;
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
    case 1: return ConvPanelRows<1, Gather>(x, in_vol, k_vol, off, masks, base, k0, kc, dst);
    case 2: return ConvPanelRows<2, Gather>(x, in_vol, k_vol, off, masks, base, k0, kc, dst);
    default: return ConvPanelRows<3, Gather>(x, in_vol, k_vol, off, masks, base, k0, kc, dst);
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
    const auto m = static_cast<__mmask8>(masks[tap * 3 + v] >> shift);
    __m256 r;
    if (Gather) {
      const __m256i idx = _mm256_add_epi32(b8, _mm256_set1_epi32(static_cast<int32_t>(off[tap])));
      r = _mm256_mmask_i32gather_ps(_mm256_setzero_ps(), m, idx, xc, 4);
    } else {
      r = _mm256_maskz_loadu_ps(m, xc + off[tap]);
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

template <int R, int NV>
void Tile(const TileArgs& t) {
  __m512 acc[R][NV];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 3
    for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_setzero_ps();
  }
  PrefetchEpilogue<R, NV>(t.c, t.ldc, t.load_c, t.post, t.i0, t.j0);
  const float* a = t.a;
  const float* b = t.b;
  const int64_t ldb = t.ldb;
  const char* pf = reinterpret_cast<const char*>(t.prefetch);
  const int64_t pf_lines = t.prefetch_lines;
  for (int64_t k = 0; k < t.kc; ++k) {
    if (k < pf_lines) _mm_prefetch(pf + k * 64, _MM_HINT_T1);
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
    b += ldb;
  }
  StoreTile<R, NV>(acc, t.c, t.ldc, t.cols, t.alpha, t.load_c, t.post, t.i0, t.j0);
}

// Calls f.template operator()<R, NV>() for a tile of `rows` (1..8) rows
// and the vector count NV (1..3) that `cols` (1..48) columns need (a
// 48-wide panel with 20 valid columns needs two vectors, not three).
template <int NV, typename F>
ORRERY_GEMM_INLINE void WithRows(int rows, F& f) {
  switch (rows) {
    case 1: return f.template operator()<1, NV>();
    case 2: return f.template operator()<2, NV>();
    case 3: return f.template operator()<3, NV>();
    case 4: return f.template operator()<4, NV>();
    case 5: return f.template operator()<5, NV>();
    case 6: return f.template operator()<6, NV>();
    case 7: return f.template operator()<7, NV>();
    default: return f.template operator()<8, NV>();
  }
}

template <typename F>
ORRERY_GEMM_INLINE void WithTileShape(int rows, int cols, F&& f) {
  switch ((cols + 15) / 16) {
    case 1: return WithRows<1>(rows, f);
    case 2: return WithRows<2>(rows, f);
    default: return WithRows<3>(rows, f);
  }
}

void TileAny(const TileArgs& t) {
  WithTileShape(t.rows, t.cols, [&]<int R, int NV>() { Tile<R, NV>(t); });
}

void ConvTileAny(const gemm_internal::ConvTileArgs& t) {
  WithTileShape(t.rows, t.cols, [&]<int R, int NV>() { ConvTile<R, NV>(t); });
}

// ConvTailArgs for NV packed 8-row panels (rows [0, 8 NV)) and P columns:
// acc[j][v] holds panel v's rows for column j, lanes 0-7 over even depths
// and 8-15 over odd ones, so every FMA lane is a useful product.
template <int P, int NV>
void ConvTailBlock(const float* a, int64_t k, const float* b, float* c, int64_t ldc, int64_t rows) {
  __m512 acc[P][NV];
#pragma GCC unroll 4
  for (int j = 0; j < P; ++j) {
#pragma GCC unroll 6
    for (int v = 0; v < NV; ++v) acc[j][v] = _mm512_setzero_ps();
  }
  const int64_t pairs = k / 2;
  const int64_t panel = kPanelRows * k;
  // B[2i][j] in lanes 0-7, B[2i + 1][j] in lanes 8-15.
  auto pair = [&](int j) {
    return _mm512_mask_blend_ps(0xff00, _mm512_set1_ps(b[j]), _mm512_set1_ps(b[P + j]));
  };
  for (int64_t i = 0; i < pairs; ++i) {
    __m512 bv[P];
#pragma GCC unroll 4
    for (int j = 0; j < P; ++j) bv[j] = pair(j);
#pragma GCC unroll 6
    for (int v = 0; v < NV; ++v) {
      const __m512 w = _mm512_loadu_ps(a + v * panel + i * 16);
#pragma GCC unroll 4
      for (int j = 0; j < P; ++j) acc[j][v] = _mm512_fmadd_ps(w, bv[j], acc[j][v]);
    }
    b += 2 * P;
  }
  if (k % 2 != 0) {  // the last depth alone, in lanes 0-7
    __m512 bv[P];
#pragma GCC unroll 4
    for (int j = 0; j < P; ++j) bv[j] = _mm512_maskz_mov_ps(0x00ff, _mm512_set1_ps(b[j]));
#pragma GCC unroll 6
    for (int v = 0; v < NV; ++v) {
      const __m512 w = _mm512_maskz_loadu_ps(0x00ff, a + v * panel + pairs * 16);
#pragma GCC unroll 4
      for (int j = 0; j < P; ++j) acc[j][v] = _mm512_fmadd_ps(w, bv[j], acc[j][v]);
    }
  }
#pragma GCC unroll 6
  for (int v = 0; v < NV; ++v) {
    const int64_t n = rows - v * kPanelRows < kPanelRows ? rows - v * kPanelRows : kPanelRows;
#pragma GCC unroll 4
    for (int j = 0; j < P; ++j) {
      alignas(64) float lanes[16];
      _mm512_store_ps(lanes, acc[j][v]);
      for (int64_t i = 0; i < n; ++i) c[(v * kPanelRows + i) * ldc + j] = lanes[i] + lanes[i + 8];
    }
  }
}

void ConvTailAny(const gemm_internal::ConvTailArgs& t) {
  constexpr int64_t kBlock = 6;  // panels: 4 x 6 accumulators, 4 B vectors, one A
  const int64_t panels = (t.rows + kPanelRows - 1) / kPanelRows;
  for (int64_t p0 = 0; p0 < panels; p0 += kBlock) {
    const int64_t nv = panels - p0 < kBlock ? panels - p0 : kBlock;
    const int64_t rows = t.rows - p0 * kPanelRows;
    const float* a = t.a + p0 * kPanelRows * t.k;
    float* c = t.c + p0 * kPanelRows * t.ldc;
    auto run = [&]<int P>() {
      switch (nv) {
        case 1: ConvTailBlock<P, 1>(a, t.k, t.b, c, t.ldc, rows); break;
        case 2: ConvTailBlock<P, 2>(a, t.k, t.b, c, t.ldc, rows); break;
        case 3: ConvTailBlock<P, 3>(a, t.k, t.b, c, t.ldc, rows); break;
        case 4: ConvTailBlock<P, 4>(a, t.k, t.b, c, t.ldc, rows); break;
        case 5: ConvTailBlock<P, 5>(a, t.k, t.b, c, t.ldc, rows); break;
        default: ConvTailBlock<P, 6>(a, t.k, t.b, c, t.ldc, rows); break;
      }
    };
    switch (t.cols) {
      case 1: run.template operator()<1>(); break;
      case 2: run.template operator()<2>(); break;
      case 3: run.template operator()<3>(); break;
      default: run.template operator()<4>(); break;
    }
  }
}

// The depthwise kernels' in-register epilogue: + row bias, + residual and
// a clamp to [lo, hi] (Relu, Clip) when there is no column bias and the
// activation is a clamp or none; otherwise the generic epilogue runs on the
// plane afterwards. Max / Min of epilogue_impl.h, so NaNs clamp as there.
struct PlanePost {
  bool in_regs, clamp;
  VF lo, hi;
  explicit PlanePost(const Epilogue& ep)
      : in_regs(ep.col_bias == nullptr && gemm_internal::PostInTile(ep)),
        clamp(in_regs && ep.act != Activation::kNone),
        lo(Splat(ep.act == Activation::kClip ? ep.act_alpha : 0.0f)),
        hi(Splat(ep.act == Activation::kClip ? ep.act_beta : __builtin_huge_valf())) {}
  // After plane p (channel ch, vol outputs at yp) is stored: the post ops
  // that did not run in registers, by the generic epilogue.
  void ApplyAfter(const Epilogue& ep, float* yp, int64_t vol, int64_t p, int64_t ch) const {
    if (in_regs || !ep.has_post()) return;
    Epilogue e = ep;
    if (e.residual != nullptr) e.residual += (p - ch) * vol;
    ApplyEpilogueImpl(e, yp, vol, ch, 0, 1, vol);
  }
};

// One input row's contribution to an output row of a stride-2, 3-wide,
// left-pad-1, undilated depthwise window (MobileNet's downsampling layers):
// output lane l of vector v reads columns 32 v + 2 l - 1 (odd lane l - 1,
// or the previous vector's last odd lane), 32 v + 2 l (even lane l) and
// 32 v + 2 l + 1 (odd lane l). Each 32 inputs are loaded once (masked at
// the row's end, so columns past it read as the zero padding) and split
// into even / odd lanes, instead of two masked loads and a shuffle per tap:
// MobileNet-v2's layers alone, minimum ms: 112 -> 56 1.5x, 56 -> 28 2.1x,
// 28 -> 14 2.2x faster than the per-tap loop, 14 -> 7 1.7x than flat gathers.
template <int NV>
ORRERY_GEMM_INLINE void Stride2Taps3Row(const float* xr, __m512 w0, __m512 w1, __m512 w2,
                                        const __mmask16 (&in_lo)[NV],
                                        const __mmask16 (&in_hi)[NV], __m512 (&acc)[NV]) {
  const __m512i evens = EvenIndices();
  const __m512i odds = _mm512_add_epi32(evens, _mm512_set1_epi32(1));
  __m512 prev_odd = _mm512_setzero_ps();  // column -1 is padding
#pragma GCC unroll 8
  for (int v = 0; v < NV; ++v) {
    const __m512 lo = _mm512_maskz_loadu_ps(in_lo[v], xr + v * 32);
    const __m512 hi = _mm512_maskz_loadu_ps(in_hi[v], xr + v * 32 + 16);
    const __m512 even = _mm512_permutex2var_ps(lo, evens, hi);
    const __m512 odd = _mm512_permutex2var_ps(lo, odds, hi);
    // (maskz with all lanes: GCC 12 warns on the unmasked form's undefined source)
    const __m512 odd_left = _mm512_castsi512_ps(_mm512_maskz_alignr_epi32(
        __mmask16(0xffff), _mm512_castps_si512(odd), _mm512_castps_si512(prev_odd), 15));
    prev_odd = odd;
    acc[v] = _mm512_fmadd_ps(w0, odd_left, acc[v]);
    acc[v] = _mm512_fmadd_ps(w1, even, acc[v]);
    acc[v] = _mm512_fmadd_ps(w2, odd, acc[v]);
  }
}

// Software prefetch for the depthwise / stem kernels, which stream their
// input planes once: with a batch, the planes come from memory, and the
// hardware prefetchers (which stop at 4 KiB pages) left the row kernels at
// 9 GB/s of the core's 32 (MobileNet-v2 at batch 8, one thread).
constexpr int64_t kDepthwisePrefetchBytes = 2048;

// Input rows ahead that are about kDepthwisePrefetchBytes.
inline int64_t PrefetchRowsAhead(int64_t w_in) {
  return std::max<int64_t>(1, kDepthwisePrefetchBytes / (std::max<int64_t>(w_in, 1) * 4));
}

// Prefetches `rows` input rows from row `row0` of plane x (rows past the
// plane are the next plane's; prefetches never fault).
ORRERY_GEMM_INLINE void PrefetchRows(const float* x, int64_t w_in, int64_t row0, int64_t rows) {
  const char* b = reinterpret_cast<const char*>(x + row0 * w_in);
  const int64_t bytes = rows * w_in * 4;
  for (int64_t off = 0; off < bytes; off += 64) _mm_prefetch(b + off, _MM_HINT_T0);
}

// Output rows computed together by DepthwiseRows for rows of NV vectors:
// with one or two vectors a row is a single short FMA chain per vector, so
// the FMA latency bounds it; interleaving 8 / 4 rows' chains measured (one
// thread, minimum ms, MobileNet-v2) 28 -> 14 0.0254 -> 0.0215, 14 -> 7
// 0.0349 -> 0.0323, 56 -> 28 even. Wider rows have chains enough: 2-4 rows
// at a time made 112x112 stride 1 and 112 -> 56 3-5% slower.
constexpr int DepthwiseRowsAtOnce(int nv) { return nv == 1 ? 8 : nv == 2 ? 4 : 1; }

// Depthwise planes with each output row held in up to 8 zmm accumulators
// (w_out <= 128), R = DepthwiseRowsAtOnce(NV) rows at a time with their
// accumulator chains interleaved: every tap is one masked load + FMA per
// vector, the masks (computed once per call from the valid output ranges)
// replace padding checks, and each row is stored once.
// Stride 2 loads 32 inputs and keeps the even ones (3-wide windows with
// left pad 1: Stride2Taps3Row). Bias, residual and Relu / Clip are applied
// to the rows in registers; other activations run on the plane after it.
// Other geometries take the generic loop.
template <int NV, int S>
void DepthwiseRows(const gemm_internal::DepthwiseGeometry& g, const float* x, const float* w,
                   float* y, int64_t c, int64_t p0, int64_t p1, const Epilogue& ep) {
  constexpr int R = DepthwiseRowsAtOnce(NV);
  constexpr int kMaxKw = 8;
  __mmask16 mlo[kMaxKw][NV], mhi[kMaxKw][NV];
  for (int64_t kw = 0; kw < g.kw; ++kw) {
    const int64_t b = g.inner_begin[kw], e = g.inner_end[kw];
    for (int v = 0; v < NV; ++v) {
      uint32_t lanes = 0;  // output lanes of vector v whose tap is inside
      for (int l = 0; l < 16; ++l) {
        const int64_t o = v * 16 + l;
        if (o >= b && o < e) lanes |= 1u << l;
      }
      if (S == 1) {
        mlo[kw][v] = static_cast<__mmask16>(lanes);
        mhi[kw][v] = 0;
      } else {
        // Input j = 2 * lane of the 32 loaded.
        mlo[kw][v] = static_cast<__mmask16>(SpreadEven(lanes & 0xff));
        mhi[kw][v] = static_cast<__mmask16>(SpreadEven(lanes >> 8));
      }
    }
  }
  __mmask16 out_mask[NV];
  for (int v = 0; v < NV; ++v) {
    out_mask[v] = FirstLanes(g.w_out - v * 16);
  }
  const __m512i evens = EvenIndices();
  // Stride2Taps3Row's geometry and its input masks (columns < w_in).
  const bool taps3 = S == 2 && gemm_internal::RowsSplitStride2Taps3(g);
  __mmask16 in_lo[NV], in_hi[NV];
  for (int v = 0; v < NV; ++v) {
    in_lo[v] = FirstLanes(g.w_in - v * 32);
    in_hi[v] = FirstLanes(g.w_in - v * 32 - 16);
  }
  const int64_t in_vol = g.h_in * g.w_in, out_vol = g.h_out * g.w_out, k_vol = g.kh * g.kw;
  const int64_t pf_ahead = PrefetchRowsAhead(g.w_in);
  const PlanePost post(ep);
  const bool in_regs = post.in_regs, clamp = post.clamp;
  const VF lo = post.lo, hi = post.hi;
  for (int64_t p = p0; p < p1; ++p) {
    const int64_t ch = p % c;
    const float* xp = x + p * in_vol;
    const float* wp = w + ch * k_vol;
    float* yp = y + p * out_vol;
    const __m512 bias = _mm512_set1_ps(in_regs && ep.row_bias != nullptr ? ep.row_bias[ch] : 0.0f);
    const bool add_bias = in_regs && ep.row_bias != nullptr;
    const float* zp = in_regs && ep.residual != nullptr ? ep.residual + p * out_vol : nullptr;
    for (int64_t oh0 = 0; oh0 < g.h_out; oh0 += R) {
      const int64_t rows = std::min<int64_t>(R, g.h_out - oh0);
      __m512 acc[R][NV];
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
        for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_setzero_ps();
      }
      // Filter row kh of output row oh0 + r reads input row ih0 + r * sh:
      // the R rows' chains interleave (rows outside the input or past the
      // plane's last row are skipped only at the edges).
      const int64_t first = oh0 * g.sh - g.ph;
      // Software prefetch, ~kDepthwisePrefetchBytes ahead of the rows this
      // group reads last (into the next plane at the end: it follows).
      PrefetchRows(xp, g.w_in, first + (R - 1) * g.sh + (g.kh - 1) * g.dh + 1 + pf_ahead,
                   R * g.sh);
      for (int64_t kh = 0; kh < g.kh; ++kh) {
        const int64_t ih0 = first + kh * g.dh;
        const bool all = rows == R && ih0 >= 0 && ih0 + (R - 1) * g.sh < g.h_in;
        const float* wr = wp + kh * g.kw;
        if (S == 2 && taps3) {
          const __m512 w0 = _mm512_set1_ps(wr[0]), w1 = _mm512_set1_ps(wr[1]),
                       w2 = _mm512_set1_ps(wr[2]);
#pragma GCC unroll 8
          for (int r = 0; r < R; ++r) {
            const int64_t ih = ih0 + r * g.sh;
            if (!all && (r >= rows || ih < 0 || ih >= g.h_in)) continue;
            Stride2Taps3Row<NV>(xp + ih * g.w_in, w0, w1, w2, in_lo, in_hi, acc[r]);
          }
          continue;
        }
        for (int64_t kw = 0; kw < g.kw; ++kw) {
          const __m512 wv = _mm512_set1_ps(wr[kw]);
          // Lane l of vector v reads input (16 v + l) * S + kw * dw - pw;
          // masked-off lanes are never read.
          const int64_t off = kw * g.dw - g.pw;
#pragma GCC unroll 8
          for (int r = 0; r < R; ++r) {
            const int64_t ih = ih0 + r * g.sh;
            if (!all && (r >= rows || ih < 0 || ih >= g.h_in)) continue;
            const float* xr = xp + ih * g.w_in;
#pragma GCC unroll 8
            for (int v = 0; v < NV; ++v) {
              if (S == 1) {
                if (mlo[kw][v] == 0) continue;
                const __m512 xv = _mm512_maskz_loadu_ps(mlo[kw][v], xr + (v * 16 + off));
                acc[r][v] = _mm512_fmadd_ps(wv, xv, acc[r][v]);
              } else {
                if ((mlo[kw][v] | mhi[kw][v]) == 0) continue;
                const __m512 xlo = _mm512_maskz_loadu_ps(mlo[kw][v], xr + (v * 32 + off));
                const __m512 xhi = _mm512_maskz_loadu_ps(mhi[kw][v], xr + (v * 32 + 16 + off));
                acc[r][v] =
                    _mm512_fmadd_ps(wv, _mm512_permutex2var_ps(xlo, evens, xhi), acc[r][v]);
              }
            }
          }
        }
      }
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        if (r >= rows) break;
        float* yr = yp + (oh0 + r) * g.w_out;
        const float* zr = zp != nullptr ? zp + (oh0 + r) * g.w_out : nullptr;
#pragma GCC unroll 8
        for (int v = 0; v < NV; ++v) {
          // The order of the generic epilogue: + bias, + residual, clamp.
          __m512 o = acc[r][v];
          if (add_bias) o = _mm512_add_ps(o, bias);
          if (zr != nullptr) o = _mm512_add_ps(o, _mm512_maskz_loadu_ps(out_mask[v], zr + v * 16));
          if (in_regs && clamp) o = (__m512)Min(Max((VF)o, lo), hi);
          _mm512_mask_storeu_ps(yr + v * 16, out_mask[v], o);
        }
      }
    }
    post.ApplyAfter(ep, yp, out_vol, p, ch);
  }
}

template <int S>
void DepthwiseStride(const gemm_internal::DepthwiseGeometry& g, const float* x, const float* w,
                     float* y, int64_t c, int64_t p0, int64_t p1, const Epilogue& ep) {
  switch ((g.w_out + 15) / 16) {
    case 1: return DepthwiseRows<1, S>(g, x, w, y, c, p0, p1, ep);
    case 2: return DepthwiseRows<2, S>(g, x, w, y, c, p0, p1, ep);
    case 3: return DepthwiseRows<3, S>(g, x, w, y, c, p0, p1, ep);
    case 4: return DepthwiseRows<4, S>(g, x, w, y, c, p0, p1, ep);
    case 5: return DepthwiseRows<5, S>(g, x, w, y, c, p0, p1, ep);
    case 6: return DepthwiseRows<6, S>(g, x, w, y, c, p0, p1, ep);
    case 7: return DepthwiseRows<7, S>(g, x, w, y, c, p0, p1, ep);
    default: return DepthwiseRows<8, S>(g, x, w, y, c, p0, p1, ep);
  }
}

// Planes as one flattened row of 16-lane vectors (see depthwise_flat.h),
// NV (<= 8) vectors [v0, v0 + NV) at a time: every (tap, vector) is one
// masked load, or a masked gather when its lanes do not read consecutive
// inputs (Gathers: stride 2 into narrow rows), plus one FMA; the
// accumulators get the in-register epilogue (bias, residual, Relu / Clip)
// and one masked store each.
template <int NV, bool Gathers>
ORRERY_GEMM_INLINE void DepthwiseFlatGroup(const gemm_internal::DepthwiseGeometry& g,
                                           const float* xp, const float* wp, float* yp,
                                           int64_t v0, int64_t out_vol, int64_t k_vol,
                                           bool add_bias, __m512 bias, const float* zp,
                                           bool clamp, VF lo, VF hi) {
  const int64_t vectors = g.flat_vectors;
  __m512 acc[NV];
#pragma GCC unroll 8
  for (int v = 0; v < NV; ++v) acc[v] = _mm512_setzero_ps();
  for (int64_t t = 0; t < k_vol; ++t) {
    const __m512 wv = _mm512_set1_ps(wp[t]);
    const int64_t e0 = t * vectors + v0;
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) {
      const __mmask16 m = g.flat_mask[e0 + v];
      __m512 xv;
      if (!Gathers || g.flat_slot[e0 + v] < 0) {
        xv = _mm512_maskz_loadu_ps(m, xp + g.flat_base[e0 + v]);
      } else {
        const __m512i idx = _mm512_loadu_si512(g.flat_gather + g.flat_slot[e0 + v] * 16);
        xv = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, idx, xp, 4);
      }
      acc[v] = _mm512_fmadd_ps(wv, xv, acc[v]);
    }
  }
#pragma GCC unroll 8
  for (int v = 0; v < NV; ++v) {
    const int64_t o = (v0 + v) * 16;
    const __mmask16 m = FirstLanes(out_vol - o);
    __m512 r = acc[v];
    if (add_bias) r = _mm512_add_ps(r, bias);
    if (zp != nullptr) r = _mm512_add_ps(r, _mm512_maskz_loadu_ps(m, zp + o));
    if (clamp) r = (__m512)Min(Max((VF)r, lo), hi);
    _mm512_mask_storeu_ps(yp + o, m, r);
  }
}

template <bool Gathers>
void DepthwiseFlat(const gemm_internal::DepthwiseGeometry& g, const float* x, const float* w,
                   float* y, int64_t c, int64_t p0, int64_t p1, const Epilogue& ep) {
  const int64_t in_vol = g.h_in * g.w_in, out_vol = g.h_out * g.w_out, k_vol = g.kh * g.kw;
  const int64_t vectors = g.flat_vectors;
  const PlanePost post(ep);
  const bool in_regs = post.in_regs, clamp = post.clamp;
  const VF lo = post.lo, hi = post.hi;
  for (int64_t p = p0; p < p1; ++p) {
    const int64_t ch = p % c;
    const float* xp = x + p * in_vol;
    const float* wp = w + ch * k_vol;
    float* yp = y + p * out_vol;
    const bool add_bias = in_regs && ep.row_bias != nullptr;
    const __m512 bias = _mm512_set1_ps(add_bias ? ep.row_bias[ch] : 0.0f);
    const float* zp = in_regs && ep.residual != nullptr ? ep.residual + p * out_vol : nullptr;
    for (int64_t v0 = 0; v0 < vectors; v0 += 8) {
      switch (vectors - v0) {
#define ORRERY_FLAT_GROUP(n)                                                                 \
  case n:                                                                                    \
    DepthwiseFlatGroup<n, Gathers>(g, xp, wp, yp, v0, out_vol, k_vol, add_bias, bias, zp, \
                                   clamp, lo, hi);                                          \
    break;
        ORRERY_FLAT_GROUP(1)
        ORRERY_FLAT_GROUP(2)
        ORRERY_FLAT_GROUP(3)
        ORRERY_FLAT_GROUP(4)
        ORRERY_FLAT_GROUP(5)
        ORRERY_FLAT_GROUP(6)
        ORRERY_FLAT_GROUP(7)
#undef ORRERY_FLAT_GROUP
        default:
          DepthwiseFlatGroup<8, Gathers>(g, xp, wp, yp, v0, out_vol, k_vol, add_bias, bias, zp,
                                         clamp, lo, hi);
      }
    }
    post.ApplyAfter(ep, yp, out_vol, p, ch);
  }
}

// Lanes l with 0 <= s + l < n (a masked load of x + s inside [0, n)).
ORRERY_GEMM_INLINE __mmask16 LanesInside(int64_t s, int64_t n) {
  const int64_t lo = s < 0 ? -s : 0, hi = n - s;
  if (lo == 0 && hi >= 16) return __mmask16(0xffff);
  if (lo >= 16 || hi <= lo) return 0;
  const uint32_t below_hi = hi >= 16 ? 0xffffu : (1u << hi) - 1;
  return static_cast<__mmask16>(below_hi & ~((1u << lo) - 1));
}

// Same-size 3x3 planes (stride 1, pad 1, undilated: MobileNet's stride-1
// depthwise layers) as one flattened row of 16-lane vectors, with no
// per-tap loads: each filter row kh reads the input stream shifted by
// (kh - 1) * w_in once (one masked load per vector and row, masked to the
// plane, so rows above / below it read as zero), and its left / right
// neighbours come from valignd with the previous / next vector of that
// stream. The left (right) column of taps is added only in lanes whose
// output column is not the first (last): per-vector masks, periodic with
// period w / gcd(w, 16) vectors (7 for every MobileNet plane), built once
// per call. 3 loads, 6 valignd and 9 FMAs per 16 outputs instead of 9
// masked loads with table look-ups (flat) or per-tap masked loads (rows).
constexpr int64_t kSame3x3MaxPeriod = 64;
constexpr int64_t kSame3x3Prefetch = 512;

inline bool Same3x3(const gemm_internal::DepthwiseGeometry& g) {
  if (g.kh != 3 || g.kw != 3 || g.sh != 1 || g.sw != 1 || g.dh != 1 || g.dw != 1 || g.ph != 1 ||
      g.pw != 1 || g.h_out != g.h_in || g.w_out != g.w_in || g.h_in < 1 || g.w_in < 1) {
    return false;
  }
  const int64_t w = g.w_in;
  return w / std::gcd<int64_t>(w, 16) <= kSame3x3MaxPeriod;
}

void DepthwiseSame3x3(const gemm_internal::DepthwiseGeometry& g, const float* x, const float* w,
                      float* y, int64_t c, int64_t p0, int64_t p1, const Epilogue& ep) {
  const int64_t width = g.w_in, vol = g.h_in * g.w_in;
  const int64_t vectors = (vol + 15) / 16;
  const int64_t period = width / std::gcd<int64_t>(width, 16);
  // left_ok[q]: lanes of vector v (v % period == q) whose column is not 0;
  // right_ok[q]: not width - 1.
  __mmask16 left_ok[kSame3x3MaxPeriod], right_ok[kSame3x3MaxPeriod];
  for (int64_t q = 0; q < period; ++q) {
    uint32_t l = 0, r = 0;
    for (int64_t lane = 0; lane < 16; ++lane) {
      const int64_t col = (q * 16 + lane) % width;
      if (col != 0) l |= 1u << lane;
      if (col != width - 1) r |= 1u << lane;
    }
    left_ok[q] = static_cast<__mmask16>(l);
    right_ok[q] = static_cast<__mmask16>(r);
  }
  const PlanePost post(ep);
  const bool in_regs = post.in_regs, clamp = post.clamp;
  const VF lo = post.lo, hi = post.hi;
  for (int64_t p = p0; p < p1; ++p) {
    const int64_t ch = p % c;
    const float* xp = x + p * vol;
    const float* wp = w + ch * 9;
    float* yp = y + p * vol;
    const bool add_bias = in_regs && ep.row_bias != nullptr;
    const __m512 bias = _mm512_set1_ps(add_bias ? ep.row_bias[ch] : 0.0f);
    const float* zp = in_regs && ep.residual != nullptr ? ep.residual + p * vol : nullptr;
    __m512 wv[9];
#pragma GCC unroll 9
    for (int t = 0; t < 9; ++t) wv[t] = _mm512_set1_ps(wp[t]);
    // Stream kh at vector v: x[16 v + (kh - 1) * width + lane], zero
    // outside the plane.
    const int64_t off[3] = {-width, 0, width};
    __m512 prev[3], cur[3];
#pragma GCC unroll 3
    for (int kh = 0; kh < 3; ++kh) {
      prev[kh] = _mm512_setzero_ps();  // only read by lane 0 of vector 0: column 0
      cur[kh] = _mm512_maskz_loadu_ps(LanesInside(off[kh], vol), xp + off[kh]);
    }
    int64_t q = 0;
    for (int64_t v = 0; v < vectors; ++v) {
      const int64_t o = v * 16;
      __m512 l[3], r[3];
#pragma GCC unroll 3
      for (int kh = 0; kh < 3; ++kh) {
        const int64_t s = o + 16 + off[kh];
        const __m512 next = _mm512_maskz_loadu_ps(LanesInside(s, vol), xp + s);
        if (kh == 2) _mm_prefetch(reinterpret_cast<const char*>(xp + s + kSame3x3Prefetch), _MM_HINT_T0);
        // (maskz with all lanes: GCC 12 warns on the unmasked form's undefined source)
        l[kh] = _mm512_castsi512_ps(_mm512_maskz_alignr_epi32(
            __mmask16(0xffff), _mm512_castps_si512(cur[kh]), _mm512_castps_si512(prev[kh]), 15));
        r[kh] = _mm512_castsi512_ps(_mm512_maskz_alignr_epi32(
            __mmask16(0xffff), _mm512_castps_si512(next), _mm512_castps_si512(cur[kh]), 1));
        prev[kh] = cur[kh];
        cur[kh] = next;
      }
      // prev[] now holds this vector's centre.
      __m512 center = _mm512_mul_ps(wv[1], prev[0]);
      __m512 left = _mm512_mul_ps(wv[0], l[0]);
      __m512 right = _mm512_mul_ps(wv[2], r[0]);
#pragma GCC unroll 2
      for (int kh = 1; kh < 3; ++kh) {
        center = _mm512_fmadd_ps(wv[kh * 3 + 1], prev[kh], center);
        left = _mm512_fmadd_ps(wv[kh * 3], l[kh], left);
        right = _mm512_fmadd_ps(wv[kh * 3 + 2], r[kh], right);
      }
      __m512 acc = _mm512_mask_add_ps(center, left_ok[q], center, left);
      acc = _mm512_mask_add_ps(acc, right_ok[q], acc, right);
      if (++q == period) q = 0;
      const __mmask16 m = FirstLanes(vol - o);
      if (add_bias) acc = _mm512_add_ps(acc, bias);
      if (zp != nullptr) acc = _mm512_add_ps(acc, _mm512_maskz_loadu_ps(m, zp + o));
      if (clamp) acc = (__m512)Min(Max((VF)acc, lo), hi);
      _mm512_mask_storeu_ps(yp + o, m, acc);
    }
    post.ApplyAfter(ep, yp, vol, p, ch);
  }
}

// The stem convolution (conv_stem.h). Per output row and chunk of up to
// kStemChunkVectors output vectors, the input rows the window reads are
// split once into their even and odd columns (zero padding built in), so
// that tap kw of output column ow, input column 2 ow + kw - pw, is lane
// ow + kw / 2 of the even (kw - pw even) or odd split row: one unaligned
// load per tap and 16 FMAs into 16 channels x 16 columns of accumulators.
// Splitting costs ~2 loads + 2 permutes per 16 columns of a row, shared by
// all channel blocks and taps.
constexpr int64_t kStemChunkVectors = 8;
constexpr int64_t kStemSplitFloats = (kStemChunkVectors + 1) * 16;  // + taps kw / 2 <= 3

// Lanes [lo, hi) of 16, clipped.
ORRERY_GEMM_INLINE __mmask16 LaneRange(int64_t lo, int64_t hi) {
  return static_cast<__mmask16>(FirstLanes(hi) & ~FirstLanes(lo));
}

// One split row's taps into R channels x NV vectors of accumulators (wt:
// the row's packed weights of the block's first channel of R).
template <int KW, int R, int NV>
ORRERY_GEMM_INLINE void StemTaps(const float* e, const float* o, const float* wt,
                                 __m512 (&acc)[R][NV]) {
#pragma GCC unroll 7
  for (int k = 0; k < KW; ++k) {
    const float* src = ((k & 1) != 0 ? o : e) + k / 2;
    __m512 t[NV];
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) t[v] = _mm512_loadu_ps(src + v * 16);
#pragma GCC unroll 16
    for (int j = 0; j < R; ++j) {
      const __m512 w = _mm512_set1_ps(wt[k * 16 + j]);
#pragma GCC unroll 2
      for (int v = 0; v < NV; ++v) acc[j][v] = _mm512_fmadd_ps(w, t[v], acc[j][v]);
    }
  }
}

// R channels (from m0) x NV vectors (from output column ow) of one output
// row: the taps of the rows inside, then the epilogue.
template <int KW, int R, int NV>
ORRERY_GEMM_INLINE void StemTile(const gemm_internal::ConvStemGeometry& g, const float* split,
                                 const bool* row_in, const float* wb, int64_t m0, int64_t oh,
                                 int64_t ow, float* y, const Epilogue& ep, bool clamp, VF lo,
                                 VF hi) {
  __m512 acc[R][NV];
#pragma GCC unroll 16
  for (int j = 0; j < R; ++j) {
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) acc[j][v] = _mm512_setzero_ps();
  }
  for (int64_t r = 0; r < g.cg * g.kh; ++r) {
    if (!row_in[r]) continue;
    const float* e = split + r * 2 * kStemSplitFloats;
    StemTaps<KW, R, NV>(e, e + kStemSplitFloats, wb + r * KW * 16, acc);
  }
  const int64_t out_vol = g.h_out * g.w_out;
  const int channels = static_cast<int>(std::min<int64_t>(R, g.m - m0));
#pragma GCC unroll 2
  for (int v = 0; v < NV; ++v) {
    const int64_t o = oh * g.w_out + ow + v * 16;
    const __mmask16 m = FirstLanes(g.w_out - ow - v * 16);
#pragma GCC unroll 16
    for (int j = 0; j < R; ++j) {
      if (j >= channels) break;
      __m512 res = acc[j][v];
      if (ep.row_bias != nullptr) res = _mm512_add_ps(res, _mm512_set1_ps(ep.row_bias[m0 + j]));
      if (ep.residual != nullptr) {
        res = _mm512_add_ps(res,
                            _mm512_maskz_loadu_ps(m, ep.residual + (m0 + j) * ep.ld_residual + o));
      }
      if (clamp) res = (__m512)Min(Max((VF)res, lo), hi);
      _mm512_mask_storeu_ps(y + (m0 + j) * out_vol + o, m, res);
    }
  }
}

template <int KW>
void ConvStemKw(const gemm_internal::ConvStemGeometry& g, const float* x, const float* packed,
                float* y, int64_t oh0, int64_t oh1, int64_t mb0, int64_t mb1, const Epilogue& ep) {
  const __m512i evens = EvenIndices();
  const __m512i odds = _mm512_add_epi32(evens, _mm512_set1_epi32(1));
  const int64_t in_vol = g.h_in * g.w_in;
  const int64_t nv = (g.w_out + 15) / 16;
  const int64_t block = g.cg * g.kh * KW * 16;  // floats of one channel block
  const PlanePost post(ep);  // conv.cc takes this kernel only for post ops in registers
  const bool clamp = post.clamp;
  const VF lo = post.lo, hi = post.hi;
  const int64_t pf_ahead = PrefetchRowsAhead(g.w_in);
  // [c][kh][even / odd][kStemSplitFloats]
  alignas(64) float split[gemm_internal::kConvStemMaxChannels * gemm_internal::kConvStemMaxKh * 2 *
                          kStemSplitFloats];
  bool row_in[gemm_internal::kConvStemMaxChannels * gemm_internal::kConvStemMaxKh];
  for (int64_t oh = oh0; oh < oh1; ++oh) {
    for (int64_t c = 0; c < g.cg; ++c) {
      PrefetchRows(x + c * in_vol, g.w_in, oh * g.sh - g.ph + (g.kh - 1) * g.dh + 1 + pf_ahead,
                   g.sh);
    }
    for (int64_t v0 = 0; v0 < nv; v0 += kStemChunkVectors) {
      const int64_t vn = std::min(kStemChunkVectors, nv - v0);
      // Split the rows: 32 input columns from s = 32 (v0 + u) - pw per 16.
      for (int64_t c = 0; c < g.cg; ++c) {
        for (int64_t kh = 0; kh < g.kh; ++kh) {
          const int64_t r = c * g.kh + kh;
          const int64_t ih = oh * g.sh - g.ph + kh * g.dh;
          row_in[r] = ih >= 0 && ih < g.h_in;
          if (!row_in[r]) continue;
          const float* xr = x + c * in_vol + ih * g.w_in;
          float* e = split + r * 2 * kStemSplitFloats;
          for (int64_t u = 0; u <= vn; ++u) {
            const int64_t s = (v0 + u) * 32 - g.pw;
            const __m512 a = _mm512_maskz_loadu_ps(LaneRange(-s, g.w_in - s), xr + s);
            const __m512 b = _mm512_maskz_loadu_ps(LaneRange(-s - 16, g.w_in - s - 16), xr + s + 16);
            _mm512_store_ps(e + u * 16, _mm512_permutex2var_ps(a, evens, b));
            _mm512_store_ps(e + kStemSplitFloats + u * 16, _mm512_permutex2var_ps(a, odds, b));
          }
        }
      }
      // Pairs of vectors as two halves of 8 channels x 2 vectors (10 loads
      // per 32 FMAs), a last odd vector as 16 channels x 1 (17 per 16).
      for (int64_t mb = mb0; mb < mb1; ++mb) {
        const float* wb = packed + mb * block;
        const int64_t m0 = mb * 16;
        int64_t u = 0;
        for (; u + 2 <= vn; u += 2) {
          const float* su = split + u * 16;
          const int64_t ow = (v0 + u) * 16;
          StemTile<KW, 8, 2>(g, su, row_in, wb, m0, oh, ow, y, ep, clamp, lo, hi);
          if (m0 + 8 < g.m) {
            StemTile<KW, 8, 2>(g, su, row_in, wb + 8, m0 + 8, oh, ow, y, ep, clamp, lo, hi);
          }
        }
        if (u < vn) {
          StemTile<KW, 16, 1>(g, split + u * 16, row_in, wb, m0, oh, (v0 + u) * 16, y, ep, clamp,
                              lo, hi);
        }
      }
    }
  }
}

void ConvStem(const gemm_internal::ConvStemGeometry& g, const float* x, const float* packed,
              float* y, int64_t oh0, int64_t oh1, int64_t mb0, int64_t mb1, const Epilogue& ep) {
  switch (g.kw) {
    case 1: return ConvStemKw<1>(g, x, packed, y, oh0, oh1, mb0, mb1, ep);
    case 2: return ConvStemKw<2>(g, x, packed, y, oh0, oh1, mb0, mb1, ep);
    case 3: return ConvStemKw<3>(g, x, packed, y, oh0, oh1, mb0, mb1, ep);
    case 4: return ConvStemKw<4>(g, x, packed, y, oh0, oh1, mb0, mb1, ep);
    case 5: return ConvStemKw<5>(g, x, packed, y, oh0, oh1, mb0, mb1, ep);
    case 6: return ConvStemKw<6>(g, x, packed, y, oh0, oh1, mb0, mb1, ep);
    default: return ConvStemKw<7>(g, x, packed, y, oh0, oh1, mb0, mb1, ep);
  }
}

void Depthwise(const gemm_internal::DepthwiseGeometry& g, const float* x, const float* w,
               float* y, int64_t c, int64_t p0, int64_t p1, const Epilogue& ep) {
  if (Same3x3(g)) return DepthwiseSame3x3(g, x, w, y, c, p0, p1, ep);
  if (g.flat_vectors >= 1) {
    if (g.flat_gather != nullptr) return DepthwiseFlat<true>(g, x, w, y, c, p0, p1, ep);
    return DepthwiseFlat<false>(g, x, w, y, c, p0, p1, ep);
  }
  if (g.w_out >= 1 && g.w_out <= 128 && g.kw <= 8) {
    if (g.sw == 1) return DepthwiseStride<1>(g, x, w, y, c, p0, p1, ep);
    if (g.sw == 2) return DepthwiseStride<2>(g, x, w, y, c, p0, p1, ep);
  }
  DepthwisePlanesImpl(g, x, w, y, c, p0, p1, ep);
}

}  // namespace
}  // namespace orrery::ops::cpu::avx512

namespace orrery::ops::cpu::gemm_internal {

const GemmKernels& Avx512Kernels() {
  static const GemmKernels k{avx512::TileAny, avx512::ApplyEpilogueImpl, avx512::Depthwise,
                             avx512::Im2ColPanelImpl, avx512::ConvTileAny, avx512::ConvPanel,
                             avx512::ConvRows, avx512::PackRightRowsImpl, true,
                             avx512::ConvTailAny};
  return k;
}

}  // namespace orrery::ops::cpu::gemm_internal

namespace orrery::ops::cpu::gemm_internal {

void ConvStemAvx512(const ConvStemGeometry& g, const float* x, const float* packed, float* y,
                    int64_t oh0, int64_t oh1, int64_t mb0, int64_t mb1, const Epilogue& ep) {
  avx512::ConvStem(g, x, packed, y, oh0, oh1, mb0, mb1, ep);
}

}  // namespace orrery::ops::cpu::gemm_internal
