// MaxPool, AveragePool, LpPool and the global pools. Expected values come
// from the ONNX backend test generators (maxpool.py, averagepool.py,
// globalaveragepool.py, globalmaxpool.py) or from the naive reference below,
// which follows pool_op_common.py: padding never contributes to a max, and an
// average divides by the valid count unless count_include_pad.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "ops/registry.h"
#include "op_test_util.h"

namespace orrery::ops {
namespace {

using testing::ExpectNear;
using testing::F32;
using testing::Values;

// RunOp with the node's declared output count (optional outputs).
Result<std::vector<Tensor>> RunPool(const std::string& op, const Tensor& x, const Attributes& a,
                                    size_t num_outputs = 1) {
  const KernelDef* def = OpRegistry::Global().Find(op, Backend::kCpu);
  if (def == nullptr) return Status::NotFound("no kernel " + op);
  const std::vector<TensorType> types{{x.dtype(), x.shape()}};
  const std::vector<const Tensor*> inputs{&x};
  std::vector<TensorType> out_types;
  ORRERY_RETURN_IF_ERROR(def->infer(InferContext{types, inputs, a, 13, num_outputs}, &out_types));
  if (out_types.size() != num_outputs) return Status::Internal("wrong output count");
  std::vector<Tensor> outs(out_types.size());
  for (size_t i = 0; i < outs.size(); ++i) {
    ORRERY_ASSIGN_OR_RETURN(outs[i], Tensor::Allocate(out_types[i].dtype, out_types[i].shape));
  }
  ORRERY_RETURN_IF_ERROR(
      PrepareAndCompute(def->prepare, def->compute, KernelContext{inputs, a, 13}, out_types, outs));
  return outs;
}

std::vector<float> Iota1(int64_t n) {  // 1, 2, ..., n
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<float>(i + 1);
  return v;
}

Attributes PoolAttrs(std::vector<int64_t> kernel, std::vector<int64_t> strides = {},
                     std::vector<int64_t> pads = {}) {
  Attributes a;
  a.Set("kernel_shape", std::move(kernel));
  if (!strides.empty()) a.Set("strides", std::move(strides));
  if (!pads.empty()) a.Set("pads", std::move(pads));
  return a;
}

// ---------------- ONNX backend cases ----------------

TEST(MaxPoolTest, OnnxPrecomputedPadsWithIndices) {
  Tensor x = F32({1, 1, 5, 5}, Iota1(25));
  auto out = RunPool("MaxPool", x, PoolAttrs({5, 5}, {}, {2, 2, 2, 2}), 2);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].shape(), (Shape{1, 1, 5, 5}));
  ExpectNear(Values<float>((*out)[0]), {13, 14, 15, 15, 15, 18, 19, 20, 20, 20, 23, 24, 25,
                                        25, 25, 23, 24, 25, 25, 25, 23, 24, 25, 25, 25});
  EXPECT_EQ((*out)[1].dtype(), DType::kInt64);
  EXPECT_EQ(Values<int64_t>((*out)[1]),
            (std::vector<int64_t>{12, 13, 14, 14, 14, 17, 18, 19, 19, 19, 22, 23, 24,
                                  24, 24, 22, 23, 24, 24, 24, 22, 23, 24, 24, 24}));
}

TEST(MaxPoolTest, OnnxStridesAndColumnMajorIndices) {
  Tensor x = F32({1, 1, 5, 5}, Iota1(25));
  Attributes a = PoolAttrs({2, 2}, {2, 2});
  auto out = RunPool("MaxPool", x, a);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ExpectNear(Values<float>((*out)[0]), {7, 9, 17, 19});
  a.Set("storage_order", int64_t{1});
  out = RunPool("MaxPool", x, a, 2);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ExpectNear(Values<float>((*out)[0]), {7, 9, 17, 19});
  EXPECT_EQ(Values<int64_t>((*out)[1]), (std::vector<int64_t>{6, 16, 8, 18}));
}

