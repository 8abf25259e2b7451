// Conv, ConvTranspose and the shared window arithmetic (ops/conv_util.h).
// Expected values come from the ONNX backend test generators
// (onnx/backend/test/case/node/conv.py, convtranspose.py) or from the naive
// reference loops below, which follow the ONNX definitions literally.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "ops/conv_util.h"
#include "ops/cpu/gemm/sgemm.h"
#include "ops/registry.h"
#include "op_test_util.h"

namespace orrery::ops {
namespace {

using testing::ExpectNear;
using testing::F32;
using testing::RandomFloats;
using testing::RunOp;
using testing::Values;

// ---------------- conv_util: one axis ----------------

TEST(ConvUtilTest, FloorAndCeilDivide) {
  EXPECT_EQ(FloorDiv(7, 2), 3);
  EXPECT_EQ(FloorDiv(-7, 2), -4);
  EXPECT_EQ(FloorDiv(-6, 2), -3);
  EXPECT_EQ(CeilDiv(7, 2), 4);
  EXPECT_EQ(CeilDiv(-7, 2), -3);
  EXPECT_EQ(CeilDiv(6, 3), 2);
  EXPECT_EQ(CeilDiv(0, 5), 0);
}

TEST(ConvUtilTest, WindowOutputSize) {
  EXPECT_EQ(WindowOutputSize(5, 3, 1, 1, 1, 1), 5);
  EXPECT_EQ(WindowOutputSize(7, 3, 2, 1, 1, 1), 4);
  EXPECT_EQ(WindowOutputSize(5, 3, 2, 1, 0, 0), 2);
  EXPECT_EQ(WindowOutputSize(4, 2, 1, 2, 0, 0), 2);  // dilated extent 3
  EXPECT_EQ(WindowOutputSize(4, 3, 2, 1, 0, 0, /*ceil_mode=*/true), 2);
  EXPECT_EQ(WindowOutputSize(4, 3, 2, 1, 0, 0, /*ceil_mode=*/false), 1);
  // ceil_mode never starts a window inside the end padding: in 5, k 2, s 2,
  // pads 1/1 would give ceil(5/2)+1 = 4, but the 4th window starts at 6 >= 5+1.
  EXPECT_EQ(WindowOutputSize(5, 2, 2, 1, 1, 1, true), 3);
  EXPECT_EQ(WindowOutputSize(2, 3, 1, 1, 0, 0), 0);  // kernel larger than input
  EXPECT_EQ(WindowOutputSize(2, 3, 1, 1, 1, 0), 1);
}

TEST(ConvUtilTest, SamePads) {
  // in 5, k 3, s 2 -> out 3, total pad 2 (conv.py test_conv_with_autopad_same).
  AxisPads p = SamePads(5, 3, 2, 1, /*upper=*/false);
  EXPECT_EQ(p.begin, 1);
  EXPECT_EQ(p.end, 1);
  // in 32, k 2, s 1 -> total 1: end for SAME_UPPER, begin for SAME_LOWER.
  p = SamePads(32, 2, 1, 1, true);
  EXPECT_EQ(p.begin, 0);
  EXPECT_EQ(p.end, 1);
  p = SamePads(32, 2, 1, 1, false);
  EXPECT_EQ(p.begin, 1);
  EXPECT_EQ(p.end, 0);
  // Stride larger than the kernel never needs negative padding.
  p = SamePads(6, 1, 3, 1, true);
  EXPECT_EQ(p.begin, 0);
  EXPECT_EQ(p.end, 0);
  // Dilation widens the kernel: k 3, d 2 -> extent 5, total 4.
  p = SamePads(10, 3, 1, 2, true);
  EXPECT_EQ(p.begin, 2);
  EXPECT_EQ(p.end, 2);
}

TEST(ConvUtilTest, TransposeOutputAndPads) {
  EXPECT_EQ(TransposeOutputSize(3, 3, 1, 1, 0, 0, 0), 5);
  EXPECT_EQ(TransposeOutputSize(3, 3, 3, 1, 1, 0, 0), 10);
  EXPECT_EQ(TransposeOutputSize(3, 3, 3, 1, 0, 1, 1), 7);
  // output_shape 10 from in 3, k 3, s 3: total -1 -> extra row at the end.
  AxisPads p = TransposePadsForOutput(3, 3, 3, 1, 0, 10, false);
  EXPECT_EQ(p.begin, 0);
  EXPECT_EQ(p.end, -1);
  // SAME_UPPER, in 3, s 2 -> out 6, total 1, odd element at the end.
  p = TransposePadsForOutput(3, 3, 2, 1, 0, 6, true);
  EXPECT_EQ(p.begin, 0);
  EXPECT_EQ(p.end, 1);
  p = TransposePadsForOutput(3, 3, 2, 1, 0, 6, false);
  EXPECT_EQ(p.begin, 1);
  EXPECT_EQ(p.end, 0);
}

// ValidTaps / ValidPositions against brute force over many small geometries.
TEST(ConvUtilTest, ValidRangesMatchBruteForce) {
  for (int64_t in = 1; in <= 6; ++in) {
    for (int64_t k = 1; k <= 4; ++k) {
      for (int64_t s = 1; s <= 3; ++s) {
        for (int64_t d = 1; d <= 3; ++d) {
          for (int64_t pb = -2; pb <= 3; ++pb) {
            const int64_t out = 7;
            for (int64_t o = 0; o < out; ++o) {
              int64_t first = -1, last = -1;
              for (int64_t t = 0; t < k; ++t) {
                const int64_t i = o * s - pb + t * d;
                if (i >= 0 && i < in) {
                  if (first < 0) first = t;
                  last = t;
                }
              }
              const IndexRange r = ValidTaps(o, in, k, s, d, pb);
              if (first < 0) {
                EXPECT_EQ(r.size(), 0) << in << " " << k << " " << s << " " << d << " " << pb;
              } else {
                EXPECT_EQ(r.begin, first);
                EXPECT_EQ(r.end, last + 1);
              }
            }
            for (int64_t t = 0; t < k; ++t) {
              int64_t first = -1, last = -1;
              for (int64_t o = 0; o < out; ++o) {
                const int64_t i = o * s - pb + t * d;
                if (i >= 0 && i < in) {
                  if (first < 0) first = o;
                  last = o;
                }
              }
              const IndexRange r = ValidPositions(t, in, out, s, d, pb);
              if (first < 0) {
                EXPECT_EQ(r.size(), 0);
              } else {
                EXPECT_EQ(r.begin, first);
                EXPECT_EQ(r.end, last + 1);
              }
            }
          }
        }
      }
    }
  }
}

TEST(ConvUtilTest, SplitIntoRuns) {
  const std::vector<int64_t> dims{2, 3, 4};
  const std::vector<GridRun> runs = SplitIntoRuns(dims, 6, 9);  // positions 6..14
  ASSERT_EQ(runs.size(), 3u);
  EXPECT_EQ(runs[0].outer, (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(runs[0].begin, 2);
  EXPECT_EQ(runs[0].end, 4);
  EXPECT_EQ(runs[0].offset, 0);
  EXPECT_EQ(runs[1].outer, (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(runs[1].offset, 2);
  EXPECT_EQ(runs[1].end - runs[1].begin, 4);
  EXPECT_EQ(runs[2].outer, (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(runs[2].begin, 0);
  EXPECT_EQ(runs[2].end, 3);
  EXPECT_EQ(runs[2].offset, 6);
}

TEST(ConvUtilTest, ReadWindowAttrsValidates) {
  const std::vector<int64_t> kernel{3, 3};
  Attributes a;
  auto w = ReadWindowAttrs("Conv", a, 2, {.weight_kernel = kernel});
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_EQ(w->strides, (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(w->pads, (std::vector<int64_t>{0, 0, 0, 0}));

  Attributes bad_stride;
  bad_stride.Set("strides", std::vector<int64_t>{1, 0});
  EXPECT_EQ(ReadWindowAttrs("Conv", bad_stride, 2, {.weight_kernel = kernel}).status().code(),
            StatusCode::kInvalidArgument);
  Attributes bad_len;
  bad_len.Set("pads", std::vector<int64_t>{1, 1});
  EXPECT_EQ(ReadWindowAttrs("Conv", bad_len, 2, {.weight_kernel = kernel}).status().code(),
            StatusCode::kInvalidArgument);
  Attributes mismatch;
  mismatch.Set("kernel_shape", std::vector<int64_t>{3, 5});
  EXPECT_EQ(ReadWindowAttrs("Conv", mismatch, 2, {.weight_kernel = kernel}).status().code(),
            StatusCode::kInvalidArgument);
  Attributes no_kernel;
  EXPECT_EQ(ReadWindowAttrs("MaxPool", no_kernel, 2, {}).status().code(),
            StatusCode::kInvalidArgument);
  Attributes ceil;
  ceil.Set("kernel_shape", std::vector<int64_t>{2, 2});
  ceil.Set("ceil_mode", int64_t{1});
  Status st = ReadWindowAttrs("X", ceil, 2, {}).status();
  EXPECT_NE(st.message().find("unsupported"), std::string::npos);
  EXPECT_TRUE(ReadWindowAttrs("X", ceil, 2, {.allow_ceil_mode = true}).ok());
}

// ---------------- Naive references ----------------

struct ConvCase {
  Shape x = {};  // N, C, spatial...
  Shape w = {};  // M, C/group, kernel...
  int64_t group = 1;
  std::vector<int64_t> strides = {}, dilations = {}, pads = {};  // empty: defaults
  std::string auto_pad = {};
  bool bias = false;
};

int64_t Prod(const std::vector<int64_t>& v) {
  int64_t p = 1;
  for (int64_t d : v) p *= d;
  return p;
}

// Calls fn(coords) for every coordinate tuple of `dims` in row-major order.
template <typename Fn>
void ForEachIndex(const std::vector<int64_t>& dims, Fn&& fn) {
  std::vector<int64_t> idx(dims.size(), 0);
  if (Prod(dims) == 0) return;
  while (true) {
    fn(idx);
    size_t j = dims.size();
    while (j > 0) {
      --j;
      if (++idx[j] < dims[j]) break;
      idx[j] = 0;
      if (j == 0) return;
    }
    if (dims.empty()) return;
  }
}

int64_t Flat(const std::vector<int64_t>& idx, const std::vector<int64_t>& dims) {
  int64_t f = 0;
  for (size_t j = 0; j < dims.size(); ++j) f = f * dims[j] + idx[j];
  return f;
}

// Direct ONNX Conv definition with explicit begin pads and output dims.
std::vector<float> NaiveConv(const ConvCase& c, const std::vector<float>& x,
                             const std::vector<float>& w, const std::vector<float>& b,
                             const std::vector<int64_t>& pad_begin,
                             const std::vector<int64_t>& out_dims) {
  const size_t r = c.x.size() - 2;
  const std::vector<int64_t> in(c.x.begin() + 2, c.x.end());
  const std::vector<int64_t> k(c.w.begin() + 2, c.w.end());
  const int64_t n = c.x[0], ch = c.x[1], m = c.w[0], cg = c.w[1], mg = m / c.group;
  std::vector<float> y(static_cast<size_t>(n * m * Prod(out_dims)));
  std::vector<int64_t> i(r);
  for (int64_t in_n = 0; in_n < n; ++in_n) {
    for (int64_t om = 0; om < m; ++om) {
      const int64_t g = om / mg;
      ForEachIndex(out_dims, [&](const std::vector<int64_t>& o) {
        double acc = c.bias ? b[static_cast<size_t>(om)] : 0.0;
        for (int64_t ic = 0; ic < cg; ++ic) {
          ForEachIndex(k, [&](const std::vector<int64_t>& t) {
            for (size_t j = 0; j < r; ++j) {
              const int64_t s = c.strides.empty() ? 1 : c.strides[j];
              const int64_t d = c.dilations.empty() ? 1 : c.dilations[j];
              i[j] = o[j] * s - pad_begin[j] + t[j] * d;
              if (i[j] < 0 || i[j] >= in[j]) return;
            }
            const int64_t xc = g * cg + ic;
            acc += static_cast<double>(x[static_cast<size_t>((in_n * ch + xc) * Prod(in) + Flat(i, in))]) *
                   w[static_cast<size_t>((om * cg + ic) * Prod(k) + Flat(t, k))];
          });
        }
        y[static_cast<size_t>((in_n * m + om) * Prod(out_dims) + Flat(o, out_dims))] =
            static_cast<float>(acc);
      });
    }
  }
  return y;
}

Attributes ConvAttrs(const ConvCase& c) {
  Attributes a;
  if (c.group != 1) a.Set("group", c.group);
  if (!c.strides.empty()) a.Set("strides", c.strides);
  if (!c.dilations.empty()) a.Set("dilations", c.dilations);
  if (!c.pads.empty()) a.Set("pads", c.pads);
  if (!c.auto_pad.empty()) a.Set("auto_pad", c.auto_pad);
  return a;
}

// Runs Conv on random data and compares with NaiveConv.
void CheckConv(const ConvCase& c, uint32_t seed, float tol = 1e-4f) {
  const size_t r = c.x.size() - 2;
  Tensor x = F32(c.x, RandomFloats(NumElements(c.x), seed));
  Tensor w = F32(c.w, RandomFloats(NumElements(c.w), seed + 1));
  Tensor b = F32({c.w[0]}, RandomFloats(c.w[0], seed + 2));
  auto out = RunOp("Conv", {&x, &w, c.bias ? &b : nullptr}, ConvAttrs(c));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  // Expected geometry, computed independently of conv_util.
  std::vector<int64_t> pad_begin(r, 0), out_dims(r);
  for (size_t j = 0; j < r; ++j) {
    const int64_t in = c.x[j + 2], k = c.w[j + 2];
    const int64_t s = c.strides.empty() ? 1 : c.strides[j];
    const int64_t d = c.dilations.empty() ? 1 : c.dilations[j];
    const int64_t ek = (k - 1) * d + 1;
    if (c.auto_pad == "SAME_UPPER" || c.auto_pad == "SAME_LOWER") {
      out_dims[j] = (in + s - 1) / s;
      const int64_t total = std::max<int64_t>(0, (out_dims[j] - 1) * s + ek - in);
      pad_begin[j] = c.auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
    } else if (c.auto_pad == "VALID") {
      out_dims[j] = (in - ek) / s + 1;
    } else {
      const int64_t pb = c.pads.empty() ? 0 : c.pads[j];
      const int64_t pe = c.pads.empty() ? 0 : c.pads[j + r];
      pad_begin[j] = pb;
      out_dims[j] = (in + pb + pe - ek) / s + 1;
    }
  }
  Shape want_shape{c.x[0], c.w[0]};
  want_shape.insert(want_shape.end(), out_dims.begin(), out_dims.end());
  ASSERT_EQ((*out)[0].shape(), want_shape);
  const std::vector<float> want =
      NaiveConv(c, Values<float>(x), Values<float>(w), Values<float>(b), pad_begin, out_dims);
  ExpectNear(Values<float>((*out)[0]), want, tol);
}

// ---------------- Conv: ONNX backend cases ----------------

std::vector<float> Iota(int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<float>(i);
  return v;
}

TEST(ConvTest, OnnxBasicWithAndWithoutPadding) {
  Tensor x = F32({1, 1, 5, 5}, Iota(25));
  Tensor w = F32({1, 1, 3, 3}, std::vector<float>(9, 1.0f));
  Attributes pad;
  pad.Set("kernel_shape", std::vector<int64_t>{3, 3});
  pad.Set("pads", std::vector<int64_t>{1, 1, 1, 1});
  auto out = RunOp("Conv", {&x, &w}, pad);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].shape(), (Shape{1, 1, 5, 5}));
  ExpectNear(Values<float>((*out)[0]),
             {12, 21, 27, 33, 24, 33, 54, 63, 72, 51, 63, 99, 108, 117, 81,
              93, 144, 153, 162, 111, 72, 111, 117, 123, 84});
  Attributes nopad;
  nopad.Set("kernel_shape", std::vector<int64_t>{3, 3});
  nopad.Set("pads", std::vector<int64_t>{0, 0, 0, 0});
  out = RunOp("Conv", {&x, &w}, nopad);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ExpectNear(Values<float>((*out)[0]), {54, 63, 72, 99, 108, 117, 144, 153, 162});
}

TEST(ConvTest, OnnxStrides) {
  Tensor x = F32({1, 1, 7, 5}, Iota(35));
  Tensor w = F32({1, 1, 3, 3}, std::vector<float>(9, 1.0f));
  Attributes a;
  a.Set("kernel_shape", std::vector<int64_t>{3, 3});
  a.Set("strides", std::vector<int64_t>{2, 2});
  a.Set("pads", std::vector<int64_t>{1, 1, 1, 1});
  auto out = RunOp("Conv", {&x, &w}, a);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].shape(), (Shape{1, 1, 4, 3}));
  ExpectNear(Values<float>((*out)[0]), {12, 27, 24, 63, 108, 81, 123, 198, 141, 112, 177, 124});

  a.Set("pads", std::vector<int64_t>{0, 0, 0, 0});
  out = RunOp("Conv", {&x, &w}, a);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ExpectNear(Values<float>((*out)[0]), {54, 72, 144, 162, 234, 252});

  a.Set("pads", std::vector<int64_t>{1, 0, 1, 0});  // asymmetric: H only
  out = RunOp("Conv", {&x, &w}, a);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].shape(), (Shape{1, 1, 4, 2}));
  ExpectNear(Values<float>((*out)[0]), {21, 33, 99, 117, 189, 207, 171, 183});
}

TEST(ConvTest, OnnxAutoPadSameLower) {
  Tensor x = F32({1, 1, 5, 5}, Iota(25));
  Tensor w = F32({1, 1, 3, 3}, std::vector<float>(9, 1.0f));
  Attributes a;
  a.Set("auto_pad", std::string("SAME_LOWER"));
  a.Set("kernel_shape", std::vector<int64_t>{3, 3});
  a.Set("strides", std::vector<int64_t>{2, 2});
  auto out = RunOp("Conv", {&x, &w}, a);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].shape(), (Shape{1, 1, 3, 3}));
  ExpectNear(Values<float>((*out)[0]), {12, 27, 24, 63, 108, 81, 72, 117, 84});
}

// ---------------- Conv: against the naive reference ----------------

TEST(ConvTest, GeneralIm2ColPath) {
  CheckConv({.x = {2, 3, 7, 6}, .w = {4, 3, 3, 2}, .pads = {1, 0, 2, 1}, .bias = true}, 1);
  CheckConv({.x = {1, 4, 9, 9}, .w = {6, 4, 3, 3}, .strides = {2, 3}, .pads = {1, 1, 1, 1}}, 2);
  CheckConv({.x = {1, 2, 10, 8}, .w = {3, 2, 3, 3}, .dilations = {2, 3}, .pads = {2, 1, 0, 3}}, 3);
  CheckConv({.x = {1, 2, 11, 7}, .w = {2, 2, 2, 3}, .strides = {3, 2}, .dilations = {2, 2}}, 4);
  // Pads wider than the kernel: whole rows of zeros in im2col.
  CheckConv({.x = {1, 1, 3, 3}, .w = {1, 1, 2, 2}, .pads = {3, 3, 3, 3}, .bias = true}, 5);
}

TEST(ConvTest, Groups) {
  CheckConv({.x = {2, 6, 8, 8}, .w = {4, 3, 3, 3}, .group = 2, .pads = {1, 1, 1, 1}, .bias = true},
            10);
  CheckConv({.x = {1, 6, 7, 7}, .w = {9, 2, 3, 3}, .group = 3, .strides = {2, 2}}, 11);
  // Depthwise with a channel multiplier (not the direct loop).
  CheckConv({.x = {1, 3, 6, 6}, .w = {6, 1, 3, 3}, .group = 3, .pads = {1, 1, 1, 1}}, 12);
}

TEST(ConvTest, DepthwiseDirectLoop) {
  CheckConv({.x = {2, 5, 9, 8}, .w = {5, 1, 3, 3}, .group = 5, .pads = {1, 1, 1, 1}, .bias = true},
            20);
  CheckConv({.x = {1, 4, 12, 11}, .w = {4, 1, 5, 3}, .group = 4, .strides = {2, 3},
             .dilations = {2, 1}, .pads = {4, 0, 1, 2}},
            21);
  CheckConv({.x = {1, 3, 20}, .w = {3, 1, 5}, .group = 3, .strides = {2}, .pads = {2, 2}}, 22);
  CheckConv({.x = {1, 2, 7, 7}, .w = {2, 1, 3, 3}, .group = 2, .auto_pad = "SAME_UPPER"}, 23);
}

TEST(ConvTest, PointwiseGemmPath) {
  CheckConv({.x = {2, 8, 5, 7}, .w = {6, 8, 1, 1}, .bias = true}, 30);
  CheckConv({.x = {1, 8, 5, 7}, .w = {6, 4, 1, 1}, .group = 2}, 31);
  // 1x1 with stride goes through im2col.
  CheckConv({.x = {1, 3, 6, 6}, .w = {2, 3, 1, 1}, .strides = {2, 2}}, 32);
}

// Every micro-kernel ISA (the im2col panels, the depthwise rows and the
// epilogue are compiled per ISA) against the naive reference; on AVX-512
// with and without the in-place kernels (InPlaceConvKernels), whatever
// this CPU's default.
TEST(ConvTest, EveryGemmIsaMatchesReference) {
  using cpu::GemmIsa;
  struct Run {
    GemmIsa isa;
    bool in_place;
  };
  for (const Run run : {Run{GemmIsa::kPortable, true}, Run{GemmIsa::kAvx2, true},
                        Run{GemmIsa::kAvx512, true}, Run{GemmIsa::kAvx512, false}}) {
    const GemmIsa isa = run.isa;
    cpu::SetGemmIsaCapForTesting(isa);
    if (cpu::ActiveGemmIsa() != isa) continue;  // the CPU lacks it
    cpu::SetInPlaceConvKernelsForTesting(run.in_place);
    SCOPED_TRACE(std::string(cpu::GemmIsaName(isa)) + (run.in_place ? " in place" : " gemm"));
    uint32_t seed = 100;
    // im2col panels spanning several output rows (w_out 7) and wide rows.
    CheckConv({.x = {1, 5, 7, 7}, .w = {9, 5, 3, 3}, .pads = {1, 1, 1, 1}, .bias = true}, seed++);
    CheckConv({.x = {1, 3, 20, 61}, .w = {17, 3, 3, 3}, .pads = {1, 1, 1, 1}}, seed++);
    CheckConv({.x = {1, 3, 30, 29}, .w = {8, 3, 7, 7}, .strides = {2, 2}, .pads = {3, 3, 3, 3}},
              seed++);
    // Stride 2 along rows wide enough for the vectorised even-lane gather.
    CheckConv({.x = {1, 3, 9, 100}, .w = {5, 3, 3, 3}, .strides = {2, 2}, .pads = {1, 1, 1, 1}},
              seed++);
    CheckConv({.x = {1, 2, 5, 67}, .w = {3, 2, 1, 4}, .strides = {1, 2}}, seed++);
    // Gather-plan panels read as runs of evenly spaced inputs (AVX-512
    // VectorRuns): output rows a multiple of 16 wide (one run per vector),
    // 20 wide (a vector spans two rows), 10 wide (three: gathers), stride 1
    // into a smaller plane (step-1 runs), a strided 1x1 and a 7x7 stem.
    CheckConv({.x = {1, 3, 16, 64}, .w = {6, 3, 7, 7}, .strides = {2, 2}, .pads = {3, 3, 3, 3}},
              seed++);
    CheckConv({.x = {1, 3, 12, 40}, .w = {5, 3, 3, 3}, .strides = {2, 2}, .pads = {1, 1, 1, 1},
               .bias = true},
              seed++);
    CheckConv({.x = {1, 2, 12, 20}, .w = {3, 2, 3, 3}, .strides = {2, 2}, .pads = {1, 1, 1, 1}},
              seed++);
    CheckConv({.x = {1, 3, 10, 30}, .w = {4, 3, 3, 3}}, seed++);
    CheckConv({.x = {1, 8, 10, 36}, .w = {16, 8, 1, 1}, .strides = {2, 2}}, seed++);
    // Dilated, strided and unevenly padded runs (masked im2col tails).
    CheckConv({.x = {1, 3, 11, 40}, .w = {5, 3, 3, 3}, .strides = {2, 2}, .dilations = {2, 2},
               .pads = {2, 1, 1, 2}},
              seed++);
    CheckConv({.x = {1, 4, 9, 14}, .w = {6, 4, 3, 3}, .dilations = {1, 3}, .pads = {1, 3, 1, 0}},
              seed++);
    // Depthwise: 1, 2 and 3+ vectors per row, stride 1 and 2, 3x3 and 5x5,
    // and a row wider than the vectorised kernel takes (w_out > 128).
    for (int64_t w : {9, 23, 40, 57, 140, 300}) {
      for (int64_t stride : {1, 2}) {
        for (int64_t k : {3, 5}) {
          const int64_t pad = k / 2;
          CheckConv({.x = {1, 3, 6, w},
                     .w = {3, 1, k, k},
                     .group = 3,
                     .strides = {stride, stride},
                     .pads = {pad, pad, pad, pad},
                     .bias = true},
                    seed++);
        }
      }
    }
    // Small planes (<= 256 outputs, the flat AVX-512 kernel): consecutive
    // lanes (stride 1, w_in == w_out), gathers (stride 2 into <= 8 columns),
    // tails of 1 and 15 lanes, 1 to 16 vectors, dilation, uneven pads,
    // 1-D, and shapes the flat kernel declines (gathers on wide rows).
    const std::vector<ConvCase> flat = {
        {.x = {1, 4, 7, 7}, .w = {4, 1, 3, 3}, .group = 4, .pads = {1, 1, 1, 1}, .bias = true},
        {.x = {2, 3, 14, 14}, .w = {3, 1, 3, 3}, .group = 3, .pads = {1, 1, 1, 1}},
        {.x = {1, 3, 14, 14}, .w = {3, 1, 3, 3}, .group = 3, .strides = {2, 2},
         .pads = {1, 1, 1, 1}, .bias = true},
        {.x = {1, 2, 15, 13}, .w = {2, 1, 5, 5}, .group = 2, .strides = {2, 2},
         .pads = {2, 2, 2, 2}},
        {.x = {1, 2, 16, 16}, .w = {2, 1, 3, 3}, .group = 2, .pads = {1, 1, 1, 1}},
        {.x = {1, 2, 1, 1}, .w = {2, 1, 3, 3}, .group = 2, .pads = {1, 1, 1, 1}, .bias = true},
        {.x = {1, 3, 9, 9}, .w = {3, 1, 3, 3}, .group = 3, .dilations = {2, 2},
         .pads = {2, 2, 2, 2}},
        {.x = {1, 2, 6, 11}, .w = {2, 1, 3, 2}, .group = 2, .pads = {0, 1, 2, 0}},
        {.x = {1, 3, 5, 17}, .w = {3, 1, 3, 3}, .group = 3, .pads = {1, 1, 1, 1}},
        {.x = {1, 2, 40}, .w = {2, 1, 5}, .group = 2, .pads = {2, 2}},
        {.x = {1, 2, 12, 40}, .w = {2, 1, 3, 3}, .group = 2, .strides = {2, 2},
         .pads = {1, 1, 1, 1}},
    };
    for (const ConvCase& c : flat) CheckConv(c, seed++);
    // Stride 2, > 4 input channels, output rows 14-128 wide (AVX-512: the
    // output channels across the lanes, gemm/conv_channels.h): ResNet's
    // 56 -> 28 (tiles of 6, 6, 6, 6, 4 positions), a partial last block of
    // 64 channels (100 = 64 + 36: a partial vector) and of 2 (130), 5x5,
    // uneven pads, two images, 128 wide; 129 wide is declined; rows of 14,
    // 18 and 20 in groups of two (tiles across rows; 18: a last group of
    // one row); 13 wide is declined.
    const std::vector<ConvCase> across = {
        {.x = {1, 8, 56, 56}, .w = {64, 8, 3, 3}, .strides = {2, 2}, .pads = {1, 1, 1, 1}, .bias = true},
        {.x = {2, 6, 49, 50}, .w = {100, 6, 3, 3}, .strides = {2, 2}, .pads = {0, 1, 1, 0}, .bias = true},
        {.x = {1, 5, 9, 61}, .w = {130, 5, 3, 3}, .strides = {2, 2}, .pads = {1, 1, 1, 1}},
        {.x = {1, 5, 11, 60}, .w = {17, 5, 5, 5}, .strides = {2, 2}, .pads = {2, 2, 2, 2}},
        {.x = {1, 6, 5, 255}, .w = {16, 6, 3, 3}, .strides = {2, 2}, .pads = {1, 1, 1, 1}},
        {.x = {1, 6, 5, 257}, .w = {16, 6, 3, 3}, .strides = {2, 2}, .pads = {1, 1, 1, 1}},
        {.x = {1, 6, 7, 52}, .w = {24, 6, 3, 4}, .strides = {2, 2}, .pads = {0, 2, 1, 1}},
        {.x = {1, 10, 28, 28}, .w = {40, 10, 3, 3}, .strides = {2, 2}, .pads = {1, 1, 1, 1}, .bias = true},
        {.x = {1, 5, 9, 36}, .w = {8, 5, 3, 3}, .strides = {2, 2}, .pads = {1, 1, 1, 1}},
        {.x = {2, 7, 13, 40}, .w = {66, 7, 3, 3}, .strides = {2, 2}, .pads = {1, 0, 0, 1}},
        {.x = {1, 7, 13, 26}, .w = {20, 7, 3, 3}, .strides = {2, 2}, .pads = {1, 1, 1, 1}},
    };
    for (const ConvCase& c : across) CheckConv(c, seed++);
    // Pointwise, <= 64 deep and wide (AVX-512, one thread: the im2col-free
    // tile at any width), 400 and 300 positions.
    CheckConv({.x = {1, 40, 20, 20}, .w = {72, 40, 1, 1}, .bias = true}, seed++);
    CheckConv({.x = {2, 64, 15, 20}, .w = {100, 64, 1, 1}}, seed++);
    // Stride 2 along rows, 3-wide, left pad 1 (AVX-512: each input row split
    // into even / odd lanes once): MobileNet's 112 -> 56 and 14 -> 7 (both
    // images), an odd width whose last window reads the right padding, no
    // right padding, 128 outputs (8 vectors), stride 1 between rows, a
    // dilated 5-tall window, and the flat kernel's old gather shapes.
    const std::vector<ConvCase> split = {
        {.x = {1, 3, 6, 112}, .w = {3, 1, 3, 3}, .group = 3, .strides = {2, 2},
         .pads = {1, 1, 1, 1}, .bias = true},
        {.x = {2, 3, 14, 14}, .w = {3, 1, 3, 3}, .group = 3, .strides = {2, 2},
         .pads = {1, 1, 1, 1}},
        {.x = {1, 2, 7, 7}, .w = {2, 1, 3, 3}, .group = 2, .strides = {2, 2},
         .pads = {1, 1, 1, 1}, .bias = true},
        {.x = {1, 2, 8, 9}, .w = {2, 1, 3, 3}, .group = 2, .strides = {2, 2},
         .pads = {1, 1, 0, 0}},
        {.x = {1, 2, 5, 256}, .w = {2, 1, 3, 3}, .group = 2, .strides = {2, 2},
         .pads = {1, 1, 1, 1}},
        {.x = {1, 2, 6, 20}, .w = {2, 1, 3, 3}, .group = 2, .strides = {1, 2},
         .pads = {1, 1, 1, 1}},
        {.x = {1, 2, 11, 30}, .w = {2, 1, 5, 3}, .group = 2, .strides = {2, 2},
         .dilations = {2, 1}, .pads = {4, 1, 4, 1}, .bias = true},
    };
    for (const ConvCase& c : split) CheckConv(c, seed++);
    // Same-size 3x3 planes, stride 1, pad 1 (AVX-512: one masked load per
    // filter row and vector, neighbours by valignd, periodic column masks):
    // MobileNet's 112 / 56 / 28 / 14 / 7 planes, two images, widths of 1,
    // 15, 16, 17 (period 17) and 3, one row, one column, a plane shorter
    // than a vector, and widths whose period is over the kernel's cap
    // (300: 75 vectors) or just under it (1008: 63).
    const std::vector<ConvCase> same3x3 = {
        {.x = {1, 2, 112, 112}, .w = {2, 1, 3, 3}, .group = 2, .pads = {1, 1, 1, 1}, .bias = true},
        {.x = {2, 3, 56, 56}, .w = {3, 1, 3, 3}, .group = 3, .pads = {1, 1, 1, 1}},
        {.x = {1, 5, 28, 28}, .w = {5, 1, 3, 3}, .group = 5, .pads = {1, 1, 1, 1}, .bias = true},
        {.x = {2, 3, 14, 14}, .w = {3, 1, 3, 3}, .group = 3, .pads = {1, 1, 1, 1}},
        {.x = {1, 4, 7, 7}, .w = {4, 1, 3, 3}, .group = 4, .pads = {1, 1, 1, 1}, .bias = true},
        {.x = {1, 2, 9, 1}, .w = {2, 1, 3, 3}, .group = 2, .pads = {1, 1, 1, 1}},
        {.x = {1, 2, 1, 20}, .w = {2, 1, 3, 3}, .group = 2, .pads = {1, 1, 1, 1}, .bias = true},
        {.x = {1, 3, 11, 15}, .w = {3, 1, 3, 3}, .group = 3, .pads = {1, 1, 1, 1}},
        {.x = {1, 3, 6, 16}, .w = {3, 1, 3, 3}, .group = 3, .pads = {1, 1, 1, 1}},
        {.x = {1, 3, 13, 17}, .w = {3, 1, 3, 3}, .group = 3, .pads = {1, 1, 1, 1}, .bias = true},
        {.x = {1, 2, 2, 3}, .w = {2, 1, 3, 3}, .group = 2, .pads = {1, 1, 1, 1}},
        {.x = {1, 2, 3, 300}, .w = {2, 1, 3, 3}, .group = 2, .pads = {1, 1, 1, 1}},
        {.x = {1, 2, 3, 1008}, .w = {2, 1, 3, 3}, .group = 2, .pads = {1, 1, 1, 1}, .bias = true},
    };
    for (const ConvCase& c : same3x3) CheckConv(c, seed++);
    // Few input channels, 3-wide stride-2 left-pad-1 windows along rows
    // (AVX-512: the direct stem kernel, 16 channels x 16 columns at a
    // time): MobileNet's 3 -> 32 stem, two images with 17 channels (a
    // 1-channel last block), one input channel with a dilated 5-tall window
    // and row stride 1, four channels with no right / top padding and odd
    // widths (the last window's odd tap reads past the row: zero).
    const std::vector<ConvCase> stem = {
        {.x = {1, 3, 224, 224}, .w = {32, 3, 3, 3}, .strides = {2, 2}, .pads = {1, 1, 1, 1},
         .bias = true},
        {.x = {2, 3, 15, 33}, .w = {17, 3, 3, 3}, .strides = {2, 2}, .pads = {1, 1, 1, 1}},
        {.x = {1, 1, 10, 70}, .w = {16, 1, 5, 3}, .strides = {1, 2}, .dilations = {2, 1},
         .pads = {2, 1, 2, 1}, .bias = true},
        {.x = {1, 4, 9, 31}, .w = {48, 4, 3, 3}, .strides = {2, 2}, .pads = {0, 1, 1, 0}},
        {.x = {1, 2, 4, 5}, .w = {3, 2, 2, 3}, .strides = {3, 2}, .pads = {1, 1, 0, 1}},
        // Other windows at stride 2 (split even / odd rows, pairs of vectors
        // as 8 channels x 2, an odd last vector as 16 x 1): ResNet's and
        // GoogLeNet's 7x7 pad 3 stem, SqueezeNet's 3x3 pad 0 (111 columns),
        // rows over one chunk of 8 vectors (150 and 129 columns), 1 / 2 / 3
        // vectors, 27 and 20 channels (a partial second half, none), even
        // and 5-wide windows and pads from 0 to kw - 1.
        {.x = {1, 3, 224, 224}, .w = {64, 3, 7, 7}, .strides = {2, 2}, .pads = {3, 3, 3, 3},
         .bias = true},
        {.x = {1, 3, 23, 224}, .w = {64, 3, 3, 3}, .strides = {2, 2}, .bias = true},
        {.x = {1, 3, 9, 300}, .w = {27, 3, 7, 7}, .strides = {2, 2}, .pads = {3, 2, 3, 2}},
        {.x = {2, 2, 11, 257}, .w = {20, 2, 5, 5}, .strides = {2, 2}, .pads = {2, 4, 2, 0}},
        {.x = {1, 4, 8, 31}, .w = {9, 4, 4, 6}, .strides = {1, 2}, .pads = {1, 5, 2, 0}},
        {.x = {1, 1, 7, 64}, .w = {33, 1, 3, 2}, .strides = {2, 2}, .pads = {0, 1, 1, 1}},
        {.x = {1, 3, 6, 70}, .w = {16, 3, 1, 7}, .strides = {1, 2}, .pads = {0, 6, 0, 6}},
        {.x = {1, 2, 5, 9}, .w = {8, 2, 3, 1}, .strides = {2, 2}, .pads = {1, 0, 1, 0}},
    };
    for (const ConvCase& c : stem) CheckConv(c, seed++);
    // Depthwise rows several at a time (AVX-512 rows kernel: planes the
    // flat kernel declines, over 4096 outputs or w_out != w_in; 8 rows of 1
    // vector, 4 of 2, other widths 1): planes taller than a group with a
    // partial last group, top / bottom padding inside a group,
    // stride 1 and 2 (the split stride-2 path too), row strides 1..3,
    // dilated rows, 5-tall windows and odd channel counts.
    const std::vector<ConvCase> multirow = {
        {.x = {1, 3, 41, 110}, .w = {3, 1, 3, 3}, .group = 3, .pads = {1, 1, 1, 1}, .bias = true},
        {.x = {2, 5, 30, 30}, .w = {5, 1, 3, 3}, .group = 5, .strides = {2, 2},
         .pads = {1, 1, 1, 1}},
        {.x = {1, 3, 23, 41}, .w = {3, 1, 3, 3}, .group = 3, .pads = {1, 0, 1, 0}},
        {.x = {1, 2, 19, 56}, .w = {2, 1, 3, 3}, .group = 2, .pads = {1, 0, 1, 0}, .bias = true},
        {.x = {1, 3, 17, 77}, .w = {3, 1, 3, 3}, .group = 3, .strides = {3, 1},
         .pads = {2, 1, 0, 1}},
        {.x = {1, 2, 70, 70}, .w = {2, 1, 3, 3}, .group = 2, .pads = {1, 1, 1, 1}},
        {.x = {1, 3, 27, 112}, .w = {3, 1, 3, 3}, .group = 3, .strides = {2, 2},
         .pads = {1, 1, 1, 1}, .bias = true},
        {.x = {1, 3, 26, 33}, .w = {3, 1, 5, 3}, .group = 3, .dilations = {3, 1},
         .pads = {6, 0, 5, 0}},
        {.x = {1, 2, 41, 38}, .w = {2, 1, 5, 5}, .group = 2, .strides = {2, 2},
         .dilations = {2, 1}, .pads = {4, 2, 3, 2}},
        {.x = {1, 7, 43, 9}, .w = {7, 1, 3, 3}, .group = 7, .pads = {0, 0, 2, 0}},
        {.x = {1, 2, 12, 128}, .w = {2, 1, 3, 3}, .group = 2, .pads = {1, 0, 1, 0}, .bias = true},
    };
    for (const ConvCase& c : multirow) CheckConv(c, seed++);
    // Stride 1, output plane == input plane, >= 256 positions, <= 32
    // channels (the im2col-free AVX-512 tile): 3x3 / 5x5 / dilated / 1-D /
    // asymmetric pads, K over one 256-deep block (40 * 9), row tails of
    // 1..7 channels, a 16-column panel tail, groups and two images.
    const std::vector<ConvCase> direct = {
        {.x = {1, 40, 16, 16}, .w = {13, 40, 3, 3}, .pads = {1, 1, 1, 1}, .bias = true},
        {.x = {2, 6, 20, 13}, .w = {9, 6, 5, 5}, .pads = {2, 2, 2, 2}},
        {.x = {1, 5, 16, 17}, .w = {8, 5, 3, 3}, .dilations = {2, 2}, .pads = {2, 2, 2, 2}},
        {.x = {1, 4, 300}, .w = {7, 4, 3}, .pads = {1, 1}, .bias = true},
        {.x = {1, 3, 18, 19}, .w = {5, 3, 2, 4}, .pads = {1, 2, 0, 1}},
        {.x = {1, 8, 17, 16}, .w = {6, 4, 3, 3}, .group = 2, .pads = {1, 1, 1, 1}},
        {.x = {1, 2, 16, 16}, .w = {1, 2, 3, 3}, .auto_pad = "SAME_LOWER"},
    };
    for (const ConvCase& c : direct) CheckConv(c, seed++);
    // The same geometry with 33..192 channels and a depth of <= 1152 (one
    // K block): the tile on one thread (the test's), full-depth Sgemm
    // panels on two: 64 -> 64 (ResNet's 3x3), 130 channels (a 2-row tail),
    // 306 positions (a 16-column panel tail), 5x5 into 192, depth 1152
    // exactly, groups of 48.
    const std::vector<ConvCase> wide_tile = {
        {.x = {1, 64, 16, 16}, .w = {64, 64, 3, 3}, .pads = {1, 1, 1, 1}, .bias = true},
        {.x = {1, 96, 17, 18}, .w = {130, 96, 3, 3}, .pads = {1, 1, 1, 1}},
        {.x = {1, 16, 20, 20}, .w = {192, 16, 5, 5}, .pads = {2, 2, 2, 2}, .bias = true},
        {.x = {1, 128, 16, 16}, .w = {33, 128, 3, 3}, .pads = {1, 1, 1, 1}},
        {.x = {1, 80, 16, 16}, .w = {96, 40, 3, 3}, .group = 2, .pads = {1, 1, 1, 1}},
    };
    for (const ConvCase& c : wide_tile) CheckConv(c, seed++);
    // Same-size planes of 160..255 positions with 64..256 channels (the
    // tile, rows outer, on any thread count): 14x14 with 70 channels (a
    // 6-row tail) and with 256 channels 2304 deep (one block), 13x13, a
    // 12x14 5x5, groups of 64; 260 channels (on it at 14x14 with the tail
    // kernel, up to 512) and 2340 deep stay off it. A last panel of 1..4
    // positions goes to the tail kernel on AVX-512 (14x14: 4; 13x15 with
    // odd K: 3; 2x97: 2; 1-D 241: 1).
    const std::vector<ConvCase> small_plane = {
        {.x = {1, 20, 14, 14}, .w = {70, 20, 3, 3}, .pads = {1, 1, 1, 1}, .bias = true},
        {.x = {1, 21, 13, 15}, .w = {64, 21, 3, 3}, .pads = {1, 1, 1, 1}, .bias = true},
        {.x = {1, 16, 2, 97}, .w = {72, 16, 3, 3}, .pads = {1, 1, 1, 1}},
        {.x = {1, 24, 241}, .w = {80, 24, 3}, .pads = {1, 1}, .bias = true},
        {.x = {1, 256, 14, 14}, .w = {64, 256, 3, 3}, .pads = {1, 1, 1, 1}},
        {.x = {1, 16, 13, 13}, .w = {64, 16, 3, 3}, .pads = {1, 1, 1, 1}, .bias = true},
        {.x = {1, 8, 12, 14}, .w = {100, 8, 5, 5}, .pads = {2, 2, 2, 2}},
        {.x = {1, 16, 14, 14}, .w = {128, 8, 3, 3}, .group = 2, .pads = {1, 1, 1, 1}},
        {.x = {1, 4, 14, 14}, .w = {260, 4, 3, 3}, .pads = {1, 1, 1, 1}},
        {.x = {1, 4, 13, 13}, .w = {260, 4, 3, 3}, .pads = {1, 1, 1, 1}},
        {.x = {1, 24, 14, 14}, .w = {512, 24, 3, 3}, .pads = {1, 1, 1, 1}, .bias = true},
        {.x = {1, 260, 14, 14}, .w = {64, 260, 3, 3}, .pads = {1, 1, 1, 1}, .bias = true},
    };
    // (Sums of 2304+ products of magnitude ~1 reach ~40: float rounding
    // alone exceeds an absolute 1e-4 there.)
    for (const ConvCase& c : small_plane) {
      CheckConv(c, seed++, NumElements(c.w) / c.w[0] > 2000 ? 1e-3f : 1e-4f);
    }
    // Pointwise layers through Sgemm whose last panel holds 1..4 positions
    // (AVX-512: those by the tail kernel): 14x14 (4), odd K, 7x7 (1), 10x10
    // (100 = 2 x 48 + 4) with 70 channels (a 6-row panel), two images.
    const std::vector<ConvCase> pointwise_tail = {
        {.x = {1, 24, 14, 14}, .w = {40, 24, 1, 1}, .bias = true},
        {.x = {1, 33, 14, 14}, .w = {96, 33, 1, 1}},
        {.x = {1, 20, 7, 7}, .w = {40, 20, 1, 1}, .bias = true},
        {.x = {2, 30, 10, 10}, .w = {70, 30, 1, 1}, .bias = true},
    };
    for (const ConvCase& c : pointwise_tail) CheckConv(c, seed++);
    // The same through Sgemm over panels: 3x3 stride 2 to 28 x 7 (196
    // positions; gathers; rows under 14 wide, so not the channels kernel),
    // 1x1 stride 2 to 14x14 (the even-even parity plane), odd K to 10x10,
    // 256 channels (formerly the transposed GEMM's), two images.
    const std::vector<ConvCase> panel_tail = {
        {.x = {1, 16, 56, 14}, .w = {40, 16, 3, 3}, .strides = {2, 2}, .pads = {1, 1, 1, 1},
         .bias = true},
        {.x = {1, 24, 28, 28}, .w = {48, 24, 1, 1}, .strides = {2, 2}},
        {.x = {2, 7, 20, 20}, .w = {20, 7, 3, 3}, .strides = {2, 2}, .pads = {1, 1, 1, 1}},
        {.x = {1, 32, 56, 14}, .w = {256, 32, 3, 3}, .strides = {2, 2}, .pads = {1, 1, 1, 1},
         .bias = true},
    };
    for (const ConvCase& c : panel_tail) CheckConv(c, seed++);
    // The same geometry with more channels (AVX-512: Sgemm over masked-load
    // panels; from 256 positions on, on one thread, the tile above unless
    // over 192 channels or 1152 deep): 1, 7, 49, 100, 256 and 260 positions
    // (panel tails of 1..48 columns, 16 / 32 / 48 wide), odd K, K over two
    // 256-deep blocks, rows not a multiple of 8, dilation, 5x5, 1-D, groups,
    // two images; 193 and 200 channels (full-depth panels, K 90 / 216), 264
    // (over one left block: K blocks) and 1170 deep (K blocks).
    const std::vector<ConvCase> panels = {
        {.x = {1, 7, 1, 1}, .w = {40, 7, 3, 3}, .pads = {1, 1, 1, 1}, .bias = true},
        {.x = {1, 5, 1, 7}, .w = {33, 5, 3, 3}, .pads = {1, 1, 1, 1}},
        {.x = {1, 9, 7, 7}, .w = {41, 9, 3, 3}, .pads = {1, 1, 1, 1}, .bias = true},
        {.x = {1, 30, 16, 16}, .w = {37, 30, 3, 3}, .pads = {1, 1, 1, 1}},
        {.x = {2, 6, 20, 13}, .w = {35, 6, 5, 5}, .pads = {2, 2, 2, 2}, .bias = true},
        {.x = {1, 5, 16, 17}, .w = {34, 5, 3, 3}, .dilations = {2, 2}, .pads = {2, 2, 2, 2}},
        {.x = {1, 4, 100}, .w = {36, 4, 3}, .pads = {1, 1}},
        {.x = {1, 8, 9, 9}, .w = {68, 4, 3, 3}, .group = 2, .pads = {1, 1, 1, 1}},
        {.x = {1, 10, 16, 17}, .w = {193, 10, 3, 3}, .pads = {1, 1, 1, 1}, .bias = true},
        {.x = {1, 24, 16, 16}, .w = {200, 24, 3, 3}, .pads = {1, 1, 1, 1}},
        {.x = {1, 20, 16, 16}, .w = {264, 20, 3, 3}, .pads = {1, 1, 1, 1}},
        {.x = {1, 130, 16, 16}, .w = {40, 130, 3, 3}, .pads = {1, 1, 1, 1}, .bias = true},
    };
    for (const ConvCase& c : panels) CheckConv(c, seed++);
    // The same geometry with few positions and >= 64 channels (the
    // transposed GEMM over masked-load left panels): 1, 7, 49, 63 and 64
    // positions (8-row panels at every lane offset of a 48-column mask
    // panel, short last panels), odd K, channels not a multiple of 8, 5x5,
    // dilation, 1-D, groups, two images.
    const std::vector<ConvCase> rows = {
        {.x = {1, 7, 1, 1}, .w = {65, 7, 3, 3}, .pads = {1, 1, 1, 1}, .bias = true},
        {.x = {1, 5, 1, 7}, .w = {70, 5, 3, 3}, .pads = {1, 1, 1, 1}},
        {.x = {2, 9, 7, 7}, .w = {67, 9, 3, 3}, .pads = {1, 1, 1, 1}, .bias = true},
        {.x = {1, 31, 7, 9}, .w = {64, 31, 3, 3}, .pads = {1, 1, 1, 1}},
        {.x = {1, 6, 8, 8}, .w = {100, 6, 5, 5}, .pads = {2, 2, 2, 2}, .bias = true},
        {.x = {1, 5, 7, 8}, .w = {66, 5, 3, 3}, .dilations = {2, 2}, .pads = {2, 2, 2, 2}},
        {.x = {1, 4, 30}, .w = {72, 4, 3}, .pads = {1, 1}},
        {.x = {1, 8, 7, 7}, .w = {136, 4, 3, 3}, .group = 2, .pads = {1, 1, 1, 1}},
        // Up to 196 positions without a residual: 14x14 (two images; now
        // the small-plane tile on AVX-512), 13x11, and a stride-2 layer
        // down to 14x14 (on AVX-512 Sgemm and the tail kernel instead).
        {.x = {2, 9, 14, 14}, .w = {66, 9, 3, 3}, .pads = {1, 1, 1, 1}, .bias = true},
        {.x = {1, 5, 13, 11}, .w = {64, 5, 3, 3}, .pads = {1, 1, 1, 1}},
        {.x = {1, 6, 28, 27}, .w = {70, 6, 3, 3}, .strides = {2, 2}, .pads = {1, 1, 1, 1}},
    };
    for (const ConvCase& c : rows) CheckConv(c, seed++);
    // Other geometries (AVX-512: masked gathers, right and transposed left
    // panels): stride 2 to 1, 7 and 49 positions, 7x7 stride 2 pad 3, 1x1
    // stride 2, a smaller output at stride 1 (no padding), strided dilated
    // with uneven pads, 1-D, odd K, channels not a multiple of 8.
    const std::vector<ConvCase> gathers = {
        {.x = {1, 7, 2, 2}, .w = {41, 7, 3, 3}, .strides = {2, 2}, .pads = {1, 1, 1, 1}},
        {.x = {1, 5, 2, 13}, .w = {70, 5, 3, 3}, .strides = {2, 2}, .pads = {1, 1, 1, 1},
         .bias = true},
        {.x = {2, 9, 14, 14}, .w = {67, 9, 3, 3}, .strides = {2, 2}, .pads = {1, 1, 1, 1}},
        {.x = {1, 3, 40, 37}, .w = {19, 3, 7, 7}, .strides = {2, 2}, .pads = {3, 3, 3, 3},
         .bias = true},
        {.x = {1, 33, 27, 28}, .w = {35, 33, 1, 1}, .strides = {2, 2}},
        {.x = {1, 33, 14, 14}, .w = {96, 33, 1, 1}, .strides = {2, 2}},
        {.x = {1, 6, 21, 19}, .w = {37, 6, 3, 3}},
        {.x = {1, 4, 23, 22}, .w = {33, 4, 3, 3}, .strides = {2, 3}, .dilations = {2, 2},
         .pads = {2, 0, 1, 3}},
        {.x = {1, 4, 101}, .w = {36, 4, 5}, .strides = {2}, .pads = {2, 2}},
        // Output rows of 32 and 24 (AVX2: whole 8-lane row segments read by
        // two loads at stride 2, by one at stride 1, masked at the edges;
        // the last column reads the input row's last element).
        {.x = {1, 3, 12, 64}, .w = {34, 3, 3, 3}, .strides = {2, 2}, .pads = {1, 1, 1, 1},
         .bias = true},
        {.x = {2, 5, 9, 49}, .w = {33, 5, 3, 3}, .strides = {2, 2}, .pads = {1, 1, 1, 1}},
        {.x = {1, 4, 6, 26}, .w = {35, 4, 3, 3}},
    };
    for (const ConvCase& c : gathers) CheckConv(c, seed++);
    CheckConv({.x = {2, 16, 9, 33}, .w = {24, 16, 1, 1}, .bias = true}, seed++);
    // Pointwise with <= 16 channels and depth <= 512 on one thread (AVX-512:
    // the im2col-free tile with one tap): 8 / 16 rows and odd channel counts,
    // depths 1, 7, 9, 32, 64, 65, 300 (two K blocks) and 512, 256 and 300
    // positions (16- and 32-wide last panels), 1-D, groups, two images; and
    // 513 deep (Sgemm again).
    const std::vector<ConvCase> pointwise = {
        {.x = {1, 32, 16, 16}, .w = {16, 32, 1, 1}, .bias = true},
        {.x = {2, 7, 15, 20}, .w = {5, 7, 1, 1}},
        {.x = {1, 64, 10, 30}, .w = {13, 64, 1, 1}, .bias = true},
        {.x = {1, 1, 20, 13}, .w = {8, 1, 1, 1}},
        {.x = {1, 9, 290}, .w = {11, 9, 1}},
        {.x = {1, 12, 17, 16}, .w = {6, 6, 1, 1}, .group = 2, .bias = true},
        {.x = {1, 65, 16, 16}, .w = {16, 65, 1, 1}},
        {.x = {1, 300, 17, 16}, .w = {16, 300, 1, 1}, .bias = true},
        {.x = {1, 512, 16, 18}, .w = {9, 512, 1, 1}},
        {.x = {1, 513, 16, 16}, .w = {16, 513, 1, 1}},
    };
    for (const ConvCase& c : pointwise) CheckConv(c, seed++);
    // 7x7 / 1x7 / 7x9 planes: the transposed GEMM in 7-row panels (1x1 and
    // 3x3; masked, gathered and raw transposed left panels, a 8-position
    // panel straddling two 48-lane mask panels), a 5x5 in 8-row panels.
    CheckConv({.x = {1, 40, 7, 7}, .w = {64, 40, 1, 1}, .bias = true}, seed++);
    CheckConv({.x = {2, 12, 7, 9}, .w = {70, 12, 3, 3}, .pads = {1, 1, 1, 1}}, seed++);
    CheckConv({.x = {1, 6, 13, 13}, .w = {66, 6, 3, 3}, .strides = {2, 2}, .pads = {1, 1, 1, 1},
               .bias = true},
              seed++);
    CheckConv({.x = {1, 8, 7, 7}, .w = {64, 8, 5, 5}, .pads = {2, 2, 2, 2}}, seed++);
    // Few positions, many channels: the transposed GEMM (3x3, 1x1, groups).
    CheckConv({.x = {2, 16, 7, 7}, .w = {72, 16, 3, 3}, .pads = {1, 1, 1, 1}, .bias = true},
              seed++);
    CheckConv({.x = {1, 40, 5, 6}, .w = {64, 40, 1, 1}, .bias = true}, seed++);
    // Deep pointwise layers up to 196 positions without a residual too
    // (14x14 and 14x13, channels not a multiple of 16, two K blocks).
    CheckConv({.x = {2, 256, 14, 14}, .w = {72, 256, 1, 1}, .bias = true}, seed++);
    CheckConv({.x = {1, 300, 14, 13}, .w = {65, 300, 1, 1}}, seed++);
    CheckConv({.x = {1, 8, 9, 9}, .w = {128, 4, 3, 3}, .group = 2, .strides = {2, 2}}, seed++);
  }
  cpu::SetGemmIsaCapForTesting(GemmIsa::kAvx512);
  cpu::SetInPlaceConvKernelsForTesting(std::nullopt);
}

// 3x3 stride-1 layers with >= 32 channels on planes >= 13 wide: Winograd's
// F(2x2, 3x3) when AVX-512 or AVX2 is active, F(4x4, 3x3) on planes >= 27
// wide (>= 16 input channels) (gemm/conv_winograd.h; its internals on
// every ISA in conv_winograd_test.cc). Odd planes (partial
// tiles), two images, chunks of 64 + 6 channels, no / uneven / automatic
// padding. F(4x4, 3x3) sums less exactly: up to 1.5e-4 from the reference
// on these outputs of magnitude ~5, where F(2x2, 3x3) stays within 1e-4.
TEST(ConvTest, WinogradMatchesReference) {
  using cpu::GemmIsa;
  int ran = 0;
  for (const GemmIsa isa : {GemmIsa::kAvx2, GemmIsa::kAvx512}) {
    cpu::SetGemmIsaCapForTesting(isa);
    if (cpu::ActiveGemmIsa() != isa) continue;  // the CPU lacks it
    SCOPED_TRACE(cpu::GemmIsaName(isa));
    ++ran;
    cpu::SetWinogradConvsForTesting(true);
    const float wide_tol = 3e-4f;
    uint32_t seed = 300;
    CheckConv({.x = {1, 32, 28, 28}, .w = {32, 32, 3, 3}, .pads = {1, 1, 1, 1}, .bias = true}, seed++, wide_tol);
    CheckConv({.x = {2, 33, 29, 27}, .w = {70, 33, 3, 3}, .pads = {1, 1, 1, 1}, .bias = true}, seed++, wide_tol);
    CheckConv({.x = {1, 32, 30, 31}, .w = {40, 32, 3, 3}}, seed++, wide_tol);
    CheckConv({.x = {1, 32, 28, 30}, .w = {36, 32, 3, 3}, .pads = {0, 1, 1, 0}}, seed++, wide_tol);
    CheckConv({.x = {1, 40, 27, 28}, .w = {32, 40, 3, 3}, .auto_pad = "SAME_UPPER"}, seed++, wide_tol);
    // 16 input channels (55x55, SqueezeNet's 16 -> 64): F(4x4, 3x3).
    CheckConv({.x = {1, 16, 55, 55}, .w = {64, 16, 3, 3}, .pads = {1, 1, 1, 1}, .bias = true}, seed++, wide_tol);
    // 14x14 and 13x13: 49 tiles, the last by the GEMM tail kernel (AVX-512).
    CheckConv({.x = {1, 64, 14, 14}, .w = {72, 64, 3, 3}, .pads = {1, 1, 1, 1}, .bias = true}, seed++);
    CheckConv({.x = {1, 48, 13, 13}, .w = {64, 48, 3, 3}, .pads = {1, 1, 1, 1}}, seed++);
  }
  cpu::SetGemmIsaCapForTesting(GemmIsa::kAvx512);
  cpu::SetWinogradConvsForTesting(std::nullopt);
  if (ran == 0) GTEST_SKIP() << "no AVX2 on this CPU: Conv takes no Winograd";
}

TEST(ConvTest, OneAndThreeDimensional) {
  CheckConv({.x = {2, 3, 17}, .w = {4, 3, 4}, .strides = {2}, .dilations = {2}, .pads = {3, 1},
             .bias = true},
            40);
  CheckConv({.x = {1, 2, 5, 6, 4}, .w = {3, 2, 3, 2, 3}, .strides = {1, 2, 1},
             .pads = {1, 0, 1, 1, 1, 0}, .bias = true},
            41);
  CheckConv({.x = {1, 4, 6, 5, 5}, .w = {4, 2, 2, 3, 2}, .group = 2, .dilations = {2, 1, 2},
             .auto_pad = "SAME_LOWER"},
            42);
}

TEST(ConvTest, AutoPadModes) {
  for (const char* mode : {"SAME_UPPER", "SAME_LOWER", "VALID", "NOTSET"}) {
    SCOPED_TRACE(mode);
    CheckConv({.x = {1, 2, 8, 7}, .w = {3, 2, 4, 3}, .strides = {3, 2}, .auto_pad = mode}, 50);
    CheckConv({.x = {1, 2, 9, 6}, .w = {2, 2, 3, 2}, .dilations = {2, 3}, .auto_pad = mode}, 51);
  }
}

// Inputs whose im2col buffer exceeds the 64 MB scratch bound: the output grid
// is split into tiles, mid-row.
TEST(ConvTest, TiledIm2Col) {
  // kdim = 256 * 9 = 2304 floats per column -> 7281 columns per tile, 10000 total.
  // Sums of thousands of terms: float accumulation-order tolerance.
  CheckConv({.x = {1, 256, 102, 102}, .w = {2, 256, 3, 3}, .bias = true}, 60, 1e-3f);
  // 1-D, kdim = 1024 * 17 -> tiles of 963 positions along a single row.
  CheckConv({.x = {1, 1024, 1016}, .w = {1, 1024, 17}, .pads = {4, 4}}, 61, 2e-3f);
}

TEST(ConvTest, BiasOnlyWhenNoInputChannels) {
  Tensor x(DType::kFloat32, {1, 0, 3, 3});
  Tensor w(DType::kFloat32, {2, 0, 2, 2});
  Tensor b = F32({2}, {1.5f, -2.0f});
  auto out = RunOp("Conv", {&x, &w, &b});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].shape(), (Shape{1, 2, 2, 2}));
  ExpectNear(Values<float>((*out)[0]), {1.5f, 1.5f, 1.5f, 1.5f, -2, -2, -2, -2});
}

