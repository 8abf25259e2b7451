// Expand, Tile, Pad. Pad expectations come from numpy.pad.
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

TEST(ExpandTest, BroadcastsBothWays) {
  Tensor x = F32({3, 1}, {1, 2, 3});
  Tensor s = I64({3}, {2, 1, 6});
  Tensor y = Run1("Expand", {&x, &s});
  EXPECT_EQ(y.shape(), (Shape{2, 3, 6}));
  std::vector<float> want;
  for (int b = 0; b < 2; ++b) {
    for (float v : {1.0f, 2.0f, 3.0f}) want.insert(want.end(), 6, v);
  }
  EXPECT_EQ(Values<float>(y), want);
  // A smaller requested shape keeps the input dims (bidirectional).
  Tensor s2 = I64({1}, {1});
  EXPECT_EQ(Run1("Expand", {&x, &s2}).shape(), (Shape{3, 1}));
  Tensor s3 = I64({2}, {3, 4});
  EXPECT_EQ(Values<float>(Run1("Expand", {&x, &s3})),
            (std::vector<float>{1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3}));
}

TEST(ExpandTest, RejectsBadShapes) {
  Tensor x = F32({3, 1}, {1, 2, 3});
  Tensor neg = I64({2}, {3, -1});
  EXPECT_EQ(TryOp("Expand", {&x, &neg}, {}).status().code(), StatusCode::kInvalidArgument);
  Tensor mismatch = I64({2}, {2, 4});
  EXPECT_EQ(TryOp("Expand", {&x, &mismatch}, {}).status().code(), StatusCode::kInvalidArgument);
  Tensor huge = I64({3}, {int64_t{1} << 40, int64_t{1} << 40, 1});
  EXPECT_FALSE(TryOp("Expand", {&x, &huge}, {}).ok());
  Tensor i32 = I32({2}, {3, 4});
  EXPECT_EQ(TryOp("Expand", {&x, &i32}, {}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(TryOp("Expand", {&x, &mismatch}, {}, {.hide_values = true}).status().code(),
            StatusCode::kUnavailable);
}

TEST(TileTest, RepeatsEachAxis) {
  Tensor x = F32({2, 2}, {0, 1, 2, 3});
  Tensor r = I64({2}, {2, 2});
  Tensor y = Run1("Tile", {&x, &r});
  EXPECT_EQ(y.shape(), (Shape{4, 4}));
  EXPECT_EQ(Values<float>(y), (std::vector<float>{0, 1, 0, 1, 2, 3, 2, 3, 0, 1, 0, 1, 2, 3, 2, 3}));
  Tensor r2 = I64({2}, {1, 3});
  EXPECT_EQ(Values<float>(Run1("Tile", {&x, &r2})),
            (std::vector<float>{0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3}));
  Tensor zero = I64({2}, {0, 3});
  EXPECT_EQ(Run1("Tile", {&x, &zero}).shape(), (Shape{0, 6}));
}

TEST(TileTest, RejectsBadRepeats) {
  Tensor x = F32({2, 2}, {0, 1, 2, 3});
  Tensor neg = I64({2}, {1, -1});
  EXPECT_EQ(TryOp("Tile", {&x, &neg}, {}).status().code(), StatusCode::kInvalidArgument);
  Tensor short_r = I64({1}, {2});
  EXPECT_EQ(TryOp("Tile", {&x, &short_r}, {}).status().code(), StatusCode::kInvalidArgument);
  const int64_t max = std::numeric_limits<int64_t>::max();
  Tensor overflow = I64({2}, {max, max});
  EXPECT_FALSE(TryOp("Tile", {&x, &overflow}, {}).ok());
}

const std::vector<int32_t> kPadIn = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};

Tensor PadRun(const char* mode, std::vector<int64_t> pads, const Tensor& x) {
  Tensor p = I64({static_cast<int64_t>(pads.size())}, pads);
  return Run1("Pad", {&x, &p}, Attrs({{"mode", std::string(mode)}}));
}

TEST(PadTest, ReflectEdgeWrapMatchNumpy) {
  Tensor x = I32({3, 4}, kPadIn);
  Tensor r = PadRun("reflect", {1, 2, 1, 3}, x);
  EXPECT_EQ(r.shape(), (Shape{5, 9}));
  EXPECT_EQ(
      Values<int32_t>(r),
      (std::vector<int32_t>{6, 5, 4, 5, 6,  7, 6, 5, 4,  2,  1,  0, 1, 2, 3, 2, 1, 0, 6, 5, 4, 5, 6,
                            7, 6, 5, 4, 10, 9, 8, 9, 10, 11, 10, 9, 8, 6, 5, 4, 5, 6, 7, 6, 5, 4}));
  EXPECT_EQ(Values<int32_t>(PadRun("edge", {1, 2, 1, 3}, x)),
            (std::vector<int32_t>{0, 0,  0,  1,  2,  3,  3, 3, 3, 0, 0,  0,  1,  2,  3,
                                  3, 3,  3,  4,  4,  4,  5, 6, 7, 7, 7,  7,  8,  8,  8,
                                  9, 10, 11, 11, 11, 11, 8, 8, 8, 9, 10, 11, 11, 11, 11}));
  EXPECT_EQ(Values<int32_t>(PadRun("wrap", {1, 2, 1, 3}, x)),
            (std::vector<int32_t>{10, 11, 8,  9, 10, 11, 8, 9, 10, 2, 3, 0, 1,  2,  3,
                                  0,  1,  2,  6, 7,  4,  5, 6, 7,  4, 5, 6, 10, 11, 8,
                                  9,  10, 11, 8, 9,  10, 2, 3, 0,  1, 2, 3, 0,  1,  2}));
}

TEST(PadTest, PadsLargerThanTheInput) {
  Tensor x = I32({3}, {0, 1, 2});
  EXPECT_EQ(Values<int32_t>(PadRun("reflect", {5, 6}, x)),
            (std::vector<int32_t>{1, 0, 1, 2, 1, 0, 1, 2, 1, 0, 1, 2, 1, 0}));
  EXPECT_EQ(Values<int32_t>(PadRun("wrap", {5, 6}, x)),
            (std::vector<int32_t>{1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2}));
  Tensor one = I32({1}, {7});
  EXPECT_EQ(Values<int32_t>(PadRun("reflect", {2, 2}, one)), (std::vector<int32_t>(5, 7)));
}

TEST(PadTest, ConstantValueNegativePadsAndAxes) {
  Tensor x = F32({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor pads = I64({4}, {0, 1, 1, -1});
  Tensor v = F32({}, {9});
  Tensor y = Run1("Pad", {&x, &pads, &v});
  EXPECT_EQ(y.shape(), (Shape{3, 3}));
  EXPECT_EQ(Values<float>(y), (std::vector<float>{9, 1, 2, 9, 4, 5, 9, 9, 9}));
  // Opset 18 axes: pad only the last dim.
  Tensor p2 = I64({2}, {2, 0});
  Tensor axes = I64({1}, {-1});
  Tensor z = Run1("Pad", {&x, &p2, nullptr, &axes}, {}, {.opset = 18});
  EXPECT_EQ(Values<float>(z), (std::vector<float>{0, 0, 1, 2, 3, 0, 0, 4, 5, 6}));
  // Opset 2..10: pads and value as attributes.
  Tensor w = Run1("Pad", {&x}, Attrs({{"pads", std::vector<int64_t>{1, 0, 0, 0}}, {"value", 1.5f}}),
                  {.opset = 10});
  EXPECT_EQ(Values<float>(w), (std::vector<float>{1.5f, 1.5f, 1.5f, 1, 2, 3, 4, 5, 6}));
  // Cropping under edge mode samples the cropped tensor.
  Tensor crop = I64({4}, {0, -1, 0, 1});
  Tensor e = Run1("Pad", {&x, &crop}, Attrs({{"mode", std::string("edge")}}));
  EXPECT_EQ(Values<float>(e), (std::vector<float>{2, 3, 3, 5, 6, 6}));
}

TEST(PadTest, RejectsBadPads) {
  Tensor x = Iota({2, 3});
  Tensor short_pads = I64({2}, {1, 1});
  EXPECT_EQ(TryOp("Pad", {&x, &short_pads}, {}).status().code(), StatusCode::kInvalidArgument);
  Tensor over_crop = I64({4}, {-3, 0, 0, 0});
  EXPECT_EQ(TryOp("Pad", {&x, &over_crop}, {}).status().code(), StatusCode::kInvalidArgument);
  const int64_t max = std::numeric_limits<int64_t>::max();
  Tensor overflow = I64({4}, {max, 0, max, 0});
  EXPECT_EQ(TryOp("Pad", {&x, &overflow}, {}).status().code(), StatusCode::kInvalidArgument);
  const int64_t min = std::numeric_limits<int64_t>::min();
  Tensor min_max = I64({4}, {min, 0, max, 0});
  EXPECT_EQ(TryOp("Pad", {&x, &min_max}, Attrs({{"mode", std::string("edge")}})).status().code(),
            StatusCode::kInvalidArgument);
  Tensor huge = I64({4}, {int64_t{1} << 40, 0, 0, int64_t{1} << 30});
  EXPECT_FALSE(TryOp("Pad", {&x, &huge}, {}).ok());
  Tensor empty = Iota({0, 3});
  Tensor grow = I64({4}, {1, 0, 1, 0});
  EXPECT_EQ(
      TryOp("Pad", {&empty, &grow}, Attrs({{"mode", std::string("reflect")}})).status().code(),
      StatusCode::kInvalidArgument);
  EXPECT_EQ(Run1("Pad", {&empty, &grow}).shape(), (Shape{2, 3}));  // constant is fine
  Tensor wrong_type = testing::F64({}, {1.0});
  EXPECT_EQ(TryOp("Pad", {&x, &grow, &wrong_type}, {}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(TryOp("Pad", {&x}, Attrs({{"mode", std::string("mirror")}})).status().code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace orrery::ops
