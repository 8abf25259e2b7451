#include "ops/tensor.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "ops/broadcast.h"

namespace orrery {
namespace {

TEST(TensorTest, AlignedZeroFilledBuffer) {
  for (int64_t n : {0, 1, 3, 17, 1000}) {
    Tensor t(DType::kFloat32, {n});
    ASSERT_NE(t.raw_data(), nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.raw_data()) % 64, 0u);
    EXPECT_EQ(t.byte_size(), static_cast<size_t>(n) * 4);
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(t.data<float>()[i], 0.0f);
  }
}

TEST(TensorTest, FromBytesChecksSize) {
  std::string bytes(12, '\0');
  auto ok = Tensor::FromBytes(DType::kFloat32, {3}, bytes);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->shape(), Shape{3});
  auto bad = Tensor::FromBytes(DType::kFloat32, {4}, bytes);
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  auto neg = Tensor::FromBytes(DType::kFloat32, {-1}, bytes);
  EXPECT_EQ(neg.status().code(), StatusCode::kInvalidArgument);
}

TEST(TensorTest, FromBytesCopiesAndRejectsBeforeAllocating) {
  std::string bytes(20, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(0x11 * (i + 1));
  auto t = Tensor::FromBytes(DType::kUint8, {4, 5}, bytes);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->bytes(), bytes);
  // A shape claiming 1 GiB with 20 bytes sent allocates nothing.
  const uint64_t before = TensorBufferAllocationCount();
  auto bad = Tensor::FromBytes(DType::kFloat32, {int64_t{1} << 28}, bytes);
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("needs 1073741824 bytes, got 20"), std::string::npos)
      << bad.status().message();
  EXPECT_EQ(TensorBufferAllocationCount(), before);
  EXPECT_EQ(Tensor::FromBytes(DType::kUndefined, {1}, bytes).status().code(), StatusCode::kInvalidArgument);
}

TEST(TensorTest, AllocateRejectsOverflowAndHugeTensors) {
  EXPECT_EQ(Tensor::Allocate(DType::kFloat32, {int64_t{1} << 32, int64_t{1} << 32}).status().code(),
            StatusCode::kResourceExhausted);
  EXPECT_EQ(Tensor::Allocate(DType::kFloat32, {int64_t{1} << 33}).status().code(),
            StatusCode::kResourceExhausted);  // 2^35 bytes > 2^34 cap
  EXPECT_EQ(Tensor::Allocate(DType::kFloat32, {2, -3}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(Tensor::Allocate(DType::kString, {2}).status().code(), StatusCode::kInvalidArgument);
  // A zero dim makes any other dim harmless.
  auto z = CheckedNumElements({0, int64_t{1} << 62}, DType::kFloat32);
  ASSERT_TRUE(z.ok());
  EXPECT_EQ(*z, 0);
}

TEST(TensorTest, ReshapedSharesBufferAndChecksCount) {
  Tensor t(DType::kInt64, {2, 3});
  t.data<int64_t>()[5] = 7;
  auto r = t.Reshaped({3, 2});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->raw_data(), t.raw_data());
  EXPECT_EQ(r->data<int64_t>()[5], 7);
  EXPECT_EQ(t.Reshaped({4}).status().code(), StatusCode::kInvalidArgument);
}

TEST(TensorTest, DTypeNames) {
  EXPECT_EQ(DTypeToOipName(DType::kFloat32), "FP32");
  EXPECT_EQ(DTypeToOipName(DType::kFloat16), "FP16");
  EXPECT_EQ(DTypeToOipName(DType::kFloat64), "FP64");
  EXPECT_EQ(DTypeToOipName(DType::kString), "BYTES");
  EXPECT_EQ(DTypeToOipName(DType::kUint16), "UINT16");
  for (const char* name : {"FP32", "FP64", "FP16", "INT8", "INT16", "INT32", "INT64", "UINT8",
                           "UINT16", "UINT32", "UINT64", "BOOL", "BYTES"}) {
    EXPECT_EQ(DTypeToOipName(DTypeFromOipName(name)), name);
  }
  EXPECT_EQ(DTypeFromOipName("FLOAT"), DType::kUndefined);
  EXPECT_EQ(DTypeName(DType::kInt64), "int64");
  EXPECT_EQ(DTypeSize(DType::kBool), 1u);
  EXPECT_EQ(ShapeToString({1, 3, 224, 224}), "[1, 3, 224, 224]");
}

TEST(BroadcastTest, Shapes) {
  auto s = ops::BroadcastShapes({8, 1, 6, 1}, {7, 1, 5});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(*s, (Shape{8, 7, 6, 5}));
  EXPECT_FALSE(ops::BroadcastShapes({2, 3}, {3, 2}).ok());
  auto zero = ops::BroadcastShapes({0, 3}, {1, 3});
  ASSERT_TRUE(zero.ok());
  EXPECT_EQ(*zero, (Shape{0, 3}));
  EXPECT_TRUE(ops::IsUnidirectionalBroadcastable({3}, {2, 3}));
  EXPECT_FALSE(ops::IsUnidirectionalBroadcastable({2, 3}, {3}));
  EXPECT_EQ(ops::BroadcastStrides({3, 1}, {2, 3, 4}), (std::vector<int64_t>{0, 1, 0}));
}

TEST(BroadcastTest, LoopMergesContiguousDims) {
  // [2,3,4] + [4]: a is contiguous throughout, b repeats -> 2 loop dims.
  ops::BinaryLoop loop = ops::MakeBinaryLoop({2, 3, 4}, {4}, {2, 3, 4});
  auto vec = [](const auto& v) { return std::vector<int64_t>(v.begin(), v.end()); };
  EXPECT_EQ(vec(loop.dims), (Shape{6, 4}));
  EXPECT_EQ(vec(loop.a_strides), (std::vector<int64_t>{4, 1}));
  EXPECT_EQ(vec(loop.b_strides), (std::vector<int64_t>{0, 1}));
  // Identical shapes collapse to a single run.
  loop = ops::MakeBinaryLoop({2, 3}, {2, 3}, {2, 3});
  EXPECT_EQ(vec(loop.dims), (Shape{6}));
}

}  // namespace
}  // namespace orrery