TEST(ConvTest, EmptySpatialInputWithPaddingGivesBias) {
  Tensor x(DType::kFloat32, {1, 1, 0, 2});
  Tensor w = F32({1, 1, 1, 1}, {3.0f});
  Tensor b = F32({1}, {0.5f});
  Attributes a;
  a.Set("pads", std::vector<int64_t>{1, 0, 1, 0});
  auto out = RunOp("Conv", {&x, &w, &b}, a);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].shape(), (Shape{1, 1, 2, 2}));
  ExpectNear(Values<float>((*out)[0]), {0.5f, 0.5f, 0.5f, 0.5f});
}

// ---------------- Conv: hostile inputs ----------------

Status ConvStatus(const Shape& xs, const Shape& ws, const Attributes& a,
                  const Shape* bs = nullptr) {
  Tensor x(DType::kFloat32, xs);
  Tensor w(DType::kFloat32, ws);
  Tensor b = bs ? Tensor(DType::kFloat32, *bs) : Tensor();
  return RunOp("Conv", {&x, &w, bs ? &b : nullptr}, a).status();
}

TEST(ConvTest, RejectsHostileAttributesAndShapes) {
  const Attributes none;
  // Kernel larger than the padded input.
  EXPECT_EQ(ConvStatus({1, 1, 2, 2}, {1, 1, 3, 3}, none).code(), StatusCode::kInvalidArgument);
  Attributes zero_stride;
  zero_stride.Set("strides", std::vector<int64_t>{0, 1});
  EXPECT_EQ(ConvStatus({1, 1, 4, 4}, {1, 1, 2, 2}, zero_stride).code(),
            StatusCode::kInvalidArgument);
  Attributes neg_dil;
  neg_dil.Set("dilations", std::vector<int64_t>{1, -2});
  EXPECT_EQ(ConvStatus({1, 1, 4, 4}, {1, 1, 2, 2}, neg_dil).code(), StatusCode::kInvalidArgument);
  Attributes neg_pad;
  neg_pad.Set("pads", std::vector<int64_t>{0, -1, 0, 0});
  EXPECT_EQ(ConvStatus({1, 1, 4, 4}, {1, 1, 2, 2}, neg_pad).code(), StatusCode::kInvalidArgument);
  Attributes huge_pad;
  huge_pad.Set("pads", std::vector<int64_t>{0, 0, int64_t{1} << 40, 0});
  EXPECT_EQ(ConvStatus({1, 1, 4, 4}, {1, 1, 2, 2}, huge_pad).code(),
            StatusCode::kInvalidArgument);
  Attributes group3;
  group3.Set("group", int64_t{3});
  EXPECT_EQ(ConvStatus({1, 4, 4, 4}, {3, 1, 2, 2}, group3).code(), StatusCode::kInvalidArgument);
  Attributes huge_group;
  huge_group.Set("group", int64_t{1} << 62);
  EXPECT_EQ(ConvStatus({1, 4, 4, 4}, {4, 1, 2, 2}, huge_group).code(),
            StatusCode::kInvalidArgument);
  Attributes zero_group;
  zero_group.Set("group", int64_t{0});
  EXPECT_EQ(ConvStatus({1, 4, 4, 4}, {4, 4, 2, 2}, zero_group).code(),
            StatusCode::kInvalidArgument);
  // M not divisible by group.
  Attributes group2;
  group2.Set("group", int64_t{2});
  EXPECT_EQ(ConvStatus({1, 4, 4, 4}, {3, 2, 2, 2}, group2).code(), StatusCode::kInvalidArgument);
  // W channel mismatch, W rank mismatch, bias mismatch.
  EXPECT_EQ(ConvStatus({1, 3, 4, 4}, {2, 2, 2, 2}, none).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ConvStatus({1, 3, 4, 4}, {2, 3, 2}, none).code(), StatusCode::kInvalidArgument);
  const Shape bad_b{3};
  EXPECT_EQ(ConvStatus({1, 3, 4, 4}, {2, 3, 2, 2}, none, &bad_b).code(),
            StatusCode::kInvalidArgument);
  const Shape bad_b2{2, 1};
  EXPECT_EQ(ConvStatus({1, 3, 4, 4}, {2, 3, 2, 2}, none, &bad_b2).code(),
            StatusCode::kInvalidArgument);
  // Rank 2 input (no spatial axes), wrong attribute counts and values.
  EXPECT_EQ(ConvStatus({1, 3}, {2, 3}, none).code(), StatusCode::kInvalidArgument);
  Attributes bad_auto;
  bad_auto.Set("auto_pad", std::string("SAME"));
  EXPECT_EQ(ConvStatus({1, 1, 4, 4}, {1, 1, 2, 2}, bad_auto).code(),
            StatusCode::kInvalidArgument);
  Attributes bad_kernel;
  bad_kernel.Set("kernel_shape", std::vector<int64_t>{2, 3});
  EXPECT_EQ(ConvStatus({1, 1, 4, 4}, {1, 1, 2, 2}, bad_kernel).code(),
            StatusCode::kInvalidArgument);
  Attributes strides3;
  strides3.Set("strides", std::vector<int64_t>{1, 1, 1});
  EXPECT_EQ(ConvStatus({1, 1, 4, 4}, {1, 1, 2, 2}, strides3).code(),
            StatusCode::kInvalidArgument);
  Attributes wrong_type;
  wrong_type.Set("strides", int64_t{2});
  EXPECT_EQ(ConvStatus({1, 1, 4, 4}, {1, 1, 2, 2}, wrong_type).code(),
            StatusCode::kInvalidArgument);
}

