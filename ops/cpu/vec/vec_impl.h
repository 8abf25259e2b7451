// The body of ops/cpu/vec: included once per instruction set by
// vec_avx512.cc, vec_avx2.cc and vec_portable.cc, each compiled with its
// own target flags, after defining
//   ORRERY_VEC_NS     the namespace of this build (avx512, avx2, portable)
//   ORRERY_VEC_LANES  floats per vector (16, 8, 4)
//   ORRERY_VEC_ISA    the vec::Isa value
// Everything here has internal linkage and uses only GCC vector extensions
// and builtins (no inline library templates), so no code compiled for a
// wider ISA can be picked by the linker for a narrower build; the AVX-512
// build alone also uses <immintrin.h> intrinsics (always-inline C
// functions, not templates) for masked loads / stores and vpermt2ps.
#include <cstddef>
#include <cstdint>
#include <utility>

#include "ops/cpu/lane_shuffle.h"
#include "ops/cpu/vec/vec.h"

#if ORRERY_VEC_LANES == 16
#include <immintrin.h>
#endif

namespace orrery::ops::cpu::vec::ORRERY_VEC_NS {
namespace {

constexpr int kW = ORRERY_VEC_LANES;
typedef float VF __attribute__((vector_size(kW * 4), aligned(4), may_alias));
typedef int32_t VI __attribute__((vector_size(kW * 4), aligned(4), may_alias));

inline VF Splat(float v) { return VF{} + v; }
inline VI SplatI(int32_t v) { return VI{} + v; }
// Unaligned loads and stores through the 4-aligned, may_alias vector types,
// as GCC's own _mm256_loadu_ps does: one vmovups. Not __builtin_memcpy:
// GCC folds a memcpy into one move only up to MOVE_MAX bytes, which is 16
// under -mavx2 with -mtune=generic, so a 32-byte memcpy became two 16-byte
// copies through a stack slot and a 32-byte reload that cannot be
// store-forwarded (AVX2 MaxPool 12x, Softmax 5x slower on Zen 3).
inline VF Load(const float* p) { return *reinterpret_cast<const VF*>(p); }
inline void Store(float* p, VF v) { *reinterpret_cast<VF*>(p) = v; }
inline VI LoadI(const int32_t* p) { return *reinterpret_cast<const VI*>(p); }
inline VF Sel(VI m, VF a, VF b) { return m ? a : b; }
inline VF Max(VF a, VF b) { return a > b ? a : b; }
inline VF Min(VF a, VF b) { return a < b ? a : b; }
inline VF AsF(VI v) { return reinterpret_cast<VF&>(v); }
inline VI AsI(VF v) { return reinterpret_cast<VI&>(v); }
inline VF Abs(VF x) { return AsF(AsI(x) & SplatI(0x7fffffff)); }
// Round to nearest integer (|x| < 2^22), as a float.
inline VF Round(VF x) {
  const VF magic = Splat(12582912.0f);  // 1.5 * 2^23
  return (x + magic) - magic;
}
inline float HSum(VF v) {
  float s = 0;
  for (int i = 0; i < kW; ++i) s += v[i];
  return s;
}
inline float HMaxNaN(VF v) {
  float m = v[0];
  for (int i = 1; i < kW; ++i) m = (v[i] > m || v[i] != v[i]) ? v[i] : m;
  return m;
}

// 2^n for integral n in [-126, 127] as a float vector.
inline VF Pow2(VF n) {
  const VI e = __builtin_convertvector(n, VI) + SplatI(127);
  return AsF(e << 23);
}

// e^r where x = n ln2 + r, |r| <= ln2 / 2 (Cephes expf's reduction and
// degree-6 polynomial); *n gets n. x is already clamped by the caller.
inline VF ExpReduced(VF x, VF* n) {
  *n = Round(x * Splat(1.44269504088896341f));
  VF r = x - *n * Splat(0.693359375f);
  r = r - *n * Splat(-2.12194440e-4f);
  VF p = Splat(1.9875691500e-4f);
  p = p * r + Splat(1.3981999507e-3f);
  p = p * r + Splat(8.3334519073e-3f);
  p = p * r + Splat(4.1665795894e-2f);
  p = p * r + Splat(1.6666665459e-1f);
  p = p * r + Splat(5.0000001201e-1f);
  p = p * (r * r) + r + Splat(1.0f);
  return p;
}

// exp(x): e^r by ExpReduced, 2^n applied in two halves so results down to
// the subnormal range and up to overflow stay right.
inline VF Exp(VF x) {
  const VF hi = Splat(88.8f), lo = Splat(-104.0f);
  VF xc = Sel(x > hi, hi, x);
  xc = Sel(xc < lo, lo, xc);
  VF n;
  const VF p = ExpReduced(xc, &n);
  // n in [-150, 129]: split into two exponents each within [-75, 65].
  const VF n1 = Round(n * Splat(0.5f));
  const VF n2 = n - n1;
  VF y = p * Pow2(n1) * Pow2(n2);
  y = Sel(x > hi, Splat(__builtin_inff()), y);
  y = Sel(x != x, x, y);
  return y;
}

// exp(x) for x <= 0 or NaN (Softmax's x - max): Exp's polynomial with one
// 2^n and no overflow side; below -87 (2^-126) it gives 0, where Exp
// keeps subnormals (< 1.2e-38, nothing next to the row's max term of 1),
// so a -inf (a masked position) is exactly 0. Per vector 4 fewer
// roundings, multiplies and blends than Exp on the softmax's hot loop.
inline VF ExpNonPositive(VF x) {
  const VF lo = Splat(-87.0f);
  const VI under = x < lo;
  VF n;
  const VF p = ExpReduced(Sel(under, lo, x), &n);
  return Sel(under, Splat(0.0f), p * Pow2(n));  // NaN: p is NaN
}

// log(x) (Cephes logf): x = m 2^e with m in [sqrt(1/2), sqrt(2)).
inline VF Log(VF x) {
  const VF x_in = x;
  // Subnormals: scale into the normal range first.
  const VI sub = x < Splat(1.17549435e-38f);
  x = Sel(sub, x * Splat(8388608.0f), x);  // 2^23
  VI xi = AsI(x);
  VF e = __builtin_convertvector(((xi >> 23) & SplatI(0xff)) - SplatI(126), VF);
  e = Sel(sub, e - Splat(23.0f), e);
  VF m = AsF((xi & SplatI(0x007fffff)) | SplatI(0x3f000000));  // [0.5, 1)
  const VI small = m < Splat(0.707106781186547524f);
  e = Sel(small, e - Splat(1.0f), e);
  m = Sel(small, m + m, m) - Splat(1.0f);
  const VF z = m * m;
  VF p = Splat(7.0376836292e-2f);
  p = p * m + Splat(-1.1514610310e-1f);
  p = p * m + Splat(1.1676998740e-1f);
  p = p * m + Splat(-1.2420140846e-1f);
  p = p * m + Splat(1.4249322787e-1f);
  p = p * m + Splat(-1.6668057665e-1f);
  p = p * m + Splat(2.0000714765e-1f);
  p = p * m + Splat(-2.4999993993e-1f);
  p = p * m + Splat(3.3333331174e-1f);
  VF y = p * m * z;
  y = y + e * Splat(-2.12194440e-4f);
  y = y - Splat(0.5f) * z;
  y = m + y + e * Splat(0.693359375f);
  y = Sel(x_in == Splat(__builtin_inff()), x_in, y);
  y = Sel(x_in == Splat(0.0f), Splat(-__builtin_inff()), y);
  y = Sel(x_in < Splat(0.0f), Splat(__builtin_nanf("")), y);
  y = Sel(x_in != x_in, x_in, y);
  return y;
}

// tanh: an odd polynomial below 0.625 (Cephes tanhf), else
// 1 - 2 / (exp(2|x|) + 1) with the sign of x.
inline VF Tanh(VF x) {
  const VF ax = Abs(x);
  const VF z = x * x;
  VF p = Splat(-5.70498872745e-3f);
  p = p * z + Splat(2.06390887954e-2f);
  p = p * z + Splat(-5.37397155531e-2f);
  p = p * z + Splat(1.33314422036e-1f);
  p = p * z + Splat(-3.33332819422e-1f);
  const VF small = p * z * x + x;
  const VF e = Exp(Min(ax + ax, Splat(40.0f)));
  VF big = Splat(1.0f) - Splat(2.0f) / (e + Splat(1.0f));
  big = AsF(AsI(big) | (AsI(x) & SplatI(int32_t(0x80000000u))));
  VF y = Sel(ax < Splat(0.625f), small, big);
  return Sel(x != x, x, y);
}

// erf: x P(x^2) below 1, else 1 - exp(-Q(|x| - 0.875)) with the sign of x
// (least-squares fits, max relative error ~1e-8 in exact arithmetic).
inline VF Erf(VF x) {
  const VF ax = Min(Abs(x), Splat(4.0f));
  const VF t = x * x;
  VF p = Splat(7.933352028367685e-05f);
  p = p * t + Splat(-0.0008034809605334494f);
  p = p * t + Splat(0.005191214865778974f);
  p = p * t + Splat(-0.026855398004437234f);
  p = p * t + Splat(0.11283625701526709f);
  p = p * t + Splat(-0.3761262987693572f);
  p = p * t + Splat(1.1283791665936347f);
  const VF small = p * x;
  const VF u = ax - Splat(0.875f);
  VF q = Splat(-1.6054132118438734e-06f);
  q = q * u + Splat(3.4176783559793966e-05f);
  q = q * u + Splat(-0.0003474934948686024f);
  q = q * u + Splat(0.0022987846689105315f);
  q = q * u + Splat(-0.011427985266106664f);
  q = q * u + Splat(0.04693791855277612f);
  q = q * u + Splat(0.8265330719300674f);
  q = q * u + Splat(2.4302204108370047f);
  q = q * u + Splat(1.5328244277185359f);
  VF big = Splat(1.0f) - Exp(-q);
  big = AsF(AsI(big) | (AsI(x) & SplatI(int32_t(0x80000000u))));
  const VF y = Sel(Abs(x) < Splat(1.0f), small, big);
  return Sel(x != x, x, y);
}

// Never exponentiates a positive number, so large |x| cannot overflow.
inline VF Sigmoid(VF x) {
  const VF e = Exp(-Abs(x));
  const VF r = Splat(1.0f) / (Splat(1.0f) + e);
  return Sel(x >= Splat(0.0f), r, e * r);
}

// exp(x) - 1, by its Taylor series near 0 where the subtraction cancels.
inline VF Expm1(VF x) {
  VF p = Splat(1.0f / 40320);
  p = p * x + Splat(1.0f / 5040);
  p = p * x + Splat(1.0f / 720);
  p = p * x + Splat(1.0f / 120);
  p = p * x + Splat(1.0f / 24);
  p = p * x + Splat(1.0f / 6);
  p = p * x + Splat(0.5f);
  const VF small = p * x * x + x;
  return Sel(Abs(x) < Splat(0.5f), small, Exp(x) - Splat(1.0f));
}

inline VF ApplyUnary(Unary op, float a, float b, VF x) {
  switch (op) {
    case Unary::kExp: return Exp(x);
    case Unary::kLog: return Log(x);
    case Unary::kTanh: return Tanh(x);
    case Unary::kErf: return Erf(x);
    case Unary::kSigmoid: return Sigmoid(x);
    case Unary::kGelu:
      return Splat(0.5f) * x * (Splat(1.0f) + Erf(x * Splat(0.70710678118654752f)));
    case Unary::kGeluTanh: {
      const VF k = Splat(0.7978845608028654f);
      return Splat(0.5f) * x * (Splat(1.0f) + Tanh(k * (x + Splat(0.044715f) * x * x * x)));
    }
    case Unary::kSoftplus: {
      // max(x, 0) + log(1 + exp(-|x|))
      const VF l = Log(Splat(1.0f) + Exp(-Abs(x)));
      const VF y = Max(x, Splat(0.0f)) + l;
      return Sel(x != x, x, y);
    }
    case Unary::kElu: return Sel(x < Splat(0.0f), Splat(a) * Expm1(x), x);
    case Unary::kSelu:
      return Splat(b) * Sel(x > Splat(0.0f), x, Splat(a) * Expm1(x));
    case Unary::kHardSigmoid: {
      const VF v = Splat(a) * x + Splat(b);
      return Sel(v < Splat(0.0f), Splat(0.0f), Sel(v > Splat(1.0f), Splat(1.0f), v));
    }
    case Unary::kHardSwish: {
      const VF v = x * Splat(1.0f / 6.0f) + Splat(0.5f);
      return x * Sel(v < Splat(0.0f), Splat(0.0f), Sel(v > Splat(1.0f), Splat(1.0f), v));
    }
    case Unary::kRelu: return Sel(x < Splat(0.0f), Splat(0.0f), x);
    case Unary::kLeakyRelu: return Sel(x < Splat(0.0f), Splat(a) * x, x);
    case Unary::kClip: {
      const VF v = Sel(x < Splat(a), Splat(a), x);
      return Sel(v > Splat(b), Splat(b), v);
    }
    case Unary::kSqrt: {
      VF y;
      for (int i = 0; i < kW; ++i) y[i] = __builtin_sqrtf(x[i]);
      return y;
    }
    case Unary::kAbs: return Abs(x);
    case Unary::kNeg: return -x;
    case Unary::kReciprocal: return Splat(1.0f) / x;
    case Unary::kSilu: return x * Sigmoid(x);
  }
  return x;
}

template <Unary kOp>
void UnaryLoop(float a, float b, const float* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + kW <= n; i += kW) Store(y + i, ApplyUnary(kOp, a, b, Load(x + i)));
  if (i < n) {
    float buf[kW] = {};
    __builtin_memcpy(buf, x + i, static_cast<size_t>(n - i) * 4);
    const VF v = ApplyUnary(kOp, a, b, Load(buf));
    Store(buf, v);
    __builtin_memcpy(y + i, buf, static_cast<size_t>(n - i) * 4);
  }
}

void UnaryImpl(Unary op, float a, float b, const float* x, float* y, int64_t n) {
  switch (op) {
#define ORRERY_VEC_CASE(k) \
  case Unary::k: return UnaryLoop<Unary::k>(a, b, x, y, n);
    ORRERY_VEC_CASE(kExp)
    ORRERY_VEC_CASE(kLog)
    ORRERY_VEC_CASE(kTanh)
    ORRERY_VEC_CASE(kErf)
    ORRERY_VEC_CASE(kSigmoid)
    ORRERY_VEC_CASE(kGelu)
    ORRERY_VEC_CASE(kGeluTanh)
    ORRERY_VEC_CASE(kSoftplus)
    ORRERY_VEC_CASE(kElu)
    ORRERY_VEC_CASE(kSelu)
    ORRERY_VEC_CASE(kHardSigmoid)
    ORRERY_VEC_CASE(kHardSwish)
    ORRERY_VEC_CASE(kRelu)
    ORRERY_VEC_CASE(kLeakyRelu)
    ORRERY_VEC_CASE(kClip)
    ORRERY_VEC_CASE(kSqrt)
    ORRERY_VEC_CASE(kAbs)
    ORRERY_VEC_CASE(kNeg)
    ORRERY_VEC_CASE(kReciprocal)
    ORRERY_VEC_CASE(kSilu)
#undef ORRERY_VEC_CASE
  }
}

template <Binary kOp>
inline VF ApplyBinary(VF a, VF b) {
  if constexpr (kOp == Binary::kAdd) return a + b;
  else if constexpr (kOp == Binary::kSub) return a - b;
  else if constexpr (kOp == Binary::kMul) return a * b;
  else if constexpr (kOp == Binary::kDiv) return a / b;
  else if constexpr (kOp == Binary::kMax) return Sel((a > b) | (a != a), a, b);  // NaN wins
  else return Sel((a < b) | (a != a), a, b);
}

template <Binary kOp>
void BinaryLoop(const float* a, int64_t sa, const float* b, int64_t sb, float* y, int64_t n) {
  int64_t i = 0;
  if (sa == 1 && sb == 1) {
    for (; i + kW <= n; i += kW) Store(y + i, ApplyBinary<kOp>(Load(a + i), Load(b + i)));
  } else if (sa == 1) {
    const VF bv = Splat(b[0]);
    for (; i + kW <= n; i += kW) Store(y + i, ApplyBinary<kOp>(Load(a + i), bv));
  } else if (sb == 1) {
    const VF av = Splat(a[0]);
    for (; i + kW <= n; i += kW) Store(y + i, ApplyBinary<kOp>(av, Load(b + i)));
  }
  for (; i < n; ++i) {
    VF av = Splat(a[i * sa]), bv = Splat(b[i * sb]);
    y[i] = ApplyBinary<kOp>(av, bv)[0];
  }
}

void BinaryImpl(Binary op, const float* a, int64_t sa, const float* b, int64_t sb, float* y,
                int64_t n) {
  switch (op) {
    case Binary::kAdd: return BinaryLoop<Binary::kAdd>(a, sa, b, sb, y, n);
    case Binary::kSub: return BinaryLoop<Binary::kSub>(a, sa, b, sb, y, n);
    case Binary::kMul: return BinaryLoop<Binary::kMul>(a, sa, b, sb, y, n);
    case Binary::kDiv: return BinaryLoop<Binary::kDiv>(a, sa, b, sb, y, n);
    case Binary::kMax: return BinaryLoop<Binary::kMax>(a, sa, b, sb, y, n);
    case Binary::kMin: return BinaryLoop<Binary::kMin>(a, sa, b, sb, y, n);
  }
}

// ---- reductions ----

template <Reduce kOp>
inline VF Fold(VF acc, VF v) {
  if constexpr (kOp == Reduce::kSum) return acc + v;
  else if constexpr (kOp == Reduce::kSumSquare) return acc + v * v;
  else if constexpr (kOp == Reduce::kMax) return Sel((v > acc) | (v != v), v, acc);
  else return Sel((v < acc) | (v != v), v, acc);
}
template <Reduce kOp>
inline float FoldScalar(float acc, float v) {
  return Fold<kOp>(Splat(acc), Splat(v))[0];
}
// Lane (l + S) mod kW of v in lane l.
template <int S, size_t... I>
inline VF RotateLanes(VF v, std::index_sequence<I...>) {
  return __builtin_shufflevector(v, v, static_cast<int>((I + S) % kW)...);
}
// All lanes of v folded in log2(kW) shuffle + fold steps, where a lane by
// lane loop is a dependent chain of kW - 1 folds (each a broadcast, compare
// and blend for max): ~100 cycles per row with 16 lanes. kSum, kMax, kMin
// (a sum adds in a tree order, not lane order).
template <Reduce kOp>
inline float HFold(VF v) {
  static_assert(kOp != Reduce::kSumSquare, "fold the squares first, then HFold<kSum>");
  constexpr auto lanes = std::make_index_sequence<kW>{};
  if constexpr (kW >= 16) v = Fold<kOp>(v, RotateLanes<8>(v, lanes));
  if constexpr (kW >= 8) v = Fold<kOp>(v, RotateLanes<4>(v, lanes));
  v = Fold<kOp>(v, RotateLanes<2>(v, lanes));
  v = Fold<kOp>(v, RotateLanes<1>(v, lanes));
  return v[0];
}
template <Reduce kOp>
constexpr float Identity() {
  if constexpr (kOp == Reduce::kMax) return -__builtin_inff();
  else if constexpr (kOp == Reduce::kMin) return __builtin_inff();
  else return 0.0f;
}

template <Reduce kOp>
float ReduceRow(const float* x, int64_t n) {
  VF a0 = Splat(Identity<kOp>()), a1 = a0;
  int64_t i = 0;
  for (; i + 2 * kW <= n; i += 2 * kW) {
    a0 = Fold<kOp>(a0, Load(x + i));
    a1 = Fold<kOp>(a1, Load(x + i + kW));
  }
  if (i + kW <= n) {
    a0 = Fold<kOp>(a0, Load(x + i));
    i += kW;
  }
  // Combine the lanes (the identity of sum-of-squares combines by sum).
  float r;
  if constexpr (kOp == Reduce::kSum || kOp == Reduce::kSumSquare) {
    r = HSum(a0 + a1);
  } else {
    r = HFold<kOp>(Fold<kOp>(a0, a1));
  }
  for (; i < n; ++i) r = FoldScalar<kOp>(r, x[i]);
  return r;
}

template <Reduce kOp>
void ReduceRowsT(const float* x, int64_t rows, int64_t n, float* y) {
  for (int64_t r = 0; r < rows; ++r) y[r] = ReduceRow<kOp>(x + r * n, n);
}

void ReduceRowsImpl(Reduce op, const float* x, int64_t rows, int64_t n, float* y) {
  switch (op) {
    case Reduce::kSum: return ReduceRowsT<Reduce::kSum>(x, rows, n, y);
    case Reduce::kMax: return ReduceRowsT<Reduce::kMax>(x, rows, n, y);
    case Reduce::kMin: return ReduceRowsT<Reduce::kMin>(x, rows, n, y);
    case Reduce::kSumSquare: return ReduceRowsT<Reduce::kSumSquare>(x, rows, n, y);
  }
}

template <Reduce kOp>
void ReduceColsT(const float* x, int64_t rows, int64_t n, float* y) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * n;
    int64_t j = 0;
    for (; j + kW <= n; j += kW) Store(y + j, Fold<kOp>(Load(y + j), Load(xr + j)));
    for (; j < n; ++j) y[j] = FoldScalar<kOp>(y[j], xr[j]);
  }
}

