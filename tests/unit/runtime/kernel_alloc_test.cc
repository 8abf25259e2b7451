// Steady-state runs allocate nothing: models built from the elementwise,
// pooling, normalisation and data-movement kernels, and from Conv / Gemm /
// MatMul with fused epilogues; every step of a warmed-up plan is counted with the replacement operator new of
// tests/unit/common/counting_new.cc (TestHeapAllocations) plus Tensor's buffer counter.
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <string>

#include "counting_new.h"
#include "model_builder.h"
#include "plan_util.h"
#include "runtime/executor.h"
#include "runtime/lane_group.h"
#include "runtime/specialize.h"

namespace orrery {
namespace {

using testing::ExpectAllNear;
using testing::F32;
using testing::Floats;
using testing::kFloat;
using testing::kInt64;
using testing::ModelBuilder;
using testing::Ramp;
using testing::Reference;

uint64_t Allocations() { return testing::TestHeapAllocations() + TensorBufferAllocationCount(); }

std::vector<float> Positive(size_t n, uint32_t seed) {
  std::vector<float> v = Ramp(n, seed);
  for (float& x : v) x = 0.5f + 0.5f * (x + 1.0f);
  return v;
}

// A CNN-like graph without Conv: BatchNorm, activations, pools, broadcast
// arithmetic, Concat, Resize, Pad, Transpose, GlobalAveragePool, Flatten,
// Softmax. X[N,8,H,W] -> Y[N,16].
ModelBuilder CnnLike() {
  ModelBuilder b(17);
  b.Input("X", kFloat, {-1, 8, 64, 64});
  b.FloatInit("bn_s", {8}, Positive(8, 1));
  b.FloatInit("bn_b", {8}, Ramp(8, 2));
  b.FloatInit("bn_m", {8}, Ramp(8, 3));
  b.FloatInit("bn_v", {8}, Positive(8, 4));
  b.FloatInit("lo", {}, {0.0f});
  b.FloatInit("hi", {}, {6.0f});
  b.FloatInit("cb", {8, 1, 1}, Ramp(8, 5));
  b.FloatInit("half", {}, {0.5f});
  b.FloatInit("scales", {4}, {1, 1, 2, 2});
  b.Int64Init("pads", {8}, {0, 0, 1, 1, 0, 0, 1, 1});
  b.Node("BatchNormalization", {"X", "bn_s", "bn_b", "bn_m", "bn_v"}, {"bn"});
  b.Node("Relu", {"bn"}, {"r"});
  auto* mp = b.Node("MaxPool", {"r"}, {"mp"});
  ModelBuilder::AttrInts(mp, "kernel_shape", {3, 3});
  ModelBuilder::AttrInts(mp, "strides", {2, 2});
  ModelBuilder::AttrInts(mp, "pads", {1, 1, 1, 1});
  b.Node("Clip", {"mp", "lo", "hi"}, {"c6"});                  // [N,8,16,16]
  b.Node("HardSwish", {"c6"}, {"hs"});
  auto* ap = b.Node("AveragePool", {"hs"}, {"ap"});
  ModelBuilder::AttrInts(ap, "kernel_shape", {3, 3});
  ModelBuilder::AttrInts(ap, "pads", {1, 1, 1, 1});
  b.Node("Add", {"ap", "cb"}, {"a1"});                          // channel broadcast
  b.Node("Mul", {"a1", "half"}, {"m1"});                        // scalar broadcast
  b.Node("Sigmoid", {"m1"}, {"sg"});
  b.Node("Mul", {"m1", "sg"}, {"silu"});
  b.Node("Concat", {"silu", "hs"}, {"cat"});                    // [N,16,16,16]
  ModelBuilder::AttrInt(b.graph()->mutable_node(b.graph()->node_size() - 1), "axis", 1);
  b.Node("Resize", {"cat", "", "scales"}, {"up"});              // [N,16,32,32]
  b.Node("Pad", {"up", "pads"}, {"pd"});                        // [N,16,34,34]
  auto* mp2 = b.Node("MaxPool", {"pd"}, {"mp2"});
  ModelBuilder::AttrInts(mp2, "kernel_shape", {2, 2});
  ModelBuilder::AttrInts(mp2, "strides", {2, 2});               // [N,16,17,17]
  auto* tr = b.Node("Transpose", {"mp2"}, {"tr"});
  ModelBuilder::AttrInts(tr, "perm", {0, 1, 3, 2});
  b.Node("Tanh", {"tr"}, {"th"});
  b.Node("GlobalAveragePool", {"th"}, {"gap"});                 // [N,16,1,1]
  b.Node("Flatten", {"gap"}, {"fl"});
  b.Node("Softmax", {"fl"}, {"Y"});
  b.Output("Y", kFloat, {-1, 16});
  return b;
}

// A transformer-like block without MatMul: embedding Gather, the
// decomposed LayerNorm torch exports, head split (Reshape, Transpose),
// Softmax over keys, the erf Gelu, LayerNormalization, Slice, Split,
// Where/Equal, Exp/Log, ReduceSum/ReduceMax.
ModelBuilder TransformerLike() {
  constexpr int64_t kVocab = 50, kD = 32;
  ModelBuilder b(17);
  b.Input("ids", kInt64, {1, 16});
  b.FloatInit("emb", {kVocab, kD}, Ramp(kVocab * kD, 1));
  b.FloatInit("pos", {16, kD}, Ramp(16 * kD, 2));
  b.FloatInit("two", {}, {2.0f});
  b.FloatInit("eps", {}, {1e-5f});
  b.FloatInit("g", {kD}, Positive(kD, 3));
  b.FloatInit("beta", {kD}, Ramp(kD, 4));
  b.FloatInit("sqrt2", {}, {1.4142135f});
  b.FloatInit("one", {}, {1.0f});
  b.FloatInit("half", {}, {0.5f});
  b.FloatInit("zero", {}, {0.0f});
  b.Int64Init("heads", {4}, {1, 16, 4, 8});
  b.Int64Init("merge", {3}, {1, 16, kD});
  b.Int64Init("s_start", {1}, {0});
  b.Int64Init("s_end", {1}, {1});
  b.Int64Init("s_axis", {1}, {1});
  b.Int64Init("split", {2}, {16, 16});
  b.Node("Gather", {"emb", "ids"}, {"e"});                      // [1,16,32]
  b.Node("Add", {"e", "pos"}, {"x"});
  // Decomposed LayerNorm.
  auto* rm = b.Node("ReduceMean", {"x"}, {"mu"});
  ModelBuilder::AttrInts(rm, "axes", {-1});
  b.Node("Sub", {"x", "mu"}, {"xc"});
  b.Node("Pow", {"xc", "two"}, {"sq"});
  auto* rv = b.Node("ReduceMean", {"sq"}, {"var"});
  ModelBuilder::AttrInts(rv, "axes", {-1});
  b.Node("Add", {"var", "eps"}, {"ve"});
  b.Node("Sqrt", {"ve"}, {"sd"});
  b.Node("Div", {"xc", "sd"}, {"xn"});
  b.Node("Mul", {"xn", "g"}, {"xg"});
  b.Node("Add", {"xg", "beta"}, {"ln1"});
  // Heads and attention-like softmax.
  b.Node("Reshape", {"ln1", "heads"}, {"h"});
  auto* tr = b.Node("Transpose", {"h"}, {"ht"});                // [1,4,16,8]
  ModelBuilder::AttrInts(tr, "perm", {0, 2, 1, 3});
  auto* sm = b.Node("Softmax", {"ht"}, {"p"});
  ModelBuilder::AttrInt(sm, "axis", -1);
  auto* tr2 = b.Node("Transpose", {"p"}, {"pt"});
  ModelBuilder::AttrInts(tr2, "perm", {0, 2, 1, 3});
  b.Node("Reshape", {"pt", "merge"}, {"att"});
  b.Node("Add", {"att", "x"}, {"res"});
  // Gelu, erf form.
  b.Node("Div", {"res", "sqrt2"}, {"gd"});
  b.Node("Erf", {"gd"}, {"ge"});
  b.Node("Add", {"ge", "one"}, {"g1"});
  b.Node("Mul", {"res", "g1"}, {"g2"});
  b.Node("Mul", {"g2", "half"}, {"gelu"});
  auto* ln = b.Node("LayerNormalization", {"gelu", "g", "beta"}, {"ln2"});
  ModelBuilder::AttrInt(ln, "axis", -1);
  auto* ls = b.Node("LogSoftmax", {"ln2"}, {"lsm"});
  ModelBuilder::AttrInt(ls, "axis", -1);
  b.Node("Exp", {"lsm"}, {"ex"});
  b.Node("Greater", {"ex", "half"}, {"big"});
  b.Node("Where", {"big", "ex", "zero"}, {"wh"});
  auto* sp = b.Node("Split", {"wh", "split"}, {"lo", "hi"});
  ModelBuilder::AttrInt(sp, "axis", 2);
  b.Node("Slice", {"lo", "s_start", "s_end", "s_axis"}, {"first"});  // [1,1,16]
  auto* rs = b.Node("ReduceSum", {"hi"}, {"rs"});
  ModelBuilder::AttrInt(rs, "keepdims", 1);
  b.Node("Max", {"first", "rs"}, {"mx"});                       // variadic broadcast
  b.Node("Sum", {"mx", "first", "half"}, {"Y"});
  b.Output("Y", kFloat, {1, 16, 16});
  return b;
}

// The remaining kernels with per-call state: Expand, Tile, InstanceNorm,
// Softmax over a middle axis, ReduceMax over a middle axis, ArgMax over a
// middle axis (as a Where condition), GlobalMaxPool, PRelu, Min / Mean,
// LeakyRelu, Elu, Softplus, Exp / Log. X[1,4,6,8] -> Y[1,4,6,8].
ModelBuilder MiscOps() {
  ModelBuilder b(17);
  b.Input("X", kFloat, {1, 4, 6, 8});
  b.Int64Init("eshape", {4}, {2, 4, 6, 8});
  b.Int64Init("reps", {4}, {1, 1, 2, 1});
  b.Int64Init("starts", {1}, {0});
  b.Int64Init("ends", {1}, {6});
  b.Int64Init("axis2", {1}, {2});
  b.FloatInit("in_s", {4}, Positive(4, 1));
  b.FloatInit("in_b", {4}, Ramp(4, 2));
  b.FloatInit("slope", {4, 1, 1}, Ramp(4, 3));
  b.Node("Expand", {"X", "eshape"}, {"ex"});                    // [2,4,6,8]
  b.Node("ReduceMean", {"ex"}, {"exm"});
  ModelBuilder::AttrInts(b.graph()->mutable_node(b.graph()->node_size() - 1), "axes", {0});
  b.Node("Tile", {"exm", "reps"}, {"t"});                       // [1,4,12,8]
  b.Node("Slice", {"t", "starts", "ends", "axis2"}, {"ts"});    // [1,4,6,8]
  b.Node("InstanceNormalization", {"ts", "in_s", "in_b"}, {"inorm"});
  auto* sm = b.Node("Softmax", {"inorm"}, {"sm"});
  ModelBuilder::AttrInt(sm, "axis", 1);
  auto* rmax = b.Node("ReduceMax", {"sm"}, {"rmax"});           // [1,1,6,8]
  ModelBuilder::AttrInts(rmax, "axes", {1});
  auto* am = b.Node("ArgMax", {"sm"}, {"am"});                  // [1,1,6,8] int64
  ModelBuilder::AttrInt(am, "axis", 1);
  b.Int64Init("zero_i", {}, {0});
  b.Node("Equal", {"am", "zero_i"}, {"first"});
  b.Node("GlobalMaxPool", {"inorm"}, {"gmp"});                  // [1,4,1,1]
  b.Node("PRelu", {"inorm", "slope"}, {"pr"});
  b.Node("Min", {"pr", "gmp", "rmax"}, {"mn"});
  b.Node("Where", {"first", "mn", "pr"}, {"wh"});
  b.Node("LeakyRelu", {"wh"}, {"lr"});
  b.Node("Elu", {"lr"}, {"el"});
  b.Node("Softplus", {"el"}, {"sp"});
  b.Node("Log", {"sp"}, {"lg"});
  b.Node("Exp", {"lg"}, {"e2"});
  b.Node("Mean", {"e2", "sp", "el"}, {"Y"});
  b.Output("Y", kFloat, {1, 4, 6, 8});
  return b;
}

// A ResNet / MobileNet-like network with every GEMM-shaped kernel: 3x3
// Conv + BatchNorm (folded) + Relu (fused), a residual Add (fused), MaxPool,
// a 1x1 Conv, a depthwise 3x3 Conv + Clip (fused), a strided Conv,
// GlobalAveragePool, Flatten and a Gemm classifier.
ModelBuilder ConvNet() {
  ModelBuilder b(13);
  b.Input("X", kFloat, {-1, 8, 16, 16});
  b.FloatInit("w1", {8, 8, 3, 3}, Ramp(8 * 8 * 9, 1));
  b.FloatInit("bn_s", {8}, Positive(8, 2));
  b.FloatInit("bn_b", {8}, Ramp(8, 3));
  b.FloatInit("bn_m", {8}, Ramp(8, 4));
  b.FloatInit("bn_v", {8}, Positive(8, 5));
  b.FloatInit("w2", {8, 8, 3, 3}, Ramp(8 * 8 * 9, 6));
  b.FloatInit("b2", {8}, Ramp(8, 7));
  b.FloatInit("w3", {16, 8, 1, 1}, Ramp(16 * 8, 8));
  b.FloatInit("wd", {16, 1, 3, 3}, Ramp(16 * 9, 9));
  b.FloatInit("w4", {32, 16, 3, 3}, Ramp(32 * 16 * 9, 10));
  b.FloatInit("fc", {10, 32}, Ramp(320, 11));
  b.FloatInit("fcb", {10}, Ramp(10, 12));
  b.FloatInit("lo", {}, {0.0f});
  b.FloatInit("hi", {}, {6.0f});
  auto pad1 = [](onnx::NodeProto* n) { ModelBuilder::AttrInts(n, "pads", {1, 1, 1, 1}); };
  pad1(b.Node("Conv", {"X", "w1"}, {"c1"}));
  b.Node("BatchNormalization", {"c1", "bn_s", "bn_b", "bn_m", "bn_v"}, {"bn"});
  b.Node("Relu", {"bn"}, {"r1"});
  pad1(b.Node("Conv", {"r1", "w2", "b2"}, {"c2"}));
  b.Node("Add", {"c2", "X"}, {"res"});
  b.Node("Relu", {"res"}, {"r2"});
  auto* mp = b.Node("MaxPool", {"r2"}, {"mp"});                 // [N,8,8,8]
  ModelBuilder::AttrInts(mp, "kernel_shape", {2, 2});
  ModelBuilder::AttrInts(mp, "strides", {2, 2});
  b.Node("Conv", {"mp", "w3"}, {"c3"});                         // 1x1: [N,16,8,8]
  auto* dw = b.Node("Conv", {"c3", "wd"}, {"c4"});              // depthwise
  ModelBuilder::AttrInt(dw, "group", 16);
  pad1(dw);
  b.Node("Clip", {"c4", "lo", "hi"}, {"r6"});
  auto* c5 = b.Node("Conv", {"r6", "w4"}, {"c5"});              // [N,32,4,4]
  ModelBuilder::AttrInts(c5, "strides", {2, 2});
  pad1(c5);
  b.Node("GlobalAveragePool", {"c5"}, {"gap"});
  b.Node("Flatten", {"gap"}, {"fl"});
  ModelBuilder::AttrInt(b.Node("Gemm", {"fl", "fc", "fcb"}, {"Y"}), "transB", 1);
  b.Output("Y", kFloat, {-1, 10});
  return b;
}

// Attention-style MatMuls: a projection with a bias Add (fused), Relu
// (fused), a batched MatMul of two computed operands, Softmax, and a
// projection with a residual Add (fused), then LayerNormalization.
ModelBuilder MatMulBlock() {
  ModelBuilder b(17);
  b.Input("X", kFloat, {1, 4, 16, 32});
  b.FloatInit("wq", {32, 32}, Ramp(1024, 1));
  b.FloatInit("bq", {32}, Ramp(32, 2));
  b.FloatInit("wo", {32, 32}, Ramp(1024, 3));
  b.FloatInit("g", {32}, Positive(32, 4));
  b.FloatInit("beta", {32}, Ramp(32, 5));
  b.Node("MatMul", {"X", "wq"}, {"q0"});
  b.Node("Add", {"bq", "q0"}, {"q1"});
  b.Node("Relu", {"q1"}, {"q"});
  auto* kt = b.Node("Transpose", {"q"}, {"kt"});                // [1,4,32,16]
  ModelBuilder::AttrInts(kt, "perm", {0, 1, 3, 2});
  b.Node("MatMul", {"q", "kt"}, {"s"});                         // [1,4,16,16]
  b.Node("Softmax", {"s"}, {"p"});
  b.Node("MatMul", {"p", "q"}, {"a"});                          // [1,4,16,32]
  b.Node("MatMul", {"a", "wo"}, {"o"});
  b.Node("Add", {"o", "X"}, {"r"});
  b.Node("LayerNormalization", {"r", "g", "beta"}, {"Y"});
  b.Output("Y", kFloat, {1, 4, 16, 32});
  return b;
}

struct StepCounts {
  std::map<std::string, uint64_t> steps;    // op type -> allocations of its steps per run
  std::map<std::string, uint64_t> kernels;  // the same, the kernels' own calls only
  std::map<std::string, uint64_t> rechecks;  // steps that re-run inference (not in `steps`)
};

// Runs the plan once to warm up, then counts each step's allocations in
// the next runs; also calls each kernel again directly (prepared state,
// the run state's scratch) to count what the kernel itself allocates.
StepCounts CountSteps(const runtime::SpecializedPlan& plan, std::span<const Tensor* const> inputs,
                      ops::ThreadGroup* threads, std::vector<Tensor>* out) {
  StepCounts c;
  for (int run = 0; run < 3; ++run) {
    auto state = plan.AcquireState();
    EXPECT_TRUE(state.ok());
    if (!state.ok()) return c;
    runtime::RunState& st = **state;
    EXPECT_TRUE(runtime::BeginRun(plan, inputs, st).ok());
    for (size_t s = 0; s < plan.steps.size(); ++s) {
      const runtime::PlannedStep& ps = plan.steps[s];
      uint64_t before = Allocations();
      const Status status = runtime::RunPlannedStep(plan, s, st, threads);
      const uint64_t n = Allocations() - before;
      EXPECT_TRUE(status.ok()) << status.ToString();
      if (run < 2) continue;
      (ps.recheck ? c.rechecks : c.steps)[ps.step->op_type] += n;
      if (ps.step->alloc != ops::OutputAlloc::kPreallocated) continue;
      std::span<const Tensor* const> ins(st.step_inputs.data() + ps.in_begin, ps.in_count);
      std::span<Tensor> outs(st.entries.data() + ps.out_begin, ps.out_count);
      const ops::KernelContext kctx{
          .inputs = ins,
          .attrs = ps.step->attrs,
          .opset = plan.base->opset,
          .prepared = ps.prepared.kernel.get(),
          .scratch = std::span<std::byte>(static_cast<std::byte*>(st.scratch.raw_data()),
                                          ops::ScratchStride(ps.prepared.scratch_bytes))};
      before = Allocations();
      EXPECT_TRUE(ps.step->compute(kctx, outs).ok());
      c.kernels[ps.step->op_type] += Allocations() - before;
    }
    if (run == 2) {
      auto outs = runtime::CollectOutputs(plan, st);
      EXPECT_TRUE(outs.ok());
      if (outs.ok()) {
        for (auto& o : *outs) out->push_back(std::move(o.tensor));
      }
    }
    runtime::EndRun(plan, st);
    plan.ReleaseState(std::move(state).value());
  }
  return c;
}

std::string Describe(const std::map<std::string, uint64_t>& per_op, uint64_t* total) {
  std::string which;
  *total = 0;
  for (const auto& [op, n] : per_op) {
    *total += n;
    if (n > 0) which += " " + op + "=" + std::to_string(n);
  }
  return which;
}

void ExpectNoStepAllocates(const char* model, const ModelBuilder& b, ops::TensorType in_type,
                           const Tensor& x, ops::ThreadGroup* threads) {
  auto sp = testing::SpecializeModel(b, {in_type});
  ASSERT_TRUE(sp.ok()) << sp.status().ToString();
  for (const runtime::PlannedStep& ps : (*sp)->steps) {
    EXPECT_FALSE(ps.dynamic) << ps.step->label;
  }
  const Tensor* in[] = {&x};
  std::vector<Tensor> out;
  const StepCounts c = CountSteps(**sp, in, threads, &out);
  uint64_t steps = 0, kernels = 0, rechecks = 0;
  const std::string step_ops = Describe(c.steps, &steps);
  const std::string kernel_ops = Describe(c.kernels, &kernels);
  const std::string recheck_ops = Describe(c.rechecks, &rechecks);
  std::printf("[ metric ] %s (%d threads): %zu steps, %llu allocations per run in the step "
              "loop%s; kernels' own %llu%s; recheck steps (runtime re-infers) %llu%s\n",
              model, ops::NumThreads(threads), (*sp)->steps.size(),
              static_cast<unsigned long long>(steps), step_ops.c_str(),
              static_cast<unsigned long long>(kernels), kernel_ops.c_str(),
              static_cast<unsigned long long>(rechecks), recheck_ops.c_str());
  EXPECT_EQ(kernels, 0u) << kernel_ops;
  // Gather, Equal and Where read run-time integer values but validate them
  // in Compute (values_checked_in_compute): no step re-runs inference.
  EXPECT_EQ(steps, 0u) << step_ops;
  EXPECT_EQ(rechecks, 0u) << recheck_ops;
  ASSERT_EQ(out.size(), 1u);
  ExpectAllNear(Floats(out[0]), Floats(Reference(b, {x})[0]), 1e-5f);
}

TEST(KernelAllocationTest, CnnLikeStepsAllocateNothing) {
  const Tensor x = F32({4, 8, 64, 64}, Ramp(4 * 8 * 64 * 64, 7));
  ExpectNoStepAllocates("CNN-like", CnnLike(), {DType::kFloat32, {4, 8, 64, 64}}, x, nullptr);
  runtime::LaneGroup lanes(runtime::LaneGroupOptions{.threads = 2});
  ExpectNoStepAllocates("CNN-like", CnnLike(), {DType::kFloat32, {4, 8, 64, 64}}, x, &lanes);
}

TEST(KernelAllocationTest, TransformerLikeStepsAllocateNothing) {
  std::vector<int64_t> ids(16);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int64_t>((i * 7) % 50);
  const Tensor x = testing::I64({1, 16}, ids);
  ExpectNoStepAllocates("transformer-like", TransformerLike(), {DType::kInt64, {1, 16}}, x,
                        nullptr);
  runtime::LaneGroup lanes(runtime::LaneGroupOptions{.threads = 2});
  ExpectNoStepAllocates("transformer-like", TransformerLike(), {DType::kInt64, {1, 16}}, x,
                        &lanes);
}

TEST(KernelAllocationTest, ConvNetStepsAllocateNothing) {
  const Tensor x = F32({2, 8, 16, 16}, Ramp(2 * 8 * 16 * 16, 13));
  ExpectNoStepAllocates("conv net", ConvNet(), {DType::kFloat32, {2, 8, 16, 16}}, x, nullptr);
  runtime::LaneGroup lanes(runtime::LaneGroupOptions{.threads = 2});
  ExpectNoStepAllocates("conv net", ConvNet(), {DType::kFloat32, {2, 8, 16, 16}}, x, &lanes);
}

TEST(KernelAllocationTest, MatMulBlockStepsAllocateNothing) {
  const Tensor x = F32({1, 4, 16, 32}, Ramp(4 * 16 * 32, 14));
  ExpectNoStepAllocates("matmul block", MatMulBlock(), {DType::kFloat32, {1, 4, 16, 32}}, x,
                        nullptr);
  runtime::LaneGroup lanes(runtime::LaneGroupOptions{.threads = 2});
  ExpectNoStepAllocates("matmul block", MatMulBlock(), {DType::kFloat32, {1, 4, 16, 32}}, x,
                        &lanes);
}

TEST(KernelAllocationTest, MiscOpsStepsAllocateNothing) {
  const Tensor x = F32({1, 4, 6, 8}, Ramp(4 * 6 * 8, 5));
  ExpectNoStepAllocates("misc ops", MiscOps(), {DType::kFloat32, {1, 4, 6, 8}}, x, nullptr);
}

}  // namespace
}  // namespace orrery
