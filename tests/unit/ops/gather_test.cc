// Gather, GatherElements, ScatterND.
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

TEST(GatherTest, AxesAndIndexShapes) {
  Tensor data = Iota({3, 4});
  Tensor idx = I64({2}, {2, 0});
  Tensor y0 = Run1("Gather", {&data, &idx});
  EXPECT_EQ(y0.shape(), (Shape{2, 4}));
  EXPECT_EQ(Values<float>(y0), (std::vector<float>{8, 9, 10, 11, 0, 1, 2, 3}));
  Tensor idx2 = I32({1, 2}, {3, 1});
  Tensor y1 = Run1("Gather", {&data, &idx2}, Attrs({{"axis", int64_t{-1}}}));
  EXPECT_EQ(y1.shape(), (Shape{3, 1, 2}));
  EXPECT_EQ(Values<float>(y1), (std::vector<float>{3, 1, 7, 5, 11, 9}));
  Tensor scalar = I64({}, {1});
  Tensor y2 = Run1("Gather", {&data, &scalar});
  EXPECT_EQ(y2.shape(), (Shape{4}));
  EXPECT_EQ(Values<float>(y2), (std::vector<float>{4, 5, 6, 7}));
}

TEST(GatherTest, NegativeIndicesAndOtherDtypes) {
  Tensor data = testing::Make<int64_t>(DType::kInt64, {10}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  Tensor idx = I64({3}, {0, -9, -10});
  EXPECT_EQ(Values<int64_t>(Run1("Gather", {&data, &idx})), (std::vector<int64_t>{0, 1, 0}));
  Tensor b = testing::Bool({4}, {1, 0, 0, 1});
  Tensor bi = I32({2}, {3, 1});
  EXPECT_EQ(Values<uint8_t>(Run1("Gather", {&b, &bi})), (std::vector<uint8_t>{1, 0}));
}

TEST(GatherTest, OutOfRangeIsAnError) {
  Tensor data = Iota({3, 4});
  for (int64_t bad :
       {int64_t{3}, int64_t{-4}, int64_t{1000}, std::numeric_limits<int64_t>::min()}) {
    Tensor idx = I64({2}, {0, bad});
    EXPECT_EQ(TryOp("Gather", {&data, &idx}, {}).status().code(), StatusCode::kInvalidArgument)
        << bad;
  }
  Tensor f = F32({1}, {0});
  EXPECT_EQ(TryOp("Gather", {&data, &f}, {}).status().code(), StatusCode::kInvalidArgument);
  Tensor idx = I64({1}, {0});
  EXPECT_EQ(TryOp("Gather", {&data, &idx}, Attrs({{"axis", int64_t{2}}})).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(GatherElementsTest, OnnxExamples) {
  Tensor d0 = F32({2, 2}, {1, 2, 3, 4});
  Tensor i0 = I64({2, 2}, {0, 0, 1, 0});
  EXPECT_EQ(Values<float>(Run1("GatherElements", {&d0, &i0}, Attrs({{"axis", int64_t{1}}}))),
            (std::vector<float>{1, 1, 4, 3}));
  Tensor d1 = F32({3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  Tensor i1 = I32({2, 3}, {1, 2, 0, 2, 0, 0});
  EXPECT_EQ(Values<float>(Run1("GatherElements", {&d1, &i1})),
            (std::vector<float>{4, 8, 3, 7, 2, 3}));
  Tensor neg = I64({2, 3}, {-1, -2, 0, -2, 0, 0});
  EXPECT_EQ(Values<float>(Run1("GatherElements", {&d1, &neg})),
            (std::vector<float>{7, 5, 3, 4, 2, 3}));
  Tensor oob = I64({1, 1}, {3});
  EXPECT_EQ(TryOp("GatherElements", {&d1, &oob}, {}).status().code(), StatusCode::kInvalidArgument);
  Tensor too_wide = I64({1, 4}, {0, 0, 0, 0});
  EXPECT_EQ(TryOp("GatherElements", {&d1, &too_wide}, {}).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(ScatterNDTest, ReplaceAddMulAndBounds) {
  Tensor data = F32({4}, {1, 2, 3, 4});
  Tensor idx = I64({2, 1}, {1, 3});
  Tensor upd = F32({2}, {10, 20});
  EXPECT_EQ(Values<float>(Run1("ScatterND", {&data, &idx, &upd})),
            (std::vector<float>{1, 10, 3, 20}));
  Tensor dup = I64({2, 1}, {0, 0});
  EXPECT_EQ(Values<float>(
                Run1("ScatterND", {&data, &dup, &upd}, Attrs({{"reduction", std::string("add")}}))),
            (std::vector<float>{31, 2, 3, 4}));
  EXPECT_EQ(Values<float>(
                Run1("ScatterND", {&data, &dup, &upd}, Attrs({{"reduction", std::string("mul")}}))),
            (std::vector<float>{200, 2, 3, 4}));
  // Slices: indices address rows of a 2-D tensor.
  Tensor m = Iota({3, 2});
  Tensor rows = I64({1, 1}, {-1});
  Tensor row = F32({1, 2}, {7, 8});
  EXPECT_EQ(Values<float>(Run1("ScatterND", {&m, &rows, &row})),
            (std::vector<float>{0, 1, 2, 3, 7, 8}));
  Tensor oob = I64({1, 1}, {4});
  Tensor one = F32({1}, {0});
  EXPECT_EQ(TryOp("ScatterND", {&data, &oob, &one}, {}).status().code(),
            StatusCode::kInvalidArgument);
  Tensor bad_shape = F32({3}, {0, 0, 0});
  EXPECT_EQ(TryOp("ScatterND", {&data, &idx, &bad_shape}, {}).status().code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace orrery::ops
