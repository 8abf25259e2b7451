// Step-by-step execution: equivalence with Run, interleaving, profiles,
// errors, output ownership, concurrency.
#include "runtime/execution.h"

#include <gtest/gtest.h>

#include <thread>

#include "model_builder.h"
#include "plan_util.h"
#include "runtime/model.h"

namespace orrery {
namespace {

using testing::ExpectAllNear;
using testing::F32;
using testing::Floats;
using testing::I64;
using testing::kFloat;
using testing::kInt64;
using testing::ModelBuilder;
using testing::Ramp;
using testing::Reference;

// X[N,4] -> fc1 (Gemm 4x8 + bias) -> Relu -> fc2 (Gemm, transB, 3x8 + bias) -> Softmax.
ModelBuilder Mlp() {
  ModelBuilder b(13);
  b.Input("X", kFloat, {-1, 4});
  b.FloatInit("W1", {4, 8}, Ramp(32, 1));
  b.FloatInit("b1", {8}, Ramp(8, 2));
  b.FloatInit("W2T", {3, 8}, Ramp(24, 3));
  b.FloatInit("b2", {3}, Ramp(3, 4));
  b.Node("Gemm", {"X", "W1", "b1"}, {"h"}, "fc1");
  b.Node("Relu", {"h"}, {"r"}, "relu");
  ModelBuilder::AttrInt(b.Node("Gemm", {"r", "W2T", "b2"}, {"logits"}, "fc2"), "transB", 1);
  b.Node("Softmax", {"logits"}, {"Y"}, "softmax");
  b.Output("Y", kFloat, {-1, 3});
  return b;
}

std::unique_ptr<CompiledModel> MustCompile(const ModelBuilder& b) {
  auto m = CompiledModel::Compile(b.Bytes());
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return m.ok() ? std::move(m).value() : nullptr;
}

Tensor Input(int64_t n, uint32_t seed) {
  return F32({n, 4}, Ramp(static_cast<size_t>(4 * n), seed));
}

TEST(ExecutionTest, StepByStepEqualsRun) {
  const ModelBuilder b = Mlp();
  auto model = MustCompile(b);
  ASSERT_NE(model, nullptr);
  const Tensor x = Input(5, 9);
  auto ex = Execution::Start(*model, {{"X", x}});
  ASSERT_TRUE(ex.ok()) << ex.status().ToString();
  // fc1's Relu is fused into it (runtime/fuse.h): Gemm+Relu, Gemm, Softmax.
  EXPECT_EQ(ex->num_steps(), 3u);
  EXPECT_EQ(ex->plan_stats().num_steps, 3u);
  EXPECT_EQ(ex->plan_stats().fused_nodes, 1u);
  EXPECT_FALSE(ex->done());
  EXPECT_EQ(ex->TakeOutputs().status().code(), StatusCode::kFailedPrecondition);
  size_t steps = 0;
  while (!ex->done()) {
    EXPECT_EQ(ex->step_index(), steps);
    ASSERT_TRUE(ex->Step().ok());
    ++steps;
  }
  EXPECT_EQ(steps, 3u);
  EXPECT_EQ(ex->Step().code(), StatusCode::kFailedPrecondition);
  auto stepped = ex->TakeOutputs();
  ASSERT_TRUE(stepped.ok()) << stepped.status().ToString();
  EXPECT_EQ(ex->TakeOutputs().status().code(), StatusCode::kFailedPrecondition);

  auto run = model->Run({{"X", x}});
  ASSERT_TRUE(run.ok());
  ASSERT_EQ(stepped->size(), 1u);
  EXPECT_EQ((*stepped)[0].name, "Y");
  EXPECT_EQ(Floats((*stepped)[0].tensor), Floats((*run)[0].tensor));
  ExpectAllNear(Floats((*run)[0].tensor), Floats(Reference(b, {x})[0]));
}

TEST(ExecutionTest, InterleavedExecutionsUseSeparateArenas) {
  // Two runs of the same plan advanced alternately: if they shared an arena
  // one would overwrite the other's intermediates.
  const ModelBuilder b = Mlp();
  auto model = MustCompile(b);
  ASSERT_NE(model, nullptr);
  const Tensor x1 = Input(3, 1), x2 = Input(3, 2);
  auto e1 = Execution::Start(*model, {{"X", x1}});
  auto e2 = Execution::Start(*model, {{"X", x2}});
  ASSERT_TRUE(e1.ok() && e2.ok());
  while (!e1->done() || !e2->done()) {
    if (!e1->done()) {
      ASSERT_TRUE(e1->Step().ok());
    }
    if (!e2->done()) {
      ASSERT_TRUE(e2->Step().ok());
    }
  }
  auto o1 = e1->TakeOutputs();
  auto o2 = e2->TakeOutputs();
  ASSERT_TRUE(o1.ok() && o2.ok());
  ExpectAllNear(Floats((*o1)[0].tensor), Floats(Reference(b, {x1})[0]));
  ExpectAllNear(Floats((*o2)[0].tensor), Floats(Reference(b, {x2})[0]));
  EXPECT_NE(Floats((*o1)[0].tensor), Floats((*o2)[0].tensor));
}

TEST(ExecutionTest, ProfileReportsStepsCostsAndTimes) {
  auto model = MustCompile(Mlp());
  ASSERT_NE(model, nullptr);
  auto ex = Execution::Start(*model, {{"X", Input(2, 5)}});
  ASSERT_TRUE(ex.ok());
  while (!ex->done()) ASSERT_TRUE(ex->Step().ok());
  const std::vector<StepProfile> prof = ex->Profile();
  ASSERT_EQ(prof.size(), 3u);  // the Relu is fused into fc1
  EXPECT_EQ(prof[0].op_type, "Gemm");
  EXPECT_EQ(prof[0].name, "fc1");
  EXPECT_EQ(prof[1].op_type, "Gemm");
  EXPECT_EQ(prof[2].name, "softmax");
  // fc1: 2 * M * N * K + bias = 2*2*8*4 + 16; bytes: X, W1, b1 in, h out.
  EXPECT_EQ(prof[0].flops, 2 * 2 * 8 * 4 + 2 * 8);
  EXPECT_EQ(prof[0].bytes, 4 * (2 * 4 + 4 * 8 + 8 + 2 * 8));
  EXPECT_EQ(prof[1].flops, 2 * 2 * 3 * 8 + 2 * 3);
  EXPECT_EQ(prof[2].flops, 0);  // no cost function: bytes only
  EXPECT_EQ(prof[2].bytes, 4 * 2 * 2 * 3);
  for (const StepProfile& p : prof) EXPECT_GE(p.ns, 0);
  EXPECT_TRUE(ex->TakeOutputs().ok());
  EXPECT_EQ(ex->Profile().size(), 3u);  // still available after TakeOutputs
}

TEST(ExecutionTest, OutputsOutliveLaterRunsAndTheModel) {
  const ModelBuilder b = Mlp();
  auto model = MustCompile(b);
  ASSERT_NE(model, nullptr);
  const Tensor x1 = Input(2, 11), x2 = Input(2, 12);
  auto first = model->Run({{"X", x1}});
  ASSERT_TRUE(first.ok());
  const std::vector<float> want1 = Floats(Reference(b, {x1})[0]);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(model->Run({{"X", x2}}).ok());
  ExpectAllNear(Floats((*first)[0].tensor), want1);  // not an arena alias

  // An Execution keeps its plan alive after the model is gone.
  auto ex = Execution::Start(*model, {{"X", x2}});
  ASSERT_TRUE(ex.ok());
  ASSERT_TRUE(ex->Step().ok());
  model.reset();
  while (!ex->done()) ASSERT_TRUE(ex->Step().ok());
  auto out = ex->TakeOutputs();
  ASSERT_TRUE(out.ok());
  ExpectAllNear(Floats((*out)[0].tensor), Floats(Reference(b, {x2})[0]));
}

TEST(ExecutionTest, RunTimeErrorEndsTheExecutionAndTheModelRecovers) {
  ModelBuilder b(13);
  b.Input("A", kInt64, {2});
  b.Input("B", kInt64, {2});
  b.Node("Add", {"A", "A"}, {"s"}, "add");
  b.Node("Div", {"s", "B"}, {"Y"}, "div");
  b.Output("Y", kInt64, {2});
  auto model = MustCompile(b);
  ASSERT_NE(model, nullptr);
  auto ex = Execution::Start(*model, {{"A", I64({2}, {3, 4})}, {"B", I64({2}, {1, 0})}});
  ASSERT_TRUE(ex.ok());
  ASSERT_TRUE(ex->Step().ok());
  Status st = ex->Step();
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("node 'div' (#1)"), std::string::npos) << st.message();
  EXPECT_TRUE(ex->done());
  EXPECT_EQ(ex->Step(), st);
  EXPECT_EQ(ex->TakeOutputs().status(), st);
  EXPECT_EQ(ex->Profile().size(), 2u);
  auto ok = model->Run({{"A", I64({2}, {3, 4})}, {"B", I64({2}, {2, -1})}});
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  const Tensor& y = (*ok)[0].tensor;
  EXPECT_EQ(std::vector<int64_t>(y.data<int64_t>(), y.data<int64_t>() + 2),
            (std::vector<int64_t>{3, -8}));
}

TEST(ExecutionTest, StartValidatesInputs) {
  auto model = MustCompile(Mlp());
  ASSERT_NE(model, nullptr);
  auto ex = Execution::Start(*model, {{"X", F32({1, 3}, {0, 0, 0})}});
  EXPECT_EQ(ex.status().code(), StatusCode::kInvalidArgument);
  ex = Execution::Start(*model, {});
  EXPECT_EQ(ex.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(ex.status().message().find("missing input 'X'"), std::string::npos);
}

TEST(ExecutionTest, MoveKeepsTheRunGoing) {
  const ModelBuilder b = Mlp();
  auto model = MustCompile(b);
  ASSERT_NE(model, nullptr);
  const Tensor x = Input(1, 21);
  auto started = Execution::Start(*model, {{"X", x}});
  ASSERT_TRUE(started.ok());
  Execution a = std::move(started).value();
  ASSERT_TRUE(a.Step().ok());
  Execution c = std::move(a);
  EXPECT_EQ(c.step_index(), 1u);
  while (!c.done()) ASSERT_TRUE(c.Step().ok());
  auto other = Execution::Start(*model, {{"X", x}});
  ASSERT_TRUE(other.ok());
  c = std::move(other).value();  // the finished run's state goes back to the pool
  while (!c.done()) ASSERT_TRUE(c.Step().ok());
  auto out = c.TakeOutputs();
  ASSERT_TRUE(out.ok());
  ExpectAllNear(Floats((*out)[0].tensor), Floats(Reference(b, {x})[0]));
}

TEST(ExecutionTest, ConcurrentRunsFromFourThreads) {
  const ModelBuilder b = Mlp();
  auto model = MustCompile(b);
  ASSERT_NE(model, nullptr);
  // Each thread its own batch size (so also concurrent cache misses) and
  // fresh input values every iteration.
  constexpr int kThreads = 4, kIters = 40;
  std::vector<std::vector<Tensor>> inputs(kThreads);
  std::vector<std::vector<std::vector<float>>> want(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    for (int i = 0; i < kIters; ++i) {
      inputs[t].push_back(Input(1 + t % 2, static_cast<uint32_t>(100 * t + i)));
      want[t].push_back(Floats(Reference(b, {inputs[t].back()})[0]));
    }
  }
  std::vector<int> mismatches(kThreads, 0), failures(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kIters; ++i) {
        auto out = model->Run({{"X", inputs[t][i]}});
        if (!out.ok()) {
          ++failures[t];
          continue;
        }
        const std::vector<float> got = Floats((*out)[0].tensor);
        for (size_t k = 0; k < got.size(); ++k) {
          if (std::abs(got[k] - want[t][i][k]) > 1e-5f) {
            ++mismatches[t];
            break;
          }
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(failures[t], 0) << "thread " << t;
    EXPECT_EQ(mismatches[t], 0) << "thread " << t;
  }
  EXPECT_EQ(model->plan_cache_stats().entries, 2u);
}

TEST(ExecutionTest, ModelWithoutStepsReturnsViewsAndConstants) {
  // Everything folds or aliases: zero steps.
  ModelBuilder b(13);
  b.Input("X", kFloat, {2, 3});
  b.Int64Init("shape", {1}, {6});
  b.FloatInit("C", {2}, {7, 8});
  b.Node("Reshape", {"X", "shape"}, {"Y"});
  b.Node("Identity", {"C"}, {"Z"});
  b.Output("Y", kFloat, {6});
  b.Output("Z", kFloat, {2});
  auto model = MustCompile(b);
  ASSERT_NE(model, nullptr);
  const Tensor x = F32({2, 3}, {1, 2, 3, 4, 5, 6});
  auto ex = Execution::Start(*model, {{"X", x}});
  ASSERT_TRUE(ex.ok());
  EXPECT_EQ(ex->num_steps(), 0u);
  EXPECT_TRUE(ex->done());
  auto out = ex->TakeOutputs();
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].tensor.shape(), (Shape{6}));
  EXPECT_EQ(Floats((*out)[0].tensor), Floats(x));
  EXPECT_EQ(Floats((*out)[1].tensor), (std::vector<float>{7, 8}));
}

// A group of two that runs every task inline and records the hints the
// execution gives it (which step was running, and in how many ns the next
// job was expected).
class HintRecordingGroup final : public ops::ThreadGroup {
 public:
  struct Hint {
    size_t step = 0;
    int64_t in_ns = 0;
  };
  explicit HintRecordingGroup(const Execution* const* ex) : ex_(ex) {}
  int size() const override { return 2; }
  void ParallelFor(int64_t num_tasks, FunctionRef<void(int64_t, int)> fn) override {
    ++jobs_;
    for (int64_t t = 0; t < num_tasks; ++t) fn(t, 0);
  }
  int64_t jobs() const override { return jobs_; }
  void ExpectJob(int64_t in_ns) override { hints.push_back({(*ex_)->step_index(), in_ns}); }
  std::vector<Hint> hints;

