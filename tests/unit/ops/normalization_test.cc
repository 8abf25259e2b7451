// BatchNormalization, InstanceNormalization, LayerNormalization against the
// numpy formulas of the ONNX backend test generators (batchnorm.py,
// instancenorm.py, layernormalization.py), recomputed here in double.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "ops/registry.h"
#include "op_test_util.h"

namespace orrery::ops {
namespace {

using testing::ExpectNear;
using testing::F32;
using testing::RandomFloats;
using testing::Values;

// RunOp with the node's declared output count (optional outputs).
Result<std::vector<Tensor>> RunNorm(const std::string& op, const std::vector<const Tensor*>& in,
                                    const Attributes& a, size_t num_outputs = 1,
                                    int64_t opset = 17) {
  const KernelDef* def = OpRegistry::Global().Find(op, Backend::kCpu);
  if (def == nullptr) return Status::NotFound("no kernel " + op);
  std::vector<TensorType> types;
  for (const Tensor* t : in) {
    types.push_back(t == nullptr ? TensorType{} : TensorType{t->dtype(), t->shape()});
  }
  std::vector<TensorType> out_types;
  ORRERY_RETURN_IF_ERROR(def->infer(InferContext{types, in, a, opset, num_outputs}, &out_types));
  if (out_types.size() != num_outputs) return Status::Internal("wrong output count");
  std::vector<Tensor> outs(out_types.size());
  for (size_t i = 0; i < outs.size(); ++i) {
    ORRERY_ASSIGN_OR_RETURN(outs[i], Tensor::Allocate(out_types[i].dtype, out_types[i].shape));
  }
  ORRERY_RETURN_IF_ERROR(
      PrepareAndCompute(def->prepare, def->compute, KernelContext{in, a, opset}, out_types, outs));
  return outs;
}

// ---------------- BatchNormalization ----------------

std::vector<float> NaiveBatchNorm(const Shape& shape, const std::vector<float>& x,
                                  const std::vector<float>& s, const std::vector<float>& b,
                                  const std::vector<float>& mean, const std::vector<float>& var,
                                  double eps, bool per_activation = false) {
  const int64_t n = shape[0], c = shape[1];
  const int64_t inner = NumElements(shape) / (n * c);
  std::vector<float> y(x.size());
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t ch = 0; ch < c; ++ch) {
      for (int64_t k = 0; k < inner; ++k) {
        const size_t xi = static_cast<size_t>((i * c + ch) * inner + k);
        const size_t p = static_cast<size_t>(per_activation ? ch * inner + k : ch);
        y[xi] = static_cast<float>(s[p] * (x[xi] - mean[p]) / std::sqrt(var[p] + eps) + b[p]);
      }
    }
  }
  return y;
}

TEST(BatchNormTest, OnnxExampleAndEpsilon) {
  const Shape shape{2, 3, 4, 5};
  const std::vector<float> xv = RandomFloats(120, 1), sv = RandomFloats(3, 2), bv = RandomFloats(3, 3),
                           mv = RandomFloats(3, 4), vv = RandomFloats(3, 5, 0.0f, 1.0f);
  Tensor x = F32(shape, xv), s = F32({3}, sv), b = F32({3}, bv), m = F32({3}, mv),
         v = F32({3}, vv);
  for (int64_t opset : {7, 9, 14, 15}) {
    SCOPED_TRACE(opset);
    auto out = RunNorm("BatchNormalization", {&x, &s, &b, &m, &v}, {}, 1, opset);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    ExpectNear(Values<float>((*out)[0]), NaiveBatchNorm(shape, xv, sv, bv, mv, vv, 1e-5), 1e-4f);
  }
  Attributes eps;
  eps.Set("epsilon", 1e-2f);
  auto out = RunNorm("BatchNormalization", {&x, &s, &b, &m, &v}, eps);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ExpectNear(Values<float>((*out)[0]), NaiveBatchNorm(shape, xv, sv, bv, mv, vv, 1e-2), 1e-4f);
}