void ReduceColsImpl(Reduce op, const float* x, int64_t rows, int64_t n, float* y) {
  switch (op) {
    case Reduce::kSum: return ReduceColsT<Reduce::kSum>(x, rows, n, y);
    case Reduce::kMax: return ReduceColsT<Reduce::kMax>(x, rows, n, y);
    case Reduce::kMin: return ReduceColsT<Reduce::kMin>(x, rows, n, y);
    case Reduce::kSumSquare: return ReduceColsT<Reduce::kSumSquare>(x, rows, n, y);
  }
}

// ---- softmax, normalisation ----

// Softmax of two rows of whole vectors, their passes interleaved: one row
// of a few vectors is a chain of max, exp-sum and scale with lane folds
// between them, whose latency one row alone cannot hide.
void SoftmaxTwoRows(const float* x, float* y, int64_t n) {
  const float* xb = x + n;
  float* yb = y + n;
  VF ma = Splat(-__builtin_inff()), mb = ma;
  for (int64_t i = 0; i < n; i += kW) {
    ma = Fold<Reduce::kMax>(ma, Load(x + i));
    mb = Fold<Reduce::kMax>(mb, Load(xb + i));
  }
  const VF a = Splat(HFold<Reduce::kMax>(ma)), b = Splat(HFold<Reduce::kMax>(mb));
  VF sa = Splat(0.0f), sb = sa;
  for (int64_t i = 0; i < n; i += kW) {
    const VF ea = ExpNonPositive(Load(x + i) - a), eb = ExpNonPositive(Load(xb + i) - b);
    Store(y + i, ea);
    Store(yb + i, eb);
    sa += ea;
    sb += eb;
  }
  const VF ia = Splat(1.0f / HFold<Reduce::kSum>(sa)), ib = Splat(1.0f / HFold<Reduce::kSum>(sb));
  for (int64_t i = 0; i < n; i += kW) {
    Store(y + i, Load(y + i) * ia);
    Store(yb + i, Load(yb + i) * ib);
  }
}

