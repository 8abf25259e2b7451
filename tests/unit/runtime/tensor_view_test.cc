// The Tensor extensions the runtime's arenas use (ops/tensor.h).
#include <gtest/gtest.h>

#include <cstring>
#include <memory>

#include "ops/tensor.h"

namespace orrery {
namespace {

TEST(TensorViewTest, ViewOfSharesTheBlock) {
  Tensor view;
  {
    Result<Tensor> block = Tensor::Allocate(DType::kUint8, {256});
    ASSERT_TRUE(block.ok());
    auto v = Tensor::ViewOf(*block, 64, DType::kFloat32, {2, 4});
    ASSERT_TRUE(v.ok()) << v.status().ToString();
    EXPECT_EQ(v->raw_data(), static_cast<uint8_t*>(block->raw_data()) + 64);
    v->data<float>()[7] = 3.5f;
    float last;
    std::memcpy(&last, static_cast<uint8_t*>(block->raw_data()) + 64 + 28, sizeof(float));
    EXPECT_EQ(last, 3.5f);
    view = std::move(v).value();
  }
  // The block is gone from scope but the view keeps it alive.
  EXPECT_EQ(view.data<float>()[7], 3.5f);
}

TEST(TensorViewTest, ViewOfRejectsBadRanges) {
  Result<Tensor> block = Tensor::Allocate(DType::kUint8, {128});
  ASSERT_TRUE(block.ok());
  EXPECT_FALSE(Tensor::ViewOf(*block, 32, DType::kFloat32, {1}).ok());     // misaligned
  EXPECT_FALSE(Tensor::ViewOf(*block, 64, DType::kFloat32, {17}).ok());    // past the end
  EXPECT_FALSE(Tensor::ViewOf(*block, 192, DType::kFloat32, {0}).ok());    // offset past end
  EXPECT_FALSE(Tensor::ViewOf(*block, 0, DType::kString, {1}).ok());       // no element size
  EXPECT_FALSE(Tensor::ViewOf(Tensor(), 0, DType::kFloat32, {1}).ok());    // no buffer
  EXPECT_TRUE(Tensor::ViewOf(*block, 128, DType::kFloat32, {0}).ok());     // empty at the end
  EXPECT_TRUE(Tensor::ViewOf(*block, 64, DType::kFloat32, {16}).ok());
}

TEST(TensorViewTest, UnboundShareAndReset) {
  Tensor t = Tensor::Unbound(DType::kFloat32, {2, 3});
  EXPECT_EQ(t.raw_data(), nullptr);
  EXPECT_EQ(t.shape(), (Shape{2, 3}));
  Tensor src(DType::kFloat32, {6});
  src.data<float>()[5] = 1.25f;
  ASSERT_TRUE(t.ShareBuffer(src).ok());
  EXPECT_EQ(t.raw_data(), src.raw_data());
  EXPECT_EQ(t.data<float>()[5], 1.25f);
  EXPECT_EQ(t.shape(), (Shape{2, 3}));  // own shape kept
  Tensor wrong(DType::kFloat32, {5});
  EXPECT_EQ(t.ShareBuffer(wrong).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(t.ShareBuffer(Tensor::Unbound(DType::kFloat32, {6})).code(),
            StatusCode::kInvalidArgument);
  t.ResetBuffer();
  EXPECT_EQ(t.raw_data(), nullptr);
  EXPECT_EQ(t.dtype(), DType::kFloat32);
}

TEST(TensorViewTest, BufferAllocationsAreCounted) {
  const uint64_t before = TensorBufferAllocationCount();
  Tensor a(DType::kFloat32, {4});
  auto b = Tensor::Allocate(DType::kInt64, {2});
  ASSERT_TRUE(b.ok());
  Tensor c = a;  // shares, no new buffer
  auto v = Tensor::ViewOf(a, 0, DType::kFloat32, {2});
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(TensorBufferAllocationCount() - before, 2u);
}

}  // namespace
}  // namespace orrery
