// Steady-state inference allocates nothing on the runtime's side: counted
// with the replacement global operator new of tests/unit/common/
// counting_new.cc (every heap allocation in this test binary) plus
// Tensor's buffer counter (buffers come from aligned_alloc).
#include <gtest/gtest.h>

#include <cstdio>

#include "counting_new.h"
#include "model_builder.h"
#include "ops/registry.h"
#include "plan_util.h"
#include "runtime/execution.h"
#include "runtime/executor.h"
#include "runtime/lane_group.h"
#include "runtime/model.h"
#include "runtime/run_state.h"

namespace orrery {
namespace {

using testing::ExpectAllNear;
using testing::F32;
using testing::Floats;
using testing::kFloat;
using testing::ModelBuilder;
using testing::Ramp;
using testing::Reference;

uint64_t Allocations() { return testing::TestHeapAllocations() + TensorBufferAllocationCount(); }

ModelBuilder Mlp(bool bias) {
  ModelBuilder b(13);
  b.Input("X", kFloat, {-1, 16});
  b.FloatInit("W1", {16, 32}, Ramp(512, 1));
  b.FloatInit("b1", {32}, Ramp(32, 4));
  b.FloatInit("W2T", {32, 32}, Ramp(1024, 2));
  b.FloatInit("W3", {32, 4}, Ramp(128, 3));
  b.Node("Gemm", bias ? std::vector<std::string>{"X", "W1", "b1"} : std::vector<std::string>{"X", "W1"},
         {"h1"}, "fc1");
  b.Node("Relu", {"h1"}, {"r1"});
  auto* fc2 = b.Node("Gemm", {"r1", "W2T"}, {"h2"}, "fc2");
  if (bias) ModelBuilder::AttrInt(fc2, "transB", 1);
  b.Node("Relu", {"h2"}, {"r2"});
  b.Node("Gemm", {"r2", "W3"}, {"logits"}, "fc3");
  b.Node("Softmax", {"logits"}, {"Y"});
  b.Output("Y", kFloat, {-1, 4});
  return b;
}

struct Counts {
  uint64_t start = 0, steps = 0, take = 0;
};

Counts CountOneRun(const CompiledModel& model, const std::vector<NamedTensor>& inputs,
                   std::vector<NamedTensor>* outputs) {
  Counts c;
  uint64_t before = Allocations();
  auto ex = Execution::Start(model, inputs);
  c.start = Allocations() - before;
  EXPECT_TRUE(ex.ok());
  if (!ex.ok()) return c;
  before = Allocations();
  while (!ex->done()) {
    if (!ex->Step().ok()) break;
  }
  c.steps = Allocations() - before;
  before = Allocations();
  auto out = ex->TakeOutputs();
  c.take = Allocations() - before;
  EXPECT_TRUE(out.ok());
  if (out.ok()) *outputs = std::move(out).value();
  return c;
}

// Runs every step of `plan` through the runtime and then the same kernel
// again directly on the same tensors; returns the runtime's own
// allocations (total minus the kernels'), summed over the steps.
struct Overhead {
  uint64_t runtime = 0, kernels = 0;
};
Overhead MeasureStepOverhead(const runtime::SpecializedPlan& plan,
                             std::span<const Tensor* const> inputs) {
  Overhead o;
  auto state = plan.AcquireState();
  EXPECT_TRUE(state.ok());
  if (!state.ok()) return o;
  runtime::RunState& st = **state;
  EXPECT_TRUE(runtime::BeginRun(plan, inputs, st).ok());
  for (size_t s = 0; s < plan.steps.size(); ++s) {
    const runtime::PlannedStep& ps = plan.steps[s];
    uint64_t before = Allocations();
    EXPECT_TRUE(runtime::RunPlannedStep(plan, s, st).ok());
    const uint64_t total = Allocations() - before;
    std::span<const Tensor* const> ins(st.step_inputs.data() + ps.in_begin, ps.in_count);
    std::span<Tensor> outs(st.entries.data() + ps.out_begin, ps.out_count);
    before = Allocations();
    // The same call the runtime makes (prepared state, the state's scratch).
    const size_t stride = ops::ScratchStride(ps.prepared.scratch_bytes);
    const ops::KernelContext kctx{
        .inputs = ins,
        .attrs = ps.step->attrs,
        .opset = plan.base->opset,
        .prepared = ps.prepared.kernel.get(),
        .scratch = std::span<std::byte>(static_cast<std::byte*>(st.scratch.raw_data()), stride)};
    EXPECT_TRUE(ps.step->compute(kctx, outs).ok());
    const uint64_t kernel = Allocations() - before;
    o.kernels += kernel;
    o.runtime += total - kernel;
  }
  runtime::EndRun(plan, st);
  plan.ReleaseState(std::move(state).value());
  return o;
}

TEST(AllocationTest, MlpRuntimeOverheadIsZero) {
  for (bool bias : {false, true}) {
    SCOPED_TRACE(bias ? "Gemm with bias and transB" : "Gemm without bias");
    const ModelBuilder b = Mlp(bias);
    auto sp = testing::SpecializeModel(b, {ops::TensorType{DType::kFloat32, {8, 16}}});
    ASSERT_TRUE(sp.ok()) << sp.status().ToString();
    const Tensor x = F32({8, 16}, Ramp(128, 9));
    const Tensor* in[] = {&x};
    MeasureStepOverhead(**sp, in);  // warm-up: creates the pooled state
    const Overhead o = MeasureStepOverhead(**sp, in);
    std::printf("[ metric ] MLP (%s): runtime allocations per run %llu, kernels' own %llu\n",
                bias ? "bias, transB" : "no bias", static_cast<unsigned long long>(o.runtime),
                static_cast<unsigned long long>(o.kernels));
    EXPECT_EQ(o.runtime, 0u);
    EXPECT_EQ(o.kernels, 0u);  // Gemm (incl. bias, transB), Relu, Softmax
  }
}

TEST(AllocationTest, MlpSteadyStateRunCounts) {
  const ModelBuilder b = Mlp(false);
  auto model = CompiledModel::Compile(b.Bytes());
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const std::vector<NamedTensor> inputs = {{"X", F32({8, 16}, Ramp(128, 9))}};
  std::vector<NamedTensor> outputs;
  CountOneRun(**model, inputs, &outputs);  // warm-up: plan, arena, pools
  Counts first = CountOneRun(**model, inputs, &outputs);
  for (int i = 0; i < 3; ++i) {
    const Counts c = CountOneRun(**model, inputs, &outputs);
    // Start allocates the output's buffer (buffer + control block + shape);
    // TakeOutputs the result vector and the output's shape copy; the steps
    // only what the kernels allocate themselves (the same every run).
    EXPECT_LE(c.start, 3u);
    EXPECT_LE(c.take, 3u);
    EXPECT_EQ(c.steps, 0u);
  }
  std::printf("[ metric ] MLP Execution: Start %llu, steps %llu (kernels' own), TakeOutputs %llu "
              "allocations\n",
              static_cast<unsigned long long>(first.start),
              static_cast<unsigned long long>(first.steps),
              static_cast<unsigned long long>(first.take));
  ExpectAllNear(Floats(outputs[0].tensor), Floats(Reference(b, {inputs[0].tensor})[0]));
}

// Kernels that allocate nothing, so that the whole step loop can be held to
// zero: Gemm without bias (no scratch), Reshape (a view) and a local ReLU.
Status ComputeTestRelu(const ops::KernelContext& ctx, std::span<Tensor> outputs) {
  const float* x = ctx.inputs[0]->data<float>();
  float* y = outputs[0].data<float>();
  for (int64_t i = 0; i < outputs[0].num_elements(); ++i) y[i] = x[i] > 0 ? x[i] : 0;
  return Status::Ok();
}
Status InferTestRelu(const ops::InferContext& ctx, std::vector<ops::TensorType>* outputs) {
  outputs->assign(1, ctx.inputs[0]);
  return Status::Ok();
}

TEST(AllocationTest, StepLoopAllocatesNothingWithNonAllocatingKernels) {
  ops::OpRegistry reg;
  for (const char* op : {"Gemm", "Reshape"}) {
    ASSERT_TRUE(reg.Register(*ops::OpRegistry::Global().Find(op, ops::Backend::kCpu)).ok());
  }
  ASSERT_TRUE(reg.Register(ops::KernelDef{.op_type = "TestRelu",
                                          .min_inputs = 1,
                                          .max_inputs = 1,
                                          .infer = InferTestRelu,
                                          .compute = ComputeTestRelu})
                  .ok());
  ModelBuilder b(13);
  b.Input("X", kFloat, {-1, 16});
  b.FloatInit("W1", {16, 32}, Ramp(512, 1));
  b.FloatInit("W2", {32, 4}, Ramp(128, 2));
  b.Int64Init("shape", {2}, {-1, 32});
  b.Node("Gemm", {"X", "W1"}, {"h1"});
  b.Node("TestRelu", {"h1"}, {"r1"});
  b.Node("Reshape", {"r1", "shape"}, {"v1"});
  b.Node("Gemm", {"v1", "W2"}, {"h2"});
  b.Node("TestRelu", {"h2"}, {"Y"});
  b.Output("Y", kFloat, {-1, 4});
  auto graph = runtime::ImportModel(b.model(), reg);
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  auto base = runtime::CompilePlan(*graph, reg);
  ASSERT_TRUE(base.ok());
  auto sp = runtime::Specialize(std::make_shared<const runtime::Plan>(std::move(base).value()),
                                {ops::TensorType{DType::kFloat32, {8, 16}}}, nullptr);
  ASSERT_TRUE(sp.ok()) << sp.status().ToString();
  ASSERT_EQ((*sp)->steps.size(), 4u);  // the Reshape is a view
  const Tensor x = F32({8, 16}, Ramp(128, 9));
  const Tensor* in[] = {&x};
  for (int run = 0; run < 3; ++run) {
    auto state = (*sp)->AcquireState();
    ASSERT_TRUE(state.ok());
    uint64_t before = Allocations();
    ASSERT_TRUE(runtime::BeginRun(**sp, in, **state).ok());
    const uint64_t begin = Allocations() - before;
    before = Allocations();
    for (size_t s = 0; s < (*sp)->steps.size(); ++s) {
      ASSERT_TRUE(runtime::RunPlannedStep(**sp, s, **state).ok());
    }
    const uint64_t steps = Allocations() - before;
    runtime::EndRun(**sp, **state);
    (*sp)->ReleaseState(std::move(state).value());
    if (run == 0) continue;  // warm-up created the state
    std::printf("[ metric ] non-allocating kernels: BeginRun %llu (the output), steps %llu\n",
                static_cast<unsigned long long>(begin), static_cast<unsigned long long>(steps));
    EXPECT_EQ(steps, 0u);
    EXPECT_LE(begin, 3u);
  }
  EXPECT_EQ((*sp)->idle_states(), 1u);  // one state, reused
}

// A kernel with a Prepare: Y = X * scale, where Prepare "packs" the scale
// (a constant input) once per node and asks for scratch the size of X.
struct PackedScale : ops::PreparedKernel {
  float scale = 0;
};
std::atomic<int> g_packs{0};

Result<ops::Prepared> PrepareTestScale(const ops::PrepareContext& ctx) {
  const Tensor* s = ctx.value(1);
  auto make = [&]() -> Result<std::shared_ptr<const ops::PreparedKernel>> {
    g_packs.fetch_add(1);
    auto p = std::make_shared<PackedScale>();
    p->scale = s == nullptr ? 1.0f : s->data<float>()[0];
    return std::shared_ptr<const ops::PreparedKernel>(std::move(p));
  };
  ORRERY_ASSIGN_OR_RETURN(std::shared_ptr<const ops::PreparedKernel> packed,
                          ctx.node_cache != nullptr ? ctx.node_cache->GetOrMake(0, make) : make());
  return ops::Prepared{.kernel = packed,
                       .scratch_bytes = NumElements(ctx.inputs[0].shape) *
                                        static_cast<int64_t>(sizeof(float))};
}
Status ComputeTestScale(const ops::KernelContext& ctx, std::span<Tensor> outputs) {
  const auto* p = dynamic_cast<const PackedScale*>(ctx.prepared);
  if (p == nullptr) return Status::Internal("not prepared");
  const int64_t n = outputs[0].num_elements();
  const size_t need = static_cast<size_t>(n) * sizeof(float);
  for (int t = 0; t < ops::NumThreads(ctx.threads); ++t) {
    if (ops::ThreadScratch(ctx, t).size() < need) return Status::Internal("scratch too small");
  }
  const float* x = ctx.inputs[0]->data<float>();
  float* y = outputs[0].data<float>();
  // Two halves on two threads, staged through each thread's scratch.
  ops::ParallelFor(ctx.threads, 2, [&](int64_t half, int thread) {
    auto* tmp = reinterpret_cast<float*>(ops::ThreadScratch(ctx, thread).data());
    const int64_t lo = half * n / 2, hi = (half + 1) * n / 2;
    for (int64_t i = lo; i < hi; ++i) tmp[i] = x[i] * p->scale;
    for (int64_t i = lo; i < hi; ++i) y[i] = tmp[i];
  });
  return Status::Ok();
}

TEST(AllocationTest, PreparedKernelsGetScratchAndThreadsWithoutAllocating) {
  ops::OpRegistry reg;
  ASSERT_TRUE(reg.Register(ops::KernelDef{.op_type = "TestScale",
                                          .min_inputs = 2,
                                          .max_inputs = 2,
                                          .infer = InferTestRelu,
                                          .compute = ComputeTestScale,
                                          .prepare = PrepareTestScale})
                  .ok());
  ModelBuilder b(13);
  b.Input("X", kFloat, {-1, 16});
  b.FloatInit("s", {1}, {3.0f});
  b.Node("TestScale", {"X", "s"}, {"Y"});
  b.Output("Y", kFloat, {-1, 16});
  auto graph = runtime::ImportModel(b.model(), reg);
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  auto base = runtime::CompilePlan(*graph, reg);
  ASSERT_TRUE(base.ok());
  auto plan = std::make_shared<const runtime::Plan>(std::move(base).value());
  g_packs = 0;
  runtime::LaneGroup lanes(runtime::LaneGroupOptions{.threads = 2});
  for (int64_t rows : {8, 4}) {
    auto sp = runtime::Specialize(plan, {ops::TensorType{DType::kFloat32, {rows, 16}}}, nullptr);
    ASSERT_TRUE(sp.ok()) << sp.status().ToString();
    EXPECT_GE((*sp)->scratch_stride, static_cast<size_t>(rows * 16 * 4));
    const Tensor x = F32({rows, 16}, Ramp(rows * 16, 9));
    const Tensor* in[] = {&x};
    for (int run = 0; run < 3; ++run) {
      auto state = (*sp)->AcquireState();
      ASSERT_TRUE(state.ok());
      ASSERT_TRUE(runtime::BeginRun(**sp, in, **state).ok());
      const uint64_t before = Allocations();
      ASSERT_TRUE(runtime::RunPlannedStep(**sp, 0, **state, &lanes).ok());
      const uint64_t steps = Allocations() - before;
      const std::vector<float> got = Floats((*state)->entries[static_cast<size_t>(
          (*sp)->output_entries[0])]);
      for (size_t i = 0; i < got.size(); ++i) ASSERT_FLOAT_EQ(got[i], 3.0f * Floats(x)[i]);
      runtime::EndRun(**sp, **state);
      (*sp)->ReleaseState(std::move(state).value());
      if (run > 0) {
        EXPECT_EQ(steps, 0u) << "run " << run;  // run 0 grows the scratch
      }
    }
  }
  // Both shapes share the node's packed state.
  EXPECT_EQ(g_packs.load(), 1);
}

}  // namespace
}  // namespace orrery