TEST(ConvTest, UnsupportedDTypeSaysSo) {
  Tensor x(DType::kFloat64, {1, 1, 3, 3});
  Tensor w(DType::kFloat64, {1, 1, 2, 2});
  Status st = RunOp("Conv", {&x, &w}).status();
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("unsupported"), std::string::npos);
  EXPECT_NE(st.message().find("Conv"), std::string::npos);
}

TEST(ConvTest, EnormousOutputIsRejectedBeforeAllocation) {
  // Infer succeeds with a shape the executor's size check refuses.
  const KernelDef* def = OpRegistry::Global().Find("Conv", Backend::kCpu);
  ASSERT_NE(def, nullptr);
  const TensorType x{DType::kFloat32, {1 << 20, 1, 1 << 12, 1 << 12}};
  const TensorType w{DType::kFloat32, {1 << 10, 1, 1, 1}};
  const std::vector<TensorType> types{x, w};
  const std::vector<const Tensor*> values{nullptr, nullptr};
  const Attributes a;
  std::vector<TensorType> outs;
  ASSERT_TRUE(def->infer(InferContext{types, values, a, 13}, &outs).ok());
  EXPECT_FALSE(CheckedNumElements(outs[0].shape, outs[0].dtype).ok());
}

// ---------------- ConvTranspose ----------------

