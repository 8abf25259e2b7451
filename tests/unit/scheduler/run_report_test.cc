// The RunReport the scheduler fills for metering: measured lane time and
// the admitted / started / ended times, for a run and for a drop.
#include <future>

#include <gtest/gtest.h>

#include "runtime/execution.h"
#include "scheduler/scheduler.h"
#include "tests/unit/common/tiny_models.h"

namespace orrery {
namespace {

constexpr int64_t kMs = 1'000'000;
using Outputs = Result<std::vector<NamedTensor>>;

InferenceRequest ReluRequest(const std::string& tenant, RunReport* report, int64_t deadline_ns = 0) {
  Result<std::unique_ptr<CompiledModel>> m = CompiledModel::Compile(testing::ReluModelBytes());
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  Tensor x(DType::kFloat32, {1, 4});
  for (int i = 0; i < 4; ++i) x.data<float>()[i] = 1.0f;
  InferenceRequest r{tenant, ModelCache::ModelPtr(std::move(m).value()), {NamedTensor{"x", x}}};
  r.model_id = "relu";
  r.deadline_ns = deadline_ns;
  r.report = report;
  return r;
}

TEST(RunReportTest, ARunReportsItsLaneTimeAndTimesBeforeTheCallback) {
  FairScheduler scheduler(FairSchedulerOptions{.lanes = 1});
  RunReport report;
  std::promise<RunReport> seen;  // what the callback can read
  const int64_t before = scheduler.NowNs();
  ASSERT_TRUE(scheduler.Submit(ReluRequest("t", &report), [&](Outputs r) {
    EXPECT_TRUE(r.ok());
    seen.set_value(report);
  }).ok());
  const RunReport r = seen.get_future().get();
  EXPECT_GE(r.admitted_ns, before);
  EXPECT_GE(r.started_ns, r.admitted_ns);
  EXPECT_GT(r.started_ns, 0);
  EXPECT_GE(r.ended_ns, r.started_ns);
  EXPECT_GT(r.lane_ns, 0);
  EXPECT_LE(r.lane_ns, r.ended_ns - r.started_ns);
  scheduler.Shutdown();
  EXPECT_EQ(scheduler.Stats().tenants[0].service_ns, r.lane_ns);
}

TEST(RunReportTest, ADroppedRequestNeverStartedAndUsedNoLaneTime) {
  FakeClock clock;
  clock.AdvanceNs(5 * kMs);
  FairScheduler scheduler(FairSchedulerOptions{.lanes = 1, .clock = &clock, .start_paused = true});
  scheduler.Calibrate("relu", 1, 1 * kMs);
  RunReport report{.started_ns = 123, .lane_ns = 456};  // overwritten
  std::promise<Status> done;
  ASSERT_TRUE(scheduler.Submit(ReluRequest("t", &report, clock.NowNs() + 3 * kMs),
                               [&](Outputs r) { done.set_value(r.status()); }).ok());
  const int64_t admitted = clock.NowNs();
  clock.AdvanceNs(2 * kMs + 1);  // can no longer finish in time
  scheduler.Resume();
  EXPECT_EQ(done.get_future().get().code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(report.admitted_ns, admitted);
  EXPECT_EQ(report.started_ns, 0);
  EXPECT_EQ(report.lane_ns, 0);
  EXPECT_EQ(report.ended_ns, admitted + 2 * kMs + 1);
  scheduler.Shutdown();
}

}  // namespace
}  // namespace orrery
