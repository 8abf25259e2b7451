// The per-model cache of shape-specialised plans: hits, misses, the LRU
// bound, failures, and the cost of a lookup.
#include "runtime/plan_cache.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>

#include "model_builder.h"
#include "plan_util.h"
#include "runtime/model.h"
#include "runtime/run_state.h"

namespace orrery {
namespace {

using testing::CompileBase;
using testing::F32;
using testing::kFloat;
using testing::ModelBuilder;
using testing::TinyMlp;
using testing::Ramp;

Tensor Batch(int64_t n) {
  return F32({n, 2}, Ramp(static_cast<size_t>(2 * n), static_cast<uint32_t>(n)));
}

TEST(PlanCacheTest, HitsAndMisses) {
  auto model = CompiledModel::Compile(TinyMlp().Bytes());
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const CompiledModel& m = **model;
  EXPECT_EQ(m.plan_cache_stats().entries, 0u);
  ASSERT_TRUE(m.Run({{"X", Batch(1)}}).ok());
  ASSERT_TRUE(m.Run({{"X", Batch(1)}}).ok());
  ASSERT_TRUE(m.Run({{"X", Batch(3)}}).ok());
  ASSERT_TRUE(m.Run({{"X", Batch(1)}}).ok());
  PlanCacheStats st = m.plan_cache_stats();
  EXPECT_EQ(st.misses, 2u);
  EXPECT_EQ(st.hits, 2u);
  EXPECT_EQ(st.entries, 2u);
  EXPECT_EQ(st.evictions, 0u);
  EXPECT_EQ(st.capacity, runtime::kDefaultPlanCacheCapacity);
}

TEST(PlanCacheTest, ManyShapesStayWithinTheBound) {
  auto model = CompiledModel::Compile(TinyMlp().Bytes());
  ASSERT_TRUE(model.ok());
  const CompiledModel& m = **model;
  // A client cycling through 40 batch sizes.
  for (int64_t n = 1; n <= 40; ++n) ASSERT_TRUE(m.Run({{"X", Batch(n)}}).ok());
  PlanCacheStats st = m.plan_cache_stats();
  EXPECT_EQ(st.entries, 16u);
  EXPECT_EQ(st.misses, 40u);
  EXPECT_EQ(st.evictions, 24u);
  // The 16 most recent shapes hit; the least recently used were evicted.
  for (int64_t n = 25; n <= 40; ++n) ASSERT_TRUE(m.Run({{"X", Batch(n)}}).ok());
  EXPECT_EQ(m.plan_cache_stats().hits, 16u);
  ASSERT_TRUE(m.Run({{"X", Batch(1)}}).ok());
  st = m.plan_cache_stats();
  EXPECT_EQ(st.misses, 41u);
  EXPECT_EQ(st.evictions, 25u);
  EXPECT_EQ(st.entries, 16u);
}

TEST(PlanCacheTest, FailedSpecialisationsAreNotCached) {
  ModelBuilder b(13);
  b.Input("A", kFloat, {-1});
  b.Input("B", kFloat, {-1});
  b.Node("Add", {"A", "B"}, {"Y"}, "add");
  b.Output("Y", kFloat, {-1});
  auto model = CompiledModel::Compile(b.Bytes());
  ASSERT_TRUE(model.ok());
  for (int i = 0; i < 3; ++i) {
    auto out = (*model)->Run({{"A", F32({2}, {1, 2})}, {"B", F32({3}, {1, 2, 3})}});
    ASSERT_FALSE(out.ok());
    EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
  }
  EXPECT_EQ((*model)->plan_cache_stats().entries, 0u);
  EXPECT_EQ((*model)->plan_cache_stats().misses, 3u);
}

TEST(PlanCacheTest, DtypeIsPartOfTheKey) {
  // Same shape, other dtype: a different plan (via PlanCache directly, since
  // a signature pins dtypes).
  ModelBuilder b(13);
  b.Input("X", kFloat, {2});
  b.Node("Relu", {"X"}, {"Y"});
  b.Output("Y", kFloat, {2});
  auto base = CompileBase(b);
  ASSERT_TRUE(base.ok());
  runtime::PlanCache cache(*base);
  const Tensor f = F32({2}, {1, 2});
  const Tensor d(DType::kFloat64, {2});
  const Tensor* fi[] = {&f};
  const Tensor* di[] = {&d};
  auto pf = cache.Get(fi);
  ASSERT_TRUE(pf.ok());
  auto pd = cache.Get(di);  // a miss, whether or not Relu takes float64
  EXPECT_EQ(cache.stats().misses, 2u);
  if (pd.ok()) {
    EXPECT_NE(pf->get(), pd->get());
  }
  auto pf2 = cache.Get(fi);
  ASSERT_TRUE(pf2.ok());
  EXPECT_EQ(pf->get(), pf2->get());
  EXPECT_EQ(cache.stats().hits, 1u);
}

TEST(PlanCacheTest, RunStatePoolIsBounded) {
  auto base = CompileBase(TinyMlp());
  ASSERT_TRUE(base.ok());
  const std::vector<ops::TensorType> types = {ops::TensorType{DType::kFloat32, {64, 2}}};
  // Twelve concurrent runs: at most kMaxIdleRunStates arenas stay pooled.
  auto budget = std::make_shared<runtime::ArenaBudget>(int64_t{1} << 30);
  auto sp = runtime::Specialize(*base, types, budget);
  ASSERT_TRUE(sp.ok());
  const int64_t arena = (*sp)->memory.peak_bytes;
  ASSERT_GT(arena, 0);
  std::vector<std::unique_ptr<runtime::RunState>> states;
  for (int i = 0; i < 12; ++i) {
    auto st = (*sp)->AcquireState();
    ASSERT_TRUE(st.ok());
    states.push_back(std::move(st).value());
  }
  EXPECT_NE(states[0]->arena.raw_data(), states[1]->arena.raw_data());
  for (auto& st : states) (*sp)->ReleaseState(std::move(st));
  EXPECT_EQ((*sp)->idle_states(), runtime::kMaxIdleRunStates);
  EXPECT_EQ(budget->pooled.load(), static_cast<int64_t>(runtime::kMaxIdleRunStates) * arena);
  // A reacquired state is a pooled one.
  auto again = (*sp)->AcquireState();
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*sp)->idle_states(), runtime::kMaxIdleRunStates - 1);
  (*sp)->ReleaseState(std::move(again).value());
  sp->reset();
  EXPECT_EQ(budget->pooled.load(), 0);  // freed with the plan

