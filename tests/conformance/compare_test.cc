#include "tests/conformance/compare.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace orrery::conformance {
namespace {

template <typename T>
Tensor Make(DType dtype, Shape shape, const std::vector<T>& values) {
  Tensor t(dtype, std::move(shape));
  EXPECT_EQ(t.byte_size(), values.size() * sizeof(T));
  std::memcpy(t.raw_data(), values.data(), values.size() * sizeof(T));
  return t;
}

Tensor F32(const std::vector<float>& v) { return Make(DType::kFloat32, {int64_t(v.size())}, v); }
Tensor F64(const std::vector<double>& v) { return Make(DType::kFloat64, {int64_t(v.size())}, v); }

TEST(CompareTest, EqualFloatsMatch) {
  EXPECT_FALSE(CompareTensors(F32({1, 2, 3}), F32({1, 2, 3})));
}

TEST(CompareTest, RelativeToleranceIsOfTheReference) {
  // |got - want| <= 1e-7 + 1e-3 * |want|: want 1000 allows 1.0000001.
  EXPECT_FALSE(CompareTensors(F64({1000.0 + 1.0}), F64({1000.0})));
  EXPECT_TRUE(CompareTensors(F64({1000.0 + 1.0001}), F64({1000.0})));
  // Not symmetric: got 1000 vs want 999 -> bound 0.999 + 1e-7 < 1.
  EXPECT_TRUE(CompareTensors(F64({1000.0}), F64({999.0})));
}

TEST(CompareTest, AbsoluteToleranceNearZero) {
  EXPECT_FALSE(CompareTensors(F64({5e-8}), F64({0.0})));
  EXPECT_TRUE(CompareTensors(F64({2e-7}), F64({0.0})));
  // A custom tolerance is honoured.
  EXPECT_FALSE(CompareTensors(F64({2e-7}), F64({0.0}), Tolerance{0, 1e-6}));
}

TEST(CompareTest, FirstMismatchIndexValuesAndCount) {
  Tensor want = Make<float>(DType::kFloat32, {2, 3}, {0, 1, 2, 3, 4, 5});
  Tensor got = Make<float>(DType::kFloat32, {2, 3}, {0, 1, 2, 3, 9, 7});
  auto m = CompareTensors(got, want);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->kind, Mismatch::Kind::kValue);
  EXPECT_EQ(m->index, 4);
  EXPECT_EQ(m->position, "[1, 1]");
  EXPECT_EQ(m->got, "9");
  EXPECT_EQ(m->want, "4");
  EXPECT_EQ(m->count, 2);
  EXPECT_DOUBLE_EQ(m->max_abs_diff, 5.0);
  EXPECT_EQ(m->ToString(), "element 4 [1, 1]: got 9, want 4 (2 elements differ, max |diff| 5)");
}

TEST(CompareTest, NanMatchesOnlyNan) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_FALSE(CompareTensors(F32({1, nan}), F32({1, nan})));
  auto m = CompareTensors(F32({1, 2}), F32({1, nan}));
  ASSERT_TRUE(m);
  EXPECT_EQ(m->index, 1);
  EXPECT_EQ(m->want, "nan");
  EXPECT_TRUE(CompareTensors(F32({nan}), F32({0})));
}

TEST(CompareTest, InfinityMatchesOnlyTheSameInfinity) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_FALSE(CompareTensors(F32({inf, -inf}), F32({inf, -inf})));
  EXPECT_TRUE(CompareTensors(F32({-inf}), F32({inf})));
  EXPECT_TRUE(CompareTensors(F32({3.4e38f}), F32({inf})));
  EXPECT_TRUE(CompareTensors(F32({inf}), F32({1})));
}

TEST(CompareTest, DtypeMustMatchExactly) {
  auto m = CompareTensors(F64({1}), F32({1}));
  ASSERT_TRUE(m);
  EXPECT_EQ(m->kind, Mismatch::Kind::kDtype);
  EXPECT_EQ(m->ToString(), "dtype: got float64, want float32");
}