TEST(MaxPoolTest, IndicesIncludeBatchAndChannel) {
  // Two planes: indices are flat over N x C x H x W.
  std::vector<float> v = Iota1(8);
  Tensor x = F32({1, 2, 2, 2}, v);
  auto out = RunPool("MaxPool", x, PoolAttrs({2, 2}), 2);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(Values<int64_t>((*out)[1]), (std::vector<int64_t>{3, 7}));
}

TEST(MaxPoolTest, OnnxSameUpperCeilDilations) {
  Tensor x5 = F32({1, 1, 5, 5}, Iota1(25));
  Attributes same = PoolAttrs({3, 3}, {2, 2});
  same.Set("auto_pad", std::string("SAME_UPPER"));
  auto out = RunPool("MaxPool", x5, same);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ExpectNear(Values<float>((*out)[0]), {7, 9, 10, 17, 19, 20, 22, 24, 25});

  Tensor x4 = F32({1, 1, 4, 4}, Iota1(16));
  Attributes ceil = PoolAttrs({3, 3}, {2, 2});
  ceil.Set("ceil_mode", int64_t{1});
  out = RunPool("MaxPool", x4, ceil);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].shape(), (Shape{1, 1, 2, 2}));
  ExpectNear(Values<float>((*out)[0]), {11, 12, 15, 16});

  Attributes dil = PoolAttrs({2, 2}, {1, 1});
  dil.Set("dilations", std::vector<int64_t>{2, 2});
  out = RunPool("MaxPool", x4, dil);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ExpectNear(Values<float>((*out)[0]), {11, 12, 15, 16});
}

TEST(MaxPoolTest, OnnxUint8AndInt8) {
  Tensor x(DType::kUint8, {1, 1, 5, 5});
  for (int i = 0; i < 25; ++i) x.data<uint8_t>()[i] = static_cast<uint8_t>(i + 1);
  auto out = RunPool("MaxPool", x, PoolAttrs({5, 5}, {}, {2, 2, 2, 2}));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].dtype(), DType::kUint8);
  EXPECT_EQ(Values<uint8_t>((*out)[0]),
            (std::vector<uint8_t>{13, 14, 15, 15, 15, 18, 19, 20, 20, 20, 23, 24, 25,
                                  25, 25, 23, 24, 25, 25, 25, 23, 24, 25, 25, 25}));
  Tensor xi(DType::kInt8, {1, 1, 1, 4});
  const int8_t vals[] = {-128, -5, -7, -100};
  for (int i = 0; i < 4; ++i) xi.data<int8_t>()[i] = vals[i];
  out = RunPool("MaxPool", xi, PoolAttrs({1, 2}, {1, 2}, {0, 1, 0, 1}));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  // Windows [pad,-128], [-5,-7], [-100,pad]: padding never wins.
  EXPECT_EQ(Values<int8_t>((*out)[0]), (std::vector<int8_t>{-128, -5, -100}));
}

TEST(AveragePoolTest, OnnxPrecomputed) {
  Tensor x = F32({1, 1, 5, 5}, Iota1(25));
  auto out = RunPool("AveragePool", x, PoolAttrs({5, 5}, {}, {2, 2, 2, 2}));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ExpectNear(Values<float>((*out)[0]), {7,    7.5f, 8,  8.5f, 9,  9.5f,  10, 10.5f, 11,
                                        11.5f, 12,  12.5f, 13, 13.5f, 14, 14.5f, 15, 15.5f,
                                        16,   16.5f, 17, 17.5f, 18, 18.5f, 19});
  Attributes inc = PoolAttrs({5, 5}, {}, {2, 2, 2, 2});
  inc.Set("count_include_pad", int64_t{1});
  out = RunPool("AveragePool", x, inc);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ExpectNear(Values<float>((*out)[0]),
             {2.52f, 3.6f, 4.8f,  4.08f, 3.24f, 4.56f, 6.4f, 8.4f,  7.04f, 5.52f, 7.2f, 10, 13,
              10.8f, 8.4f, 6.96f, 9.6f,  12.4f, 10.24f, 7.92f, 6.12f, 8.4f, 10.8f, 8.88f, 6.84f});

  out = RunPool("AveragePool", x, PoolAttrs({2, 2}, {2, 2}));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ExpectNear(Values<float>((*out)[0]), {4, 6, 14, 16});

  Attributes same = PoolAttrs({3, 3}, {2, 2});
  same.Set("auto_pad", std::string("SAME_UPPER"));
  out = RunPool("AveragePool", x, same);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ExpectNear(Values<float>((*out)[0]), {4, 5.5f, 7, 11.5f, 13, 14.5f, 19, 20.5f, 22});

  Tensor x4 = F32({1, 1, 4, 4}, Iota1(16));
  Attributes ceil = PoolAttrs({3, 3}, {2, 2});
  ceil.Set("ceil_mode", int64_t{1});
  out = RunPool("AveragePool", x4, ceil);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ExpectNear(Values<float>((*out)[0]), {6, 7.5f, 12, 13.5f});
}

