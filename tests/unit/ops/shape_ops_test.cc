// Shape, Size, Squeeze, Unsqueeze, Reshape, Flatten, Identity, Dropout, Constant.
#include <gtest/gtest.h>

#include <optional>

#include "data_op_test_util.h"

namespace orrery::ops {
namespace {

using testing::Attrs;
using testing::F32;
using testing::I64;
using testing::Iota;
using testing::IsUnsupported;
using testing::Run1;
using testing::RunOptions;
using testing::TryOp;
using testing::Values;

TEST(ShapeOpTest, StartEndAndClamping) {
  Tensor x = Iota({3, 4, 5});
  EXPECT_EQ(Values<int64_t>(Run1("Shape", {&x})), (std::vector<int64_t>{3, 4, 5}));
  struct Case {
    std::optional<int64_t> start, end;
    std::vector<int64_t> want;
  } cases[] = {{1, {}, {4, 5}},      {{}, 1, {3}},        {-1, {}, {5}},
               {{}, -1, {3, 4}},     {1, -1, {4}},        {1, 2, {4}},
               {-10, {}, {3, 4, 5}}, {{}, 10, {3, 4, 5}}, {2, 1, {}}};
  for (const Case& c : cases) {
    Attributes a;
    if (c.start) a.Set("start", *c.start);
    if (c.end) a.Set("end", *c.end);
    Tensor y = Run1("Shape", {&x}, a, {.opset = 15});
    EXPECT_EQ(y.shape(), (Shape{static_cast<int64_t>(c.want.size())}));
    EXPECT_EQ(Values<int64_t>(y), c.want);
  }
}

TEST(ShapeOpTest, SizeIsAnInt64Scalar) {
  Tensor x = Iota({3, 4, 5});
  Tensor y = Run1("Size", {&x});
  EXPECT_EQ(y.dtype(), DType::kInt64);
  EXPECT_TRUE(y.shape().empty());
  EXPECT_EQ(Values<int64_t>(y), (std::vector<int64_t>{60}));
  Tensor empty = Iota({2, 0});
  EXPECT_EQ(Values<int64_t>(Run1("Size", {&empty})), (std::vector<int64_t>{0}));
}

TEST(SqueezeTest, AttributeBefore13InputFrom13) {
  Tensor x = Iota({1, 3, 1, 5});
  EXPECT_EQ(
      Run1("Squeeze", {&x}, Attrs({{"axes", std::vector<int64_t>{0}}}), {.opset = 11}).shape(),
      (Shape{3, 1, 5}));
  Tensor axes = I64({1}, {-2});
  Tensor y = Run1("Squeeze", {&x, &axes});
  EXPECT_EQ(y.shape(), (Shape{1, 3, 5}));
  EXPECT_EQ(y.raw_data(), x.raw_data());                    // a view, no copy
  EXPECT_EQ(Run1("Squeeze", {&x}).shape(), (Shape{3, 5}));  // no axes: every 1
}

TEST(SqueezeTest, RejectsNonUnitDimsAndBadAxes) {
  Tensor x = Iota({1, 3});
  Tensor bad = I64({1}, {1});
  EXPECT_EQ(TryOp("Squeeze", {&x, &bad}, {}).status().code(), StatusCode::kInvalidArgument);
  Tensor oob = I64({1}, {2});
  EXPECT_EQ(TryOp("Squeeze", {&x, &oob}, {}).status().code(), StatusCode::kInvalidArgument);
  Tensor twice = I64({2}, {0, -2});
  EXPECT_EQ(TryOp("Squeeze", {&x, &twice}, {}).status().code(), StatusCode::kInvalidArgument);
}

TEST(UnsqueezeTest, UnsortedAndNegativeAxes) {
  Tensor x = Iota({3, 4, 5});
  Tensor axes = I64({3}, {5, 4, 2});
  EXPECT_EQ(Run1("Unsqueeze", {&x, &axes}).shape(), (Shape{3, 4, 1, 5, 1, 1}));
  Tensor neg = I64({1}, {-1});
  EXPECT_EQ(Run1("Unsqueeze", {&x, &neg}).shape(), (Shape{3, 4, 5, 1}));
  EXPECT_EQ(
      Run1("Unsqueeze", {&x}, Attrs({{"axes", std::vector<int64_t>{0, 4}}}), {.opset = 11}).shape(),
      (Shape{1, 3, 4, 5, 1}));
  Tensor scalar = F32({}, {7});
  Tensor zero = I64({1}, {0});
  EXPECT_EQ(Run1("Unsqueeze", {&scalar, &zero}).shape(), (Shape{1}));
}

TEST(UnsqueezeTest, RejectsDuplicatesOutOfRangeAndMissingAxes) {
  Tensor x = Iota({3});
  Tensor dup = I64({2}, {0, 0});
  EXPECT_EQ(TryOp("Unsqueeze", {&x, &dup}, {}).status().code(), StatusCode::kInvalidArgument);
  Tensor oob = I64({1}, {3});
  EXPECT_EQ(TryOp("Unsqueeze", {&x, &oob}, {}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(TryOp("Unsqueeze", {&x}, {}).status().code(), StatusCode::kInvalidArgument);
}

TEST(ShapeOpTest, ValueDependentInferenceAsksForValues) {
  Tensor x = Iota({2, 3});
  Tensor shape = I64({1}, {6});
  Tensor axes = I64({1}, {0});
  RunOptions hidden{.hide_values = true};
  EXPECT_EQ(TryOp("Reshape", {&x, &shape}, {}, hidden).status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(TryOp("Unsqueeze", {&x, &axes}, {}, hidden).status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(TryOp("Squeeze", {&x, &axes}, {}, hidden).status().code(), StatusCode::kUnavailable);
  // Shape needs no value.
  EXPECT_TRUE(TryOp("Shape", {&x}, {}, hidden).ok());
}

TEST(ShapeOpTest, ViewsWorkForEveryDtype) {
  for (DType d : {DType::kInt8, DType::kUint16, DType::kFloat16, DType::kBool, DType::kUint64,
                  DType::kFloat64}) {
    Tensor x(d, {2, 3});
    EXPECT_EQ(Run1("Identity", {&x}).dtype(), d);
    EXPECT_EQ(Run1("Flatten", {&x}, Attrs({{"axis", int64_t{0}}})).shape(), (Shape{1, 6}));
    Tensor shape = I64({2}, {3, -1});
    EXPECT_EQ(Run1("Reshape", {&x, &shape}).shape(), (Shape{3, 2}));
  }
}

TEST(DropoutTest, InferenceIsIdentityWithAllTrueMask) {
  Tensor x = F32({3}, {-1, 0, 1});
  auto r = TryOp("Dropout", {&x}, Attrs({{"seed", int64_t{0}}}), {.num_outputs = 2});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(Values<float>((*r)[0]), (std::vector<float>{-1, 0, 1}));
  EXPECT_EQ((*r)[1].dtype(), DType::kBool);
  EXPECT_EQ(Values<uint8_t>((*r)[1]), (std::vector<uint8_t>{1, 1, 1}));
  // Opset 7..9 masks have the input dtype.
  auto old = TryOp("Dropout", {&x}, Attrs({{"ratio", 0.2f}}), {.opset = 7, .num_outputs = 2});
  ASSERT_TRUE(old.ok()) << old.status().ToString();
  EXPECT_EQ((*old)[1].dtype(), DType::kFloat32);
  EXPECT_EQ(Values<float>((*old)[1]), (std::vector<float>{1, 1, 1}));
}

TEST(DropoutTest, TrainingModeNeedsAZeroRatio) {
  Tensor x = F32({2}, {1, 2});
  Tensor half = F32({}, {0.5f});
  Tensor zero = F32({}, {0.0f});
  Tensor on = testing::Bool({}, {1});
  Tensor off = testing::Bool({}, {0});
  EXPECT_TRUE(IsUnsupported(TryOp("Dropout", {&x, &half, &on}, {}).status()));
  EXPECT_TRUE(IsUnsupported(TryOp("Dropout", {&x, nullptr, &on}, {}).status()));
  EXPECT_EQ(Values<float>(Run1("Dropout", {&x, &zero, &on})), (std::vector<float>{1, 2}));
  EXPECT_EQ(Values<float>(Run1("Dropout", {&x, &half, &off})), (std::vector<float>{1, 2}));
  // Unknown at inference time: the check happens at run time.
  EXPECT_TRUE(
      IsUnsupported(TryOp("Dropout", {&x, &half, &on}, {}, {.hide_values = true}).status()));
}

TEST(ConstantTest, ScalarAndListAttributes) {
  Tensor f = Run1("Constant", {}, Attrs({{"value_float", 2.5f}}));
  EXPECT_EQ(f.dtype(), DType::kFloat32);
  EXPECT_TRUE(f.shape().empty());
  EXPECT_EQ(Values<float>(f), (std::vector<float>{2.5f}));
  Tensor fs = Run1("Constant", {}, Attrs({{"value_floats", std::vector<float>{1, 2}}}));
  EXPECT_EQ(fs.shape(), (Shape{2}));
  Tensor i = Run1("Constant", {}, Attrs({{"value_int", int64_t{-3}}}));
  EXPECT_EQ(Values<int64_t>(i), (std::vector<int64_t>{-3}));
  Tensor is = Run1("Constant", {}, Attrs({{"value_ints", std::vector<int64_t>{4, 5, 6}}}));
  EXPECT_EQ(Values<int64_t>(is), (std::vector<int64_t>{4, 5, 6}));
  EXPECT_TRUE(
      IsUnsupported(TryOp("Constant", {}, Attrs({{"value_string", std::string("hi")}})).status()));
  EXPECT_TRUE(IsUnsupported(
      TryOp("Constant", {}, Attrs({{"value_strings", std::vector<std::string>{"a"}}})).status()));
  EXPECT_EQ(TryOp("Constant", {}, {}).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace orrery::ops
