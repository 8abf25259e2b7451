#include "scheduler/batching.h"

#include <future>
#include <mutex>

#include <gtest/gtest.h>

#include "runtime/execution.h"
#include "scheduler/scheduler.h"
#include "tests/unit/common/tiny_models.h"

namespace orrery {
namespace {

constexpr int64_t kMs = 1'000'000;
using Outputs = Result<std::vector<NamedTensor>>;

ModelCache::ModelPtr ReluModel() {  // x, y: float32 [N, 4]
  Result<std::unique_ptr<CompiledModel>> m = CompiledModel::Compile(testing::ReluModelBytes());
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return ModelCache::ModelPtr(std::move(m).value());
}

// `rows` x 4 values, row r: (base + r) * (-1, 1, -1, 1).
Tensor Rows(int rows, float base) {
  Tensor x(DType::kFloat32, {rows, 4});
  for (int r = 0; r < rows; ++r) {
    for (int i = 0; i < 4; ++i) x.data<float>()[r * 4 + i] = (base + static_cast<float>(r)) * (i % 2 ? 1.0f : -1.0f);
  }
  return x;
}

TEST(BatchingTest, ConcatAndSplitRoundTripAlongDimZero) {
  std::vector<NamedTensor> a{{"x", Rows(1, 1)}}, b{{"x", Rows(2, 10)}};
  EXPECT_TRUE(SameShapeBesidesRows(a, b));
  EXPECT_EQ(BatchRows(a), 1);
  EXPECT_EQ(BatchRows(b), 2);
  Result<std::vector<NamedTensor>> cat = ConcatRows({&a, &b});
  ASSERT_TRUE(cat.ok()) << cat.status().ToString();
  ASSERT_EQ((*cat)[0].tensor.shape(), (Shape{3, 4}));
  EXPECT_EQ((*cat)[0].tensor.data<float>()[4], -10.0f);  // b's first row follows a's
  Result<std::vector<std::vector<NamedTensor>>> parts = SplitRows(*cat, {1, 2});
  ASSERT_TRUE(parts.ok()) << parts.status().ToString();
  ASSERT_EQ(parts->size(), 2u);
  EXPECT_EQ((*parts)[0][0].tensor.bytes(), a[0].tensor.bytes());
  EXPECT_EQ((*parts)[1][0].tensor.bytes(), b[0].tensor.bytes());
  EXPECT_EQ((*parts)[1][0].name, "x");
  // An output that does not have the batch's rows cannot be split.
  EXPECT_EQ(SplitRows(*cat, {1, 1}).status().code(), StatusCode::kInternal);
}

TEST(BatchingTest, OnlyMatchingShapesAndDynamicBatchDimsBatch) {
  std::vector<NamedTensor> a{{"x", Rows(1, 1)}};
  std::vector<NamedTensor> wider{{"x", Tensor(DType::kFloat32, {1, 5})}};
  std::vector<NamedTensor> other_dtype{{"x", Tensor(DType::kInt32, {1, 4})}};
  std::vector<NamedTensor> other_name{{"y", Rows(1, 1)}};
  EXPECT_FALSE(SameShapeBesidesRows(a, wider));
  EXPECT_FALSE(SameShapeBesidesRows(a, other_dtype));
  EXPECT_FALSE(SameShapeBesidesRows(a, other_name));
  std::vector<NamedTensor> mixed{{"x", Rows(2, 1)}, {"z", Tensor(DType::kFloat32, {3})}};
  EXPECT_EQ(BatchRows(mixed), 0);  // no common dim 0
  std::vector<NamedTensor> scalar{{"x", Tensor(DType::kFloat32, {})}};
  EXPECT_EQ(BatchRows(scalar), 0);

  EXPECT_TRUE(BatchDimIsDynamic(ReluModel()->signature()));
  ModelSignature fixed;
  fixed.inputs.push_back(TensorSpec{"x", DType::kFloat32, {1, 4}});
  fixed.outputs.push_back(TensorSpec{"y", DType::kFloat32, {-1, 4}});
  EXPECT_FALSE(BatchDimIsDynamic(fixed));
}

// Submits requests of `rows` rows each (distinct values) on a paused
// scheduler with a fake clock, resumes, and collects reports and outputs.
struct Submitted {
  std::vector<RunReport> reports;
  std::vector<Outputs> outputs;
};

Submitted RunAll(FairScheduler* scheduler, const ModelCache::ModelPtr& model, const std::vector<int>& rows,
                 const std::vector<int64_t>& deadlines = {}) {
  Submitted out;
  out.reports.resize(rows.size());
  out.outputs.resize(rows.size(), Status::Internal("no callback"));
  std::vector<std::promise<void>> done(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    InferenceRequest r{"t", model, {NamedTensor{"x", Rows(rows[i], 100.0f * static_cast<float>(i + 1))}}};
    r.model_id = "relu";
    r.report = &out.reports[i];
    if (!deadlines.empty()) r.deadline_ns = deadlines[i];
    EXPECT_TRUE(scheduler->Submit(std::move(r), [&out, &done, i](Outputs o) {
                           out.outputs[i] = std::move(o);
                           done[i].set_value();
                         })
                    .ok());
  }
  scheduler->Resume();
  for (auto& d : done) d.get_future().wait();
  return out;
}

TEST(FairSchedulerBatchingTest, QueuedSameModelRequestsRunAsOneBatchSplitBackByRows) {
  FakeClock clock;
  FairScheduler scheduler(FairSchedulerOptions{.lanes = 1, .clock = &clock, .start_paused = true});
  // Per row: 1 ms alone, 0.4 ms in a batch of 4.
  scheduler.Calibrate("relu", 1, 1 * kMs);
  scheduler.Calibrate("relu", 2, 1200'000);
  scheduler.Calibrate("relu", 4, 1600'000);
  auto model = ReluModel();
  Submitted s = RunAll(&scheduler, model, {1, 2, 1});
  const double shares[] = {0.25, 0.5, 0.25};
  for (size_t i = 0; i < 3; ++i) {
    ASSERT_TRUE(s.outputs[i].ok()) << s.outputs[i].status().ToString();
    const Tensor& y = (*s.outputs[i])[0].tensor;
    const Tensor x = Rows(static_cast<int>(y.shape()[0]), 100.0f * static_cast<float>(i + 1));
    ASSERT_EQ(y.shape(), x.shape()) << i;
    for (int64_t k = 0; k < x.num_elements(); ++k) {
      EXPECT_EQ(y.data<float>()[k], std::max(0.0f, x.data<float>()[k])) << i << "," << k;
    }
    EXPECT_EQ(s.reports[i].batch_size, 3) << i;
    EXPECT_DOUBLE_EQ(s.reports[i].batch_share, shares[i]) << i;
    EXPECT_EQ(s.reports[i].started_ns, s.reports[0].started_ns);
  }
  SchedulerStats st = scheduler.Stats();
  EXPECT_EQ(st.batches, 1u);
  EXPECT_EQ(st.tenants[0].batched, 3u);
  EXPECT_EQ(st.tenants[0].completed, 3u);
  EXPECT_EQ(st.tenants[0].in_flight, 0);
}

TEST(FairSchedulerBatchingTest, NoBatchWhenItIsNotCheaperPerRequestOrDisabledOrUnknown) {
  FakeClock clock;
  auto model = ReluModel();
  {
    FairScheduler linear(FairSchedulerOptions{.lanes = 1, .clock = &clock, .start_paused = true});
    linear.Calibrate("relu", 1, 1 * kMs);
    linear.Calibrate("relu", 4, 4 * kMs);  // no saving per row
    Submitted s = RunAll(&linear, model, {1, 1, 1, 1});
    for (const RunReport& r : s.reports) EXPECT_EQ(r.batch_size, 1);
    EXPECT_EQ(linear.Stats().batches, 0u);
  }
  {
    FairScheduler off(FairSchedulerOptions{.lanes = 1, .clock = &clock, .start_paused = true, .max_batch = 1});
    off.Calibrate("relu", 1, 1 * kMs);
    off.Calibrate("relu", 4, 1 * kMs);
    RunAll(&off, model, {1, 1, 1, 1});
    EXPECT_EQ(off.Stats().batches, 0u);
  }
  {
    FairScheduler unknown(FairSchedulerOptions{.lanes = 1, .clock = &clock, .start_paused = true});
    RunAll(&unknown, model, {1, 1, 1});  // never measured: nothing to compare with
    EXPECT_EQ(unknown.Stats().batches, 0u);
  }
}

TEST(FairSchedulerBatchingTest, BatchRespectsMaxRowsAndPicksTheCheapestSize) {
  FakeClock clock;
  FairScheduler scheduler(FairSchedulerOptions{.lanes = 1, .clock = &clock, .start_paused = true, .max_batch = 4});
  // 2 rows cost as much per row as 1; 4 rows are cheaper: the lane must not
  // stop at 2 (not cheaper) and must not go past 4 (the limit).
  scheduler.Calibrate("relu", 1, 1 * kMs);
  scheduler.Calibrate("relu", 2, 2 * kMs);
  scheduler.Calibrate("relu", 4, 2 * kMs);
  Submitted s = RunAll(&scheduler, ReluModel(), {1, 1, 1, 1, 1, 1, 1, 1});
  for (const RunReport& r : s.reports) EXPECT_EQ(r.batch_size, 4);
  EXPECT_EQ(scheduler.Stats().batches, 2u);
}

TEST(FairSchedulerBatchingTest, ABatchNeverStretchesALayerPastTheStepBound) {
  FakeClock clock;
  // relu is one layer: a batch of 4 (1.6 ms) would make that layer 1.6 ms,
  // past the 1.3 ms bound; a batch of 2 (1.2 ms) stays inside it.
  FairScheduler scheduler(
      FairSchedulerOptions{.lanes = 1, .clock = &clock, .start_paused = true, .max_batch_step_ns = 1300'000});
  scheduler.Calibrate("relu", 1, 1 * kMs);
  scheduler.Calibrate("relu", 2, 1200'000);
  scheduler.Calibrate("relu", 4, 1600'000);
  Submitted s = RunAll(&scheduler, ReluModel(), {1, 1, 1, 1});
  for (const RunReport& r : s.reports) EXPECT_EQ(r.batch_size, 2);
  EXPECT_EQ(scheduler.Stats().batches, 2u);
  // A layer already longer than the bound alone may still batch up to the
  // bound of its own layer length (the bound never forbids running at all).
  FairScheduler tight(
      FairSchedulerOptions{.lanes = 1, .clock = &clock, .start_paused = true, .max_batch_step_ns = 100'000});
  tight.Calibrate("relu", 1, 1 * kMs);
  tight.Calibrate("relu", 2, 1 * kMs);  // free second row: same layer time
  Submitted t = RunAll(&tight, ReluModel(), {1, 1});
  for (const RunReport& r : t.reports) EXPECT_EQ(r.batch_size, 2);
}

TEST(FairSchedulerBatchingTest, OnlyBatchSizesThatRanBeforeAreFormed) {
  FakeClock clock;
  auto model = ReluModel();
  // 1 and 4 rows measured, 4 much cheaper per row; 2 and 3 would be cheaper
  // too by interpolation, but have never run: three requests run alone.
  FairScheduler three(FairSchedulerOptions{.lanes = 1, .clock = &clock, .start_paused = true});
  three.Calibrate("relu", 1, 1 * kMs);
  three.Calibrate("relu", 4, 1 * kMs);
  Submitted s = RunAll(&three, model, {1, 1, 1});
  for (const RunReport& r : s.reports) EXPECT_EQ(r.batch_size, 1);
  FairScheduler four(FairSchedulerOptions{.lanes = 1, .clock = &clock, .start_paused = true});
  four.Calibrate("relu", 1, 1 * kMs);
  four.Calibrate("relu", 4, 1 * kMs);
  s = RunAll(&four, model, {1, 1, 1, 1});
  for (const RunReport& r : s.reports) EXPECT_EQ(r.batch_size, 4);
}

TEST(FairSchedulerBatchingTest, AMemberThatWouldMissItsDeadlineInTheBatchRunsAlone) {
  FakeClock clock;
  FairScheduler scheduler(FairSchedulerOptions{.lanes = 1, .clock = &clock, .start_paused = true});
  scheduler.Calibrate("relu", 1, 1 * kMs);
  scheduler.Calibrate("relu", 2, 1500'000);
  scheduler.Calibrate("relu", 3, 1800'000);
  const int64_t now = clock.NowNs();
  // The first request meets its deadline alone (1 ms) but not in any batch
  // (1.5 ms or more): it runs first, alone; the other two batch after it.
  Submitted s = RunAll(&scheduler, ReluModel(), {1, 1, 1}, {now + 1200'000, now + 50 * kMs, now + 50 * kMs});
  for (const Outputs& o : s.outputs) EXPECT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(s.reports[0].batch_size, 1);
  EXPECT_EQ(s.reports[1].batch_size, 2);
  EXPECT_EQ(s.reports[2].batch_size, 2);
  EXPECT_EQ(scheduler.Stats().batches, 1u);
}

TEST(FairSchedulerBatchingTest, ShapesThatDifferBesidesRowsDoNotBatch) {
  FakeClock clock;
  FairScheduler scheduler(FairSchedulerOptions{.lanes = 1, .clock = &clock, .start_paused = true});
  scheduler.Calibrate("relu", 1, 1 * kMs);
  scheduler.Calibrate("relu", 2, 1 * kMs);
  auto model = ReluModel();
  RunReport r1, r2;
  std::promise<void> d1, d2;
  InferenceRequest a{"t", model, {NamedTensor{"x", Rows(1, 1)}}};
  a.model_id = "relu";
  a.report = &r1;
  // Another tenant's request of the same model id never joins.
  InferenceRequest b{"u", model, {NamedTensor{"x", Rows(1, 2)}}};
  b.model_id = "relu";
  b.report = &r2;
  ASSERT_TRUE(scheduler.Submit(std::move(a), [&](Outputs) { d1.set_value(); }).ok());
  ASSERT_TRUE(scheduler.Submit(std::move(b), [&](Outputs) { d2.set_value(); }).ok());
  scheduler.Resume();
  d1.get_future().wait();
  d2.get_future().wait();
  EXPECT_EQ(r1.batch_size, 1);
  EXPECT_EQ(r2.batch_size, 1);
  EXPECT_EQ(scheduler.Stats().batches, 0u);
}

}  // namespace
}  // namespace orrery