TEST(GlobalPoolTest, OnnxPrecomputed) {
  Tensor x = F32({1, 1, 3, 3}, Iota1(9));
  auto avg = testing::RunOp("GlobalAveragePool", {&x});
  ASSERT_TRUE(avg.ok()) << avg.status().ToString();
  EXPECT_EQ((*avg)[0].shape(), (Shape{1, 1, 1, 1}));
  ExpectNear(Values<float>((*avg)[0]), {5});
  auto mx = testing::RunOp("GlobalMaxPool", {&x});
  ASSERT_TRUE(mx.ok()) << mx.status().ToString();
  ExpectNear(Values<float>((*mx)[0]), {9});
  auto lp = testing::RunOp("GlobalLpPool", {&x});
  ASSERT_TRUE(lp.ok()) << lp.status().ToString();
  ExpectNear(Values<float>((*lp)[0]), {std::sqrt(285.0f)}, 1e-4f);
}

TEST(GlobalPoolTest, PerPlaneAnyRank) {
  Tensor x = F32({2, 2, 2, 1, 2}, Iota1(16));
  auto avg = testing::RunOp("GlobalAveragePool", {&x});
  ASSERT_TRUE(avg.ok()) << avg.status().ToString();
  EXPECT_EQ((*avg)[0].shape(), (Shape{2, 2, 1, 1, 1}));
  ExpectNear(Values<float>((*avg)[0]), {2.5f, 6.5f, 10.5f, 14.5f});
  auto mx = testing::RunOp("GlobalMaxPool", {&x});
  ASSERT_TRUE(mx.ok()) << mx.status().ToString();
  ExpectNear(Values<float>((*mx)[0]), {4, 8, 12, 16});
  Tensor x1 = F32({1, 2, 3}, {1, -2, 3, 4, 5, -6});
  Attributes p1;
  p1.Set("p", int64_t{1});
  auto lp = testing::RunOp("GlobalLpPool", {&x1}, p1);
  ASSERT_TRUE(lp.ok()) << lp.status().ToString();
  ExpectNear(Values<float>((*lp)[0]), {6, 15});
}

// ---------------- Naive reference ----------------

enum class Kind { kMax, kAvg, kLp };

struct PoolCase {
  Shape x = {};
  std::vector<int64_t> kernel = {}, strides = {}, dilations = {}, pads = {};
  std::string auto_pad = {};
  bool ceil_mode = false;
  bool include_pad = false;
  int64_t p = 2;
};

int64_t Prod(const std::vector<int64_t>& v) {
  int64_t p = 1;
  for (int64_t d : v) p *= d;
  return p;
}

template <typename Fn>
void ForEachIndex(const std::vector<int64_t>& dims, Fn&& fn) {
  if (Prod(dims) == 0) return;
  std::vector<int64_t> idx(dims.size(), 0);
  while (true) {
    fn(idx);
    size_t j = dims.size();
    while (true) {
      if (j == 0) return;
      --j;
      if (++idx[j] < dims[j]) break;
      idx[j] = 0;
    }
  }
}

struct NaiveResult {
  Shape shape;
  std::vector<float> y;
  std::vector<int64_t> indices;
};