 private:
  const Execution* const* ex_;
  int64_t jobs_ = 0;
};

// Abs, Neg (one thread each: too small to split), a 64 x 128 x 64 MatMul
// (1 MFLOP: split), Abs.
ModelBuilder SerialSerialParallelSerial() {
  ModelBuilder b(13);
  b.Input("X", kFloat, {64, 128});
  b.FloatInit("W", {128, 64}, Ramp(128 * 64, 3));
  b.Node("Abs", {"X"}, {"a"});
  b.Node("Neg", {"a"}, {"n"});
  b.Node("MatMul", {"n", "W"}, {"m"});
  b.Node("Abs", {"m"}, {"Y"});
  b.Output("Y", kFloat, {64, 64});
  return b;
}

TEST(ExecutionTest, StepsBeforeAParallelStepWakeTheGroupAheadOfIt) {
  const ModelBuilder b = SerialSerialParallelSerial();
  auto model = MustCompile(b);
  ASSERT_NE(model, nullptr);
  const Tensor x = F32({64, 128}, Ramp(64 * 128, 7));
  const Execution* current = nullptr;
  HintRecordingGroup group(&current);
  std::vector<int64_t> first_ns;
  for (int run = 0; run < 2; ++run) {
    auto ex = Execution::Start(*model, {{"X", x}});
    ASSERT_TRUE(ex.ok()) << ex.status().ToString();
    ASSERT_EQ(ex->num_steps(), 4u);
    current = &*ex;
    while (!ex->done()) ASSERT_TRUE(ex->Step(&group).ok());
    EXPECT_EQ(group.jobs(), run + 1) << "the MatMul alone uses the group";
    auto out = ex->TakeOutputs();
    ASSERT_TRUE(out.ok());
    ExpectAllNear(Floats((*out)[0].tensor), Floats(Reference(b, {x})[0]));
    if (run == 0) {
      // Nothing learned yet: no hints.
      EXPECT_TRUE(group.hints.empty());
      for (size_t s = 0; s < 4; ++s) first_ns.push_back(ex->step_ns(s));
    }
  }
  // The second run (the same arena, back from the pool): Abs and Neg each
  // announce the MatMul, due after their own and the later steps' times of
  // the first run; the MatMul and the last Abs do not.
  ASSERT_EQ(group.hints.size(), 2u);
  EXPECT_EQ(group.hints[0].step, 0u);
  EXPECT_EQ(group.hints[0].in_ns, first_ns[0] + first_ns[1]);
  EXPECT_EQ(group.hints[1].step, 1u);
  EXPECT_EQ(group.hints[1].in_ns, first_ns[1]);
}

TEST(ExecutionTest, NoHintsWithoutAGroupOfSeveralThreads) {
  auto model = MustCompile(SerialSerialParallelSerial());
  ASSERT_NE(model, nullptr);
  const Tensor x = F32({64, 128}, Ramp(64 * 128, 7));
  const Execution* current = nullptr;
  HintRecordingGroup group(&current);
  for (int run = 0; run < 2; ++run) {
    auto ex = Execution::Start(*model, {{"X", x}});
    ASSERT_TRUE(ex.ok());
    current = &*ex;
    // The first run learns which step is parallel; the second runs alone.
    while (!ex->done()) ASSERT_TRUE(ex->Step(run == 0 ? &group : nullptr).ok());
  }
  EXPECT_TRUE(group.hints.empty());
}

}  // namespace
}  // namespace orrery