void SoftmaxRowsImpl(const float* x, float* y, int64_t rows, int64_t n, bool log) {
  int64_t r0 = 0;
  if (!log && n % kW == 0 && n <= 64 * kW) {
    for (; r0 + 2 <= rows; r0 += 2) SoftmaxTwoRows(x + r0 * n, y + r0 * n, n);
  }
  for (int64_t r = r0; r < rows; ++r) {
    const float* xr = x + r * n;
    float* yr = y + r * n;
    const float mx = ReduceRow<Reduce::kMax>(xr, n);
    const VF m = Splat(mx);
    // Two sums, so that consecutive exps do not wait on one add chain.
    VF s0 = Splat(0.0f), s1 = s0;
    int64_t i = 0;
    if (log) {
      for (; i + 2 * kW <= n; i += 2 * kW) {
        s0 += Exp(Load(xr + i) - m);
        s1 += Exp(Load(xr + i + kW) - m);
      }
      for (; i + kW <= n; i += kW) s0 += Exp(Load(xr + i) - m);
    } else {
      for (; i + 2 * kW <= n; i += 2 * kW) {
        const VF e0 = ExpNonPositive(Load(xr + i) - m), e1 = ExpNonPositive(Load(xr + i + kW) - m);
        Store(yr + i, e0);
        Store(yr + i + kW, e1);
        s0 += e0;
        s1 += e1;
      }
      for (; i + kW <= n; i += kW) {
        const VF e = ExpNonPositive(Load(xr + i) - m);
        Store(yr + i, e);
        s0 += e;
      }
    }
    float sum = HFold<Reduce::kSum>(s0 + s1);
    for (; i < n; ++i) {
      const float e = Exp(Splat(xr[i] - mx))[0];
      if (!log) yr[i] = e;
      sum += e;
    }
    if (log) {
      // (x - max) - log(sum): subtracting max first keeps large inputs exact.
      const float ls = Log(Splat(sum))[0];
      const VF lv = Splat(ls);
      int64_t j = 0;
      for (; j + kW <= n; j += kW) Store(yr + j, (Load(xr + j) - m) - lv);
      for (; j < n; ++j) yr[j] = (xr[j] - mx) - ls;
    } else {
      const float inv = 1.0f / sum;
      BinaryLoop<Binary::kMul>(yr, 1, &inv, 0, yr, n);
    }
  }
}