TEST(BatchNormTest, RankTwoAndSpatialZero) {
  const std::vector<float> xv = RandomFloats(6, 10), sv = RandomFloats(3, 11), bv = RandomFloats(3, 12),
                           mv = RandomFloats(3, 13), vv = RandomFloats(3, 14, 0.1f, 1.0f);
  Tensor x = F32({2, 3}, xv), s = F32({3}, sv), b = F32({3}, bv), m = F32({3}, mv),
         v = F32({3}, vv);
  auto out = RunNorm("BatchNormalization", {&x, &s, &b, &m, &v}, {});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ExpectNear(Values<float>((*out)[0]), NaiveBatchNorm({2, 3}, xv, sv, bv, mv, vv, 1e-5), 1e-4f);

  // Opset 7 spatial = 0: parameters per activation, shape [C, H, W].
  const std::vector<float> x2 = RandomFloats(24, 20), s2 = RandomFloats(12, 21), b2 = RandomFloats(12, 22),
                           m2 = RandomFloats(12, 23), v2 = RandomFloats(12, 24, 0.1f, 1.0f);
  Tensor tx = F32({2, 3, 2, 2}, x2), ts = F32({3, 2, 2}, s2), tb = F32({3, 2, 2}, b2),
         tm = F32({3, 2, 2}, m2), tv = F32({3, 2, 2}, v2);
  Attributes spatial0;
  spatial0.Set("spatial", int64_t{0});
  out = RunNorm("BatchNormalization", {&tx, &ts, &tb, &tm, &tv}, spatial0, 1, 7);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ExpectNear(Values<float>((*out)[0]),
             NaiveBatchNorm({2, 3, 2, 2}, x2, s2, b2, m2, v2, 1e-5, /*per_activation=*/true),
             1e-4f);
}

TEST(BatchNormTest, DoublePrecision) {
  Tensor x(DType::kFloat64, {1, 2, 2});
  Tensor s(DType::kFloat64, {2}), b(DType::kFloat64, {2}), m(DType::kFloat64, {2}),
      v(DType::kFloat64, {2});
  const double xs[] = {1, 2, 3, 4};
  for (int i = 0; i < 4; ++i) x.data<double>()[i] = xs[i];
  for (int i = 0; i < 2; ++i) {
    s.data<double>()[i] = 2.0;
    b.data<double>()[i] = 0.5;
    m.data<double>()[i] = 1.0 + i;
    v.data<double>()[i] = 4.0;
  }
  Attributes eps;
  eps.Set("epsilon", 0.0f);
  auto out = RunNorm("BatchNormalization", {&x, &s, &b, &m, &v}, eps);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  const std::vector<double> y = Values<double>((*out)[0]);
  // 2 * (x - mean) / 2 + 0.5
  EXPECT_DOUBLE_EQ(y[0], 0.5);
  EXPECT_DOUBLE_EQ(y[1], 1.5);
  EXPECT_DOUBLE_EQ(y[2], 1.5);
  EXPECT_DOUBLE_EQ(y[3], 2.5);
}