struct TransposeCase {
  Shape x = {};  // N, C, spatial...
  Shape w = {};  // C, M/group, kernel...
  int64_t group = 1;
  std::vector<int64_t> strides = {}, dilations = {}, pads = {}, output_padding = {},
                       output_shape = {};
  std::string auto_pad = {};
  bool bias = false;
};

// Direct ONNX ConvTranspose definition: scatter each input into the full
// (unpadded) output, then crop pad_begin and take out_dims.
std::vector<float> NaiveConvTranspose(const TransposeCase& c, const std::vector<float>& x,
                                      const std::vector<float>& w, const std::vector<float>& b,
                                      const std::vector<int64_t>& pad_begin,
                                      const std::vector<int64_t>& out_dims) {
  const size_t r = c.x.size() - 2;
  const std::vector<int64_t> in(c.x.begin() + 2, c.x.end());
  const std::vector<int64_t> k(c.w.begin() + 2, c.w.end());
  const int64_t n = c.x[0], ch = c.x[1], mg = c.w[1], m = mg * c.group, cg = ch / c.group;
  std::vector<float> y(static_cast<size_t>(n * m * Prod(out_dims)));
  std::vector<int64_t> o(r);
  for (int64_t in_n = 0; in_n < n; ++in_n) {
    for (int64_t om = 0; om < m; ++om) {
      const int64_t g = om / mg;
      const int64_t base = (in_n * m + om) * Prod(out_dims);
      for (int64_t i = 0; i < Prod(out_dims); ++i) {
        y[static_cast<size_t>(base + i)] = c.bias ? b[static_cast<size_t>(om)] : 0.0f;
      }
      for (int64_t ic = 0; ic < cg; ++ic) {
        const int64_t xc = g * cg + ic;
        ForEachIndex(in, [&](const std::vector<int64_t>& i) {
          ForEachIndex(k, [&](const std::vector<int64_t>& t) {
            for (size_t j = 0; j < r; ++j) {
              const int64_t s = c.strides.empty() ? 1 : c.strides[j];
              const int64_t d = c.dilations.empty() ? 1 : c.dilations[j];
              o[j] = i[j] * s + t[j] * d - pad_begin[j];
              if (o[j] < 0 || o[j] >= out_dims[j]) return;
            }
            y[static_cast<size_t>(base + Flat(o, out_dims))] +=
                x[static_cast<size_t>((in_n * ch + xc) * Prod(in) + Flat(i, in))] *
                w[static_cast<size_t>((xc * mg + (om - g * mg)) * Prod(k) + Flat(t, k))];
          });
        });
      }
    }
  }
  return y;
}

