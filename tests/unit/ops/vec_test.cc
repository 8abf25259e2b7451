// ops/cpu/vec against the C library, for every instruction set this CPU
// has: the math functions over wide ranges and at inf / NaN / extremes,
// and the row kernels against plain loops.
#include "ops/cpu/vec/vec.h"

#include <gtest/gtest.h>

#include "ops/conv_util.h"

#include <cmath>
#include <limits>
#include <numbers>
#include <vector>

namespace orrery::ops::cpu::vec {
namespace {

std::vector<const Kernels*> AllIsas() {
  std::vector<const Kernels*> out;
  for (Isa isa : {Isa::kPortable, Isa::kAvx2, Isa::kAvx512}) {
    if (const Kernels* k = ForIsa(isa)) out.push_back(k);
  }
  return out;
}

// Values spread over [lo, hi] plus special values; n not a multiple of any
// vector width so the tails run too.
std::vector<float> Inputs(float lo, float hi) {
  std::vector<float> v;
  const int n = 20011;
  for (int i = 0; i < n; ++i) v.push_back(lo + (hi - lo) * static_cast<float>(i) / (n - 1));
  const float inf = std::numeric_limits<float>::infinity();
  for (float s : {0.0f, -0.0f, inf, -inf, std::numeric_limits<float>::quiet_NaN(),
                  std::numeric_limits<float>::max(), -std::numeric_limits<float>::max(),
                  std::numeric_limits<float>::min(), std::numeric_limits<float>::denorm_min(),
                  1e-30f, -1e-30f, 1e-6f, -1e-6f}) {
    v.push_back(s);
  }
  return v;
}

// |got - want| <= rel * |want| + abs, with NaN / inf required exactly.
void ExpectClose(const char* what, const Kernels& k, float x, float got, double want_exact,
                 double rel, double abs) {
  // Compare with the float the exact value rounds to; results in the
  // subnormal range have fewer bits, so allow a few of their quanta.
  const double want = static_cast<float>(want_exact);
  abs += 4.0 * std::numeric_limits<float>::denorm_min();
  if (std::isnan(want)) {
    EXPECT_TRUE(std::isnan(got)) << what << "(" << x << ") " << IsaName(k.isa) << " got " << got;
    return;
  }
  if (std::isinf(want)) {
    EXPECT_EQ(got, want) << what << "(" << x << ") " << IsaName(k.isa);
    return;
  }
  EXPECT_LE(std::abs(got - want), rel * std::abs(want) + abs)
      << what << "(" << x << ") " << IsaName(k.isa) << " got " << got << " want " << want;
}

struct Case {
  Unary op;
  const char* name;
  float lo, hi;
  double rel, abs;
  double (*ref)(double);
};

double Sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double Gelu(double x) { return 0.5 * x * (1.0 + std::erf(x / std::numbers::sqrt2)); }
double Softplus(double x) { return x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x)); }
double Elu(double x) { return x < 0 ? std::expm1(x) : x; }
double Silu(double x) { return x * Sigmoid(x); }

TEST(VecTest, MathFunctionsMatchTheCLibrary) {
  const Case cases[] = {
      {Unary::kExp, "exp", -110, 90, 2e-6, 0, [](double x) { return std::exp(x); }},
      {Unary::kLog, "log", 0, 1e4, 2e-6, 0, [](double x) { return std::log(x); }},
      {Unary::kLog, "log", -1, 3, 2e-6, 1e-7, [](double x) { return std::log(x); }},
      {Unary::kTanh, "tanh", -12, 12, 2e-6, 0, [](double x) { return std::tanh(x); }},
      {Unary::kErf, "erf", -6, 6, 2e-6, 0, [](double x) { return std::erf(x); }},
      {Unary::kSigmoid, "sigmoid", -90, 90, 2e-6, 1e-38, Sigmoid},
      {Unary::kGelu, "gelu", -10, 10, 2e-6, 1e-7, Gelu},
      {Unary::kSoftplus, "softplus", -30, 30, 2e-6, 1e-7, Softplus},
      {Unary::kElu, "elu", -20, 5, 2e-6, 1e-8, Elu},
      {Unary::kSilu, "silu", -80, 80, 2e-6, 1e-30, Silu},
  };
  for (const Kernels* k : AllIsas()) {
    for (const Case& c : cases) {
      const std::vector<float> x = Inputs(c.lo, c.hi);
      std::vector<float> y(x.size());
      k->unary(c.op, 1.0f, 1.0f, x.data(), y.data(), static_cast<int64_t>(x.size()));
      for (size_t i = 0; i < x.size() && !::testing::Test::HasFailure(); ++i) {
        ExpectClose(c.name, *k, x[i], y[i], c.ref(static_cast<double>(x[i])), c.rel, c.abs);
      }
    }
  }
}

