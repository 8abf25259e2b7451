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

}  // namespace
}  // namespace orrery
