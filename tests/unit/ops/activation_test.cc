// Activations, Clip and the softmax family (ops/cpu/activations.cc, softmax.cc).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "op_test_util.h"
#include "ops/registry.h"

namespace orrery::ops {
namespace {

using testing::ExpectNear;
using testing::F32;
using testing::I64;
using testing::Make;
using testing::RunOp;
using testing::Values;

std::vector<float> Act(const std::string& op, const std::vector<const Tensor*>& inputs,
                       const Attributes& attrs = {}, int64_t opset = 13) {
  auto out = RunOp(op, inputs, attrs, opset);
  EXPECT_TRUE(out.ok()) << op << ": " << out.status().ToString();
  if (!out.ok()) return {};
  return Values<float>((*out)[0]);
}

Attributes Floats(std::initializer_list<std::pair<const char*, float>> kv) {
  Attributes a;
  for (const auto& [k, v] : kv) a.Set(k, v);
  return a;
}

void ExpectUnsupported(const Status& st, const std::string& op) {
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
  EXPECT_NE(st.message().find("unsupported"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find(op), std::string::npos) << st.message();
}

const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

TEST(ActivationsTest, ReluFamily) {
  Tensor x = F32({5}, {-2, -0.5f, 0, 1.5f, kNaN});
  std::vector<float> r = Act("Relu", {&x});
  ExpectNear({r[0], r[1], r[2], r[3]}, {0, 0, 0, 1.5f});
  EXPECT_TRUE(std::isnan(r[4]));
  ExpectNear(Act("LeakyRelu", {&x}, Floats({{"alpha", 0.1f}})).size() == 5
                 ? std::vector<float>{Act("LeakyRelu", {&x}, Floats({{"alpha", 0.1f}}))[0]}
                 : std::vector<float>{},
             {-0.2f});
  Tensor y = F32({4}, {-1, 0, 1, 2.5f});
  ExpectNear(Act("LeakyRelu", {&y}), {-0.01f, 0, 1, 2.5f});
  ExpectNear(Act("ThresholdedRelu", {&y}, Floats({{"alpha", 1.0f}})), {0, 0, 0, 2.5f});
  ExpectNear(Act("Elu", {&y}, Floats({{"alpha", 2.0f}})), {-1.2642411f, 0, 1, 2.5f});
  ExpectNear(Act("Selu", {&y}, Floats({{"alpha", 2.0f}, {"gamma", 3.0f}})),
             {-3.7927232f, 0, 3, 7.5f});
  ExpectNear(Act("Selu", {&y}), {-1.1113307f, 0, 1.050701f, 2.6267526f});
  ExpectNear(Act("Celu", {&y}, Floats({{"alpha", 2.0f}})),
             {2.0f * (std::exp(-0.5f) - 1), 0, 1, 2.5f});
  EXPECT_EQ(RunOp("Celu", {&y}, Floats({{"alpha", 0.0f}})).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(ActivationsTest, ReluIntegersFromOpset14) {
  Tensor i = I64({3}, {-3, 0, 4});
  auto out = RunOp("Relu", {&i}, {}, 14);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(Values<int64_t>((*out)[0]), (std::vector<int64_t>{0, 0, 4}));
  ExpectUnsupported(RunOp("Relu", {&i}, {}, 13).status(), "Relu");
  Tensor u = Make<uint8_t>(DType::kUint8, {1}, {1});
  ExpectUnsupported(RunOp("Relu", {&u}, {}, 14).status(), "Relu");
}

TEST(ActivationsTest, SmoothActivations) {
  Tensor x = F32({5}, {-100, -1, 0, 1, 100});
  std::vector<float> s = Act("Sigmoid", {&x});
  ExpectNear(s, {0, 0.26894142f, 0.5f, 0.7310586f, 1});
  ExpectNear(Act("Tanh", {&x}), {-1, -0.7615942f, 0, 0.7615942f, 1});
  // Softplus must not overflow for large inputs.
  ExpectNear(Act("Softplus", {&x}), {0, 0.31326169f, 0.6931472f, 1.3132617f, 100}, 1e-4f);
  ExpectNear(Act("Softsign", {&x}), {-100.0f / 101, -0.5f, 0, 0.5f, 100.0f / 101});
  ExpectNear(Act("HardSigmoid", {&x}), {0, 0.3f, 0.5f, 0.7f, 1});
  ExpectNear(Act("HardSigmoid", {&x}, Floats({{"alpha", 0.5f}, {"beta", 0.6f}})),
             {0, 0.1f, 0.6f, 1, 1});
  ExpectNear(Act("HardSwish", {&x}), {0, -1.0f / 3, 0, 2.0f / 3, 100});
  ExpectNear(Act("Mish", {&x}), {0, -0.30340147f, 0, 0.86509836f, 100}, 1e-4f);
  Tensor g = F32({4}, {-1, 0, 0.5f, 2});
  ExpectNear(Act("Gelu", {&g}), {-0.15865526f, 0, 0.34573123f, 1.9544997f});
  Attributes tanh;
  tanh.Set("approximate", std::string("tanh"));
  ExpectNear(Act("Gelu", {&g}, tanh), {-0.15880801f, 0, 0.34571401f, 1.9545977f});
  Attributes bad;
  bad.Set("approximate", std::string("erf"));
  EXPECT_EQ(RunOp("Gelu", {&g}, bad).status().code(), StatusCode::kInvalidArgument);
  Tensor sh = F32({5}, {-2, -0.4f, 0, 0.4f, 2});
  ExpectNear(Act("Shrink", {&sh}, Floats({{"lambd", 0.5f}, {"bias", 1.0f}})), {-1, 0, 0, 0, 1});
}

TEST(ActivationsTest, Float64AndUnsupported) {
  Tensor d = Make<double>(DType::kFloat64, {2}, {-1, 1});
  auto out = RunOp("Sigmoid", {&d});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].dtype(), DType::kFloat64);
  EXPECT_NEAR(Values<double>((*out)[0])[1], 1.0 / (1.0 + std::exp(-1.0)), 1e-15);
  Tensor h(DType::kFloat16, {2});
  ExpectUnsupported(RunOp("Elu", {&h}).status(), "Elu");
  Tensor i = I64({2}, {1, 2});
  ExpectUnsupported(RunOp("Tanh", {&i}).status(), "Tanh");
}

TEST(PReluTest, SlopeBroadcastsUnidirectionally) {
  Tensor x = F32({2, 3}, {-1, 2, -3, 4, -5, 6});
  Tensor slope = F32({3}, {0.1f, 0.2f, 0.3f});
  ExpectNear(Act("PRelu", {&x, &slope}), {-0.1f, 2, -0.9f, 4, -1.0f, 6});
  Tensor col = F32({2, 1}, {1, 2});
  ExpectNear(Act("PRelu", {&x, &col}), {-1, 2, -3, 4, -10, 6});
  Tensor scalar = F32({}, {0.5f});
  ExpectNear(Act("PRelu", {&x, &scalar}), {-0.5f, 2, -1.5f, 4, -2.5f, 6});
  // The slope may not grow X.
  Tensor big = F32({2, 2, 3}, std::vector<float>(12, 1));
  EXPECT_EQ(RunOp("PRelu", {&x, &big}).status().code(), StatusCode::kInvalidArgument);
  Tensor xi = I64({2}, {-4, 4});
  Tensor si = I64({1}, {3});
  auto out = RunOp("PRelu", {&xi, &si});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(Values<int64_t>((*out)[0]), (std::vector<int64_t>{-12, 4}));
}

TEST(ClipTest, AttributeFormBeforeOpset11) {
  Tensor x = F32({4}, {-6, 0, 6, kInf});
  ExpectNear(Act("Clip", {&x}, Floats({{"min", -5.0f}, {"max", 5.0f}}), 6), {-5, 0, 5, 5});
  std::vector<float> r = Act("Clip", {&x}, Floats({{"max", 1.0f}}), 6);
  ExpectNear(r, {-6, 0, 1, 1});
  Tensor lo = F32({}, {-1});
  EXPECT_EQ(RunOp("Clip", {&x, &lo}, {}, 6).status().code(), StatusCode::kInvalidArgument);
}

TEST(ClipTest, InputFormWithOptionalBounds) {
  Tensor x = F32({5}, {-6, -1, 0, 6, kNaN});
  Tensor lo = F32({}, {-5});
  Tensor hi = F32({1}, {5});
  std::vector<float> r = Act("Clip", {&x, &lo, &hi});
  ExpectNear({r[0], r[1], r[2], r[3]}, {-5, -1, 0, 5});
  EXPECT_TRUE(std::isnan(r[4]));
  r = Act("Clip", {&x, &lo});
  ExpectNear({r[0], r[3]}, {-5, 6});
  r = Act("Clip", {&x, nullptr, &hi});  // min absent
  ExpectNear({r[0], r[3]}, {-6, 5});
  r = Act("Clip", {&x});
  ExpectNear({r[0], r[3]}, {-6, 6});
  // min > max: everything becomes max.
  Tensor hi_low = F32({}, {-10});
  r = Act("Clip", {&x, &lo, &hi_low});
  ExpectNear({r[0], r[1], r[2], r[3]}, {-10, -10, -10, -10});
  Tensor i8 = Make<int8_t>(DType::kInt8, {3}, {-128, 0, 127});
  Tensor i8lo = Make<int8_t>(DType::kInt8, {}, {0});
  auto out = RunOp("Clip", {&i8, &i8lo});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(Values<int8_t>((*out)[0]), (std::vector<int8_t>{0, 0, 127}));
  Tensor vec = F32({2}, {0, 1});
  EXPECT_EQ(RunOp("Clip", {&x, &vec}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(RunOp("Clip", {&x, &i8lo}).status().code(), StatusCode::kInvalidArgument);
}

// ---------------- Softmax family ----------------

TEST(SoftmaxFamilyTest, LogSoftmaxMatchesReference) {
  Tensor x = F32({2, 4}, {0, 1, 2, 3, 10000, 10001, 10002, 10003});
  ExpectNear(Act("LogSoftmax", {&x}), {-3.4401896f, -2.4401896f, -1.4401896f, -0.44018966f,
                                       -3.4401896f, -2.4401896f, -1.4401896f, -0.44018966f});
  // Opset < 13 flattens from axis 1 (default), so axis 0 normalises everything.
  Tensor y = F32({1, 2, 2}, {1, 2, 3, 4});
  std::vector<float> legacy = Act("LogSoftmax", {&y}, {}, 11);
  std::vector<float> modern = Act("LogSoftmax", {&y}, {}, 13);
  ExpectNear(legacy, {std::log(0.0320586f), std::log(0.0871443f), std::log(0.2368828f),
                      std::log(0.6439142f)});
  ExpectNear(modern, {std::log(0.2689414f), std::log(0.7310586f), std::log(0.2689414f),
                      std::log(0.7310586f)});
}

TEST(SoftmaxFamilyTest, HardmaxPicksFirstMaximum) {
  Tensor x = F32({2, 4}, {3, 3, 3, 1, 0, 1, 5, 2});
  ExpectNear(Act("Hardmax", {&x}), {1, 0, 0, 0, 0, 0, 1, 0});
  Attributes axis0;
  axis0.Set("axis", int64_t{0});
  ExpectNear(Act("Hardmax", {&x}, axis0), {1, 1, 0, 0, 0, 0, 1, 1});
  // Legacy axis 0: one maximum over the whole flattened tensor.
  ExpectNear(Act("Hardmax", {&x}, axis0, 11), {0, 0, 0, 0, 0, 0, 1, 0});
}

TEST(SoftmaxFamilyTest, Float64AndMiddleAxis) {
  Tensor d = Make<double>(DType::kFloat64, {2, 2, 1}, {1, 3, 2, 2});
  Attributes axis1;
  axis1.Set("axis", int64_t{1});
  auto out = RunOp("Softmax", {&d}, axis1);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  std::vector<double> v = Values<double>((*out)[0]);
  EXPECT_NEAR(v[0], 1 / (1 + std::exp(2.0)), 1e-15);
  EXPECT_NEAR(v[2], 0.5, 1e-15);
  Tensor h(DType::kFloat16, {2});
  ExpectUnsupported(RunOp("Softmax", {&h}).status(), "Softmax");
  Tensor s = F32({}, {1});
  EXPECT_EQ(RunOp("LogSoftmax", {&s}).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace orrery::ops