void MomentsImpl(const float* x, int64_t n, float* mean, float* var) {
  if (n <= 0) {
    *mean = 0;
    *var = 0;
    return;
  }
  const float m = ReduceRow<Reduce::kSum>(x, n) / static_cast<float>(n);
  const VF mv = Splat(m);
  VF s0 = Splat(0.0f), s1 = s0;
  int64_t i = 0;
  for (; i + 2 * kW <= n; i += 2 * kW) {
    const VF d0 = Load(x + i) - mv, d1 = Load(x + i + kW) - mv;
    s0 += d0 * d0;
    s1 += d1 * d1;
  }
  float s = HSum(s0 + s1);
  for (; i < n; ++i) s += (x[i] - m) * (x[i] - m);
  *mean = m;
  *var = s / static_cast<float>(n);
}

void LayerNormRowsImpl(const float* x, float* y, int64_t rows, int64_t n, const float* scale,
                       const float* bias, float epsilon, float* mean_out, float* inv_std_out) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * n;
    float* yr = y + r * n;
    float mean = 0, var = 0;
    MomentsImpl(xr, n, &mean, &var);
    const float inv = 1.0f / __builtin_sqrtf(var + epsilon);
    const VF m = Splat(mean), is = Splat(inv);
    int64_t i = 0;
    if (bias != nullptr) {
      for (; i + kW <= n; i += kW) {
        Store(yr + i, (Load(xr + i) - m) * is * Load(scale + i) + Load(bias + i));
      }
      for (; i < n; ++i) yr[i] = (xr[i] - mean) * inv * scale[i] + bias[i];
    } else {
      for (; i + kW <= n; i += kW) Store(yr + i, (Load(xr + i) - m) * is * Load(scale + i));
      for (; i < n; ++i) yr[i] = (xr[i] - mean) * inv * scale[i];
    }
    if (mean_out != nullptr) mean_out[r] = mean;
    if (inv_std_out != nullptr) inv_std_out[r] = inv;
  }
}

