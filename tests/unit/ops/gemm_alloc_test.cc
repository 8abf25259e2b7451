// Prepared Conv / Gemm / MatMul allocate nothing in Compute: every heap
// allocation of this test binary is counted by the replacement operator new
// of tests/unit/common/counting_new.cc, plus Tensor buffers.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "counting_new.h"
#include "ops/registry.h"
#include "op_test_util.h"

namespace orrery::ops {
namespace {

using testing::RandomTensor;

uint64_t Allocations() { return orrery::testing::TestHeapAllocations() + TensorBufferAllocationCount(); }

// Prepares `op` like a planned step (constants: the inputs in `constant`),
// then counts the allocations of two Compute calls.
uint64_t ComputeAllocations(const std::string& op, const std::vector<const Tensor*>& inputs,
                            const std::vector<bool>& constant, const Attributes& attrs) {
  const KernelDef* def = OpRegistry::Global().Find(op, Backend::kCpu);
  EXPECT_NE(def, nullptr);
  EXPECT_NE(def->prepare, nullptr) << op;
  if (def == nullptr || def->prepare == nullptr) return ~uint64_t{0};
  std::vector<TensorType> types;
  std::vector<const Tensor*> values;
  for (size_t i = 0; i < inputs.size(); ++i) {
    types.push_back({inputs[i]->dtype(), inputs[i]->shape()});
    values.push_back(constant[i] ? inputs[i] : nullptr);
  }
  std::vector<TensorType> out_types;
  EXPECT_TRUE(def->infer(InferContext{types, values, attrs, 13}, &out_types).ok());
  NodeCache cache;
  auto prepared = def->prepare(PrepareContext{.inputs = types,
                                              .values = values,
                                              .outputs = out_types,
                                              .attrs = attrs,
                                              .opset = 13,
                                              .node_cache = &cache});
  EXPECT_TRUE(prepared.ok()) << prepared.status().ToString();
  if (!prepared.ok()) return ~uint64_t{0};
  std::vector<Tensor> outs;
  for (const TensorType& t : out_types) outs.push_back(*Tensor::Allocate(t.dtype, t.shape));
  Result<Tensor> scratch = Tensor::Allocate(
      DType::kUint8, {static_cast<int64_t>(ScratchStride(prepared->scratch_bytes)) + 1});
  EXPECT_TRUE(scratch.ok());
  const KernelContext ctx{.inputs = inputs,
                          .attrs = attrs,
                          .opset = 13,
                          .prepared = prepared->kernel.get(),
                          .scratch = std::span<std::byte>(
                              static_cast<std::byte*>(scratch->raw_data()),
                              ScratchStride(prepared->scratch_bytes))};
  const uint64_t before = Allocations();
  for (int i = 0; i < 2; ++i) EXPECT_TRUE(def->compute(ctx, outs).ok());
  return Allocations() - before;
}

TEST(GemmAllocationTest, PreparedKernelsAllocateNothing) {
  const Tensor x = RandomTensor({1, 16, 20, 20}, 1);
  const Tensor w3 = RandomTensor({24, 16, 3, 3}, 2);
  const Tensor w1 = RandomTensor({24, 16, 1, 1}, 3);
  const Tensor wd = RandomTensor({16, 1, 3, 3}, 4);
  const Tensor b24 = RandomTensor({24}, 5);
  const Tensor b16 = RandomTensor({16}, 6);
  const Tensor z = RandomTensor({1, 24, 20, 20}, 7);
  const Tensor zd = RandomTensor({1, 16, 10, 10}, 8);

  Attributes conv3;
  conv3.Set("pads", std::vector<int64_t>{1, 1, 1, 1});
  conv3.Set("_fused_activation", std::string("Relu"));
  conv3.Set("_fused_residual", int64_t{1});
  EXPECT_EQ(ComputeAllocations("Conv", {&x, &w3, &b24, &z}, {false, true, true, false}, conv3),
            0u);
  Attributes plain;
  EXPECT_EQ(ComputeAllocations("Conv", {&x, &w1, &b24}, {false, true, true}, plain), 0u);
  // Weights that are not constant are packed on the fly into scratch.
  EXPECT_EQ(ComputeAllocations("Conv", {&x, &w3, &b24}, {false, false, false}, plain), 0u);
  // Few positions and many channels: the transposed GEMM (Y^T in scratch).
  const Tensor x7 = RandomTensor({1, 16, 7, 7}, 17);
  const Tensor w64 = RandomTensor({64, 16, 3, 3}, 18);
  const Tensor z7 = RandomTensor({1, 64, 7, 7}, 19);
  const Tensor b64 = RandomTensor({64}, 20);
  EXPECT_EQ(ComputeAllocations("Conv", {&x7, &w64, &b64, &z7}, {false, true, true, false}, conv3),
            0u);
  Attributes dw;
  dw.Set("group", int64_t{16});
  dw.Set("strides", std::vector<int64_t>{2, 2});
  dw.Set("pads", std::vector<int64_t>{1, 1, 1, 1});
  dw.Set("_fused_activation", std::string("Clip"));
  dw.Set("_fused_alpha", 0.0f);
  dw.Set("_fused_beta", 6.0f);
  dw.Set("_fused_residual", int64_t{1});
  EXPECT_EQ(ComputeAllocations("Conv", {&x, &wd, &b16, &zd}, {false, true, true, false}, dw), 0u);

  const Tensor a = RandomTensor({4, 64}, 9);
  const Tensor bw = RandomTensor({48, 64}, 10);
  const Tensor c = RandomTensor({48}, 11);
  Attributes gemm;
  gemm.Set("transB", int64_t{1});
  gemm.Set("_fused_activation", std::string("Gelu"));
  EXPECT_EQ(ComputeAllocations("Gemm", {&a, &bw, &c}, {false, true, true}, gemm), 0u);

  const Tensor q = RandomTensor({2, 4, 16, 8}, 12);
  const Tensor kt = RandomTensor({2, 4, 8, 16}, 13);
  const Tensor wm = RandomTensor({8, 32}, 14);
  EXPECT_EQ(ComputeAllocations("MatMul", {&q, &kt}, {false, false}, plain), 0u);
  EXPECT_EQ(ComputeAllocations("MatMul", {&q, &wm}, {false, true}, plain), 0u);

  // The rare 3-D path does use heap buffers: proof that the counter counts.
  const Tensor x3 = RandomTensor({1, 2, 4, 4, 4}, 15);
  const Tensor w33 = RandomTensor({3, 2, 2, 2, 2}, 16);
  EXPECT_GT(ComputeAllocations("Conv", {&x3, &w33}, {false, true}, plain), 0u);
}

}  // namespace
}  // namespace orrery::ops