void CheckConvTranspose(const TransposeCase& c, uint32_t seed) {
  const size_t r = c.x.size() - 2;
  Tensor x = F32(c.x, RandomFloats(NumElements(c.x), seed));
  Tensor w = F32(c.w, RandomFloats(NumElements(c.w), seed + 1));
  const int64_t m = c.w[1] * c.group;
  Tensor b = F32({m}, RandomFloats(m, seed + 2));
  Attributes a;
  if (c.group != 1) a.Set("group", c.group);
  if (!c.strides.empty()) a.Set("strides", c.strides);
  if (!c.dilations.empty()) a.Set("dilations", c.dilations);
  if (!c.pads.empty()) a.Set("pads", c.pads);
  if (!c.output_padding.empty()) a.Set("output_padding", c.output_padding);
  if (!c.output_shape.empty()) a.Set("output_shape", c.output_shape);
  if (!c.auto_pad.empty()) a.Set("auto_pad", c.auto_pad);
  auto out = RunOp("ConvTranspose", {&x, &w, c.bias ? &b : nullptr}, a);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  std::vector<int64_t> pad_begin(r, 0), out_dims(r);
  for (size_t j = 0; j < r; ++j) {
    const int64_t in = c.x[j + 2], k = c.w[j + 2];
    const int64_t s = c.strides.empty() ? 1 : c.strides[j];
    const int64_t d = c.dilations.empty() ? 1 : c.dilations[j];
    const int64_t op = c.output_padding.empty() ? 0 : c.output_padding[j];
    const int64_t full = s * (in - 1) + op + (k - 1) * d + 1;
    const bool same = c.auto_pad == "SAME_UPPER" || c.auto_pad == "SAME_LOWER";
    if (!c.output_shape.empty() || same) {
      out_dims[j] = c.output_shape.empty() ? in * s : c.output_shape[j];
      const int64_t total = full - out_dims[j];
      const int64_t half = FloorDiv(total, 2);
      pad_begin[j] = c.auto_pad == "SAME_UPPER" ? half : total - half;
    } else {
      pad_begin[j] = c.pads.empty() ? 0 : c.pads[j];
      out_dims[j] = full - pad_begin[j] - (c.pads.empty() ? 0 : c.pads[j + r]);
    }
  }
  Shape want_shape{c.x[0], m};
  want_shape.insert(want_shape.end(), out_dims.begin(), out_dims.end());
  ASSERT_EQ((*out)[0].shape(), want_shape);
  ExpectNear(Values<float>((*out)[0]),
             NaiveConvTranspose(c, Values<float>(x), Values<float>(w), Values<float>(b),
                                pad_begin, out_dims),
             1e-4f);
}