TEST(BatchNormTest, TrainingIsUnsupportedAndShapesAreChecked) {
  Tensor x(DType::kFloat32, {2, 3, 4});
  Tensor p3(DType::kFloat32, {3}), p4(DType::kFloat32, {4});
  Attributes train;
  train.Set("training_mode", int64_t{1});
  Status st = RunNorm("BatchNormalization", {&x, &p3, &p3, &p3, &p3}, train, 3).status();
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("unsupported"), std::string::npos);
  EXPECT_NE(st.message().find("BatchNormalization"), std::string::npos);
  // Opset 9 training-only outputs.
  st = RunNorm("BatchNormalization", {&x, &p3, &p3, &p3, &p3}, {}, 5, 9).status();
  EXPECT_NE(st.message().find("unsupported"), std::string::npos);
  EXPECT_EQ(RunNorm("BatchNormalization", {&x, &p3, &p4, &p3, &p3}, {}).status().code(),
            StatusCode::kInvalidArgument);
  Tensor x1(DType::kFloat32, {3});
  EXPECT_EQ(RunNorm("BatchNormalization", {&x1, &p3, &p3, &p3, &p3}, {}).status().code(),
            StatusCode::kInvalidArgument);
  Tensor d3(DType::kFloat64, {3});
  st = RunNorm("BatchNormalization", {&x, &p3, &p3, &d3, &p3}, {}).status();
  EXPECT_NE(st.message().find("unsupported"), std::string::npos);
  Tensor xi(DType::kInt32, {2, 3});
  st = RunNorm("BatchNormalization", {&xi, &p3, &p3, &p3, &p3}, {}).status();
  EXPECT_NE(st.message().find("unsupported"), std::string::npos);
}

// ---------------- InstanceNormalization ----------------

std::vector<float> NaiveInstanceNorm(const Shape& shape, const std::vector<float>& x,
                                     const std::vector<float>& s, const std::vector<float>& b,
                                     double eps) {
  const int64_t c = shape[1];
  const int64_t inner = NumElements(shape) / (shape[0] * c);
  std::vector<float> y(x.size());
  for (int64_t p = 0; p < shape[0] * c; ++p) {
    double mean = 0, var = 0;
    for (int64_t k = 0; k < inner; ++k) mean += x[static_cast<size_t>(p * inner + k)];
    mean /= static_cast<double>(inner);
    for (int64_t k = 0; k < inner; ++k) {
      const double d = x[static_cast<size_t>(p * inner + k)] - mean;
      var += d * d;
    }
    var /= static_cast<double>(inner);
    for (int64_t k = 0; k < inner; ++k) {
      const size_t i = static_cast<size_t>(p * inner + k);
      y[i] = static_cast<float>(s[static_cast<size_t>(p % c)] * (x[i] - mean) /
                                    std::sqrt(var + eps) +
                                b[static_cast<size_t>(p % c)]);
    }
  }
  return y;
}

TEST(InstanceNormTest, OnnxExample) {
  // instancenorm.py: x (1, 2, 1, 3), s [1, 1.5], bias [0, 1].
  Tensor x = F32({1, 2, 1, 3}, {-1, 0, 1, 2, 3, 4});
  Tensor s = F32({2}, {1.0f, 1.5f});
  Tensor b = F32({2}, {0.0f, 1.0f});
  auto out = RunNorm("InstanceNormalization", {&x, &s, &b}, {});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  // var = 2/3 per plane: (x - mean) / sqrt(2/3 + 1e-5).
  const float k = 1.0f / std::sqrt(2.0f / 3.0f + 1e-5f);
  ExpectNear(Values<float>((*out)[0]), {-k, 0, k, 1 - 1.5f * k, 1, 1 + 1.5f * k});
}

TEST(InstanceNormTest, OnnxEpsilonRandom) {
  const Shape shape{2, 3, 4, 5};
  const std::vector<float> xv = RandomFloats(120, 30), sv = RandomFloats(3, 31), bv = RandomFloats(3, 32);
  Tensor x = F32(shape, xv), s = F32({3}, sv), b = F32({3}, bv);
  Attributes eps;
  eps.Set("epsilon", 1e-2f);
  auto out = RunNorm("InstanceNormalization", {&x, &s, &b}, eps);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ExpectNear(Values<float>((*out)[0]), NaiveInstanceNorm(shape, xv, sv, bv, 1e-2), 1e-4f);
  // Rank 3 and rank 5 inputs.
  const std::vector<float> x3 = RandomFloats(2 * 3 * 7, 33);
  Tensor t3 = F32({2, 3, 7}, x3);
  out = RunNorm("InstanceNormalization", {&t3, &s, &b}, {});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ExpectNear(Values<float>((*out)[0]), NaiveInstanceNorm({2, 3, 7}, x3, sv, bv, 1e-5), 1e-4f);
}

