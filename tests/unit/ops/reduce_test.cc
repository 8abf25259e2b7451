// Reductions and ArgMax / ArgMin (ops/cpu/reduce.cc).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
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

Attributes Axes(std::vector<int64_t> axes, int64_t keepdims = 1) {
  Attributes a;
  a.Set("axes", std::move(axes));
  a.Set("keepdims", keepdims);
  return a;
}

Attributes KeepDims(int64_t keepdims) {
  Attributes a;
  a.Set("keepdims", keepdims);
  return a;
}

// Reference: folds every element into its output with f, then finishes.
struct RefOp {
  const char* name;
  double init;
  std::function<double(double, double)> step;
  std::function<double(double, int64_t)> finish;
};

std::vector<RefOp> RefOps() {
  auto id = [](double a, int64_t) { return a; };
  return {
      {"ReduceSum", 0, [](double a, double x) { return a + x; }, id},
      {"ReduceMean", 0, [](double a, double x) { return a + x; },
       [](double a, int64_t n) { return a / static_cast<double>(n); }},
      {"ReduceMax", -INFINITY, [](double a, double x) { return std::max(a, x); }, id},
      {"ReduceMin", INFINITY, [](double a, double x) { return std::min(a, x); }, id},
      {"ReduceProd", 1, [](double a, double x) { return a * x; }, id},
      {"ReduceL1", 0, [](double a, double x) { return a + std::abs(x); }, id},
      {"ReduceL2", 0, [](double a, double x) { return a + x * x; },
       [](double a, int64_t) { return std::sqrt(a); }},
      {"ReduceSumSquare", 0, [](double a, double x) { return a + x * x; }, id},
      {"ReduceLogSum", 0, [](double a, double x) { return a + x; },
       [](double a, int64_t) { return std::log(a); }},
      {"ReduceLogSumExp", 0, [](double a, double x) { return a + std::exp(x); },
       [](double a, int64_t) { return std::log(a); }},
  };
}

// Reference reduction of a float tensor over `reduced` dims (keepdims=1 layout).
std::vector<double> Reference(const RefOp& op, const Tensor& x, const std::vector<bool>& reduced) {
  const Shape& s = x.shape();
  Shape out = s;
  int64_t count = 1;
  for (size_t i = 0; i < s.size(); ++i) {
    if (reduced[i]) {
      out[i] = 1;
      count *= s[i];
    }
  }
  std::vector<double> acc(static_cast<size_t>(NumElements(out)), op.init);
  for (int64_t i = 0; i < x.num_elements(); ++i) {
    int64_t rem = i, o = 0, stride = 1;
    for (size_t d = s.size(); d-- > 0;) {
      const int64_t c = rem % s[d];
      rem /= s[d];
      if (!reduced[d]) o += c * stride;
      stride *= out[d];
    }
    acc[static_cast<size_t>(o)] = op.step(acc[static_cast<size_t>(o)], x.data<float>()[i]);
  }
  for (double& a : acc) a = op.finish(a, count);
  return acc;
}

TEST(ReduceTest, EveryReductionMatchesReferenceOnEveryAxisSubset) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> dist(0.5f, 2.0f);  // positive: LogSum is defined
  for (const Shape& shape : {Shape{3, 4, 5}, Shape{2, 1, 3, 2}, Shape{7}, Shape{1, 6}}) {
    Tensor x(DType::kFloat32, shape);
    for (int64_t i = 0; i < x.num_elements(); ++i) x.data<float>()[i] = dist(rng);
    const size_t rank = shape.size();
    for (uint32_t mask = 1; mask < (1u << rank); ++mask) {
      std::vector<bool> reduced(rank);
      std::vector<int64_t> axes;
      for (size_t d = 0; d < rank; ++d) {
        reduced[d] = (mask >> d) & 1u;
        if (reduced[d]) axes.push_back(static_cast<int64_t>(d));
      }
      for (const RefOp& op : RefOps()) {
        const std::vector<double> want = Reference(op, x, reduced);
        // Attribute form (opset 13; ReduceSum takes an input there).
        Tensor axes_t = I64({static_cast<int64_t>(axes.size())}, axes);
        auto out = std::string(op.name) == "ReduceSum"
                       ? RunOp(op.name, {&x, &axes_t}, KeepDims(1), 13)
                       : RunOp(op.name, {&x}, Axes(axes), 13);
        ASSERT_TRUE(out.ok()) << op.name << ": " << out.status().ToString();
        // Input form (opset 18), keepdims = 0.
        auto out18 = RunOp(op.name, {&x, &axes_t}, KeepDims(0), 18);
        ASSERT_TRUE(out18.ok()) << op.name << ": " << out18.status().ToString();
        EXPECT_EQ((*out18)[0].num_elements(), (*out)[0].num_elements());
        std::vector<float> got = Values<float>((*out)[0]);
        std::vector<float> got18 = Values<float>((*out18)[0]);
        ASSERT_EQ(got.size(), want.size()) << op.name;
        for (size_t i = 0; i < want.size(); ++i) {
          const double tol = 1e-5 * std::max(1.0, std::abs(want[i]));
          EXPECT_NEAR(got[i], want[i], tol) << op.name << " mask " << mask << " at " << i;
          EXPECT_EQ(got18[i], got[i]) << op.name << " mask " << mask << " at " << i;
        }
      }
    }
  }
}