TEST(CompareTest, ShapeMustMatchExactlyWithoutBroadcasting) {
  Tensor scalar = Make<float>(DType::kFloat32, {}, {1});
  Tensor one = Make<float>(DType::kFloat32, {1}, {1});
  auto m = CompareTensors(one, scalar);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->kind, Mismatch::Kind::kShape);
  EXPECT_EQ(m->ToString(), "shape: got [1], want []");
  Tensor t23 = Make<float>(DType::kFloat32, {2, 3}, {0, 0, 0, 0, 0, 0});
  Tensor t32 = Make<float>(DType::kFloat32, {3, 2}, {0, 0, 0, 0, 0, 0});
  EXPECT_TRUE(CompareTensors(t23, t32));
}

TEST(CompareTest, IntegersAreExact) {
  // allclose would accept 100000 vs 100001 (rtol 1e-3); integer kernels must not.
  Tensor want = Make<int64_t>(DType::kInt64, {1}, {100000});
  EXPECT_TRUE(CompareTensors(Make<int64_t>(DType::kInt64, {1}, {100001}), want));
  EXPECT_FALSE(CompareTensors(Make<int64_t>(DType::kInt64, {1}, {100000}), want));
  auto m = CompareTensors(Make<int8_t>(DType::kInt8, {2}, {-1, 2}),
                          Make<int8_t>(DType::kInt8, {2}, {-2, 2}));
  ASSERT_TRUE(m);
  EXPECT_EQ(m->got, "-1");
  EXPECT_EQ(m->want, "-2");
  auto u = CompareTensors(Make<uint64_t>(DType::kUint64, {1}, {~uint64_t{0}}),
                          Make<uint64_t>(DType::kUint64, {1}, {~uint64_t{0} - 1}));
  ASSERT_TRUE(u);
  EXPECT_EQ(u->got, "18446744073709551615");
}

TEST(CompareTest, BoolsAreExact) {
  Tensor want = Make<uint8_t>(DType::kBool, {3}, {1, 0, 1});
  EXPECT_FALSE(CompareTensors(Make<uint8_t>(DType::kBool, {3}, {1, 0, 1}), want));
  auto m = CompareTensors(Make<uint8_t>(DType::kBool, {3}, {1, 1, 1}), want);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->index, 1);
  EXPECT_EQ(m->got, "true");
  EXPECT_EQ(m->want, "false");
}

TEST(CompareTest, Float16ValuesAreDecoded) {
  EXPECT_DOUBLE_EQ(HalfToDouble(0x3c00), 1.0);
  EXPECT_DOUBLE_EQ(HalfToDouble(0xc000), -2.0);
  EXPECT_DOUBLE_EQ(HalfToDouble(0x0001), std::ldexp(1.0, -24));
  EXPECT_TRUE(std::isinf(HalfToDouble(0x7c00)));
  EXPECT_TRUE(std::isnan(HalfToDouble(0x7e00)));
  // 1.0 vs 1.0009765625 (next half): 0.00098 <= 1e-7 + 1e-3 -> match.
  EXPECT_FALSE(CompareTensors(Make<uint16_t>(DType::kFloat16, {1}, {0x3c01}),
                              Make<uint16_t>(DType::kFloat16, {1}, {0x3c00})));
  EXPECT_TRUE(CompareTensors(Make<uint16_t>(DType::kFloat16, {1}, {0x3c02}),
                             Make<uint16_t>(DType::kFloat16, {1}, {0x3c00})));
}

TEST(CompareTest, EmptyTensorsMatch) {
  Tensor a(DType::kFloat32, {0, 3});
  Tensor b(DType::kFloat32, {0, 3});
  EXPECT_FALSE(CompareTensors(a, b));
  EXPECT_TRUE(CompareTensors(a, Tensor(DType::kFloat32, {3, 0})));
}

}  // namespace
}  // namespace orrery::conformance
