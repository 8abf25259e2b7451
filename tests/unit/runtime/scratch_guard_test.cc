// With ORRERY_POISON_OUTPUTS=1 (as ctest runs the unit and conformance
// tests) the executor guards the bytes after each step's scratch: a kernel
// that writes past its declared scratch_bytes fails its step with INTERNAL,
// naming the node, instead of overwriting what follows.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "model_builder.h"
#include "ops/registry.h"
#include "plan_util.h"
#include "runtime/executor.h"
#include "runtime/graph.h"
#include "runtime/run_state.h"
#include "runtime/specialize.h"

namespace orrery {
namespace {

using testing::F32;
using testing::kFloat;
using testing::ModelBuilder;

constexpr int64_t kDeclared = 100;

Status InferSame(const ops::InferContext& ctx, std::vector<ops::TensorType>* outputs) {
  outputs->assign(1, ctx.inputs[0]);
  return Status::Ok();
}

Result<ops::Prepared> PrepareScratch(const ops::PrepareContext&) {
  return ops::Prepared{.kernel = nullptr, .scratch_bytes = kDeclared};
}

// Copies X to Y after writing `extra` bytes past the end of its scratch.
template <size_t extra>
Status ComputeWriting(const ops::KernelContext& ctx, std::span<Tensor> outputs) {
  std::memset(ctx.scratch.data(), 1, ctx.scratch.size() + extra);
  std::memcpy(outputs[0].raw_data(), ctx.inputs[0]->raw_data(), outputs[0].byte_size());
  return Status::Ok();
}

ops::KernelDef Def(const char* op, ops::ComputeFn compute) {
  return ops::KernelDef{.op_type = op,
                        .min_inputs = 1,
                        .max_inputs = 1,
                        .infer = InferSame,
                        .compute = compute,
                        .prepare = PrepareScratch};
}

const ops::OpRegistry& Registry() {
  static const ops::OpRegistry reg = [] {
    ops::OpRegistry r;
    EXPECT_TRUE(r.Register(Def("WithinScratch", ComputeWriting<0>)).ok());
    EXPECT_TRUE(r.Register(Def("PastScratch", ComputeWriting<1>)).ok());
    return r;
  }();
  return reg;
}

// Runs a one-node model of `op` on a 4-float input; the first error.
Status RunOne(const char* op) {
  ModelBuilder b(13);
  b.Input("X", kFloat, {4});
  b.Output("Y", kFloat, {4});
  b.Node(op, {"X"}, {"Y"});
  ORRERY_ASSIGN_OR_RETURN(runtime::Graph g, runtime::ImportModel(b.model(), Registry()));
  ORRERY_ASSIGN_OR_RETURN(runtime::Plan plan, runtime::CompilePlan(g, Registry()));
  ORRERY_ASSIGN_OR_RETURN(
      std::shared_ptr<runtime::SpecializedPlan> sp,
      runtime::Specialize(std::make_shared<const runtime::Plan>(std::move(plan)),
                          {ops::TensorType{DType::kFloat32, {4}}}, nullptr));
  ORRERY_ASSIGN_OR_RETURN(auto state, sp->AcquireState());
  const Tensor x = F32({4}, {1, 2, 3, 4});
  const Tensor* inputs[] = {&x};
  ORRERY_RETURN_IF_ERROR(runtime::BeginRun(*sp, inputs, *state));
  Status st = Status::Ok();
  for (size_t s = 0; s < sp->steps.size() && st.ok(); ++s) st = runtime::RunPlannedStep(*sp, s, *state);
  runtime::EndRun(*sp, *state);
  return st;
}

TEST(ScratchGuardTest, AKernelWritingPastItsScratchFailsItsStep) {
  const char* poison = std::getenv("ORRERY_POISON_OUTPUTS");
  if (poison == nullptr || poison[0] != '1') GTEST_SKIP() << "needs ORRERY_POISON_OUTPUTS=1 (ctest sets it)";
  const Status within = RunOne("WithinScratch");
  EXPECT_TRUE(within.ok()) << within.ToString();
  const Status st = RunOne("PastScratch");
  EXPECT_EQ(st.code(), StatusCode::kInternal) << st.ToString();
  EXPECT_NE(st.message().find("wrote past its scratch"), std::string::npos) << st.ToString();
  EXPECT_NE(st.message().find("PastScratch"), std::string::npos) << st.ToString();
}

}  // namespace
}  // namespace orrery