  // A byte budget smaller than two arenas keeps one.
  auto small = std::make_shared<runtime::ArenaBudget>(arena + arena / 2);
  auto sp2 = runtime::Specialize(*base, types, small);
  ASSERT_TRUE(sp2.ok());
  auto s1 = (*sp2)->AcquireState();
  auto s2 = (*sp2)->AcquireState();
  ASSERT_TRUE(s1.ok() && s2.ok());
  (*sp2)->ReleaseState(std::move(s1).value());
  (*sp2)->ReleaseState(std::move(s2).value());
  EXPECT_EQ((*sp2)->idle_states(), 1u);
  EXPECT_EQ(small->pooled.load(), arena);
}

TEST(PlanCacheTest, LookupCost) {
  auto base = CompileBase(TinyMlp());
  ASSERT_TRUE(base.ok());
  runtime::PlanCache cache(*base);
  std::vector<Tensor> batches;
  for (int64_t n = 1; n <= 16; ++n) batches.push_back(Batch(n));
  for (const Tensor& t : batches) {
    const Tensor* in[] = {&t};
    ASSERT_TRUE(cache.Get(in).ok());
  }
  // Full cache; look up the entry scanned last.
  const Tensor* in[] = {&batches.back()};
  constexpr int kLookups = 200000;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < kLookups; ++i) {
    auto p = cache.Get(in);
    ASSERT_TRUE(p.ok());
  }
  const double ns =
      std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() /
      kLookups;
  std::printf("[ metric ] plan cache hit (16 entries): %.1f ns per lookup\n", ns);
  EXPECT_EQ(cache.stats().hits, static_cast<uint64_t>(kLookups));
  EXPECT_LT(ns, 20000.0);  // loose: sanitizer builds are slow
}

}  // namespace
}  // namespace orrery