TEST(InstanceNormTest, RejectsBadShapes) {
  Tensor x(DType::kFloat32, {1, 3, 4});
  Tensor p3(DType::kFloat32, {3}), p2(DType::kFloat32, {2});
  EXPECT_EQ(RunNorm("InstanceNormalization", {&x, &p2, &p3}, {}).status().code(),
            StatusCode::kInvalidArgument);
  Tensor x2(DType::kFloat32, {1, 3});
  EXPECT_EQ(RunNorm("InstanceNormalization", {&x2, &p3, &p3}, {}).status().code(),
            StatusCode::kInvalidArgument);
}

// ---------------- LayerNormalization ----------------

struct LayerNormExpected {
  std::vector<float> y, mean, inv_std;
};

// layernormalization.py's _layer_normalization; W and B have X.shape[axis:].
LayerNormExpected NaiveLayerNorm(const Shape& shape, int64_t axis, const std::vector<float>& x,
                                 const std::vector<float>& w, const std::vector<float>& b,
                                 double eps) {
  if (axis < 0) axis += static_cast<int64_t>(shape.size());
  int64_t rows = 1, cols = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    (static_cast<int64_t>(i) < axis ? rows : cols) *= shape[i];
  }
  LayerNormExpected e;
  e.y.resize(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    double mean = 0, var = 0;
    for (int64_t c = 0; c < cols; ++c) mean += x[static_cast<size_t>(r * cols + c)];
    mean /= static_cast<double>(cols);
    for (int64_t c = 0; c < cols; ++c) {
      const double d = x[static_cast<size_t>(r * cols + c)] - mean;
      var += d * d;
    }
    var /= static_cast<double>(cols);
    const double inv = 1.0 / std::sqrt(var + eps);
    for (int64_t c = 0; c < cols; ++c) {
      const size_t i = static_cast<size_t>(r * cols + c);
      e.y[i] = static_cast<float>((x[i] - mean) * inv * w[static_cast<size_t>(c)] +
                                  (b.empty() ? 0.0 : b[static_cast<size_t>(c)]));
    }
    e.mean.push_back(static_cast<float>(mean));
    e.inv_std.push_back(static_cast<float>(inv));
  }
  return e;
}

void CheckLayerNorm(const Shape& shape, int64_t axis, float eps, uint32_t seed) {
  const int64_t rank = static_cast<int64_t>(shape.size());
  const int64_t a = axis < 0 ? axis + rank : axis;
  const Shape norm(shape.begin() + a, shape.end());
  const std::vector<float> xv = RandomFloats(NumElements(shape), seed);
  const std::vector<float> wv = RandomFloats(NumElements(norm), seed + 1);
  const std::vector<float> bv = RandomFloats(NumElements(norm), seed + 2);
  Tensor x = F32(shape, xv), w = F32(norm, wv), b = F32(norm, bv);
  Attributes attrs;
  attrs.Set("axis", axis);
  attrs.Set("epsilon", eps);
  auto out = RunNorm("LayerNormalization", {&x, &w, &b}, attrs, 3);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  const LayerNormExpected e = NaiveLayerNorm(shape, axis, xv, wv, bv, eps);
  Shape stats(shape.begin(), shape.begin() + a);
  stats.resize(shape.size(), 1);
  EXPECT_EQ((*out)[0].shape(), shape);
  EXPECT_EQ((*out)[1].shape(), stats);
  EXPECT_EQ((*out)[2].shape(), stats);
  EXPECT_EQ((*out)[1].dtype(), DType::kFloat32);
  ExpectNear(Values<float>((*out)[0]), e.y, 1e-4f);
  ExpectNear(Values<float>((*out)[1]), e.mean, 1e-5f);
  ExpectNear(Values<float>((*out)[2]), e.inv_std, 1e-3f);
}