void ScaleShiftImpl(const float* x, float* y, int64_t n, float a, float b) {
  const VF av = Splat(a), bv = Splat(b);
  int64_t i = 0;
  for (; i + kW <= n; i += kW) Store(y + i, Load(x + i) * av + bv);
  for (; i < n; ++i) y[i] = x[i] * a + b;
}

// ---- pooling ----

// kW output columns starting at ow: the input values under kernel column
// `kx` of each, i.e. x[row + (ow + l) * sw + off] for lanes l.
inline VF Gather(const float* row, int64_t base, int64_t sw) {
  if (sw == 1) return Load(row + base);
  if (sw == 2) {
    // The second load ends at the last lane's element, never past it.
    const VF a = Load(row + base), b = Load(row + base + kW - 1);
    return StrideTwoOf<kW>(a, b, std::make_index_sequence<kW>());
  }
  VF v;
  for (int l = 0; l < kW; ++l) v[l] = row[base + l * sw];
  return v;
}

// Max keeps the running value unless v is larger: a NaN never replaces it,
// and the first of equal maxima wins (as the scalar MaxPool does).
template <bool kMax>
inline VF Fold(VF acc, VF v) {
  if constexpr (kMax) return Sel(v > acc, v, acc);
  else return acc + v;
}
template <bool kMax>
inline float FoldScalar(float acc, float v) {
  if constexpr (kMax) return v > acc ? v : acc;
  else return acc + v;
}

// Separable pooling, one output row at a time: the vertical pass folds the
// window's input rows into `row` (the input row's columns at offset pw, pad
// values around them: 0 for sums, lowest() for max, which is also where
// every max fold starts, so no value in `row` is NaN or below lowest(),
// and a window of padding gives lowest()), then the horizontal pass
// folds kw columns of `row` per output. Rows outside the input are skipped
// via taps_h. Loads and stores may run past a row's end into the next row
// while they stay inside [x, x_end) / [y, y_end): those lanes are pad or
// rewritten later.
// Software prefetch distance of the pooling loops, which stream their
// planes once (prefetches never fault, so reading past the planes is fine).
constexpr int64_t kPoolPrefetchFloats = 512;

template <bool kMax>
void VerticalFold(const Pool2d& p, const float* x, const float* x_end, int64_t r0, int64_t rows,
                  float* row) {
  const float init = kMax ? -3.40282347e+38f : 0.0f;  // numeric_limits<float>::lowest()
  const float pad = init;
  float* t = row + p.pw;
  const int64_t vec_end = (p.iw + kW - 1) / kW * kW;
  const int64_t last = rows > 0 ? (r0 + (rows - 1) * p.dh) * p.iw : 0;
  const int64_t jv = last + vec_end <= x_end - x ? vec_end : p.iw / kW * kW;
  int64_t j = 0;
  if (p.dh == 1 && rows == 3) {  // the common 3x3 window
    const float* a = x + r0 * p.iw;
    const float* b = a + p.iw;
    const float* c = b + p.iw;
    for (; j < jv; j += kW) {
      __builtin_prefetch(c + j + kPoolPrefetchFloats);
      Store(t + j, Fold<kMax>(Fold<kMax>(Fold<kMax>(Splat(init), Load(a + j)), Load(b + j)),
                              Load(c + j)));
    }
  } else {
    for (; j < jv; j += kW) {
      VF acc = Splat(init);
      for (int64_t k = 0; k < rows; ++k) acc = Fold<kMax>(acc, Load(x + (r0 + k * p.dh) * p.iw + j));
      Store(t + j, acc);
    }
  }
  for (; j < p.iw; ++j) {
    float acc = init;
    for (int64_t k = 0; k < rows; ++k) acc = FoldScalar<kMax>(acc, x[(r0 + k * p.dh) * p.iw + j]);
    t[j] = acc;
  }
  // Lanes read past the row, as far as the last output's window reaches.
  const int64_t reach = (p.ow - 1) * p.sw - p.pw + (p.kw - 1) * p.dw + 1;
  for (j = p.iw; j < jv && j < reach; ++j) t[j] = pad;
}

// kW outputs from `row` starting at output column ow; kKw / kSw > 0 fix
// the kernel width and stride at compile time (dilation 1).
template <bool kMax, int kKw, int kSw>
inline VF HorizontalFold(const Pool2d& p, const float* row, int64_t ow) {
  if constexpr (kKw > 0) {
    if constexpr (kSw == 2 && kW == 8 && kKw <= 3) {
      // Taps 0, 1, 2 of stride 2 in vshufps order (pairs of lanes out of
      // place, which lane-wise folds do not mind), put in order once:
      // 4 loads and 4 shuffles where EvenLanesOf takes 6 and 9 on AVX2.
      const float* r = row + 2 * ow;
      const auto idx = std::make_index_sequence<kW>();
      const VF r0 = Load(r), r1 = Load(r + kW);
      VF acc = Fold<kMax>(EvenLanesInBlocksOf<kW>(r0, r1, idx),
                          OddLanesInBlocksOf<kW>(r0, r1, idx));
      if constexpr (kKw == 3) {
        acc = Fold<kMax>(acc, EvenLanesInBlocksOf<kW>(Load(r + 2), Load(r + 2 + kW), idx));
      }
      return BlocksInOrder<kW>(acc, idx);
    } else if constexpr (kSw == 2) {
      // Taps 0, 1, 2 of stride 2: even lanes of row[2 ow + kx ...].
      const float* r = row + 2 * ow;
      const auto idx = std::make_index_sequence<kW>();
      VF acc = EvenLanesOf(Load(r), Load(r + kW), idx);
      for (int kx = 1; kx < kKw; ++kx) {
        acc = Fold<kMax>(acc, EvenLanesOf(Load(r + kx), Load(r + kx + kW), idx));
      }
      return acc;
    } else {
      const float* r = row + ow * kSw;
      VF acc = Load(r);
      for (int kx = 1; kx < kKw; ++kx) acc = Fold<kMax>(acc, Load(r + kx));
      return acc;
    }
  } else {
    const int64_t base = ow * p.sw;
    VF acc = Gather(row, base, p.sw);
    for (int64_t kx = 1; kx < p.kw; ++kx) acc = Fold<kMax>(acc, Gather(row, base + kx * p.dw, p.sw));
    return acc;
  }
}

