// ConstantOfShape, Range, EyeLike, Trilu, NonZero, OneHot.
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

TEST(ConstantOfShapeTest, ValueDtypesAndShapes) {
  Tensor shape = I64({3}, {4, 3, 2});
  Tensor y = Run1("ConstantOfShape", {&shape});
  EXPECT_EQ(y.dtype(), DType::kFloat32);
  EXPECT_EQ(y.shape(), (Shape{4, 3, 2}));
  EXPECT_EQ(Values<float>(y), std::vector<float>(24, 0.0f));
  Tensor seven = I32({1}, {7});
  Tensor s2 = I64({2}, {2, 3});
  Tensor z = Run1("ConstantOfShape", {&s2}, Attrs({{"value", seven}}));
  EXPECT_EQ(z.dtype(), DType::kInt32);
  EXPECT_EQ(Values<int32_t>(z), std::vector<int32_t>(6, 7));
  Tensor scalar_shape = I64({0}, {});
  Tensor s = Run1("ConstantOfShape", {&scalar_shape}, Attrs({{"value", seven}}));
  EXPECT_TRUE(s.shape().empty());
  EXPECT_EQ(Values<int32_t>(s), (std::vector<int32_t>{7}));
  Tensor zero = I64({1}, {0});
  EXPECT_EQ(Run1("ConstantOfShape", {&zero}).shape(), (Shape{0}));
}