TEST(VecTest, SimpleUnariesAreExact) {
  const std::vector<float> x = Inputs(-10, 10);
  for (const Kernels* k : AllIsas()) {
    std::vector<float> y(x.size());
    const auto n = static_cast<int64_t>(x.size());
    k->unary(Unary::kRelu, 0, 0, x.data(), y.data(), n);
    for (size_t i = 0; i < x.size(); ++i) {
      if (std::isnan(x[i])) {
        EXPECT_TRUE(std::isnan(y[i]));
      } else {
        EXPECT_EQ(y[i], x[i] > 0 ? x[i] : 0.0f);
      }
    }
    k->unary(Unary::kClip, 0, 6, x.data(), y.data(), n);
    for (size_t i = 0; i < x.size(); ++i) {
      if (!std::isnan(x[i])) {
        EXPECT_EQ(y[i], std::min(std::max(x[i], 0.0f), 6.0f));
      }
    }
    k->unary(Unary::kSqrt, 0, 0, x.data(), y.data(), n);
    for (size_t i = 0; i < x.size(); ++i) {
      if (x[i] >= 0) {
        EXPECT_EQ(y[i], std::sqrt(x[i]));
      }
    }
  }
}

TEST(VecTest, BinaryBroadcastModes) {
  const int64_t n = 37;
  std::vector<float> a(n), b(n), y(n);
  for (int64_t i = 0; i < n; ++i) {
    a[static_cast<size_t>(i)] = static_cast<float>(i) - 10.5f;
    b[static_cast<size_t>(i)] = 0.25f * static_cast<float>(i) + 1.0f;
  }
  for (const Kernels* k : AllIsas()) {
    k->binary(Binary::kDiv, a.data(), 1, b.data(), 1, y.data(), n);
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(y[i], a[i] / b[i]);
    k->binary(Binary::kSub, a.data(), 1, b.data() + 3, 0, y.data(), n);
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(y[i], a[i] - b[3]);
    k->binary(Binary::kMax, a.data() + 20, 0, b.data(), 1, y.data(), n);
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(y[i], std::max(a[20], b[i]));
  }
}

// Max and min fold their vector lanes in a tree (HFold): whichever lane
// holds the extreme or a NaN, the row's result is that value.
TEST(VecTest, RowMaxAndMinFindTheExtremeOrNaNInEveryLane) {
  const int64_t n = 67;  // two 2-vector steps, one vector, a scalar tail on every ISA
  for (const Kernels* k : AllIsas()) {
    for (int64_t at = 0; at < n; ++at) {
      std::vector<float> x(n);
      for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>((i * 37) % 23) - 11.0f;
      float mx = 0, mn = 0;
      x[at] = 100.0f;
      k->reduce_rows(Reduce::kMax, x.data(), 1, n, &mx);
      EXPECT_EQ(mx, 100.0f) << IsaName(k->isa) << " max at " << at;
      x[at] = -100.0f;
      k->reduce_rows(Reduce::kMin, x.data(), 1, n, &mn);
      EXPECT_EQ(mn, -100.0f) << IsaName(k->isa) << " min at " << at;
      x[at] = std::numeric_limits<float>::quiet_NaN();
      k->reduce_rows(Reduce::kMax, x.data(), 1, n, &mx);
      k->reduce_rows(Reduce::kMin, x.data(), 1, n, &mn);
      EXPECT_TRUE(std::isnan(mx)) << IsaName(k->isa) << " NaN at " << at;
      EXPECT_TRUE(std::isnan(mn)) << IsaName(k->isa) << " NaN at " << at;
    }
  }
}