const std::vector<float> kX3x3 = {0, 1, 2, 3, 4, 5, 6, 7, 8};

TEST(ConvTransposeTest, OnnxDefault) {
  Tensor x = F32({1, 1, 3, 3}, kX3x3);
  Tensor w = F32({1, 2, 3, 3}, std::vector<float>(18, 1.0f));
  auto out = RunOp("ConvTranspose", {&x, &w});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].shape(), (Shape{1, 2, 5, 5}));
  const std::vector<float> plane = {0, 1, 3,  3,  2,  3, 8,  15, 12, 7,  9, 21, 36,
                                    27, 15, 9, 20, 33, 24, 13, 6, 13, 21, 15, 8};
  std::vector<float> want = plane;
  want.insert(want.end(), plane.begin(), plane.end());
  ExpectNear(Values<float>((*out)[0]), want);
}

TEST(ConvTransposeTest, Onnx1D) {
  Tensor x = F32({1, 1, 3}, {0, 1, 2});
  Tensor w = F32({1, 2, 3}, std::vector<float>(6, 1.0f));
  auto out = RunOp("ConvTranspose", {&x, &w});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].shape(), (Shape{1, 2, 5}));
  ExpectNear(Values<float>((*out)[0]), {0, 1, 3, 3, 2, 0, 1, 3, 3, 2});
}

