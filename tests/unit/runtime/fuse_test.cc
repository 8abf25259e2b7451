// The fusion pass (runtime/fuse.h): what it merges, what it must leave
// alone, and that fused plans compute what the unfused graph computes.
// MatMul here is a small test kernel implementing every fusion, so these
// tests check the runtime's rewriting, not a particular kernel.
#include "runtime/fuse.h"

#include <gtest/gtest.h>

#include <cmath>

#include "model_builder.h"
#include "ops/registry.h"
#include "plan_util.h"
#include "runtime/executor.h"
#include "runtime/graph.h"
#include "runtime/run_state.h"
#include "runtime/specialize.h"

namespace orrery {
namespace {

using testing::ExpectAllNear;
using testing::F32;
using testing::Floats;
using testing::kFloat;
using testing::ModelBuilder;
using testing::Ramp;

// 2-D MatMul [M, K] x [K, N] with every fusion, done the obvious way.
Status InferTestMatMul(const ops::InferContext& ctx, std::vector<ops::TensorType>* outputs) {
  const Shape& a = ctx.inputs[0].shape;
  const Shape& b = ctx.inputs[1].shape;
  if (a.size() != 2 || b.size() != 2 || a[1] != b[0]) {
    return Status::InvalidArgument("TestMatMul: bad shapes");
  }
  const ops::TensorType out{DType::kFloat32, {a[0], b[1]}};
  if (ctx.attrs.Has("_fused_residual") && !(ctx.inputs.back() == out)) {
    return Status::InvalidArgument("TestMatMul: residual must have the output's shape");
  }
  outputs->assign(1, out);
  return Status::Ok();
}

Status ComputeTestMatMul(const ops::KernelContext& ctx, std::span<Tensor> outputs) {
  const Tensor& a = *ctx.inputs[0];
  const Tensor& b = *ctx.inputs[1];
  const int64_t m = a.shape()[0], k = a.shape()[1], n = b.shape()[1];
  const bool bias = ctx.attrs.Has("_fused_bias");
  const bool residual = ctx.attrs.Has("_fused_residual");
  ORRERY_ASSIGN_OR_RETURN(std::string act, ctx.attrs.GetString("_fused_activation", ""));
  ORRERY_ASSIGN_OR_RETURN(float alpha, ctx.attrs.GetFloat("_fused_alpha", 0));
  ORRERY_ASSIGN_OR_RETURN(float beta, ctx.attrs.GetFloat("_fused_beta", 0));
  float* y = outputs[0].data<float>();
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      float acc = 0;
      for (int64_t p = 0; p < k; ++p) acc += a.data<float>()[i * k + p] * b.data<float>()[p * n + j];
      if (bias) acc += ctx.inputs[2]->data<float>()[j];
      if (residual) acc += ctx.inputs.back()->data<float>()[i * n + j];
      if (act == "Relu") acc = std::max(acc, 0.0f);
      if (act == "Clip") acc = std::min(std::max(acc, alpha), beta);
      y[i * n + j] = acc;
    }
  }
  return Status::Ok();
}

ops::OpRegistry MakeTestRegistry() {
  ops::OpRegistry reg;
  ops::OpRegistry* r = &reg;
  {
    for (const char* op : {"Add", "Relu", "Clip", "Conv", "BatchNormalization", "Shape"}) {
      EXPECT_TRUE(r->Register(*ops::OpRegistry::Global().Find(op, ops::Backend::kCpu)).ok());
    }
    EXPECT_TRUE(r->Register(ops::KernelDef{.op_type = "MatMul",
                                           .min_inputs = 2,
                                           .max_inputs = 4,
                                           .infer = InferTestMatMul,
                                           .compute = ComputeTestMatMul,
                                           .fusions = ops::kFuseBias | ops::kFuseResidual |
                                                      ops::kFuseActivation})
                    .ok());
  }
  return reg;
}

const ops::OpRegistry& TestRegistry() {
  static const ops::OpRegistry reg = MakeTestRegistry();
  return reg;
}

Result<runtime::Plan> Compile(ModelBuilder& b, bool fuse) {
  ORRERY_ASSIGN_OR_RETURN(runtime::Graph g, runtime::ImportModel(b.model(), TestRegistry()));
  return runtime::CompilePlan(g, TestRegistry(), ops::Backend::kCpu,
                              runtime::CompileOptions{.fuse = fuse});
}