TEST(ConstantOfShapeTest, RejectsHostileShapes) {
  Tensor neg = I64({2}, {2, -1});
  EXPECT_EQ(TryOp("ConstantOfShape", {&neg}, {}).status().code(), StatusCode::kInvalidArgument);
  Tensor huge = I64({2}, {int64_t{1} << 40, int64_t{1} << 40});
  EXPECT_FALSE(TryOp("ConstantOfShape", {&huge}, {}).ok());
  Tensor ok = I64({1}, {2});
  Tensor two = F32({2}, {1, 2});
  EXPECT_EQ(TryOp("ConstantOfShape", {&ok}, Attrs({{"value", two}})).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(TryOp("ConstantOfShape", {&ok}, {}, {.hide_values = true}).status().code(),
            StatusCode::kUnavailable);
}

TEST(RangeTest, FloatAndIntegerTypes) {
  Tensor s = F32({}, {1}), l = F32({}, {5}), d = F32({}, {2});
  EXPECT_EQ(Values<float>(Run1("Range", {&s, &l, &d})), (std::vector<float>{1, 3}));
  Tensor si = I32({}, {10}), li = I32({}, {6}), di = I32({}, {-3});
  EXPECT_EQ(Values<int32_t>(Run1("Range", {&si, &li, &di})), (std::vector<int32_t>{10, 7}));
  Tensor e0 = I64({}, {5}), e1 = I64({}, {5}), e2 = I64({}, {1});
  EXPECT_EQ(Run1("Range", {&e0, &e1, &e2}).shape(), (Shape{0}));
  const int64_t min = std::numeric_limits<int64_t>::min();
  const int64_t max = std::numeric_limits<int64_t>::max();
  Tensor a = I64({}, {min}), b = I64({}, {max}), c = I64({}, {int64_t{1} << 62});
  EXPECT_EQ(Values<int64_t>(Run1("Range", {&a, &b, &c})),
            (std::vector<int64_t>{min, min + (int64_t{1} << 62), 0, int64_t{1} << 62}));
  Tensor fs = testing::F64({}, {0.0}), fl = testing::F64({}, {1.0}), fd = testing::F64({}, {0.25});
  EXPECT_EQ(Values<double>(Run1("Range", {&fs, &fl, &fd})),
            (std::vector<double>{0, 0.25, 0.5, 0.75}));
}

TEST(RangeTest, RejectsZeroDeltaHugeCountsAndMixedTypes) {
  Tensor s = F32({}, {0}), l = F32({}, {1}), zero = F32({}, {0});
  EXPECT_EQ(TryOp("Range", {&s, &l, &zero}, {}).status().code(), StatusCode::kInvalidArgument);
  Tensor tiny = F32({}, {1e-30f});
  EXPECT_EQ(TryOp("Range", {&s, &l, &tiny}, {}).status().code(), StatusCode::kInvalidArgument);
  Tensor nan = F32({}, {std::numeric_limits<float>::quiet_NaN()});
  EXPECT_EQ(TryOp("Range", {&s, &nan, &l}, {}).status().code(), StatusCode::kInvalidArgument);
  Tensor i = I64({}, {1});
  EXPECT_EQ(TryOp("Range", {&s, &i, &l}, {}).status().code(), StatusCode::kInvalidArgument);
  Tensor u8 = testing::U8({}, {1});
  EXPECT_TRUE(testing::IsUnsupported(TryOp("Range", {&u8, &u8, &u8}, {}).status()));
}

TEST(EyeLikeTest, OffsetsAndDtypes) {
  Tensor x = I32({3, 4}, std::vector<int32_t>(12, 5));
  Tensor y = Run1("EyeLike", {&x});
  EXPECT_EQ(y.dtype(), DType::kInt32);
  EXPECT_EQ(Values<int32_t>(y), (std::vector<int32_t>{1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0}));
  Tensor d = Run1("EyeLike", {&x}, Attrs({{"dtype", int64_t{11}}, {"k", int64_t{1}}}));
  EXPECT_EQ(d.dtype(), DType::kFloat64);
  EXPECT_EQ(Values<double>(d), (std::vector<double>{0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1}));
  Tensor far = Run1("EyeLike", {&x}, Attrs({{"k", std::numeric_limits<int64_t>::min()}}));
  EXPECT_EQ(Values<int32_t>(far), std::vector<int32_t>(12, 0));
  Tensor h = Run1("EyeLike", {&x}, Attrs({{"dtype", int64_t{10}}, {"k", int64_t{-1}}}));
  EXPECT_EQ(Values<uint16_t>(h)[4], 0x3C00);  // float16 1.0 at (1, 0)
  EXPECT_TRUE(testing::IsUnsupported(
      TryOp("EyeLike", {&x}, Attrs({{"dtype", int64_t{8}}})).status()));  // string
  Tensor v = Iota({3});
  EXPECT_EQ(TryOp("EyeLike", {&v}, {}).status().code(), StatusCode::kInvalidArgument);
}

TEST(TriluTest, UpperLowerWithK) {
  Tensor x = Iota({2, 3, 3});
  Tensor up = Run1("Trilu", {&x});
  EXPECT_EQ(Values<float>(up),
            (std::vector<float>{0, 1, 2, 0, 4, 5, 0, 0, 8, 9, 10, 11, 0, 13, 14, 0, 0, 17}));
  Tensor k = I64({}, {-1});
  Tensor low = Run1("Trilu", {&x, &k}, Attrs({{"upper", int64_t{0}}}));
  EXPECT_EQ(Values<float>(low),
            (std::vector<float>{0, 0, 0, 3, 0, 0, 6, 7, 0, 0, 0, 0, 12, 0, 0, 15, 16, 0}));
  Tensor big = I64({}, {std::numeric_limits<int64_t>::max()});
  EXPECT_EQ(Values<float>(Run1("Trilu", {&x, &big})), std::vector<float>(18, 0));
  Tensor r = Iota({4, 5});
  Tensor k2 = I64({}, {2});
  EXPECT_EQ(Values<float>(Run1("Trilu", {&r, &k2}))[2], 2);
  EXPECT_EQ(Values<float>(Run1("Trilu", {&r, &k2}))[1], 0);
  Tensor v = Iota({3});
  EXPECT_EQ(TryOp("Trilu", {&v}, {}).status().code(), StatusCode::kInvalidArgument);
}

TEST(NonZeroTest, CoordinatesInRowMajorOrder) {
  Tensor b = testing::Bool({2, 2}, {1, 0, 1, 1});
  Tensor y = Run1("NonZero", {&b});
  EXPECT_EQ(y.shape(), (Shape{2, 3}));
  EXPECT_EQ(Values<int64_t>(y), (std::vector<int64_t>{0, 1, 1, 0, 0, 1}));
  Tensor f = F32({4}, {0.0f, -0.0f, 2.0f, std::numeric_limits<float>::quiet_NaN()});
  EXPECT_EQ(Values<int64_t>(Run1("NonZero", {&f})), (std::vector<int64_t>{2, 3}));
  Tensor none = F32({2}, {0, 0});
  EXPECT_EQ(Run1("NonZero", {&none}).shape(), (Shape{1, 0}));
  EXPECT_EQ(TryOp("NonZero", {&b}, {}, {.hide_values = true}).status().code(),
            StatusCode::kUnavailable);
}

TEST(OneHotTest, AxesNegativeIndicesAndValueTypes) {
  Tensor idx = I64({3}, {0, 7, 8});
  Tensor depth = F32({}, {12});
  Tensor vals = I32({2}, {2, 5});
  Tensor y = Run1("OneHot", {&idx, &depth, &vals});
  EXPECT_EQ(y.shape(), (Shape{3, 12}));
  std::vector<int32_t> want(36, 2);
  want[0] = want[12 + 7] = want[24 + 8] = 5;
  EXPECT_EQ(Values<int32_t>(y), want);
  Tensor fidx = F32({2, 2}, {1, 9, 2, 4});
  Tensor d10 = F32({}, {10});
  Tensor fv = F32({2}, {1, 3});
  Tensor z = Run1("OneHot", {&fidx, &d10, &fv}, Attrs({{"axis", int64_t{1}}}));
  EXPECT_EQ(z.shape(), (Shape{2, 10, 2}));
  EXPECT_EQ(Values<float>(z)[1 * 2 + 0], 3);  // [0, 1, 0]: index 1
  EXPECT_EQ(Values<float>(z)[9 * 2 + 1], 3);  // [0, 9, 1]: index 9
  Tensor neg = I64({3}, {0, -7, -11});
  Tensor n = Run1("OneHot", {&neg, &d10, &fv}, Attrs({{"axis", int64_t{-2}}}));
  EXPECT_EQ(n.shape(), (Shape{10, 3}));
  EXPECT_EQ(Values<float>(n)[3 * 3 + 1], 3);                               // -7 -> 3
  for (int i = 0; i < 10; ++i) EXPECT_EQ(Values<float>(n)[i * 3 + 2], 1);  // -11: all off
  Tensor bad_depth = F32({}, {0});
  EXPECT_EQ(TryOp("OneHot", {&idx, &bad_depth, &vals}, {}).status().code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace orrery::ops