// test_convtranspose_output_shape / _pad / _kernel_shape share one expected output.
TEST(ConvTransposeTest, OnnxOutputShapeAndOutputPadding) {
  Tensor x = F32({1, 1, 3, 3}, kX3x3);
  Tensor w = F32({1, 2, 3, 3}, std::vector<float>(18, 1.0f));
  const std::vector<float> rows[3] = {{0, 0, 1, 1, 3, 2, 2, 0},
                                      {3, 3, 7, 4, 9, 5, 5, 0},
                                      {6, 6, 13, 7, 15, 8, 8, 0}};
  std::vector<float> plane;
  for (int r = 0; r < 9; ++r) plane.insert(plane.end(), rows[r / 3].begin(), rows[r / 3].end());
  plane.insert(plane.end(), 8, 0.0f);
  std::vector<float> want = plane;
  want.insert(want.end(), plane.begin(), plane.end());

  Attributes shape_attr;
  shape_attr.Set("strides", std::vector<int64_t>{3, 2});
  shape_attr.Set("output_shape", std::vector<int64_t>{10, 8});
  Attributes pad_attr;
  pad_attr.Set("strides", std::vector<int64_t>{3, 2});
  pad_attr.Set("output_padding", std::vector<int64_t>{1, 1});
  Attributes both = shape_attr;
  both.Set("kernel_shape", std::vector<int64_t>{3, 3});
  both.Set("output_padding", std::vector<int64_t>{1, 1});
  for (const Attributes* a : {&shape_attr, &pad_attr, &both}) {
    auto out = RunOp("ConvTranspose", {&x, &w}, *a);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    EXPECT_EQ((*out)[0].shape(), (Shape{1, 2, 10, 8}));
    ExpectNear(Values<float>((*out)[0]), want);
  }
}