NaiveResult NaivePool(Kind kind, const PoolCase& c, const std::vector<float>& x) {
  const size_t r = c.x.size() - 2;
  const std::vector<int64_t> in(c.x.begin() + 2, c.x.end());
  std::vector<int64_t> pb(r, 0), pe(r, 0), out(r);
  for (size_t j = 0; j < r; ++j) {
    const int64_t s = c.strides.empty() ? 1 : c.strides[j];
    const int64_t d = c.dilations.empty() ? 1 : c.dilations[j];
    const int64_t ek = (c.kernel[j] - 1) * d + 1;
    if (c.auto_pad == "SAME_UPPER" || c.auto_pad == "SAME_LOWER") {
      out[j] = (in[j] + s - 1) / s;
      const int64_t total = std::max<int64_t>(0, (out[j] - 1) * s + ek - in[j]);
      pb[j] = c.auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      pe[j] = total - pb[j];
    } else {
      if (c.auto_pad != "VALID" && !c.pads.empty()) {
        pb[j] = c.pads[j];
        pe[j] = c.pads[j + r];
      }
      const int64_t span = in[j] + pb[j] + pe[j] - ek;
      out[j] = (c.ceil_mode ? (span + s - 1) / s : span / s) + 1;
      if (c.ceil_mode && (out[j] - 1) * s >= in[j] + pb[j]) --out[j];
    }
  }
  NaiveResult res;
  res.shape = {c.x[0], c.x[1]};
  res.shape.insert(res.shape.end(), out.begin(), out.end());
  const int64_t in_vol = Prod(in);
  for (int64_t plane = 0; plane < c.x[0] * c.x[1]; ++plane) {
    ForEachIndex(out, [&](const std::vector<int64_t>& o) {
      double best = -std::numeric_limits<double>::infinity(), sum = 0.0;
      int64_t best_idx = -1, valid = 0, padded = 0;
      ForEachIndex(c.kernel, [&](const std::vector<int64_t>& t) {
        int64_t flat = 0;
        bool inside = true, in_padded = true;
        for (size_t j = 0; j < r; ++j) {
          const int64_t s = c.strides.empty() ? 1 : c.strides[j];
          const int64_t d = c.dilations.empty() ? 1 : c.dilations[j];
          const int64_t i = o[j] * s - pb[j] + t[j] * d;
          if (i < -pb[j] || i >= in[j] + pe[j]) in_padded = false;
          if (i < 0 || i >= in[j]) inside = false;
          flat = flat * in[j] + i;
        }
        padded += in_padded ? 1 : 0;
        if (!inside) return;
        ++valid;
        const double v = x[static_cast<size_t>(plane * in_vol + flat)];
        if (v > best) {
          best = v;
          best_idx = plane * in_vol + flat;
        }
        sum += kind == Kind::kLp ? std::pow(std::abs(v), static_cast<double>(c.p)) : v;
      });
      double y = 0.0;
      if (kind == Kind::kMax) y = best;
      if (kind == Kind::kAvg) y = sum / static_cast<double>(c.include_pad ? padded : valid);
      if (kind == Kind::kLp) y = std::pow(sum, 1.0 / static_cast<double>(c.p));
      res.y.push_back(static_cast<float>(y));
      res.indices.push_back(best_idx);
    });
  }
  return res;
}

// With `indices` false, MaxPool runs without its Indices output, the
// vectorised path (ops/cpu/vec pool2d).
void CheckPool(Kind kind, const PoolCase& c, uint32_t seed, bool indices = true) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> xv(static_cast<size_t>(NumElements(c.x)));
  for (float& f : xv) f = dist(gen);
  Tensor x = F32(c.x, xv);
  Attributes a = PoolAttrs(c.kernel, c.strides, c.pads);
  if (!c.dilations.empty()) a.Set("dilations", c.dilations);
  if (!c.auto_pad.empty()) a.Set("auto_pad", c.auto_pad);
  if (c.ceil_mode) a.Set("ceil_mode", int64_t{1});
  if (c.include_pad) a.Set("count_include_pad", int64_t{1});
  if (kind == Kind::kLp) a.Set("p", c.p);
  const char* op = kind == Kind::kMax ? "MaxPool" : kind == Kind::kAvg ? "AveragePool" : "LpPool";
  auto out = RunPool(op, x, a, kind == Kind::kMax && indices ? 2 : 1);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  const NaiveResult want = NaivePool(kind, c, xv);
  ASSERT_EQ((*out)[0].shape(), want.shape);
  ExpectNear(Values<float>((*out)[0]), want.y, 1e-5f);
  if (kind == Kind::kMax && indices) {
    EXPECT_EQ(Values<int64_t>((*out)[1]), want.indices);
  }
}