// Output rows are pooled kPool2dRowGroup at a time: their vertical folds
// first, each into its own row of scratch, then their horizontal passes,
// whose loads straddle the vectors the fold just stored: right after the
// store, such a load cannot be forwarded from the store queue and waits
// for it to reach L1 (one row at a time, MaxPool 192 x 56 x 56 / 2 spent
// ~80 cycles per output row).
template <bool kMax, int kKw, int kSw>
void PoolPlane(const Pool2d& p, const float* x, const float* x_end, float* y, const float* y_end,
               float* rows_buf, int64_t width) {
  for (int64_t g0 = 0; g0 < p.oh; g0 += kPool2dRowGroup) {
    const int64_t g1 = g0 + kPool2dRowGroup < p.oh ? g0 + kPool2dRowGroup : p.oh;
    for (int64_t oh = g0; oh < g1; ++oh) {
      const int64_t h0 = p.taps_h[2 * oh], h1 = p.taps_h[2 * oh + 1];
      VerticalFold<kMax>(p, x, x_end, oh * p.sh - p.ph + h0 * p.dh, h1 - h0,
                         rows_buf + (oh - g0) * width);
    }
    for (int64_t oh = g0; oh < g1; ++oh) {
      const float* row = rows_buf + (oh - g0) * width;
      const int64_t h0 = p.taps_h[2 * oh], h1 = p.taps_h[2 * oh + 1];
      float* yr = y + oh * p.ow;
      const VF rows = Splat(static_cast<float>(h1 - h0));
      const VF padded_rows = Splat(static_cast<float>(p.padded_h[oh]));
      for (int64_t ow = 0; ow < p.ow; ow += kW) {
        // The row's values are NaN-free (folded from `init`), so the
        // horizontal pass may start from its first tap.
        VF acc = HorizontalFold<kMax, kKw, kSw>(p, row, ow);
        if constexpr (!kMax) {
          const VF count = p.count_include_pad ? padded_rows * Load(p.col_padded + ow)
                                               : rows * Load(p.col_valid + ow);
          acc = Sel(count == Splat(0.0f), Splat(0.0f), acc / count);
        }
        if (ow + kW <= p.ow || (yr - y) + ow + kW <= y_end - y) {
          Store(yr + ow, acc);
        } else {
          float tail[kW];
          Store(tail, acc);
          __builtin_memcpy(yr + ow, tail, static_cast<size_t>(p.ow - ow) * 4);
        }
      }
    }
  }
}

template <bool kMax, int kKw, int kSw>
void PoolPlanes(const Pool2d& p, const float* x, float* y, int64_t planes, float* row) {
  const int64_t in_vol = p.ih * p.iw, out_vol = p.oh * p.ow;
  const float* x_end = x + planes * in_vol;
  const float* y_end = y + planes * out_vol;
  const float pad = kMax ? -3.40282347e+38f : 0.0f;  // lowest(): see above VerticalFold
  const int64_t width = Pool2dRowWidth(p);
  for (int64_t i = 0; i < kPool2dRowGroup * width; ++i) row[i] = pad;
  for (int64_t i = 0; i < planes; ++i) {
    PoolPlane<kMax, kKw, kSw>(p, x + i * in_vol, x_end, y + i * out_vol, y_end, row, width);
  }
}

// ---- 3x3 stride-1 "same" pooling of small planes, flattened ----
//
// Rows of 7..32 columns waste most lanes of a row-by-row pass, so this
// path treats the task's planes as one flat array of planes * ih * iw
// values: the vertical fold reads x[i - iw], x[i], x[i + iw], the
// horizontal one v[i - 1], v[i], v[i + 1], each neighbour masked off at
// row and plane edges by tables periodic in the plane (built per call in
// scratch). Chunks of kFlatChunk outputs keep v in L1.
constexpr int64_t kFlatChunk = kPool2dFlatChunk;

template <bool kMax>
inline float FlatVerticalScalar(const Pool2d& p, const float* x, int64_t n, int64_t i) {
  const float low = kMax ? -3.40282347e+38f : 0.0f;
  if (i >= n) return low;
  const int64_t r = (i % (p.ih * p.iw)) / p.iw;
  float acc = FoldScalar<kMax>(low, x[i]);
  if (r > 0) acc = FoldScalar<kMax>(acc, x[i - p.iw]);
  if (r + 1 < p.ih) acc = FoldScalar<kMax>(acc, x[i + p.iw]);
  return acc;
}

// The plane position of the next vector's first lane in the flat pools
// (one plane of hw positions, kW lanes a vector), without a division.
inline int64_t NextFlatPosition(int64_t m, int64_t hw) {
  m += kW;
  while (m >= hw) m -= hw;
  return m;
}