TEST(ReduceTest, KeepdimsAndShapes) {
  Tensor x = F32({3, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  Tensor axes = I64({1}, {1});
  auto out = RunOp("ReduceSum", {&x, &axes}, KeepDims(0), 13);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].shape(), (Shape{3, 2}));
  ExpectNear(Values<float>((*out)[0]), {4, 6, 12, 14, 20, 22});
  Tensor neg = I64({1}, {-2});
  out = RunOp("ReduceSum", {&x, &neg}, KeepDims(1), 13);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].shape(), (Shape{3, 1, 2}));
  // No axes: reduce everything (keepdims default 1).
  out = RunOp("ReduceMax", {&x}, {}, 13);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].shape(), (Shape{1, 1, 1}));
  ExpectNear(Values<float>((*out)[0]), {12});
  Tensor empty_axes = I64({0}, {});
  out = RunOp("ReduceSum", {&x, &empty_axes}, KeepDims(0), 13);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].shape(), (Shape{}));
  ExpectNear(Values<float>((*out)[0]), {78});
  // noop_with_empty_axes returns the input unchanged.
  Attributes noop;
  noop.Set("noop_with_empty_axes", int64_t{1});
  out = RunOp("ReduceSum", {&x, &empty_axes}, noop, 13);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].shape(), x.shape());
  EXPECT_EQ(Values<float>((*out)[0]), Values<float>(x));
  out = RunOp("ReduceMean", {&x}, noop, 18);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].shape(), x.shape());
  // A scalar reduces to itself.
  Tensor s = F32({}, {2.5f});
  out = RunOp("ReduceL2", {&s}, {}, 13);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ExpectNear(Values<float>((*out)[0]), {2.5f});
}

TEST(ReduceTest, EmptySetsReduceToIdentities) {
  Tensor x(DType::kFloat32, {2, 0, 3});
  const float inf = std::numeric_limits<float>::infinity();
  struct Case {
    const char* op;
    float want;
  };
  for (const Case& c : {Case{"ReduceSum", 0}, Case{"ReduceProd", 1}, Case{"ReduceMax", -inf},
                        Case{"ReduceMin", inf}, Case{"ReduceL1", 0}, Case{"ReduceL2", 0},
                        Case{"ReduceSumSquare", 0}, Case{"ReduceLogSum", -inf},
                        Case{"ReduceLogSumExp", -inf}}) {
    Tensor axes = I64({1}, {1});
    auto out = RunOp(c.op, {&x, &axes}, KeepDims(0), 18);
    ASSERT_TRUE(out.ok()) << c.op << ": " << out.status().ToString();
    EXPECT_EQ((*out)[0].shape(), (Shape{2, 3})) << c.op;
    for (float v : Values<float>((*out)[0])) EXPECT_EQ(v, c.want) << c.op;
  }
  Tensor axes = I64({1}, {1});
  auto mean = RunOp("ReduceMean", {&x, &axes}, KeepDims(0), 18);
  ASSERT_TRUE(mean.ok());
  EXPECT_TRUE(std::isnan(Values<float>((*mean)[0])[0]));
  Tensor xi(DType::kInt32, {0, 2});
  Tensor a0 = I64({1}, {0});
  auto imax = RunOp("ReduceMax", {&xi, &a0}, KeepDims(0), 18);
  ASSERT_TRUE(imax.ok());
  EXPECT_EQ(Values<int32_t>((*imax)[0]), (std::vector<int32_t>(2, std::numeric_limits<int32_t>::min())));
  auto imean = RunOp("ReduceMean", {&xi, &a0}, KeepDims(0), 18);
  ASSERT_TRUE(imean.ok());
  EXPECT_EQ(Values<int32_t>((*imean)[0]), (std::vector<int32_t>{0, 0}));
}