TEST(ConvTransposeTest, OnnxPads) {
  Tensor x = F32({1, 1, 3, 3}, kX3x3);
  Tensor w = F32({1, 2, 3, 3}, std::vector<float>(18, 1.0f));
  Attributes a;
  a.Set("strides", std::vector<int64_t>{3, 2});
  a.Set("pads", std::vector<int64_t>{1, 2, 1, 2});
  auto out = RunOp("ConvTranspose", {&x, &w}, a);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].shape(), (Shape{1, 2, 7, 3}));
  const std::vector<float> plane = {1, 1, 3, 1, 1, 3, 7, 4, 9, 7, 4,
                                    9, 7, 4, 9, 13, 7, 15, 13, 7, 15};
  std::vector<float> want = plane;
  want.insert(want.end(), plane.begin(), plane.end());
  ExpectNear(Values<float>((*out)[0]), want);
}

TEST(ConvTransposeTest, OnnxDilations) {
  Tensor x = F32({1, 1, 3, 3}, {3, 8, 1, 9, 5, 7, 3, 2, 6});
  Tensor w = F32({1, 1, 2, 2}, {7, 2, 1, 9});
  Attributes a;
  a.Set("dilations", std::vector<int64_t>{2, 2});
  auto out = RunOp("ConvTranspose", {&x, &w}, a);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].shape(), (Shape{1, 1, 5, 5}));
  ExpectNear(Values<float>((*out)[0]), {21, 56, 13, 16, 2,  63, 35, 67, 10, 14, 24, 22, 76,
                                        76, 21, 9,  5,  88, 45, 63, 3,  2,  33, 18, 54});
}

TEST(ConvTransposeTest, OnnxAutoPadSameUpper) {
  Tensor x = F32({1, 1, 3, 3}, kX3x3);
  Tensor w = F32({1, 2, 3, 3}, std::vector<float>(18, 1.0f));
  Attributes a;
  a.Set("auto_pad", std::string("SAME_UPPER"));
  a.Set("strides", std::vector<int64_t>{2, 2});
  auto out = RunOp("ConvTranspose", {&x, &w}, a);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].shape(), (Shape{1, 2, 6, 6}));
  const std::vector<float> plane = {0, 0, 1, 1, 3,  2,  0, 0, 1,  1,  3,  2,
                                    3, 3, 8, 5, 12, 7,  3, 3, 7,  4,  9,  5,
                                    9, 9, 20, 11, 24, 13, 6, 6, 13, 7, 15, 8};
  std::vector<float> want = plane;
  want.insert(want.end(), plane.begin(), plane.end());
  ExpectNear(Values<float>((*out)[0]), want);
}

TEST(ConvTransposeTest, Onnx3DAgainstReference) {
  // test_convtranspose_3d: (1, 1, 3, 4, 5) x ones(1, 2, 3, 3, 3); spot-check
  // values from convtranspose.py and compare all against the reference.
  Tensor x = F32({1, 1, 3, 4, 5}, Iota(60));
  Tensor w = F32({1, 2, 3, 3, 3}, std::vector<float>(54, 1.0f));
  auto out = RunOp("ConvTranspose", {&x, &w});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].shape(), (Shape{1, 2, 5, 6, 7}));
  const std::vector<float> y = Values<float>((*out)[0]);
  EXPECT_FLOAT_EQ(y[0 * 42 + 0 * 7 + 3], 6.0f);
  EXPECT_FLOAT_EQ(y[2 * 42 + 2 * 7 + 2], 702.0f);
  EXPECT_FLOAT_EQ(y[4 * 42 + 5 * 7 + 6], 59.0f);
  EXPECT_FLOAT_EQ(y[210 + 3 * 42 + 3 * 7 + 3], 756.0f);
  CheckConvTranspose({.x = {1, 2, 3, 4, 3}, .w = {2, 2, 3, 2, 3}, .strides = {2, 1, 2},
                      .pads = {1, 0, 1, 0, 1, 1}, .bias = true},
                     70);
}

TEST(ConvTransposeTest, AgainstReference) {
  CheckConvTranspose({.x = {2, 3, 4, 5}, .w = {3, 2, 3, 3}, .strides = {2, 2}, .bias = true}, 80);
  CheckConvTranspose({.x = {1, 4, 3, 3}, .w = {4, 3, 3, 2}, .group = 2, .strides = {2, 3},
                      .dilations = {2, 1}, .pads = {1, 0, 2, 1}, .output_padding = {1, 2}},
                     81);
  CheckConvTranspose({.x = {1, 2, 5}, .w = {2, 3, 4}, .strides = {3}, .output_padding = {2},
                      .bias = true},
                     82);
  CheckConvTranspose({.x = {1, 2, 4, 4}, .w = {2, 1, 3, 3}, .strides = {2, 2},
                      .output_shape = {9, 10}},
                     83);
  // output_shape smaller than the full result and larger by two (negative pads).
  CheckConvTranspose({.x = {1, 1, 4, 4}, .w = {1, 2, 3, 3}, .strides = {2, 2},
                      .output_shape = {7, 12}},
                     84);
  CheckConvTranspose({.x = {1, 2, 3, 3}, .w = {2, 2, 2, 2}, .strides = {2, 2},
                      .auto_pad = "SAME_LOWER"},
                     85);
  // Pointwise: a single transposed GEMM.
  CheckConvTranspose({.x = {2, 4, 3, 5}, .w = {4, 3, 1, 1}, .bias = true}, 86);
  // Depthwise-style groups.
  CheckConvTranspose({.x = {1, 3, 4, 4}, .w = {3, 1, 3, 3}, .group = 3, .strides = {2, 2},
                      .pads = {1, 1, 1, 1}},
                     87);
}

TEST(ConvTransposeTest, TiledCol2Im) {
  // col rows = M/group * K = 64 * 25 = 1600 -> 10485 input positions a tile of 12100.
  CheckConvTranspose({.x = {1, 2, 110, 110}, .w = {2, 64, 5, 5}, .strides = {1, 1},
                      .pads = {2, 2, 2, 2}},
                     90);
}

Status TransposeStatus(const Shape& xs, const Shape& ws, const Attributes& a,
                       const Shape* bs = nullptr) {
  Tensor x(DType::kFloat32, xs);
  Tensor w(DType::kFloat32, ws);
  Tensor b = bs ? Tensor(DType::kFloat32, *bs) : Tensor();
  return RunOp("ConvTranspose", {&x, &w, bs ? &b : nullptr}, a).status();
}

TEST(ConvTransposeTest, RejectsHostileAttributesAndShapes) {
  const Attributes none;
  EXPECT_EQ(TransposeStatus({1, 2, 3, 3}, {3, 1, 2, 2}, none).code(),
            StatusCode::kInvalidArgument);  // W[0] != C
  Attributes group3;
  group3.Set("group", int64_t{3});
  EXPECT_EQ(TransposeStatus({1, 4, 3, 3}, {4, 1, 2, 2}, group3).code(),
            StatusCode::kInvalidArgument);
  Attributes big_group;
  big_group.Set("group", int64_t{1} << 62);
  EXPECT_EQ(TransposeStatus({1, 4, 3, 3}, {4, 1, 2, 2}, big_group).code(),
            StatusCode::kInvalidArgument);
  const Shape bad_b{3};
  EXPECT_EQ(TransposeStatus({1, 2, 3, 3}, {2, 2, 2, 2}, none, &bad_b).code(),
            StatusCode::kInvalidArgument);
  Attributes big_pads;
  big_pads.Set("pads", std::vector<int64_t>{5, 0, 5, 0});
  EXPECT_EQ(TransposeStatus({1, 1, 3, 3}, {1, 1, 2, 2}, big_pads).code(),
            StatusCode::kInvalidArgument);  // no output left
  Attributes neg_op;
  neg_op.Set("output_padding", std::vector<int64_t>{-1, 0});
  EXPECT_EQ(TransposeStatus({1, 1, 3, 3}, {1, 1, 2, 2}, neg_op).code(),
            StatusCode::kInvalidArgument);
  Attributes bad_os;
  bad_os.Set("output_shape", std::vector<int64_t>{4});
  EXPECT_EQ(TransposeStatus({1, 1, 3, 3}, {1, 1, 2, 2}, bad_os).code(),
            StatusCode::kInvalidArgument);
  Attributes zero_os;
  zero_os.Set("output_shape", std::vector<int64_t>{0, 4});
  EXPECT_EQ(TransposeStatus({1, 1, 3, 3}, {1, 1, 2, 2}, zero_os).code(),
            StatusCode::kInvalidArgument);
  Attributes huge_stride;
  huge_stride.Set("strides", std::vector<int64_t>{int64_t{1} << 40, 1});
  EXPECT_EQ(TransposeStatus({1, 1, 3, 3}, {1, 1, 2, 2}, huge_stride).code(),
            StatusCode::kInvalidArgument);
  // Largest allowed stride: a legal but enormous output that the size check refuses.
  Attributes big_stride;
  big_stride.Set("strides", std::vector<int64_t>{kMaxWindowAttr, kMaxWindowAttr});
  Status st = TransposeStatus({1, 1, 3, 3}, {1, 1, 2, 2}, big_stride);
  EXPECT_FALSE(st.ok());
  // Full-rank output_shape (N, C first) is accepted.
  Attributes full_os;
  full_os.Set("output_shape", std::vector<int64_t>{1, 1, 4, 4});
  EXPECT_TRUE(TransposeStatus({1, 1, 3, 3}, {1, 1, 2, 2}, full_os).ok());
}

}  // namespace
}  // namespace orrery::ops