// Softmax rows of whole vectors (two rows interleaved, exp of x - max
// without the overflow side) on every instruction set: against a double
// loop, an odd row out of the pairs, -inf (a masked position) exactly 0,
// terms below e^-87 next to the max, and a NaN row next to a finite one.
TEST(VecTest, SoftmaxRowsOfWholeVectors) {
  const float inf = std::numeric_limits<float>::infinity();
  for (const Kernels* k : AllIsas()) {
    for (int64_t n : {16, 64, 128}) {
      const int64_t rows = 5;
      std::vector<float> x(static_cast<size_t>(rows * n));
      for (size_t i = 0; i < x.size(); ++i) {
        x[i] = std::sin(0.77f * static_cast<float>(i)) * 6.0f;
      }
      x[3] = -inf;
      x[static_cast<size_t>(n + 5)] = -95.0f;  // e^(x - max) < 2^-126
      x[static_cast<size_t>(3 * n + 1)] = std::numeric_limits<float>::quiet_NaN();
      std::vector<float> y(x.size());
      k->softmax_rows(x.data(), y.data(), rows, n, false);
      for (int64_t r : {0, 1, 2, 4}) {
        const float* xr = x.data() + r * n;
        double mx = -1e30, sum = 0, got = 0;
        for (int64_t i = 0; i < n; ++i) mx = std::max(mx, static_cast<double>(xr[i]));
        for (int64_t i = 0; i < n; ++i) sum += std::exp(xr[i] - mx);
        for (int64_t i = 0; i < n; ++i) {
          const float v = y[static_cast<size_t>(r * n + i)];
          EXPECT_NEAR(v, std::exp(xr[i] - mx) / sum, 1e-6)
              << IsaName(k->isa) << " n " << n << " row " << r << " at " << i;
          got += v;
        }
        EXPECT_NEAR(got, 1.0, 1e-5) << IsaName(k->isa) << " n " << n << " row " << r;
      }
      EXPECT_EQ(y[3], 0.0f) << IsaName(k->isa);
      for (int64_t i = 0; i < n; ++i) {
        EXPECT_TRUE(std::isnan(y[static_cast<size_t>(3 * n + i)])) << IsaName(k->isa) << " " << i;
      }
    }
  }
}

TEST(VecTest, SoftmaxLayerNormAndReductionsMatchLoops) {
  const int64_t rows = 3, n = 45;
  std::vector<float> x(rows * n);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(static_cast<float>(i)) * 5.0f;
  std::vector<float> scale(n), bias(n);
  for (int64_t i = 0; i < n; ++i) {
    scale[i] = 1.0f + 0.01f * i;
    bias[i] = -0.5f + 0.02f * i;
  }
  for (const Kernels* k : AllIsas()) {
    std::vector<float> y(x.size()), ly(x.size()), ln(x.size()), mean(rows), inv(rows), red(rows);
    k->softmax_rows(x.data(), y.data(), rows, n, false);
    k->softmax_rows(x.data(), ly.data(), rows, n, true);
    k->layer_norm_rows(x.data(), ln.data(), rows, n, scale.data(), bias.data(), 1e-5f,
                       mean.data(), inv.data());
    k->reduce_rows(Reduce::kSum, x.data(), rows, n, red.data());
    for (int64_t r = 0; r < rows; ++r) {
      const float* xr = x.data() + r * n;
      double mx = -1e30, sum = 0, s = 0, sq = 0;
      for (int64_t i = 0; i < n; ++i) mx = std::max(mx, static_cast<double>(xr[i]));
      for (int64_t i = 0; i < n; ++i) sum += std::exp(xr[i] - mx);
      for (int64_t i = 0; i < n; ++i) s += xr[i];
      const double m = s / n;
      for (int64_t i = 0; i < n; ++i) sq += (xr[i] - m) * (xr[i] - m);
      const double is = 1.0 / std::sqrt(sq / n + 1e-5);
      EXPECT_NEAR(red[r], s, 1e-4);
      EXPECT_NEAR(mean[r], m, 1e-5);
      EXPECT_NEAR(inv[r], is, 1e-5 * is);
      for (int64_t i = 0; i < n; ++i) {
        EXPECT_NEAR(y[r * n + i], std::exp(xr[i] - mx) / sum, 1e-6);
        EXPECT_NEAR(ly[r * n + i], xr[i] - mx - std::log(sum), 1e-5);
        EXPECT_NEAR(ln[r * n + i], (xr[i] - m) * is * scale[i] + bias[i], 1e-5);
      }
    }
  }
}

struct PoolCase {
  int64_t ih, iw, k, s, d, pad_lo, pad_hi;
};