TEST(ReduceTest, IntegerReductions) {
  Tensor x = Make<int32_t>(DType::kInt32, {2, 3}, {1, -2, 3, 4, 5, -7});
  auto out = RunOp("ReduceSum", {&x}, Axes({1}, 0), 11);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(Values<int32_t>((*out)[0]), (std::vector<int32_t>{2, 2}));
  out = RunOp("ReduceMean", {&x}, Axes({0}, 0), 11);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(Values<int32_t>((*out)[0]), (std::vector<int32_t>{2, 1, -2}));  // truncates
  out = RunOp("ReduceProd", {&x}, Axes({1}, 0), 11);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(Values<int32_t>((*out)[0]), (std::vector<int32_t>{-6, -140}));
  out = RunOp("ReduceL1", {&x}, Axes({1}, 0), 11);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(Values<int32_t>((*out)[0]), (std::vector<int32_t>{6, 16}));
  out = RunOp("ReduceMin", {&x}, Axes({0, 1}, 0), 11);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(Values<int32_t>((*out)[0]), (std::vector<int32_t>{-7}));
  // Sums wrap in the element type.
  Tensor big = Make<int32_t>(DType::kInt32, {2}, {std::numeric_limits<int32_t>::max(), 1});
  out = RunOp("ReduceSum", {&big}, Axes({0}, 0), 11);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(Values<int32_t>((*out)[0]), (std::vector<int32_t>{std::numeric_limits<int32_t>::min()}));
  Tensor u8 = Make<uint8_t>(DType::kUint8, {3}, {200, 100, 7});
  out = RunOp("ReduceMax", {&u8}, Axes({0}, 0), 11);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(Values<uint8_t>((*out)[0]), (std::vector<uint8_t>{200}));
  Tensor d = Make<double>(DType::kFloat64, {2}, {1e300, 1e300});
  out = RunOp("ReduceLogSumExp", {&d}, Axes({0}, 0), 11);
  ASSERT_TRUE(out.ok());
  EXPECT_NEAR(Values<double>((*out)[0])[0], 1e300 + std::log(2.0), 1e285);
}

TEST(ReduceTest, NaNPropagatesThroughMax) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor x = F32({2, 2}, {1, nan, 3, 2});
  auto out = RunOp("ReduceMax", {&x}, Axes({1}, 0), 13);
  ASSERT_TRUE(out.ok());
  std::vector<float> v = Values<float>((*out)[0]);
  EXPECT_TRUE(std::isnan(v[0]));
  EXPECT_EQ(v[1], 3.0f);
}