template <bool kMax>
void PoolFlat(const Pool2d& p, const float* x, float* y, int64_t planes, float* scratch) {
  const int64_t hw = p.ih * p.iw, n = planes * hw, ext = Pool2dFlatPeriod(p);
  const int32_t* masks = p.flat_masks;
  const float* counts = p.flat_count;
  float* v_buf = scratch;
  if (masks == nullptr || counts == nullptr) {
    int32_t* m = reinterpret_cast<int32_t*>(scratch);
    float* c = scratch + 4 * ext;
    Pool2dFlatTables(p, m, c);
    masks = m;
    counts = c;
    v_buf = scratch + 5 * ext;
  }
  const int32_t* up = masks;
  const int32_t* down = up + ext;
  const int32_t* left = down + ext;
  const int32_t* right = left + ext;
  const float low = kMax ? -3.40282347e+38f : 0.0f;
  const VF lowv = Splat(low);
  // m: position in the plane of the vector's first lane (the tables run kW
  // past the period).
  for (int64_t c0 = 0; c0 < n; c0 += kFlatChunk) {
    const int64_t c1 = c0 + kFlatChunk < n ? c0 + kFlatChunk : n;
    // v over [v0, v1): the chunk and one neighbour either side.
    const int64_t v0 = c0 - kW > 0 ? c0 - kW : 0;
    const int64_t v1 = c1 + kW < n ? c1 + kW : n;
    float* v = v_buf + 1 - v0;  // v[j] for j in [v0 - 1, v1 + kW)
    v[v0 - 1] = low;
    int64_t m = v0 % hw;
    for (int64_t j = v0; j < v1; j += kW, m = NextFlatPosition(m, hw)) {
      if (j - p.iw >= 0 && j + p.iw + kW <= n) {
        __builtin_prefetch(x + j + p.iw + kPoolPrefetchFloats);
        VF acc = Fold<kMax>(lowv, Load(x + j));
        acc = Fold<kMax>(acc, Sel(LoadI(up + m), Load(x + j - p.iw), lowv));
        acc = Fold<kMax>(acc, Sel(LoadI(down + m), Load(x + j + p.iw), lowv));
        Store(v + j, acc);
      } else {
        for (int l = 0; l < kW; ++l) v[j + l] = FlatVerticalScalar<kMax>(p, x, n, j + l);
      }
    }
    m = c0 % hw;
    for (int64_t i = c0; i < c1; i += kW, m = NextFlatPosition(m, hw)) {
      VF acc = Load(v + i);
      acc = Fold<kMax>(acc, Sel(LoadI(left + m), Load(v + i - 1), lowv));
      acc = Fold<kMax>(acc, Sel(LoadI(right + m), Load(v + i + 1), lowv));
      if constexpr (!kMax) {
        const VF count = Load(counts + m);
        acc = Sel(count == Splat(0.0f), Splat(0.0f), acc / count);
      }
      if (i + kW <= n) {
        Store(y + i, acc);
      } else {
        float tail[kW];
        Store(tail, acc);
        __builtin_memcpy(y + i, tail, static_cast<size_t>(n - i) * 4);
      }
    }
  }
}

#if ORRERY_VEC_LANES == 16
// ---- AVX-512 stride-2 MaxPool (3x3 / 2x2 windows), in registers ----
//
// One output row at a time, 16 outputs per step: the window's input rows
// are folded into three vectors of input columns [c, c + 48) (masked loads:
// lanes outside the row read as lowest(), which also covers left pads and
// ceil_mode's right edge), whose even / odd lanes (vpermt2ps) and even lanes
// one further (valignd with the next step's first vector) are the three
// horizontal taps (the next step's first vector is this one's third).
// Nothing goes through scratch: against the separable path's stored
// vertical fold and reloads, per-step minima at T=1 in the models, ms:
// SqueezeNet 111 / 55 / 27 wide 0.087 / 0.046 / 0.028 -> 0.053 / 0.030 /
// 0.018, GoogLeNet's 112 / 56 / 28 and 2x2 14 0.085 / 0.069 / 0.057 /
// 0.038 -> 0.055 / 0.044 / 0.037 / 0.024, ResNet's 112 pad 1 0.089 -> 0.082.
inline __mmask16 ColumnMask(int64_t c, int64_t iw) {
  const int64_t lo = c < 0 ? -c : 0;
  const int64_t hi = iw - c < 16 ? iw - c : 16;
  if (hi <= lo) return 0;
  return static_cast<__mmask16>(((1u << hi) - 1u) & ~((1u << lo) - 1u));
}

// max(v, acc) with MaxPool's NaN rule (a NaN v keeps acc): vmaxps. Not
// _mm512_max_ps, whose _mm512_undefined_ps pass-through GCC 12 flags as
// maybe-uninitialized.
inline __m512 MaxInto(__m512 v, __m512 acc) { return v > acc ? v : acc; }

// Max over kN rows (kN = 0: n rows) of the 16 columns from c on; lanes
// outside the mask (outside [0, iw)) read as lowest().
template <int kN>
inline __m512 VerticalMax(const float* r, int64_t iw, int64_t n, int64_t c, __mmask16 m,
                          __m512 low) {
  const int64_t rows = kN > 0 ? kN : n;
  if (m == 0) return low;  // past the row (a narrow row's last step)
  if (m == 0xffff) {  // inside the row: plain loads (no merge operand to copy)
    __m512 acc = MaxInto(_mm512_loadu_ps(r + c), low);  // from lowest(): a NaN never stays
    for (int64_t k = 1; k < rows; ++k) acc = MaxInto(_mm512_loadu_ps(r + k * iw + c), acc);
    return acc;
  }
  __m512 acc = MaxInto(_mm512_mask_loadu_ps(low, m, r + c), low);
  for (int64_t k = 1; k < rows; ++k) acc = MaxInto(_mm512_mask_loadu_ps(low, m, r + k * iw + c), acc);
  return acc;
}

// One output row from the kN (or n >= 1) input rows from r on; masks[2 j],
// masks[2 j + 1] the column masks of step j's second and third vectors,
// m0 that of the first step's first.
template <int kKw, int kN>
inline void MaxPoolStride2Row(const float* r, int64_t iw, int64_t n, int64_t pw, int64_t ow,
                              const __mmask16* masks, __mmask16 m0, float* yr,
                              const float* y_end) {
  const __m512 low = _mm512_set1_ps(-3.40282347e+38f);
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
  int64_t c = -pw;
  __m512 va = VerticalMax<kN>(r, iw, n, c, m0, low);
  for (int64_t o = 0; o < ow; o += 16, c += 32, masks += 2) {
    const __m512 vb = VerticalMax<kN>(r, iw, n, c + 16, masks[0], low);
    const __m512 e = _mm512_permutex2var_ps(va, even, vb);
    __m512 acc = MaxInto(_mm512_permutex2var_ps(va, odd, vb), e);
    va = VerticalMax<kN>(r, iw, n, c + 32, masks[1], low);
    if constexpr (kKw == 3) {
      // e's lanes 1..15 and va's lane 0 (valignd).
      const __m512 e2 =
          __builtin_shufflevector(e, va, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16);
      acc = MaxInto(e2, acc);
    }
    if (o + 16 <= ow || y_end - (yr + o) >= 16) {  // the next row rewrites lanes past ow
      _mm512_storeu_ps(yr + o, acc);
    } else {
      _mm512_mask_storeu_ps(yr + o, static_cast<__mmask16>((1u << (ow - o)) - 1u), acc);
    }
  }
}

// Rows of up to kMaxSteps * 16 outputs (the mask table lives on the stack).
constexpr int64_t kStride2MaxSteps = 32;