// Runs a specialised plan once; returns its first output and its step count.
std::pair<std::vector<float>, size_t> RunSpecialized(std::shared_ptr<const runtime::Plan> plan,
                                                     const std::vector<Tensor>& inputs) {
  std::vector<ops::TensorType> types;
  std::vector<const Tensor*> ptrs;
  for (const Tensor& t : inputs) {
    types.push_back({t.dtype(), t.shape()});
    ptrs.push_back(&t);
  }
  auto sp = runtime::Specialize(std::move(plan), types, nullptr);
  EXPECT_TRUE(sp.ok()) << sp.status().ToString();
  if (!sp.ok()) return {};
  auto state = (*sp)->AcquireState();
  EXPECT_TRUE(state.ok());
  EXPECT_TRUE(runtime::BeginRun(**sp, ptrs, **state).ok());
  for (size_t s = 0; s < (*sp)->steps.size(); ++s) {
    Status st = runtime::RunPlannedStep(**sp, s, **state);
    EXPECT_TRUE(st.ok()) << st.ToString();
  }
  auto out = runtime::CollectOutputs(**sp, **state);
  EXPECT_TRUE(out.ok());
  runtime::EndRun(**sp, **state);
  if (!out.ok()) return {};
  return {Floats((*out)[0].tensor), (*sp)->steps.size()};
}

std::vector<float> Unfused(ModelBuilder& b, const std::vector<Tensor>& inputs) {
  auto plan = Compile(b, /*fuse=*/false);
  EXPECT_TRUE(plan.ok()) << plan.status().ToString();
  auto out = runtime::ExecutePlan(*plan, inputs);
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  return out.ok() ? Floats((*out)[0]) : std::vector<float>{};
}

// Y = Relu(X W + b + Z)
ModelBuilder LinearResidualRelu() {
  ModelBuilder b(13);
  b.Input("X", kFloat, {-1, 8});
  b.Input("Z", kFloat, {-1, -1});
  b.FloatInit("W", {8, 4}, Ramp(32, 1));
  b.FloatInit("bias", {4}, Ramp(4, 2));
  b.Node("MatMul", {"X", "W"}, {"mm"});
  b.Node("Add", {"bias", "mm"}, {"lin"});  // bias first, as torch exports it
  b.Node("Add", {"lin", "Z"}, {"sum"});
  b.Node("Relu", {"sum"}, {"Y"});
  b.Output("Y", kFloat, {-1, 4});
  return b;
}

TEST(FuseTest, BiasResidualAndActivationBecomeOneStep) {
  ModelBuilder b = LinearResidualRelu();
  auto plan = Compile(b, true);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  ASSERT_EQ(plan->steps.size(), 1u);
  EXPECT_EQ(plan->fusion.biases, 1u);
  EXPECT_EQ(plan->fusion.residuals, 1u);
  EXPECT_EQ(plan->fusion.activations, 1u);
  const runtime::Step& s = plan->steps[0];
  EXPECT_EQ(s.op_type, "MatMul");
  EXPECT_EQ(s.inputs.size(), 4u);  // X, W, bias, Z
  EXPECT_EQ(s.unfused.size(), 3u);  // MatMul+bias, Add(Z), Relu: the residual's fallback

  const std::vector<Tensor> in{F32({3, 8}, Ramp(24, 3)), F32({3, 4}, Ramp(12, 4))};
  const std::vector<float> want = Unfused(b, in);
  auto shared = std::make_shared<const runtime::Plan>(std::move(plan).value());
  auto [got, steps] = RunSpecialized(shared, in);
  EXPECT_EQ(steps, 1u);
  ExpectAllNear(got, want);
  // The reference executor runs the original steps.
  auto ref = runtime::ExecutePlan(*shared, in);
  ASSERT_TRUE(ref.ok());
  ExpectAllNear(Floats((*ref)[0]), want);
}

TEST(FuseTest, ResidualFallsBackWhenItBroadcasts) {
  ModelBuilder b = LinearResidualRelu();
  auto plan = Compile(b, true);
  ASSERT_TRUE(plan.ok());
  // Z [1, 4] broadcasts over the rows: exact only unfused.
  const std::vector<Tensor> in{F32({3, 8}, Ramp(24, 3)), F32({1, 4}, Ramp(4, 4))};
  const std::vector<float> want = Unfused(b, in);
  auto [got, steps] = RunSpecialized(std::make_shared<const runtime::Plan>(std::move(plan).value()), in);
  EXPECT_EQ(steps, 3u);  // MatMul(+bias), Add, Relu
  ExpectAllNear(got, want);
}