TEST(PoolTest, TwoDimensionalAgainstReference) {
  for (Kind kind : {Kind::kMax, Kind::kAvg, Kind::kLp}) {
    SCOPED_TRACE(static_cast<int>(kind));
    CheckPool(kind, {.x = {2, 3, 9, 8}, .kernel = {3, 3}, .strides = {2, 2}, .pads = {1, 1, 1, 1}},
              1);
    CheckPool(kind, {.x = {1, 2, 10, 9}, .kernel = {3, 2}, .strides = {1, 3},
                     .dilations = {2, 2}, .pads = {2, 0, 1, 1}},
              2);
    CheckPool(kind, {.x = {1, 2, 7, 7}, .kernel = {2, 3}, .strides = {2, 2}, .auto_pad = "SAME_LOWER"},
              3);
    CheckPool(kind, {.x = {1, 2, 7, 8}, .kernel = {3, 3}, .strides = {2, 3}, .auto_pad = "SAME_UPPER"},
              4);
    CheckPool(kind, {.x = {1, 1, 8, 7}, .kernel = {3, 2}, .strides = {2, 2}, .auto_pad = "VALID"}, 5);
    CheckPool(kind, {.x = {1, 2, 6, 7}, .kernel = {3, 3}, .strides = {2, 2}, .pads = {1, 1, 1, 1},
                     .ceil_mode = true},
              6);
  }
}

TEST(PoolTest, OneAndThreeDimensionalAgainstReference) {
  for (Kind kind : {Kind::kMax, Kind::kAvg, Kind::kLp}) {
    SCOPED_TRACE(static_cast<int>(kind));
    CheckPool(kind, {.x = {2, 3, 17}, .kernel = {3}, .strides = {2}, .pads = {1, 2}}, 10);
    CheckPool(kind, {.x = {1, 2, 16}, .kernel = {2}, .dilations = {3}, .ceil_mode = true}, 11);
    CheckPool(kind, {.x = {1, 2, 5, 6, 7}, .kernel = {2, 3, 2}, .strides = {2, 1, 2},
                     .pads = {1, 1, 0, 0, 1, 1}},
              12);
    CheckPool(kind, {.x = {1, 1, 6, 5, 4}, .kernel = {3, 2, 2}, .strides = {2, 2, 1},
                     .dilations = {1, 2, 1}, .auto_pad = "SAME_UPPER"},
              13);
  }
}

// GoogLeNet's / ResNet's pools through Prepare and the vectorised paths:
// 3x3 stride 1 pad 1 on small planes (flat, tables from Prepare), 3x3
// stride 2 with ceil_mode or pads, 2x2 stride 2 with ceil_mode.
TEST(PoolTest, CommonCnnShapesOnTheVectorPaths) {
  for (Kind kind : {Kind::kMax, Kind::kAvg}) {
    SCOPED_TRACE(static_cast<int>(kind));
    for (bool include_pad : {false, true}) {
      CheckPool(kind, {.x = {1, 5, 14, 14}, .kernel = {3, 3}, .strides = {1, 1},
                       .pads = {1, 1, 1, 1}, .ceil_mode = true, .include_pad = include_pad},
                30, false);
      CheckPool(kind, {.x = {1, 3, 7, 7}, .kernel = {3, 3}, .strides = {1, 1},
                       .pads = {1, 1, 1, 1}, .include_pad = include_pad},
                31, false);
    }
    CheckPool(kind, {.x = {1, 4, 57, 57}, .kernel = {3, 3}, .strides = {2, 2}, .ceil_mode = true},
              32, false);
    CheckPool(kind, {.x = {1, 4, 56, 56}, .kernel = {3, 3}, .strides = {2, 2},
                     .pads = {1, 1, 1, 1}},
              33, false);
    CheckPool(kind, {.x = {1, 6, 15, 15}, .kernel = {2, 2}, .strides = {2, 2}, .ceil_mode = true},
              34, false);
    // Output rows folded 8 at a time (kPool2dRowGroup): 21 rows (a partial
    // last group, top / bottom padding inside groups), planes of 8 rows.
    CheckPool(kind, {.x = {2, 3, 21, 40}, .kernel = {3, 3}, .strides = {1, 1},
                     .pads = {1, 1, 1, 1}},
              35, false);
    CheckPool(kind, {.x = {1, 5, 16, 37}, .kernel = {3, 3}, .strides = {2, 2},
                     .pads = {1, 0, 0, 1}, .ceil_mode = true},
              36, false);
  }
}

