// Concat, Split, Slice.
#include <gtest/gtest.h>

#include <limits>

#include "data_op_test_util.h"

namespace orrery::ops {
namespace {

using testing::Attrs;
using testing::F32;
using testing::I32;
using testing::I64;
using testing::Iota;
using testing::Run1;
using testing::TryOp;
using testing::Values;

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();

TEST(ConcatTest, EveryAxisIncludingNegative) {
  Tensor a = F32({2, 2}, {1, 2, 3, 4});
  Tensor b = F32({2, 2}, {5, 6, 7, 8});
  Tensor y0 = Run1("Concat", {&a, &b}, Attrs({{"axis", int64_t{0}}}));
  EXPECT_EQ(y0.shape(), (Shape{4, 2}));
  EXPECT_EQ(Values<float>(y0), (std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8}));
  Tensor y1 = Run1("Concat", {&a, &b}, Attrs({{"axis", int64_t{-1}}}));
  EXPECT_EQ(y1.shape(), (Shape{2, 4}));
  EXPECT_EQ(Values<float>(y1), (std::vector<float>{1, 2, 5, 6, 3, 4, 7, 8}));
}

TEST(ConcatTest, UnevenAndEmptyInputsAnyDtype) {
  Tensor a = testing::Make<int16_t>(DType::kInt16, {2, 1}, {1, 2});
  Tensor e = testing::Make<int16_t>(DType::kInt16, {2, 0}, {});
  Tensor b = testing::Make<int16_t>(DType::kInt16, {2, 3}, {3, 4, 5, 6, 7, 8});
  Tensor y = Run1("Concat", {&a, &e, &b}, Attrs({{"axis", int64_t{1}}}));
  EXPECT_EQ(y.shape(), (Shape{2, 4}));
  EXPECT_EQ(Values<int16_t>(y), (std::vector<int16_t>{1, 3, 4, 5, 2, 6, 7, 8}));
}

TEST(ConcatTest, RejectsMismatches) {
  Tensor a = Iota({2, 2});
  Tensor b = Iota({3, 3});
  Tensor i = I64({2, 2}, {1, 2, 3, 4});
  EXPECT_EQ(TryOp("Concat", {&a, &b}, Attrs({{"axis", int64_t{0}}})).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(TryOp("Concat", {&a, &i}, Attrs({{"axis", int64_t{0}}})).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(TryOp("Concat", {&a, &a}, Attrs({{"axis", int64_t{2}}})).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(TryOp("Concat", {&a, &a}, {}).status().code(), StatusCode::kInvalidArgument);
}

TEST(SplitTest, EqualPartsAndSplitInput) {
  Tensor x = F32({2, 6}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  auto r = TryOp("Split", {&x}, Attrs({{"axis", int64_t{1}}}), {.num_outputs = 2});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(Values<float>((*r)[0]), (std::vector<float>{1, 2, 3, 7, 8, 9}));
  EXPECT_EQ(Values<float>((*r)[1]), (std::vector<float>{4, 5, 6, 10, 11, 12}));
  Tensor split = I64({2}, {2, 4});
  r = TryOp("Split", {&x, &split}, Attrs({{"axis", int64_t{1}}}), {.num_outputs = 2});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)[0].shape(), (Shape{2, 2}));
  EXPECT_EQ(Values<float>((*r)[1]), (std::vector<float>{3, 4, 5, 6, 9, 10, 11, 12}));
  // Opset 11: split as an attribute.
  r = TryOp("Split", {&x}, Attrs({{"axis", int64_t{-1}}, {"split", std::vector<int64_t>{1, 5}}}),
            {.opset = 11, .num_outputs = 2});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(Values<float>((*r)[0]), (std::vector<float>{1, 7}));
}

TEST(SplitTest, ZeroSizeAndUnevenChunks) {
  Tensor empty = Iota({0});
  Tensor zeros = I64({3}, {0, 0, 0});
  auto r = TryOp("Split", {&empty, &zeros}, {}, {.num_outputs = 3});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  for (const Tensor& t : *r) EXPECT_EQ(t.shape(), (Shape{0}));
  Tensor x = Iota({7});
  // Opset 18: ceil-sized chunks with a smaller last one.
  r = TryOp("Split", {&x}, Attrs({{"num_outputs", int64_t{3}}}), {.opset = 18, .num_outputs = 3});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(Values<float>((*r)[2]), (std::vector<float>{6}));
  EXPECT_EQ((*r)[0].shape(), (Shape{3}));
  // Before 18 the axis must divide evenly.
  EXPECT_EQ(TryOp("Split", {&x}, {}, {.num_outputs = 3}).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(SplitTest, RejectsBadSplits) {
  Tensor x = Iota({6});
  Tensor bad_sum = I64({2}, {2, 3});
  EXPECT_EQ(TryOp("Split", {&x, &bad_sum}, {}, {.num_outputs = 2}).status().code(),
            StatusCode::kInvalidArgument);
  Tensor negative = I64({2}, {7, -1});
  EXPECT_EQ(TryOp("Split", {&x, &negative}, {}, {.num_outputs = 2}).status().code(),
            StatusCode::kInvalidArgument);
  Tensor wrong_count = I64({3}, {2, 2, 2});
  EXPECT_EQ(TryOp("Split", {&x, &wrong_count}, {}, {.num_outputs = 2}).status().code(),
            StatusCode::kInvalidArgument);
  Tensor ok = I64({2}, {3, 3});
  EXPECT_EQ(TryOp("Split", {&x, &ok}, {}, {.num_outputs = 2, .hide_values = true}).status().code(),
            StatusCode::kUnavailable);
}

// numpy-style reference for one axis: x[start:end:step] over a 1-D iota.
std::vector<float> PySlice(int64_t n, int64_t start, int64_t end, int64_t step) {
  std::vector<float> out;
  if (start < 0) start += n;
  if (end < 0) end += n;
  if (step > 0) {
    start = std::clamp<int64_t>(start, 0, n);
    end = std::clamp<int64_t>(end, 0, n);
    for (int64_t i = start; i < end; i += step) out.push_back(static_cast<float>(i));
  } else {
    start = std::clamp<int64_t>(start, -1, n - 1);
    end = std::clamp<int64_t>(end, -1, n - 1);
    for (int64_t i = start; i > end; i += step) out.push_back(static_cast<float>(i));
  }
  return out;
}

TEST(SliceTest, ClampingMatchesNumpy) {
  const int64_t n = 10;
  Tensor x = Iota({n});
  const int64_t points[] = {kMin, -1000, -11, -10, -3, -1, 0, 1, 5, 9, 10, 11, 1000, kMax};
  for (int64_t start : points) {
    for (int64_t end : points) {
      for (int64_t step : {int64_t{1}, int64_t{2}, int64_t{-1}, int64_t{-3}}) {
        Tensor s = I64({1}, {start});
        Tensor e = I64({1}, {end});
        Tensor a = I64({1}, {0});
        Tensor st = I64({1}, {step});
        Tensor y = Run1("Slice", {&x, &s, &e, &a, &st});
        // The spec clamps a far-negative start to 0 for negative steps where
        // Python would clamp it to -1 (empty).
        const int64_t py_start = step < 0 && start < -n ? 0 : start;
        EXPECT_EQ(Values<float>(y), PySlice(n, py_start, end, step))
            << start << ":" << end << ":" << step;
      }
    }
  }
}

TEST(SliceTest, OnnxCases) {
  Tensor x = Iota({20, 10, 5});
  Tensor starts = I64({3}, {20, 10, 4});
  Tensor ends = I64({3}, {0, 0, 1});
  Tensor axes = I64({3}, {0, 1, 2});
  Tensor steps = I64({3}, {-1, -3, -2});
  Tensor y = Run1("Slice", {&x, &starts, &ends, &axes, &steps});
  EXPECT_EQ(y.shape(), (Shape{19, 3, 2}));
  // y[0, 0, :] = x[19, 9, 4:1:-2] = elements 19*50 + 9*5 + {4, 2}
  EXPECT_EQ(Values<float>(y)[0], 19 * 50 + 45 + 4);
  EXPECT_EQ(Values<float>(y)[1], 19 * 50 + 45 + 2);
  // Negative axes, default steps, int32 inputs.
  Tensor s32 = I32({2}, {3, 0});
  Tensor e32 = I32({2}, {4, 2});
  Tensor a32 = I32({2}, {-1, -3});
  Tensor z = Run1("Slice", {&x, &s32, &e32, &a32});
  EXPECT_EQ(z.shape(), (Shape{2, 10, 1}));
  EXPECT_EQ(Values<float>(z)[1], 8);
  // Out of bounds start gives an empty dim.
  Tensor big = I64({1}, {1000});
  Tensor one = I64({1}, {1});
  EXPECT_EQ(Run1("Slice", {&x, &big, &big, &one}).shape(), (Shape{20, 0, 5}));
}

TEST(SliceTest, Opset9AttributesAndErrors) {
  Tensor x = Iota({4, 4});
  Tensor y = Run1("Slice", {&x},
                  Attrs({{"starts", std::vector<int64_t>{1}},
                         {"ends", std::vector<int64_t>{kMax}},
                         {"axes", std::vector<int64_t>{1}}}),
                  {.opset = 9});
  EXPECT_EQ(y.shape(), (Shape{4, 3}));
  EXPECT_EQ(Values<float>(y)[0], 1);
  Tensor s = I64({1}, {0});
  Tensor e = I64({1}, {2});
  Tensor a = I64({1}, {0});
  Tensor zero = I64({1}, {0});
  EXPECT_EQ(TryOp("Slice", {&x, &s, &e, &a, &zero}, {}).status().code(),
            StatusCode::kInvalidArgument);
  Tensor twice = I64({2}, {0, 0});
  Tensor s2 = I64({2}, {0, 0});
  EXPECT_EQ(TryOp("Slice", {&x, &s2, &s2, &twice}, {}).status().code(),
            StatusCode::kInvalidArgument);
  Tensor short_ends = I64({2}, {1, 1});
  EXPECT_EQ(TryOp("Slice", {&x, &s, &short_ends}, {}).status().code(),
            StatusCode::kInvalidArgument);
  Tensor huge_step = I64({1}, {kMin});
  Tensor from_end = I64({1}, {kMax});
  Tensor to_start = I64({1}, {kMin});
  Tensor r = Run1("Slice", {&x, &from_end, &to_start, &a, &huge_step});
  EXPECT_EQ(r.shape(), (Shape{1, 4}));
  EXPECT_EQ(Values<float>(r)[0], 12);
  EXPECT_EQ(TryOp("Slice", {&x, &s, &e}, {}, {.hide_values = true}).status().code(),
            StatusCode::kUnavailable);
}

}  // namespace
}  // namespace orrery::ops