TEST(LayerNormTest, OnnxAxesWithMeanAndInvStdDev) {
  // Every axis of the 4-D, 2-D and 3-D (epsilon 0.1) ONNX cases, both signs.
  for (int64_t axis = -4; axis < 4; ++axis) CheckLayerNorm({2, 3, 4, 5}, axis, 1e-5f, 40);
  for (int64_t axis = -2; axis < 2; ++axis) CheckLayerNorm({3, 4}, axis, 1e-5f, 41);
  for (int64_t axis = -3; axis < 3; ++axis) CheckLayerNorm({2, 3, 5}, axis, 0.1f, 42);
}

TEST(LayerNormTest, DefaultAxisOptionalOutputsAndBias) {
  const std::vector<float> xv = RandomFloats(24, 50), wv = RandomFloats(4, 51);
  Tensor x = F32({2, 3, 4}, xv), w = F32({4}, wv);
  auto out = RunNorm("LayerNormalization", {&x, &w}, {});  // no B, Y only
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_EQ(out->size(), 1u);
  ExpectNear(Values<float>((*out)[0]), NaiveLayerNorm({2, 3, 4}, -1, xv, wv, {}, 1e-5).y, 1e-4f);
  out = RunNorm("LayerNormalization", {&x, &w, nullptr}, {}, 2);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_EQ(out->size(), 2u);
  ExpectNear(Values<float>((*out)[1]), NaiveLayerNorm({2, 3, 4}, -1, xv, wv, {}, 1e-5).mean);
}

TEST(LayerNormTest, BroadcastScale) {
  // Scale [1, 4] broadcasts over the normalized shape [3, 4].
  const std::vector<float> xv = RandomFloats(24, 60), wv = RandomFloats(4, 61);
  Tensor x = F32({2, 3, 4}, xv), w = F32({1, 4}, wv), b = F32({1}, {0.25f});
  Attributes a;
  a.Set("axis", int64_t{1});
  auto out = RunNorm("LayerNormalization", {&x, &w, &b}, a);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  std::vector<float> w_full, b_full(12, 0.25f);
  for (int i = 0; i < 3; ++i) w_full.insert(w_full.end(), wv.begin(), wv.end());
  ExpectNear(Values<float>((*out)[0]), NaiveLayerNorm({2, 3, 4}, 1, xv, w_full, b_full, 1e-5).y,
             1e-4f);
}

TEST(LayerNormTest, RejectsBadInputs) {
  Tensor x(DType::kFloat32, {2, 3, 4});
  Tensor w4(DType::kFloat32, {4}), w3(DType::kFloat32, {3}), w34(DType::kFloat32, {2, 3, 4});
  EXPECT_EQ(RunNorm("LayerNormalization", {&x, &w3}, {}).status().code(),
            StatusCode::kInvalidArgument);
  Attributes axis1;
  axis1.Set("axis", int64_t{2});
  EXPECT_EQ(RunNorm("LayerNormalization", {&x, &w34}, axis1).status().code(),
            StatusCode::kInvalidArgument);
  Attributes bad_axis;
  bad_axis.Set("axis", int64_t{3});
  EXPECT_EQ(RunNorm("LayerNormalization", {&x, &w4}, bad_axis).status().code(),
            StatusCode::kInvalidArgument);
  Attributes stash;
  stash.Set("stash_type", int64_t{11});
  Status st = RunNorm("LayerNormalization", {&x, &w4}, stash).status();
  EXPECT_NE(st.message().find("unsupported"), std::string::npos);
  EXPECT_EQ(RunNorm("LayerNormalization", {&x, &w4}, {}, 4).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(RunNorm("LayerNormalization", {&x, nullptr}, {}).status().code(),
            StatusCode::kInvalidArgument);
  Tensor scalar(DType::kFloat32, {});
  EXPECT_EQ(RunNorm("LayerNormalization", {&scalar, &w4}, {}).status().code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace orrery::ops
