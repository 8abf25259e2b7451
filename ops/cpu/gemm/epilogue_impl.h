// Internal to ops/cpu/gemm: the vectorised epilogue (biases, residual,
// activation), written once with GCC vector extensions and compiled by each
// kernel_<isa>.cc with its own flags and vector width.
//
// Include it after defining ORRERY_GEMM_NS (a namespace name unique to the
// including file) and ORRERY_GEMM_WIDTH (floats per native vector): every
// function lands in that namespace, so the linker never merges an AVX-512
// instantiation into code that runs on a CPU without AVX-512. Uses nothing
// from the standard library for the same reason.
#pragma once

#include <cstdint>

#include "ops/cpu/gemm/kernels.h"
#include "ops/cpu/lane_shuffle.h"
#include "ops/cpu/gemm/sgemm.h"

#if !defined(ORRERY_GEMM_NS) || !defined(ORRERY_GEMM_WIDTH)
#error "define ORRERY_GEMM_NS and ORRERY_GEMM_WIDTH before including epilogue_impl.h"
#endif

namespace orrery::ops::cpu::ORRERY_GEMM_NS {

constexpr int kW = ORRERY_GEMM_WIDTH;
typedef float VF __attribute__((vector_size(kW * 4)));
typedef int32_t VI __attribute__((vector_size(kW * 4)));
// The same vectors at any float's address, for unaligned loads and stores.
typedef float VFU __attribute__((vector_size(kW * 4), aligned(4), may_alias));

#define ORRERY_GEMM_INLINE inline __attribute__((always_inline))

ORRERY_GEMM_INLINE VF Splat(float x) { return VF{} + x; }
// One unaligned vector move each, as _mm256_loadu_ps is. Not __builtin_memcpy:
// GCC folds a memcpy into one move only up to MOVE_MAX bytes (16 under -mavx2
// with -mtune=generic), so a 32-byte one went through a stack slot and a
// reload that store forwarding cannot serve.
ORRERY_GEMM_INLINE VF Load(const float* p) { return *reinterpret_cast<const VFU*>(p); }
ORRERY_GEMM_INLINE void Store(float* p, VF v) { *reinterpret_cast<VFU*>(p) = v; }
ORRERY_GEMM_INLINE VF Max(VF a, VF b) { return a > b ? a : b; }
ORRERY_GEMM_INLINE VF Min(VF a, VF b) { return a < b ? a : b; }
// Casts between same-size vector types reinterpret the bits (in registers).
ORRERY_GEMM_INLINE VF Abs(VF a) { return reinterpret_cast<VF>(reinterpret_cast<VI>(a) & 0x7fffffff); }

// e^x, relative error ~2e-7 (Cephes expf: range reduction by ln 2, degree-6
// polynomial); saturates outside [-87, 88].
ORRERY_GEMM_INLINE VF Exp(VF x) {
  x = Min(Max(x, Splat(-87.0f)), Splat(88.0f));
  const VF round = Splat(12582912.0f);  // 1.5 * 2^23: adding it rounds to an integer
  const VF n = (x * 1.44269504088896341f + round) - round;
  const VF r = x - n * 0.693359375f + n * 2.12194440e-4f;
  VF p = Splat(1.9875691500e-4f);
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const VF y = p * r * r + r + 1.0f;
  const VI e = (__builtin_convertvector(n, VI) + 127) << 23;
  return y * reinterpret_cast<VF>(e);
}

ORRERY_GEMM_INLINE VF Sigmoid(VF x) { return 1.0f / (1.0f + Exp(-x)); }

// Cephes tanhf: an odd polynomial below 0.625, 1 - 2 / (e^2|x| + 1) above.
ORRERY_GEMM_INLINE VF Tanh(VF x) {
  const VF ax = Abs(x);
  const VF z = x * x;
  VF p = Splat(-5.70498872745e-3f);
  p = p * z + 2.06390887954e-2f;
  p = p * z - 5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z - 3.33332819422e-1f;
  const VF small = x + x * z * p;
  const VF big_abs = 1.0f - 2.0f / (Exp(ax * 2.0f) + 1.0f);
  const VF big = x < 0.0f ? -big_abs : big_abs;
  return ax < 0.625f ? small : big;
}

// erf, absolute error < 1.5e-7 (Abramowitz & Stegun 7.1.26).
ORRERY_GEMM_INLINE VF Erf(VF x) {
  const VF ax = Abs(x);
  const VF t = 1.0f / (1.0f + 0.3275911f * ax);
  VF p = Splat(1.061405429f);
  p = p * t - 1.453152027f;
  p = p * t + 1.421413741f;
  p = p * t - 0.284496736f;
  p = p * t + 0.254829592f;
  const VF y = 1.0f - p * t * Exp(-ax * ax);
  return x < 0.0f ? -y : y;
}

template <Activation A>
ORRERY_GEMM_INLINE VF Activate(VF v, float alpha, float beta) {
  if constexpr (A == Activation::kNone) {
    return v;
  } else if constexpr (A == Activation::kRelu) {
    return Max(v, Splat(0.0f));
  } else if constexpr (A == Activation::kClip) {
    return Min(Max(v, Splat(alpha)), Splat(beta));
  } else if constexpr (A == Activation::kLeakyRelu) {
    return v >= 0.0f ? v : v * alpha;
  } else if constexpr (A == Activation::kHardSigmoid) {
    return Min(Max(v * alpha + beta, Splat(0.0f)), Splat(1.0f));
  } else if constexpr (A == Activation::kHardSwish) {
    return v * Min(Max(v * (1.0f / 6.0f) + 0.5f, Splat(0.0f)), Splat(1.0f));
  } else if constexpr (A == Activation::kSigmoid) {
    return Sigmoid(v);
  } else if constexpr (A == Activation::kTanh) {
    return Tanh(v);
  } else {
    return v * 0.5f * (1.0f + Erf(v * 0.70710678118654752f));
  }
}

template <Activation A>
void EpilogueRows(const Epilogue& ep, float* c, int64_t ldc, int64_t i0, int64_t j0,
                  int64_t rows, int64_t cols) {
  const float* cb = ep.col_bias != nullptr ? ep.col_bias + j0 : nullptr;
  for (int64_t r = 0; r < rows; ++r) {
    float* cr = c + r * ldc;
    const float rb = ep.row_bias != nullptr ? ep.row_bias[i0 + r] : 0.0f;
    const float* zr =
        ep.residual != nullptr ? ep.residual + (i0 + r) * ep.ld_residual + j0 : nullptr;
    int64_t j = 0;
    for (; j + kW <= cols; j += kW) {
      VF v = Load(cr + j) + rb;
      if (cb != nullptr) v += Load(cb + j);
      if (zr != nullptr) v += Load(zr + j);
      Store(cr + j, Activate<A>(v, ep.act_alpha, ep.act_beta));
    }
    if (j < cols) {
      // The tail goes through a padded copy so that no load leaves the rows.
      const int64_t n = cols - j;
      float buf[kW] = {};
      float add[kW] = {};
      for (int64_t t = 0; t < n; ++t) {
        buf[t] = cr[j + t];
        add[t] = (cb != nullptr ? cb[j + t] : 0.0f) + (zr != nullptr ? zr[j + t] : 0.0f);
      }
      const VF v = Activate<A>(Load(buf) + Load(add) + rb, ep.act_alpha, ep.act_beta);
      Store(buf, v);
      for (int64_t t = 0; t < n; ++t) cr[j + t] = buf[t];
    }
  }
}

inline void ApplyEpilogueImpl(const Epilogue& ep, float* c, int64_t ldc, int64_t i0, int64_t j0,
                              int64_t rows, int64_t cols) {
  switch (ep.act) {
    case Activation::kNone:
      return EpilogueRows<Activation::kNone>(ep, c, ldc, i0, j0, rows, cols);
    case Activation::kRelu:
      return EpilogueRows<Activation::kRelu>(ep, c, ldc, i0, j0, rows, cols);
    case Activation::kClip:
      return EpilogueRows<Activation::kClip>(ep, c, ldc, i0, j0, rows, cols);
    case Activation::kLeakyRelu:
      return EpilogueRows<Activation::kLeakyRelu>(ep, c, ldc, i0, j0, rows, cols);
    case Activation::kHardSigmoid:
      return EpilogueRows<Activation::kHardSigmoid>(ep, c, ldc, i0, j0, rows, cols);
    case Activation::kHardSwish:
      return EpilogueRows<Activation::kHardSwish>(ep, c, ldc, i0, j0, rows, cols);
    case Activation::kSigmoid:
      return EpilogueRows<Activation::kSigmoid>(ep, c, ldc, i0, j0, rows, cols);
    case Activation::kTanh:
      return EpilogueRows<Activation::kTanh>(ep, c, ldc, i0, j0, rows, cols);
    case Activation::kGelu:
      return EpilogueRows<Activation::kGelu>(ep, c, ldc, i0, j0, rows, cols);
  }
}

// The depthwise plane, compiled per ISA like the epilogue (plain loops that
// the compiler vectorises with the file's flags).
inline void DepthwisePlaneImpl(const gemm_internal::DepthwiseGeometry& g, const float* x,
                               const float* w, float* y) {
  for (int64_t oh = 0; oh < g.h_out; ++oh) {
    float* __restrict yr = y + oh * g.w_out;
    for (int64_t i = 0; i < g.w_out; ++i) yr[i] = 0.0f;
    const int64_t start = oh * g.sh - g.ph;
    for (int64_t kh = 0; kh < g.kh; ++kh) {
      const int64_t ih = start + kh * g.dh;
      if (ih < 0 || ih >= g.h_in) continue;
      const float* xr = x + ih * g.w_in;
      for (int64_t kw = 0; kw < g.kw; ++kw) {
        const int64_t b = g.inner_begin[kw], e = g.inner_end[kw];
        if (e <= b) continue;
        const float wv = w[kh * g.kw + kw];
        // xs[i] is the input under output column b + i.
        const float* __restrict xs = xr + b * g.sw + kw * g.dw - g.pw;
        float* __restrict ys = yr + b;
        const int64_t len = e - b;
        if (g.sw == 1) {
          for (int64_t i = 0; i < len; ++i) ys[i] += wv * xs[i];
        } else if (g.sw == 2) {
          for (int64_t i = 0; i < len; ++i) ys[i] += wv * xs[2 * i];
        } else {
          for (int64_t i = 0; i < len; ++i) ys[i] += wv * xs[i * g.sw];
        }
      }
    }
  }
}

// Planes [p0, p1) with the plain plane loop and the epilogue after each
// plane (see DepthwiseFn).
inline void DepthwisePlanesImpl(const gemm_internal::DepthwiseGeometry& g, const float* x,
                                const float* w, float* y, int64_t c, int64_t p0, int64_t p1,
                                const Epilogue& ep) {
  const int64_t in_vol = g.h_in * g.w_in, out_vol = g.h_out * g.w_out, k_vol = g.kh * g.kw;
  for (int64_t p = p0; p < p1; ++p) {
    const int64_t ch = p % c;
    float* yp = y + p * out_vol;
    DepthwisePlaneImpl(g, x + p * in_vol, w + ch * k_vol, yp);
    if (ep.has_post()) {
      Epilogue e = ep;
      if (e.residual != nullptr) e.residual += (p - ch) * out_vol;
      ApplyEpilogueImpl(e, yp, out_vol, ch, 0, 1, out_vol);
    }
  }
}

#if defined(__AVX512F__)
ORRERY_GEMM_INLINE __mmask16 FirstLanes(int64_t n) {
  return n >= 16 ? __mmask16(0xffff) : n <= 0 ? __mmask16(0) : __mmask16((1u << n) - 1);
}

// One im2col run with masked tails (rows of 7, 14 or 28 outputs would
// otherwise be mostly scalar): out[o] = 0 on [b, lo) and [hi, e),
// out[o] = src[o * s] on [lo, hi); s is 1 or 2. Masked-off lanes are never
// read.
ORRERY_GEMM_INLINE void Im2ColRun512(float* out, const float* src, int64_t b, int64_t lo,
                                     int64_t hi, int64_t e, int64_t s) {
  const __m512 zero = _mm512_setzero_ps();
  for (int64_t o = b; o < lo; o += 16) _mm512_mask_storeu_ps(out + o, FirstLanes(lo - o), zero);
  if (s == 1) {
    for (int64_t o = lo; o < hi; o += 16) {
      const __mmask16 m = FirstLanes(hi - o);
      _mm512_mask_storeu_ps(out + o, m, _mm512_maskz_loadu_ps(m, src + o));
    }
  } else {
    const __m512i evens =
        _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    for (int64_t o = lo; o < hi; o += 16) {
      const int64_t n = hi - o < 16 ? hi - o : 16;  // outputs; inputs 2o .. 2o + 2n - 2
      const int64_t in = 2 * n - 1;
      const __m512 x0 = _mm512_maskz_loadu_ps(FirstLanes(in), src + 2 * o);
      const __m512 x1 = _mm512_maskz_loadu_ps(FirstLanes(in - 16), src + 2 * o + 16);
      _mm512_mask_storeu_ps(out + o, FirstLanes(n), _mm512_permutex2var_ps(x0, evens, x1));
    }
  }
  for (int64_t o = hi; o < e; o += 16) _mm512_mask_storeu_ps(out + o, FirstLanes(e - o), zero);
}
#endif

// The right panels of a row-major (not transposed) operand with n
// columns, depth [k0, k0 + kc) and columns [j0, j1): the panel at column q0
// starts at dst + (q0 - j0) * kc, has width w = PanelWidth(n - q0) and
// holds dst[k * w + j] = b[(k0 + k) * ldb + q0 + j], zero past column n.
// Row by row across the panels, so that each row of B is read left to
// right (one stream the hardware prefetcher follows; panel by panel it was
// kc short strided runs per panel). Native vectors instead of a memcpy call
// per 48-float row, which cost ~20% of a 64-row pointwise convolution.
// Rows of B that PackRightRowsImpl prefetches ahead (AVX-512): at batch 8
// a 1x1 convolution's input comes from memory, one row of the kc rows
// 12 KiB from the next, too many streams for the hardware prefetcher
// (ResNet-50's 256 -> 64 at 56x56, 8 images, one thread: 5.5 -> 4.55 ms;
// 2 rows ahead 5.0, 8 rows 5.1).
constexpr int64_t kPackRowsAhead = 4;

inline void PackRightRowsImpl(const float* b, int64_t ldb, int64_t n, int64_t k0, int64_t kc,
                              int64_t j0, int64_t j1, float* dst) {
  for (int64_t k = 0; k < kc; ++k) {
    const float* row = b + (k0 + k) * ldb;
    for (int64_t q0 = j0; q0 < j1; q0 += kPanelCols) {
      const int64_t cols = n - q0 < kPanelCols ? n - q0 : kPanelCols;
      const int64_t w = gemm_internal::PanelWidth(n - q0);
      const float* src = row + q0;
      float* d = dst + (q0 - j0) * kc + k * w;
#if defined(__AVX512F__)
      for (int64_t j = 0; j < w; j += 16) {
        if (k + kPackRowsAhead < kc && j < cols) {
          __builtin_prefetch(src + kPackRowsAhead * ldb + j, 0, 3);
        }
        const __mmask16 m = FirstLanes(cols - j);
        _mm512_storeu_ps(d + j, _mm512_maskz_loadu_ps(m, src + j));
      }
#else
      int64_t j = 0;
      for (; j + kW <= cols; j += kW) Store(d + j, Load(src + j));
      for (; j < cols; ++j) d[j] = src[j];
      for (; j < w; ++j) d[j] = 0.0f;
#endif
    }
  }
}

// One right panel of the im2col matrix: rows k0..k0+kc (channel, tap),
// output positions [j0, j0 + cols) of the flattened output plane, written
// to dst[k * w + j] in order. The positions are split once into runs along
// output rows; per row k each run is a zero / copy / zero in native vectors.
inline void Im2ColPanelImpl(const gemm_internal::Im2ColGeometry& g, const float* x, int64_t k0,
                            int64_t kc, int64_t j0, int64_t cols, int64_t w, float* dst) {
  struct Run {
    int64_t oh, ow, len, pos;
  };
  Run runs[kPanelCols];
  int nruns = 0;
  {
    int64_t oh = j0 / g.w_out, ow = j0 - oh * g.w_out, pos = 0;
    while (pos < cols) {
      const int64_t left = g.w_out - ow, want = cols - pos;
      const int64_t len = left < want ? left : want;
      runs[nruns++] = {oh, ow, len, pos};
      pos += len;
      ow = 0;
      ++oh;
    }
  }
  const int64_t k_vol = g.kh * g.kw;
  int64_t c = k0 / k_vol;
  const int64_t t0 = k0 - c * k_vol;
  int64_t th = t0 / g.kw, tw = t0 - th * g.kw;
  const VF zero = Splat(0.0f);
  for (int64_t k = 0; k < kc; ++k) {
    float* d = dst + k * w;
    const float* xc = x + c * g.in_vol;
    const int64_t off = tw * g.dw - g.pw;
    const int64_t ib = g.inner_begin[tw], ie = g.inner_end[tw];
    const int64_t row_off = th * g.dh - g.ph;
    for (int r = 0; r < nruns; ++r) {
      const Run& run = runs[r];
      float* out = d + run.pos - run.ow;  // out[o] is output column o
      const int64_t end = run.ow + run.len;
      const int64_t ih = run.oh * g.sh + row_off;
      int64_t lo = ib < run.ow ? run.ow : ib > end ? end : ib;
      int64_t hi = ie < lo ? lo : ie > end ? end : ie;
      if (ih < 0 || ih >= g.h_in) lo = hi = end;
#if defined(__AVX512F__)
      if (g.sw <= 2) {
        Im2ColRun512(out, xc + ih * g.w_in + off, run.ow, lo, hi, end, g.sw);
        continue;
      }
#endif
      int64_t o = run.ow;
      for (; o + kW <= lo; o += kW) Store(out + o, zero);
      for (; o < lo; ++o) out[o] = 0.0f;
      const float* src = xc + ih * g.w_in + off;
      if (g.sw == 1) {
        for (; o + kW <= hi; o += kW) Store(out + o, Load(src + o));
        for (; o < hi; ++o) out[o] = src[o];
      } else if (g.sw == 2) {
        // Two vectors of inputs, even lanes kept; only while both stay
        // inside the input row (src[2 o + 2 kW - 1] with src[0] at `off`).
        for (; o + kW <= hi && 2 * (o + kW) - 1 + off < g.w_in; o += kW) {
          const VF a = Load(src + 2 * o), b = Load(src + 2 * o + kW);
          Store(out + o, EvenLanesOf(a, b, std::make_index_sequence<kW>()));
        }
        for (; o < hi; ++o) out[o] = src[2 * o];
      } else {
        for (; o < hi; ++o) out[o] = src[o * g.sw];
      }
      for (; o + kW <= end; o += kW) Store(out + o, zero);
      for (; o < end; ++o) out[o] = 0.0f;
    }
    if (++tw == g.kw) {
      tw = 0;
      if (++th == g.kh) {
        th = 0;
        ++c;
      }
    }
  }
}

}  // namespace orrery::ops::cpu::ORRERY_GEMM_NS