// pool2d against a direct loop over the window, for strides 1..3,
// dilations, padding and count_include_pad, on every instruction set.
TEST(VecTest, Pool2dMatchesDirectLoops) {
  const PoolCase cases[] = {{7, 37, 3, 1, 1, 1, 1},  {8, 40, 3, 2, 1, 1, 1}, {9, 53, 2, 2, 1, 0, 0},
                            {6, 45, 3, 3, 1, 0, 2},  {11, 50, 3, 1, 2, 2, 2}, {5, 70, 5, 2, 1, 2, 3},
                            {4, 4, 3, 1, 1, 1, 1},   {3, 9, 1, 1, 1, 0, 0},
                            // The special-cased windows on small and odd planes (GoogLeNet's
                            // 7x7 / 14x14, ceil_mode as an extra end pad), 2x2 stride 2,
                            // windows that see no input at all.
                            {7, 7, 3, 1, 1, 1, 1},   {14, 14, 3, 1, 1, 1, 1}, {13, 13, 3, 2, 1, 0, 1},
                            {56, 56, 3, 2, 1, 0, 1}, {17, 33, 3, 2, 1, 1, 1}, {9, 31, 2, 2, 1, 0, 1},
                            {1, 1, 3, 1, 1, 1, 1},   {2, 3, 1, 1, 1, 1, 1},   {1, 17, 3, 2, 1, 1, 1},
                            // Flattened 3x3 stride-1 planes (Pool2dFlat): several chunks,
                            // one row, one column, sizes off the vector width.
                            {32, 32, 3, 1, 1, 1, 1}, {28, 28, 3, 1, 1, 1, 1}, {1, 5, 3, 1, 1, 1, 1},
                            {6, 1, 3, 1, 1, 1, 1},   {3, 5, 3, 1, 1, 1, 1},   {2, 2, 3, 1, 1, 1, 1},
                            // AVX-512 stride-2 max rows (several 16-output steps, the
                            // third vector carried, masks at both ends): SqueezeNet's
                            // 111 (no pad), ResNet's 112 pad 1, GoogLeNet's ceil_mode 112,
                            // 2x2 windows, rows past the kernel's step table.
                            {5, 111, 3, 2, 1, 0, 0}, {4, 112, 3, 2, 1, 1, 1}, {5, 112, 3, 2, 1, 0, 1},
                            {3, 66, 2, 2, 1, 0, 0},  {3, 67, 2, 2, 1, 0, 1},  {4, 47, 3, 2, 1, 1, 2},
                            {2, 1100, 3, 2, 1, 1, 1}};
  for (const Kernels* k : AllIsas()) {
    for (const PoolCase& c : cases) {
      for (int mode = 0; mode < 3; ++mode) {  // max, average, average with pads counted
        const int64_t eff = (c.k - 1) * c.d + 1;
        const int64_t oh = (c.ih + c.pad_lo + c.pad_hi - eff) / c.s + 1;
        const int64_t ow = (c.iw + c.pad_lo + c.pad_hi - eff) / c.s + 1;
        std::vector<int64_t> th, tw, ph, pw;
        auto table = [&](int64_t in, int64_t out, std::vector<int64_t>* taps,
                         std::vector<int64_t>* padded) {
          for (int64_t o = 0; o < out; ++o) {
            const IndexRange r = ValidTaps(o, in, c.k, c.s, c.d, c.pad_lo);
            taps->push_back(r.begin);
            taps->push_back(std::max(r.begin, r.end));
            padded->push_back(ValidTaps(o, in + c.pad_lo + c.pad_hi, c.k, c.s, c.d, 0).size());
          }
        };
        table(c.ih, oh, &th, &ph);
        table(c.iw, ow, &tw, &pw);
        std::vector<float> col_valid(static_cast<size_t>(Pool2dColumns(ow)), 1.0f);
        std::vector<float> col_padded = col_valid;
        for (int64_t o = 0; o < ow; ++o) {
          col_valid[static_cast<size_t>(o)] = static_cast<float>(tw[2 * o + 1] - tw[2 * o]);
          col_padded[static_cast<size_t>(o)] = static_cast<float>(pw[static_cast<size_t>(o)]);
        }
        const Pool2d p{.ih = c.ih, .iw = c.iw, .oh = oh, .ow = ow, .kh = c.k, .kw = c.k,
                       .sh = c.s, .sw = c.s, .dh = c.d, .dw = c.d, .ph = c.pad_lo,
                       .pw = c.pad_lo, .max = mode == 0, .count_include_pad = mode == 2,
                       .taps_h = th.data(), .padded_h = ph.data(), .col_valid = col_valid.data(),
                       .col_padded = col_padded.data()};
        std::vector<float> scratch(static_cast<size_t>(Pool2dScratchFloats(p)));
        const int64_t planes = 3;
        // Guards after y: pool2d writes only its planes' outputs.
        const size_t guard = 64;
        std::vector<float> x(static_cast<size_t>(planes * c.ih * c.iw));
        for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * static_cast<float>(i));
        std::vector<float> y(static_cast<size_t>(planes * oh * ow) + guard, -7.0f);
        k->pool2d(p, x.data(), y.data(), planes, scratch.data());
        for (size_t i = y.size() - guard; i < y.size(); ++i) ASSERT_EQ(y[i], -7.0f);
        for (int64_t pl = 0; pl < planes; ++pl) {
          for (int64_t a = 0; a < oh; ++a) {
            for (int64_t b = 0; b < ow; ++b) {
              float mx = std::numeric_limits<float>::lowest(), sum = 0;
              int64_t n = 0;
              for (int64_t u = 0; u < c.k; ++u) {
                for (int64_t v = 0; v < c.k; ++v) {
                  const int64_t r = a * c.s - c.pad_lo + u * c.d, q = b * c.s - c.pad_lo + v * c.d;
                  if (r < 0 || r >= c.ih || q < 0 || q >= c.iw) continue;
                  const float val = x[static_cast<size_t>((pl * c.ih + r) * c.iw + q)];
                  mx = std::max(mx, val);
                  sum += val;
                  ++n;
                }
              }
              const int64_t count = mode == 2 ? ph[static_cast<size_t>(a)] * pw[static_cast<size_t>(b)] : n;
              const float want = mode == 0 ? mx : (count == 0 ? 0.0f : sum / static_cast<float>(count));
              EXPECT_NEAR(y[static_cast<size_t>((pl * oh + a) * ow + b)], want, 1e-5f)
                  << IsaName(k->isa) << " mode " << mode << " case " << c.ih << "x" << c.iw
                  << " k" << c.k << " s" << c.s << " d" << c.d << " at " << a << "," << b;
            }
          }
        }
      }
    }
  }
}