TEST(ReduceTest, RejectsBadAxes) {
  Tensor x = F32({2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_EQ(RunOp("ReduceMean", {&x}, Axes({2}), 13).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(RunOp("ReduceMean", {&x}, Axes({0, -2}), 13).status().code(),
            StatusCode::kInvalidArgument);
  Tensor axes = I64({1}, {0});
  // Axes as an input only from opset 13 (ReduceSum) / 18 (the others).
  EXPECT_EQ(RunOp("ReduceMean", {&x, &axes}, {}, 13).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(RunOp("ReduceSum", {&x, &axes}, {}, 11).status().code(),
            StatusCode::kInvalidArgument);
  Tensor axes_i32 = Make<int32_t>(DType::kInt32, {1}, {0});
  EXPECT_EQ(RunOp("ReduceSum", {&x, &axes_i32}, {}, 13).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(RunOp("ReduceSum", {&x, &axes}, Axes({0}), 13).status().code(),
            StatusCode::kInvalidArgument);
  Tensor h(DType::kFloat16, {2});
  Status st = RunOp("ReduceSum", {&h}, {}, 13).status();
  EXPECT_NE(st.message().find("unsupported"), std::string::npos);
  EXPECT_NE(st.message().find("ReduceSum"), std::string::npos);
}

TEST(ReduceTest, InferenceWaitsForUnknownAxes) {
  const KernelDef* def = OpRegistry::Global().Find("ReduceSum", Backend::kCpu);
  ASSERT_NE(def, nullptr);
  const TensorType types[] = {{DType::kFloat32, {2, 3}}, {DType::kInt64, {1}}};
  const Tensor* values[] = {nullptr, nullptr};
  Attributes attrs;
  InferContext ctx{types, values, attrs, 13};
  std::vector<TensorType> out;
  EXPECT_EQ(def->infer(ctx, &out).code(), StatusCode::kUnavailable);
}

// ---------------- ArgMax / ArgMin ----------------

Attributes ArgAttrs(int64_t axis, int64_t keepdims, int64_t last = 0) {
  Attributes a;
  a.Set("axis", axis);
  a.Set("keepdims", keepdims);
  a.Set("select_last_index", last);
  return a;
}

TEST(ArgTest, AxesKeepdimsAndTies) {
  Tensor x = F32({2, 2}, {2, 1, 3, 10});
  auto out = RunOp("ArgMax", {&x}, ArgAttrs(1, 0));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].dtype(), DType::kInt64);
  EXPECT_EQ((*out)[0].shape(), (Shape{2}));
  EXPECT_EQ(Values<int64_t>((*out)[0]), (std::vector<int64_t>{0, 1}));
  out = RunOp("ArgMax", {&x}, {});  // axis 0, keepdims 1
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].shape(), (Shape{1, 2}));
  EXPECT_EQ(Values<int64_t>((*out)[0]), (std::vector<int64_t>{1, 1}));
  Tensor ties = F32({2, 2}, {2, 2, 3, 10});
  out = RunOp("ArgMax", {&ties}, ArgAttrs(-1, 1, 1));
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].shape(), (Shape{2, 1}));
  EXPECT_EQ(Values<int64_t>((*out)[0]), (std::vector<int64_t>{1, 1}));
  out = RunOp("ArgMin", {&ties}, ArgAttrs(1, 0, 0));
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(Values<int64_t>((*out)[0]), (std::vector<int64_t>{0, 0}));
  out = RunOp("ArgMin", {&ties}, ArgAttrs(1, 0, 1));
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(Values<int64_t>((*out)[0]), (std::vector<int64_t>{1, 0}));
}

TEST(ArgTest, MiddleAxisIntegersAndNaN) {
  // [2, 3, 2]: argmax over the middle axis.
  Tensor x = Make<int64_t>(DType::kInt64, {2, 3, 2}, {1, 9, 5, 2, 3, 9, 0, 0, 7, -1, 7, 8});
  auto out = RunOp("ArgMax", {&x}, ArgAttrs(1, 0));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(Values<int64_t>((*out)[0]), (std::vector<int64_t>{1, 0, 1, 2}));
  out = RunOp("ArgMax", {&x}, ArgAttrs(1, 0, 1));
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(Values<int64_t>((*out)[0]), (std::vector<int64_t>{1, 2, 2, 2}));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor f = F32({4}, {1, nan, 5, nan});
  out = RunOp("ArgMax", {&f}, ArgAttrs(0, 0));
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(Values<int64_t>((*out)[0]), (std::vector<int64_t>{1}));
  out = RunOp("ArgMin", {&f}, ArgAttrs(0, 0, 1));
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(Values<int64_t>((*out)[0]), (std::vector<int64_t>{3}));
}

TEST(ArgTest, RejectsBadInputs) {
  Tensor empty(DType::kFloat32, {0, 3});
  EXPECT_EQ(RunOp("ArgMax", {&empty}, ArgAttrs(0, 1)).status().code(),
            StatusCode::kInvalidArgument);
  Tensor ok = F32({2}, {1, 2});
  EXPECT_EQ(RunOp("ArgMin", {&ok}, ArgAttrs(1, 1)).status().code(), StatusCode::kInvalidArgument);
  Tensor s = F32({}, {1});
  EXPECT_EQ(RunOp("ArgMin", {&s}).status().code(), StatusCode::kInvalidArgument);
  // Reducing over a non-empty axis of an otherwise empty tensor is fine.
  auto out = RunOp("ArgMax", {&empty}, ArgAttrs(1, 1));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].shape(), (Shape{0, 1}));
}

}  // namespace
}  // namespace orrery::ops