template <int kKw>
void MaxPoolStride2Rows(const Pool2d& p, const float* x, float* y, int64_t planes) {
  __mmask16 masks[2 * kStride2MaxSteps];
  const int64_t steps = (p.ow + 15) / 16;
  for (int64_t j = 0; j < steps; ++j) {
    masks[2 * j] = ColumnMask(32 * j - p.pw + 16, p.iw);
    masks[2 * j + 1] = ColumnMask(32 * j - p.pw + 32, p.iw);
  }
  const __mmask16 m0 = ColumnMask(-p.pw, p.iw);
  const int64_t in_vol = p.ih * p.iw, out_vol = p.oh * p.ow;
  const float* y_end = y + planes * out_vol;
  for (int64_t pl = 0; pl < planes; ++pl) {
    const float* xp = x + pl * in_vol;
    float* yr = y + pl * out_vol;
    for (int64_t oh = 0; oh < p.oh; ++oh, yr += p.ow) {
      const int64_t h0 = p.taps_h[2 * oh], n = p.taps_h[2 * oh + 1] - h0;
      const float* r = xp + (oh * p.sh - p.ph + h0) * p.iw;
      if (n == kKw) {
        MaxPoolStride2Row<kKw, kKw>(r, p.iw, n, p.pw, p.ow, masks, m0, yr, y_end);
      } else if (n > 0) {
        MaxPoolStride2Row<kKw, 0>(r, p.iw, n, p.pw, p.ow, masks, m0, yr, y_end);
      } else {
        for (int64_t o = 0; o < p.ow; ++o) yr[o] = -3.40282347e+38f;
      }
    }
  }
}

// ---- AVX-512 flat 3x3 stride-1 MaxPool (Pool2dFlat's planes) ----
//
// PoolFlat's scheme without its scratch round trip: the vertical fold of
// vector j + 1 is made while vector j's horizontal taps are taken from its
// neighbours in registers (valignd), and each neighbour is a masked load or
// a masked max (the periodic tables as lane masks), not a load and a blend.
// x's table position m of a vector's first lane advances by 16 mod hw.
// T=1 step minima in GoogLeNet against PoolFlat, ms: 28 x 28 x 192 / 256
// 0.042 / 0.049 -> 0.026 / 0.033, 14 x 14 x 480-528 0.026-0.028 -> 0.016-
// 0.018, 7 x 7 x 832 0.011 -> 0.007.
void MaxPoolFlat(const Pool2d& p, const float* x, float* y, int64_t planes, float* scratch) {
  const int64_t hw = p.ih * p.iw, n = planes * hw;
  const uint64_t* lane_masks = p.flat_lane_masks;
  if (lane_masks == nullptr) {
    uint64_t* t = reinterpret_cast<uint64_t*>(scratch);
    Pool2dFlatLaneMasks(p, t);
    lane_masks = t;
  }
  const __m512 low = _mm512_set1_ps(-3.40282347e+38f);
  const int64_t iw = p.iw;
  // Vertical fold of the vector at i (lane masks w), lanes past n low.
  auto vertical = [&](int64_t i, uint64_t w) {
    const __mmask16 live = n - i >= 16 ? 0xffff : static_cast<__mmask16>((1u << (n - i)) - 1u);
    const __mmask16 up = static_cast<__mmask16>(w), down = static_cast<__mmask16>(w >> 16);
    __m512 acc = MaxInto(_mm512_mask_loadu_ps(low, live, x + i), low);
    acc = MaxInto(_mm512_mask_loadu_ps(low, live & up, x + i - iw), acc);
    return MaxInto(_mm512_mask_loadu_ps(low, live & down, x + i + iw), acc);
  };
  __m512 vp = low;
  __m512 vc = vertical(0, lane_masks[0]);
  int64_t m = 0, mn = NextFlatPosition(0, hw);
  for (int64_t i = 0; i < n; i += 16) {
    const uint64_t w = lane_masks[m];
    const __m512 vn = i + 16 < n ? vertical(i + 16, lane_masks[mn]) : low;
    // Lane l's left neighbour is lane l - 1 (lane 15 of vp for l = 0),
    // its right one lane l + 1 (lane 0 of vn for l = 15).
    const __m512 l =
        __builtin_shufflevector(vp, vc, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30);
    const __m512 r =
        __builtin_shufflevector(vc, vn, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16);
    __m512 acc = _mm512_mask_max_ps(vc, static_cast<__mmask16>(w >> 32), l, vc);
    acc = _mm512_mask_max_ps(acc, static_cast<__mmask16>(w >> 48), r, acc);
    if (n - i >= 16) {
      _mm512_storeu_ps(y + i, acc);
    } else {
      _mm512_mask_storeu_ps(y + i, static_cast<__mmask16>((1u << (n - i)) - 1u), acc);
    }
    vp = vc;
    vc = vn;
    m = mn;
    mn = NextFlatPosition(mn, hw);
  }
}
#endif

template <bool kMax>
void Pool2dOf(const Pool2d& p, const float* x, float* y, int64_t planes, float* row) {
#if ORRERY_VEC_LANES == 16
  if (kMax && Pool2dFlat(p)) return MaxPoolFlat(p, x, y, planes, row);
#endif
  if (Pool2dFlat(p)) return PoolFlat<kMax>(p, x, y, planes, row);
#if ORRERY_VEC_LANES == 16
  if (kMax && p.sw == 2 && p.dw == 1 && p.dh == 1 && p.kh == p.kw &&
      p.ow <= 16 * kStride2MaxSteps) {
    if (p.kw == 3) return MaxPoolStride2Rows<3>(p, x, y, planes);
    if (p.kw == 2) return MaxPoolStride2Rows<2>(p, x, y, planes);
  }
#endif
  if (p.kw == 3 && p.dw == 1 && p.sw == 1) return PoolPlanes<kMax, 3, 1>(p, x, y, planes, row);
  if (p.kw == 3 && p.dw == 1 && p.sw == 2) return PoolPlanes<kMax, 3, 2>(p, x, y, planes, row);
  if (p.kw == 2 && p.dw == 1 && p.sw == 2) return PoolPlanes<kMax, 2, 2>(p, x, y, planes, row);
  PoolPlanes<kMax, 0, 0>(p, x, y, planes, row);
}

void Pool2dImpl(const Pool2d& p, const float* x, float* y, int64_t planes, float* scratch) {
  if (p.max) {
    Pool2dOf<true>(p, x, y, planes, scratch);
  } else {
    Pool2dOf<false>(p, x, y, planes, scratch);
  }
}

}  // namespace

extern const Kernels kKernels;
const Kernels kKernels = {
    .isa = ORRERY_VEC_ISA,
    .unary = UnaryImpl,
    .binary = BinaryImpl,
    .reduce_rows = ReduceRowsImpl,
    .reduce_cols = ReduceColsImpl,
    .softmax_rows = SoftmaxRowsImpl,
    .layer_norm_rows = LayerNormRowsImpl,
    .scale_shift = ScaleShiftImpl,
    .moments = MomentsImpl,
    .pool2d = Pool2dImpl,
};

}  // namespace orrery::ops::cpu::vec::ORRERY_VEC_NS