TEST(PoolTest, CountIncludePadAndCeilMode) {
  CheckPool(Kind::kAvg, {.x = {1, 2, 7, 6}, .kernel = {3, 3}, .strides = {2, 2},
                         .pads = {1, 2, 1, 0}, .include_pad = true},
            20);
  // The last ceil-mode window overhangs the end padding: the overhang is not counted.
  CheckPool(Kind::kAvg, {.x = {1, 1, 6, 6}, .kernel = {3, 3}, .strides = {2, 2},
                         .pads = {1, 1, 1, 1}, .ceil_mode = true, .include_pad = true},
            21);
  CheckPool(Kind::kAvg, {.x = {1, 1, 5, 9}, .kernel = {2, 4}, .strides = {2, 3},
                         .pads = {0, 1, 0, 1}, .ceil_mode = true},
            22);
  CheckPool(Kind::kLp, {.x = {1, 2, 6, 6}, .kernel = {2, 2}, .strides = {2, 2}, .p = 3}, 23);
  CheckPool(Kind::kLp, {.x = {1, 2, 6, 6}, .kernel = {3, 1}, .strides = {1, 1}, .p = 1}, 24);
}

TEST(PoolTest, ColumnMajorIndicesThreeD) {
  // storage_order = 1: column-major within the plane, plane offset unchanged.
  std::vector<float> v(2 * 2 * 3 * 2, 0.0f);
  v[12 + 1 * 6 + 2 * 2 + 1] = 5.0f;  // channel 1, (d, h, w) = (1, 2, 1)
  Tensor x = F32({1, 2, 2, 3, 2}, v);
  Attributes a = PoolAttrs({2, 3, 2});
  a.Set("storage_order", int64_t{1});
  auto out = RunPool("MaxPool", x, a, 2);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  // Column-major: d + h * D + w * D * H = 1 + 2 * 2 + 1 * 6 = 11.
  EXPECT_EQ(Values<int64_t>((*out)[1])[1], 12 + 11);
}

TEST(MaxPoolTest, AllPaddingWindows) {
  // Pads as wide as the kernel: the corner windows see no input at all.
  Tensor x = F32({1, 1, 1, 1}, {-3.0f});
  auto out = RunPool("MaxPool", x, PoolAttrs({1, 1}, {}, {1, 1, 1, 1}), 2);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  const std::vector<float> y = Values<float>((*out)[0]);
  const std::vector<int64_t> idx = Values<int64_t>((*out)[1]);
  ASSERT_EQ(y.size(), 9u);
  EXPECT_EQ(y[4], -3.0f);
  EXPECT_EQ(idx[4], 0);
  EXPECT_EQ(y[0], std::numeric_limits<float>::lowest());
  EXPECT_EQ(idx[0], -1);
  auto avg = RunPool("AveragePool", x, PoolAttrs({1, 1}, {}, {1, 1, 1, 1}));
  ASSERT_TRUE(avg.ok()) << avg.status().ToString();
  ExpectNear(Values<float>((*avg)[0]), {0, 0, 0, 0, -3, 0, 0, 0, 0});
}

// ---------------- Hostile inputs ----------------