// MaxPool's NaN rule on every instruction set: a NaN never replaces the
// running maximum, so a window of NaNs (and padding) gives lowest().
TEST(VecTest, Pool2dMaxIgnoresNaN) {
  const int64_t ih = 5, iw = 21;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> x(static_cast<size_t>(ih * iw));
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::cos(0.7f * static_cast<float>(i));
  for (int64_t r = 0; r < 2; ++r) {  // rows 0-1, columns 0-1: NaN
    for (int64_t q = 0; q < 2; ++q) x[static_cast<size_t>(r * iw + q)] = nan;
  }
  x[static_cast<size_t>(3 * iw + 10)] = nan;
  for (int64_t sw : {1, 2}) {
    const int64_t oh = ih, ow = (iw + 2 - 3) / sw + 1;
    std::vector<int64_t> th, ph(static_cast<size_t>(oh), 3);
    for (int64_t o = 0; o < oh; ++o) {
      const IndexRange r = ValidTaps(o, ih, 3, 1, 1, 1);
      th.push_back(r.begin);
      th.push_back(r.end);
    }
    std::vector<float> ones(static_cast<size_t>(Pool2dColumns(ow)), 1.0f);
    const Pool2d p{.ih = ih, .iw = iw, .oh = oh, .ow = ow, .kh = 3, .kw = 3, .sh = 1, .sw = sw,
                   .ph = 1, .pw = 1, .max = true, .taps_h = th.data(), .padded_h = ph.data(),
                   .col_valid = ones.data(), .col_padded = ones.data()};
    for (const Kernels* k : AllIsas()) {
      std::vector<float> scratch(static_cast<size_t>(Pool2dScratchFloats(p)));
      std::vector<float> y(static_cast<size_t>(oh * ow));
      k->pool2d(p, x.data(), y.data(), 1, scratch.data());
      for (int64_t a = 0; a < oh; ++a) {
        for (int64_t b = 0; b < ow; ++b) {
          float want = std::numeric_limits<float>::lowest();
          for (int64_t r = a - 1; r <= a + 1; ++r) {
            for (int64_t q = b * sw - 1; q <= b * sw + 1; ++q) {
              if (r < 0 || r >= ih || q < 0 || q >= iw) continue;
              const float v = x[static_cast<size_t>(r * iw + q)];
              if (v > want) want = v;
            }
          }
          EXPECT_EQ(y[static_cast<size_t>(a * ow + b)], want)
              << IsaName(k->isa) << " sw " << sw << " at " << a << "," << b;
        }
      }
      if (sw == 1) {
        EXPECT_EQ(y[0], std::numeric_limits<float>::lowest());  // only NaNs
      }
    }
  }
}

}  // namespace
}  // namespace orrery::ops::cpu::vec