TEST(FuseTest, ValuesWithOtherReadersOrGraphOutputsAreNotAbsorbed) {
  ModelBuilder b(13);
  b.Input("X", kFloat, {2, 8});
  b.FloatInit("W", {8, 4}, Ramp(32, 1));
  b.Node("MatMul", {"X", "W"}, {"mm"});
  b.Node("Relu", {"mm"}, {"r"});
  b.Node("Add", {"mm", "r"}, {"Y"});  // mm has two readers
  b.Output("Y", kFloat, {2, 4});
  b.Output("mm", kFloat, {2, 4});
  auto plan = Compile(b, true);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->steps.size(), 3u);
  EXPECT_EQ(plan->fusion.activations + plan->fusion.residuals, 0u);
}

TEST(FuseTest, KernelsWithoutFusionSupportAreLeftAlone) {
  // The same MatMul, declaring no fusions: the Relu stays its own step.
  ops::OpRegistry reg;
  for (const char* op : {"Relu"}) {
    ASSERT_TRUE(reg.Register(*TestRegistry().Find(op, ops::Backend::kCpu)).ok());
  }
  ops::KernelDef mm = *TestRegistry().Find("MatMul", ops::Backend::kCpu);
  mm.fusions = 0;
  ASSERT_TRUE(reg.Register(mm).ok());
  ModelBuilder b(13);
  b.Input("X", kFloat, {2, 8});
  b.FloatInit("W", {8, 4}, Ramp(32, 1));
  b.Node("MatMul", {"X", "W"}, {"mm"});
  b.Node("Relu", {"mm"}, {"Y"});
  b.Output("Y", kFloat, {2, 4});
  auto g = runtime::ImportModel(b.model(), reg);
  ASSERT_TRUE(g.ok());
  auto plan = runtime::CompilePlan(*g, reg);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->steps.size(), 2u);
}

TEST(FuseTest, BatchNormFoldsIntoConvWeights) {
  ModelBuilder b(13);
  b.Input("X", kFloat, {1, 2, 5, 5});
  b.FloatInit("W", {3, 2, 3, 3}, Ramp(54, 1));
  b.FloatInit("B", {3}, {0.1f, -0.2f, 0.3f});
  b.FloatInit("scale", {3}, {1.5f, 0.5f, -1.0f});
  b.FloatInit("shift", {3}, {0.2f, 0.0f, -0.4f});
  b.FloatInit("mean", {3}, {0.05f, -0.1f, 0.2f});
  b.FloatInit("var", {3}, {0.9f, 1.2f, 0.3f});
  auto* conv = b.Node("Conv", {"X", "W", "B"}, {"c"});
  ModelBuilder::AttrInts(conv, "pads", {1, 1, 1, 1});
  ModelBuilder::AttrFloat(b.Node("BatchNormalization", {"c", "scale", "shift", "mean", "var"}, {"Y"}),
                          "epsilon", 1e-3f);
  b.Output("Y", kFloat, {1, 3, 5, 5});
  auto plan = Compile(b, true);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->fusion.batchnorms_folded, 1u);
  ASSERT_EQ(plan->steps.size(), 1u);
  EXPECT_TRUE(plan->steps[0].unfused.empty());  // exact for every shape
  const std::vector<Tensor> in{F32({1, 2, 5, 5}, Ramp(50, 7))};
  auto out = runtime::ExecutePlan(*plan, in);
  ASSERT_TRUE(out.ok());
  ExpectAllNear(Floats((*out)[0]), Unfused(b, in), 1e-4f);
}

TEST(FuseTest, UserModelsCannotSetReservedAttributes) {
  ModelBuilder b(13);
  b.Input("X", kFloat, {2, 8});
  b.FloatInit("W", {8, 4}, Ramp(32, 1));
  ModelBuilder::AttrInt(b.Node("MatMul", {"X", "W"}, {"Y"}, "mm"), "_fused_residual", 1);
  b.Output("Y", kFloat, {2, 4});
  auto g = runtime::ImportModel(b.model(), TestRegistry());
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(g.status().message().find("_fused_residual"), std::string::npos);
  EXPECT_NE(g.status().message().find("reserved"), std::string::npos);
}

}  // namespace
}  // namespace orrery
