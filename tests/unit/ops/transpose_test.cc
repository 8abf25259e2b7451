// StridedCopy, Transpose, DepthToSpace, SpaceToDepth.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "data_op_test_util.h"
#include "ops/cpu/data_movement.h"

namespace orrery::ops {
namespace {

using testing::Attrs;
using testing::F32;
using testing::Iota;
using testing::Run1;
using testing::TryOp;
using testing::Values;

// Naive transpose by coordinates, the oracle for the strided/tiled kernel.
template <typename T>
std::vector<T> NaiveTranspose(const std::vector<T>& in, const Shape& shape,
                              const std::vector<int64_t>& perm) {
  const size_t r = shape.size();
  Shape out_shape(r);
  for (size_t i = 0; i < r; ++i) out_shape[i] = shape[static_cast<size_t>(perm[i])];
  const std::vector<int64_t> in_strides = cpu::ContiguousStrides(shape);
  std::vector<T> out(in.size());
  std::vector<int64_t> c(r, 0);
  for (size_t o = 0; o < out.size(); ++o) {
    int64_t src = 0;
    for (size_t i = 0; i < r; ++i) src += c[i] * in_strides[static_cast<size_t>(perm[i])];
    out[o] = in[static_cast<size_t>(src)];
    for (size_t i = r; i-- > 0;) {
      if (++c[i] < out_shape[i]) break;
      c[i] = 0;
    }
  }
  return out;
}

template <typename T>
void CheckAllPermutations(DType dtype, const Shape& shape) {
  const int64_t n = NumElements(shape);
  std::vector<T> data(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) data[static_cast<size_t>(i)] = static_cast<T>(i * 7 + 3);
  Tensor x = testing::Make<T>(dtype, shape, data);
  std::vector<int64_t> perm(shape.size());
  std::iota(perm.begin(), perm.end(), 0);
  int count = 0;
  do {
    Tensor y = Run1("Transpose", {&x}, Attrs({{"perm", perm}}));
    ASSERT_EQ(y.dtype(), dtype);
    EXPECT_EQ(Values<T>(y), NaiveTranspose(data, shape, perm)) << "perm #" << count;
    ++count;
  } while (std::next_permutation(perm.begin(), perm.end()));
  EXPECT_GT(count, 1);
}

TEST(TransposeTest, AllPermutationsAllElementSizes) {
  CheckAllPermutations<float>(DType::kFloat32, {2, 3, 4});
  CheckAllPermutations<int8_t>(DType::kInt8, {2, 3, 4});
  CheckAllPermutations<uint16_t>(DType::kFloat16, {3, 1, 5, 2});
  CheckAllPermutations<int64_t>(DType::kInt64, {2, 5, 3});
  CheckAllPermutations<uint8_t>(DType::kBool, {4, 2, 3});
}

TEST(TransposeTest, LargeTiledShapes) {
  // Sizes not multiple of the tile (nor of the 4 x 4 blocks of 4-byte
  // elements), NCHW <-> NHWC, and a 2-D matrix.
  CheckAllPermutations<float>(DType::kFloat32, {67, 131});
  for (const auto& [shape, perm] :
       std::vector<std::pair<Shape, std::vector<int64_t>>>{{{2, 35, 9, 7}, {0, 2, 3, 1}},
                                                           {{2, 9, 7, 35}, {0, 3, 1, 2}},
                                                           {{3, 40, 50}, {2, 1, 0}},
                                                           {{5, 33, 6, 70}, {0, 3, 2, 1}},
                                                           // A transformer's per-head K^T (4-byte
                                                           // 4 x 4 blocks, whole tiles).
                                                           {{4, 128, 64}, {0, 2, 1}},
                                                           {{3, 30, 37}, {0, 2, 1}}}) {
    Tensor x = Iota(shape);
    std::vector<float> data = Values<float>(x);
    Tensor y = Run1("Transpose", {&x}, Attrs({{"perm", perm}}));
    EXPECT_EQ(Values<float>(y), NaiveTranspose(data, shape, perm)) << ShapeToString(shape);
  }
}

TEST(TransposeTest, DefaultReversesAndRejectsBadPerms) {
  Tensor x = Iota({2, 3, 4});
  Tensor y = Run1("Transpose", {&x});
  EXPECT_EQ(y.shape(), (Shape{4, 3, 2}));
  EXPECT_EQ(Values<float>(y), NaiveTranspose(Values<float>(x), {2, 3, 4}, {2, 1, 0}));
  EXPECT_EQ(
      TryOp("Transpose", {&x}, Attrs({{"perm", std::vector<int64_t>{0, 0, 1}}})).status().code(),
      StatusCode::kInvalidArgument);
  EXPECT_EQ(TryOp("Transpose", {&x}, Attrs({{"perm", std::vector<int64_t>{0, 1}}})).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(
      TryOp("Transpose", {&x}, Attrs({{"perm", std::vector<int64_t>{0, 1, 3}}})).status().code(),
      StatusCode::kInvalidArgument);
  Tensor scalar = F32({}, {4});
  EXPECT_EQ(Values<float>(Run1("Transpose", {&scalar})), (std::vector<float>{4}));
  Tensor empty = Iota({0, 3});
  EXPECT_EQ(Run1("Transpose", {&empty}).shape(), (Shape{3, 0}));
}

TEST(StridedCopyTest, NegativeAndZeroStrides) {
  const std::vector<int32_t> src = {0, 1, 2, 3, 4, 5};
  std::vector<int32_t> dst(6, -1);
  // Reverse rows and columns of a 2x3 matrix: start at the last element.
  const int64_t dims[] = {2, 3};
  const int64_t rev[] = {-3, -1};
  cpu::StridedCopy(src.data() + 5, dims, rev, sizeof(int32_t), dst.data());
  EXPECT_EQ(dst, (std::vector<int32_t>{5, 4, 3, 2, 1, 0}));
  // Broadcast a row.
  const int64_t bcast[] = {0, 1};
  cpu::StridedCopy(src.data(), dims, bcast, sizeof(int32_t), dst.data());
  EXPECT_EQ(dst, (std::vector<int32_t>{0, 1, 2, 0, 1, 2}));
}

TEST(FillElementsTest, FillsEveryCount) {
  for (int64_t n : {1, 2, 3, 7, 64, 1000}) {
    std::vector<uint16_t> v(static_cast<size_t>(n), 0);
    const uint16_t x = 0xBEEF;
    cpu::FillElements(v.data(), n, &x, sizeof(x));
    EXPECT_TRUE(std::all_of(v.begin(), v.end(), [](uint16_t e) { return e == 0xBEEF; })) << n;
  }
}

const std::vector<float> kDepthInput = {
    0,  1,  2,  3,  4,  5,  9,  10, 11, 12, 13, 14, 18, 19, 20, 21, 22, 23, 27, 28, 29, 30, 31, 32,
    36, 37, 38, 39, 40, 41, 45, 46, 47, 48, 49, 50, 54, 55, 56, 57, 58, 59, 63, 64, 65, 66, 67, 68};

TEST(DepthToSpaceTest, DcrAndCrdMatchOnnxExamples) {
  Tensor x = F32({1, 8, 2, 3}, kDepthInput);
  Tensor dcr =
      Run1("DepthToSpace", {&x}, Attrs({{"blocksize", int64_t{2}}, {"mode", std::string("DCR")}}));
  EXPECT_EQ(dcr.shape(), (Shape{1, 2, 4, 6}));
  EXPECT_EQ(Values<float>(dcr),
            (std::vector<float>{0,  18, 1,  19, 2,  20, 36, 54, 37, 55, 38, 56, 3,  21, 4,  22,
                                5,  23, 39, 57, 40, 58, 41, 59, 9,  27, 10, 28, 11, 29, 45, 63,
                                46, 64, 47, 65, 12, 30, 13, 31, 14, 32, 48, 66, 49, 67, 50, 68}));
  Tensor crd =
      Run1("DepthToSpace", {&x}, Attrs({{"blocksize", int64_t{2}}, {"mode", std::string("CRD")}}));
  EXPECT_EQ(Values<float>(crd),
            (std::vector<float>{0,  9,  1,  10, 2,  11, 18, 27, 19, 28, 20, 29, 3,  12, 4,  13,
                                5,  14, 21, 30, 22, 31, 23, 32, 36, 45, 37, 46, 38, 47, 54, 63,
                                55, 64, 56, 65, 39, 48, 40, 49, 41, 50, 57, 66, 58, 67, 59, 68}));
}

TEST(SpaceToDepthTest, InvertsDepthToSpaceDcr) {
  Tensor x = Iota({2, 8, 3, 5});
  Attributes a = Attrs({{"blocksize", int64_t{2}}});
  Tensor s = Run1("DepthToSpace", {&x}, a);
  EXPECT_EQ(s.shape(), (Shape{2, 2, 6, 10}));
  Tensor back = Run1("SpaceToDepth", {&s}, a);
  EXPECT_EQ(back.shape(), x.shape());
  EXPECT_EQ(Values<float>(back), Values<float>(x));
}

TEST(SpaceToDepthTest, RejectsBadShapesAndBlocksizes) {
  Tensor x = Iota({1, 3, 5, 4});
  EXPECT_EQ(TryOp("SpaceToDepth", {&x}, Attrs({{"blocksize", int64_t{2}}})).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(TryOp("DepthToSpace", {&x}, Attrs({{"blocksize", int64_t{2}}})).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(TryOp("DepthToSpace", {&x}, Attrs({{"blocksize", int64_t{0}}})).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(TryOp("DepthToSpace", {&x}, {}).status().code(), StatusCode::kInvalidArgument);
  Tensor three = Iota({4, 2, 2});
  EXPECT_EQ(TryOp("SpaceToDepth", {&three}, Attrs({{"blocksize", int64_t{2}}})).status().code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace orrery::ops