TEST(PoolTest, RejectsHostileAttributes) {
  Tensor x(DType::kFloat32, {1, 1, 4, 4});
  auto code = [&](const char* op, const Attributes& a, size_t n_out = 1) {
    return RunPool(op, x, a, n_out).status().code();
  };
  EXPECT_EQ(code("MaxPool", Attributes{}), StatusCode::kInvalidArgument);  // no kernel_shape
  EXPECT_EQ(code("MaxPool", PoolAttrs({5, 5})), StatusCode::kInvalidArgument);  // > input
  EXPECT_EQ(code("MaxPool", PoolAttrs({2, 2}, {0, 1})), StatusCode::kInvalidArgument);
  EXPECT_EQ(code("MaxPool", PoolAttrs({2, 2}, {-1, 1})), StatusCode::kInvalidArgument);
  EXPECT_EQ(code("MaxPool", PoolAttrs({0, 2})), StatusCode::kInvalidArgument);
  EXPECT_EQ(code("MaxPool", PoolAttrs({2})), StatusCode::kInvalidArgument);
  EXPECT_EQ(code("AveragePool", PoolAttrs({2, 2}, {}, {1, 1})), StatusCode::kInvalidArgument);
  EXPECT_EQ(code("AveragePool", PoolAttrs({2, 2}, {}, {0, 0, -1, 0})),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(code("AveragePool", PoolAttrs({2, 2}, {}, {0, 0, int64_t{1} << 50, 0})),
            StatusCode::kInvalidArgument);
  Attributes dil = PoolAttrs({2, 2});
  dil.Set("dilations", std::vector<int64_t>{0, 1});
  EXPECT_EQ(code("MaxPool", dil), StatusCode::kInvalidArgument);
  Attributes order = PoolAttrs({2, 2});
  order.Set("storage_order", int64_t{2});
  EXPECT_EQ(code("MaxPool", order), StatusCode::kInvalidArgument);
  Attributes cip = PoolAttrs({2, 2});
  cip.Set("count_include_pad", int64_t{-1});
  EXPECT_EQ(code("AveragePool", cip), StatusCode::kInvalidArgument);
  Attributes ceil = PoolAttrs({2, 2});
  ceil.Set("ceil_mode", int64_t{7});
  EXPECT_EQ(code("MaxPool", ceil), StatusCode::kInvalidArgument);
  Attributes p0 = PoolAttrs({2, 2});
  p0.Set("p", int64_t{0});
  EXPECT_EQ(code("LpPool", p0), StatusCode::kInvalidArgument);
  EXPECT_EQ(code("AveragePool", PoolAttrs({2, 2}), 2), StatusCode::kInvalidArgument);
  EXPECT_EQ(code("MaxPool", PoolAttrs({2, 2}), 3), StatusCode::kInvalidArgument);
  Tensor rank2(DType::kFloat32, {1, 4});
  EXPECT_FALSE(RunPool("MaxPool", rank2, PoolAttrs({2})).ok());
  EXPECT_FALSE(testing::RunOp("GlobalMaxPool", {&rank2}).ok());
}

TEST(PoolTest, UnsupportedDTypesSaySo) {
  Tensor xi(DType::kInt32, {1, 1, 4, 4});
  Status st = RunPool("MaxPool", xi, PoolAttrs({2, 2})).status();
  EXPECT_NE(st.message().find("unsupported"), std::string::npos);
  Tensor xu(DType::kUint8, {1, 1, 4, 4});
  st = RunPool("AveragePool", xu, PoolAttrs({2, 2})).status();
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("unsupported"), std::string::npos);
  EXPECT_NE(st.message().find("AveragePool"), std::string::npos);
}

TEST(PoolTest, DoublePrecision) {
  Tensor x(DType::kFloat64, {1, 1, 2, 3});
  for (int i = 0; i < 6; ++i) x.data<double>()[i] = 0.1 * (i + 1);
  auto out = RunPool("AveragePool", x, PoolAttrs({2, 2}));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].dtype(), DType::kFloat64);
  const std::vector<double> y = Values<double>((*out)[0]);
  ASSERT_EQ(y.size(), 2u);
  EXPECT_NEAR(y[0], 0.3, 1e-12);
  EXPECT_NEAR(y[1], 0.4, 1e-12);
}

}  // namespace
}  // namespace orrery::ops
