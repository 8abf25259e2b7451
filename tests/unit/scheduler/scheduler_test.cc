#include "scheduler/scheduler.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <future>
#include <map>
#include <mutex>
#include <thread>

#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include "base/cpu_set.h"
#include "runtime/execution.h"
#include "tests/unit/common/tiny_models.h"

namespace orrery {
namespace {

constexpr int64_t kMs = 1'000'000;
using Outputs = Result<std::vector<NamedTensor>>;

// The order in which requests finish, one letter per request (callbacks run
// on lane threads, hence the lock). Read `order` after Shutdown().
struct FinishOrder {
  InferenceCallback Note(const char* letter) {
    return [this, letter](Outputs) {
      std::lock_guard<std::mutex> lock(mu);
      order += letter;
    };
  }
  std::mutex mu;
  std::string order;
};

ModelCache::ModelPtr Compile(const std::string& bytes) {
  Result<std::unique_ptr<CompiledModel>> m = CompiledModel::Compile(bytes);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return ModelCache::ModelPtr(std::move(m).value());
}

ModelCache::ModelPtr ReluModel() { return Compile(testing::ReluModelBytes()); }

// Returns once the queue is empty (the request submitted last is on the
// lane). Polls with sleeps, not yield(): a yielding thread that shares a CPU
// with the lane can wait out the lane's whole time slice, i.e. the run it
// meant to catch in progress.
void WaitUntilQueueEmpty(const FairScheduler& scheduler) {
  while (scheduler.queue_depth() > 0) std::this_thread::sleep_for(std::chrono::microseconds(20));
}

// y = Relu(Relu(...Relu(x))) `layers` deep, x: float32 [1, N]: a "long"
// model whose steps all cost about the same.
ModelCache::ModelPtr ChainModel(int layers) {
  onnx::ModelProto model;
  model.set_ir_version(8);
  auto* opset = model.add_opset_import();
  opset->set_domain("");
  opset->set_version(13);
  auto* graph = model.mutable_graph();
  graph->set_name("chain");
  std::string prev = "x";
  for (int i = 0; i < layers; ++i) {
    std::string out = i + 1 == layers ? "y" : std::string("h").append(std::to_string(i));
    auto* node = graph->add_node();
    node->set_op_type("Relu");
    node->set_name("relu" + std::to_string(i));
    node->add_input(prev);
    node->add_output(out);
    prev = out;
  }
  for (auto [info, name] : {std::pair{graph->add_input(), std::string("x")}, std::pair{graph->add_output(), std::string("y")}}) {
    info->set_name(name);
    auto* tt = info->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(onnx::TensorProto::FLOAT);
    tt->mutable_shape()->add_dim()->set_dim_value(1);
    tt->mutable_shape()->add_dim()->set_dim_param("N");
  }
  return Compile(model.SerializeAsString());
}

InferenceRequest Request(const std::string& tenant, ModelCache::ModelPtr model, float value,
                         int64_t deadline_ns = 0) {
  Tensor x(DType::kFloat32, {1, 4});
  for (int i = 0; i < 4; ++i) x.data<float>()[i] = value * (i % 2 ? 1 : -1);
  InferenceRequest r{tenant, std::move(model), {NamedTensor{"x", x}}};
  r.model_id = "relu";
  r.deadline_ns = deadline_ns;
  return r;
}

TEST(FairSchedulerTest, RunsRequestsAndReturnsOutputs) {
  FairScheduler scheduler(FairSchedulerOptions{.lanes = 2});
  EXPECT_EQ(scheduler.lanes(), 2);
  std::promise<Outputs> p;
  ASSERT_TRUE(scheduler.Submit(Request("t", ReluModel(), 3.0f), [&](Outputs r) { p.set_value(std::move(r)); }).ok());
  Outputs r = p.get_future().get();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0].tensor.data<float>()[0], 0.0f);
  EXPECT_EQ((*r)[0].tensor.data<float>()[1], 3.0f);
  scheduler.Shutdown();
  SchedulerStats s = scheduler.Stats();
  ASSERT_EQ(s.tenants.size(), 1u);
  EXPECT_EQ(s.tenants[0].completed, 1u);
  EXPECT_EQ(s.tenants[0].in_flight, 0);
  ASSERT_EQ(s.models.size(), 1u);
  EXPECT_EQ(s.models[0].model_id, "relu");
  EXPECT_EQ(s.models[0].samples, 1u);
}

TEST(FairSchedulerTest, LaneGroupsSplitTheLaneCpus) {
  const int cpu = AllowedCpus().front();
  FairScheduler grouped(FairSchedulerOptions{.lane_threads = 2, .lane_cpus = {cpu, cpu, cpu, cpu}});
  EXPECT_EQ(grouped.lanes(), 2);  // 4 CPUs, 2 threads each
  std::promise<Outputs> done;
  ASSERT_TRUE(grouped.Submit(Request("t", ReluModel(), -2.0f), [&](Outputs r) { done.set_value(std::move(r)); }).ok());
  Outputs out = done.get_future().get();
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].tensor.data<float>()[0], 2.0f);
  EXPECT_EQ((*out)[0].tensor.data<float>()[1], 0.0f);
  FairScheduler explicit_lanes(FairSchedulerOptions{.lanes = 3, .lane_threads = 2, .lane_cpus = {cpu}});
  EXPECT_EQ(explicit_lanes.lanes(), 3);
}

TEST(FairSchedulerTest, ErrorsReachTheCallback) {
  FairScheduler scheduler(FairSchedulerOptions{.lanes = 1});
  InferenceRequest req = Request("t", ReluModel(), 1.0f);
  req.inputs[0].name = "wrong";
  std::promise<Status> p;
  ASSERT_TRUE(scheduler.Submit(std::move(req), [&](Outputs r) { p.set_value(r.status()); }).ok());
  EXPECT_EQ(p.get_future().get().code(), StatusCode::kInvalidArgument);
  scheduler.Shutdown();
  EXPECT_EQ(scheduler.Stats().tenants[0].failed, 1u);
}

// lane_spin_ns: a lane polls its queue instead of sleeping. An hour's spin
// must still pick up the next request and end at Shutdown (each would
// otherwise hang for the hour).
TEST(FairSchedulerTest, ASpinningLaneRunsTheNextRequestAndStopsAtShutdown) {
  FairScheduler scheduler(FairSchedulerOptions{.lanes = 1, .lane_spin_ns = int64_t{3600} * 1'000'000'000});
  for (float v : {1.0f, 2.0f}) {  // the second arrives while the lane spins
    std::promise<Outputs> p;
    std::future<Outputs> f = p.get_future();
    ASSERT_TRUE(scheduler.Submit(Request("t", ReluModel(), v), [&](Outputs r) { p.set_value(std::move(r)); }).ok());
    ASSERT_EQ(f.wait_for(std::chrono::seconds(60)), std::future_status::ready);
    Outputs r = f.get();
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ((*r)[0].tensor.data<float>()[1], v);
  }
  scheduler.Shutdown();
  EXPECT_EQ(scheduler.completed(), 2u);
}

// A spinning lane looks at the queue only when it changed (a lock taken
// on every poll put Submit to sleep on the mutex); Resume changes what the
// lane may run without changing the queue, so it must count as a change:
// a request queued while paused runs once resumed, not after the hour.
TEST(FairSchedulerTest, ASpinningLaneRunsWhatWasQueuedWhilePausedOnceResumed) {
  FairScheduler scheduler(FairSchedulerOptions{.lanes = 1, .start_paused = true,
                                               .lane_spin_ns = int64_t{3600} * 1'000'000'000});
  scheduler.Resume();
  std::promise<void> first;
  ASSERT_TRUE(scheduler.Submit(Request("t", ReluModel(), 1.0f), [&](Outputs) { first.set_value(); }).ok());
  first.get_future().get();  // the lane is spinning now
  scheduler.Pause();
  std::promise<Outputs> p;
  std::future<Outputs> f = p.get_future();
  ASSERT_TRUE(scheduler.Submit(Request("t", ReluModel(), 2.0f), [&](Outputs r) { p.set_value(std::move(r)); }).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the spinner has seen the paused queue
  EXPECT_EQ(f.wait_for(std::chrono::seconds(0)), std::future_status::timeout) << "ran while paused";
  scheduler.Resume();
  ASSERT_EQ(f.wait_for(std::chrono::seconds(60)), std::future_status::ready);
  EXPECT_TRUE(f.get().ok());
  scheduler.Shutdown();
}

TEST(FairSchedulerTest, ShutdownDrainsQueuedWorkThenRefuses) {
  auto model = ReluModel();
  std::atomic<int> done{0};
  FairScheduler scheduler(FairSchedulerOptions{.lanes = 1});
  for (int i = 0; i < 50; ++i) {
    ASSERT_TRUE(scheduler.Submit(Request("t", model, 1.0f), [&](Outputs r) { done += r.ok() ? 1 : 0; }).ok());
  }
  scheduler.Shutdown();
  EXPECT_EQ(done.load(), 50);
  EXPECT_EQ(scheduler.completed(), 50u);
  EXPECT_EQ(scheduler.Submit(Request("t", model, 1.0f), [](Outputs) {}).code(), StatusCode::kUnavailable);
}

TEST(FairSchedulerTest, RejectsAtAdmissionWhenThePredictedCompletionIsTooLate) {
  FakeClock clock;
  FairScheduler scheduler(FairSchedulerOptions{.lanes = 1, .clock = &clock, .start_paused = true, .admission_wait_slack = 0});
  scheduler.Calibrate("relu", 1, 1 * kMs);
  auto model = ReluModel();
  std::atomic<int> ok{0};
  // Own cost alone is too much.
  Status s = scheduler.Submit(Request("t", model, 1, clock.NowNs() + kMs / 2), [](Outputs) {});
  EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(s.message().find("predicted completion in 1.000 ms"), std::string::npos) << s.message();
  // Five queued ahead on one lane: the sixth completes at +6 ms.
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(scheduler.Submit(Request("t", model, 1, clock.NowNs() + 100 * kMs), [&](Outputs r) { ok += r.ok(); }).ok());
  }
  s = scheduler.Submit(Request("t", model, 1, clock.NowNs() + 5 * kMs + kMs / 2), [](Outputs) {});
  EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(s.message().find("predicted completion in 6.000 ms"), std::string::npos) << s.message();
  EXPECT_TRUE(scheduler.Submit(Request("t", model, 1, clock.NowNs() + 6 * kMs), [&](Outputs r) { ok += r.ok(); }).ok());
  SchedulerStats st = scheduler.Stats();
  EXPECT_EQ(st.tenants[0].rejected_deadline, 2u);
  EXPECT_EQ(st.tenants[0].admitted, 6u);
  EXPECT_EQ(st.tenants[0].queued, 6u);
  scheduler.Resume();
  scheduler.Shutdown();  // the fake clock stands still: all six stay feasible
  EXPECT_EQ(ok.load(), 6);
}

// Tenant b recently took 30% of the lane; a is backlogged, so b's next
// requests go ahead of a's newest in fair order. a's admission plans its wait
// with them (10 ms of own queue take 10 / 0.7 ms); b's does not see a's.
TEST(FairSchedulerTest, AdmissionOfABackloggedTenantPlansForTheArrivalsOfOnesBelowTheirShare) {
  FakeClock clock;
  FairScheduler scheduler(FairSchedulerOptions{.lanes = 1, .clock = &clock, .start_paused = true, .admission_wait_slack = 0});
  scheduler.Calibrate("relu", 1, 1 * kMs);
  auto model = ReluModel();
  std::atomic<int> ok{0};
  for (int i = 0; i < 300; ++i) {
    ASSERT_TRUE(scheduler.Submit(Request("b", model, 1, clock.NowNs() + 1000 * kMs), [&](Outputs r) { ok += r.ok(); }).ok());
  }
  scheduler.Resume();
  while (scheduler.completed() < 300) std::this_thread::yield();
  scheduler.Pause();  // b's 300 ms charged at a standing clock: 30% of the last second (tau 1 s)
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(scheduler.Submit(Request("a", model, 1, clock.NowNs() + 1000 * kMs), [&](Outputs r) { ok += r.ok(); }).ok());
  }
  // Without b's share 10 + 1 ms would fit 12 ms; with it, 10 / 0.7 + 1 does not.
  Status s = scheduler.Submit(Request("a", model, 1, clock.NowNs() + 12 * kMs), [](Outputs) {});
  EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(s.message().find("predicted completion in 15.286 ms"), std::string::npos) << s.message();
  EXPECT_TRUE(scheduler.Submit(Request("a", model, 1, clock.NowNs() + 16 * kMs), [&](Outputs r) { ok += r.ok(); }).ok());
  // b's next request starts 1 ms (its last charge) into a's queue: one of
  // a's, then its own; a's arrivals would not go ahead of it.
  EXPECT_TRUE(scheduler.Submit(Request("b", model, 1, clock.NowNs() + 2 * kMs + kMs / 2), [&](Outputs r) { ok += r.ok(); }).ok());
  scheduler.Resume();
  scheduler.Shutdown();
  EXPECT_EQ(ok.load(), 312);
}

TEST(FairSchedulerTest, AdmissionPlansForTheObservedResponseTime) {
  FakeClock clock;
  FairScheduler scheduler(FairSchedulerOptions{.lanes = 1, .clock = &clock, .start_paused = true, .admission_wait_slack = 0});
  scheduler.Calibrate("relu", 1, 1 * kMs);
  auto model = ReluModel();
  std::atomic<int> ok{0};
  // 1 ms of lane time fits a 1.5 ms deadline...
  ASSERT_TRUE(scheduler.Submit(Request("t", model, 1, clock.NowNs() + 1500'000), [&](Outputs r) { ok += r.ok(); }).ok());
  // ...and a second one behind it a 2.5 ms deadline (1 + 1 ms)...
  // ...until answers are seen to need 1 ms after the lane (99th percentile
  // of the observations: one slow answer among many fast ones counts too).
  for (int i = 0; i < 99; ++i) scheduler.ObserveResponseNs(100'000);
  scheduler.ObserveResponseNs(5 * kMs);
  for (int i = 0; i < 12; ++i) scheduler.ObserveResponseNs(1 * kMs);
  Status s = scheduler.Submit(Request("t", model, 1, clock.NowNs() + 2500'000), [](Outputs) {});
  EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(s.message().find("predicted completion in 3.000 ms"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("and answering 1.000 ms"), std::string::npos) << s.message();
  EXPECT_TRUE(scheduler.Submit(Request("t", model, 1, clock.NowNs() + 100 * kMs), [&](Outputs r) { ok += r.ok(); }).ok());
  scheduler.Resume();
  scheduler.Shutdown();
  EXPECT_EQ(ok.load(), 2);
}

TEST(FairSchedulerTest, ObservedResponseTimesExpireSoABurstDoesNotRejectForever) {
  FakeClock clock;
  FairScheduler scheduler(FairSchedulerOptions{.lanes = 1, .clock = &clock, .start_paused = true,
                                               .admission_wait_slack = 0, .response_max_age_ns = 5'000'000'000});
  scheduler.Calibrate("relu", 1, 1 * kMs);
  auto model = ReluModel();
  // A burst of slow answers: 50 ms after the lane.
  for (int i = 0; i < 32; ++i) scheduler.ObserveResponseNs(50 * kMs);
  Status s = scheduler.Submit(Request("t", model, 1, clock.NowNs() + 10 * kMs), [](Outputs) {});
  EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded) << "50 ms of answering does not fit 10 ms";
  // Rejected requests answer nothing, so no new observation comes; the old
  // ones expire and admission plans with what is left (nothing).
  clock.AdvanceNs(5'000'000'001);
  std::promise<Outputs> done;
  ASSERT_TRUE(scheduler.Submit(Request("t", model, 1, clock.NowNs() + 10 * kMs), [&](Outputs r) {
    done.set_value(std::move(r));
  }).ok());
  scheduler.Resume();
  EXPECT_TRUE(done.get_future().get().ok());
}

TEST(FairSchedulerTest, CheckAdmissionCountsTheModelLoadAndQueuesNothing) {
  FakeClock clock;
  FairScheduler scheduler(FairSchedulerOptions{.lanes = 1, .clock = &clock, .start_paused = true});
  scheduler.Calibrate("relu", 1, 1 * kMs);
  // Not loaded yet: no compiled model, weights predicted resident in 8 ms.
  InferenceRequest cold = Request("t", nullptr, 1, clock.NowNs() + 5 * kMs);
  cold.ready_ns = clock.NowNs() + 8 * kMs;
  Status s = scheduler.CheckAdmission(cold);
  EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(s.message().find("predicted completion in 9.000 ms"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("8.000 ms for the model's weights to load"), std::string::npos) << s.message();
  // Without the load the same request would be admitted.
  cold.ready_ns = 0;
  EXPECT_TRUE(scheduler.CheckAdmission(cold).ok());
  cold.ready_ns = clock.NowNs() + 4 * kMs;  // ready at 4 ms, done at 5 ms: just in time
  EXPECT_TRUE(scheduler.CheckAdmission(cold).ok());
  SchedulerStats st = scheduler.Stats();
  ASSERT_EQ(st.tenants.size(), 1u);
  EXPECT_EQ(st.tenants[0].rejected_deadline, 1u);
  EXPECT_EQ(st.tenants[0].admitted, 0u);  // a check admits nothing
  EXPECT_EQ(scheduler.queue_depth(), 0u);
  // Submit applies the same rule to a request that carries a ready time.
  auto model = ReluModel();
  InferenceRequest late = Request("t", model, 1, clock.NowNs() + 5 * kMs);
  late.ready_ns = clock.NowNs() + 6 * kMs;
  EXPECT_EQ(scheduler.Submit(std::move(late), [](Outputs) {}).code(), StatusCode::kDeadlineExceeded);
  scheduler.Shutdown();
}

TEST(FairSchedulerTest, QueuedRequestThatBecomesInfeasibleIsDroppedBeforeItRuns) {
  FakeClock clock;
  FairScheduler scheduler(FairSchedulerOptions{.lanes = 1, .clock = &clock, .start_paused = true});
  scheduler.Calibrate("relu", 1, 1 * kMs);
  auto model = ReluModel();
  std::promise<Status> dropped;
  std::promise<Status> kept;
  ASSERT_TRUE(scheduler.Submit(Request("t", model, 1, clock.NowNs() + 3 * kMs),
                               [&](Outputs r) { dropped.set_value(r.status()); }).ok());
  ASSERT_TRUE(scheduler.Submit(Request("u", model, 1, clock.NowNs() + 10 * kMs),
                               [&](Outputs r) { kept.set_value(r.status()); }).ok());
  clock.AdvanceNs(2 * kMs + 1);  // the first can no longer finish by +3 ms
  scheduler.Resume();
  Status s = dropped.get_future().get();
  EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(s.message().find("dropped before running"), std::string::npos) << s.message();
  EXPECT_TRUE(kept.get_future().get().ok());
  scheduler.Shutdown();
  SchedulerStats st = scheduler.Stats();
  ASSERT_EQ(st.tenants.size(), 2u);
  EXPECT_EQ(st.tenants[0].dropped, 1u);
  EXPECT_EQ(st.tenants[0].completed, 0u);
  EXPECT_EQ(st.tenants[0].in_flight, 0);
  EXPECT_EQ(st.tenants[1].completed, 1u);
}

// Scenario 4's late rejections: an overloaded tenant's queue is admitted up
// to its deadlines, so when the lane then runs slower than predicted for a
// while (this VM's slow spells), the requests at the back miss and are
// dropped after waiting. With the queue horizon the queue holds at most
// half of the time to the deadline, the excess is refused at admission and
// the same slow spell drops nothing.
TEST(FairSchedulerTest, TheQueueHorizonTurnsASlowSpellsDropsIntoRejectionsAtAdmission) {
  struct Outcome {
    uint64_t admitted = 0, rejected = 0, dropped = 0, completed = 0;
  };
  auto run = [](double horizon) {
    FakeClock clock;
    FairScheduler scheduler(FairSchedulerOptions{.lanes = 1, .clock = &clock, .start_paused = true,
                                                 .max_batch = 1, .admission_wait_slack = 0,
                                                 .queue_horizon_fraction = horizon});
    scheduler.Calibrate("relu", 1, 1 * kMs);
    auto model = ReluModel();
    // 40 requests at once, each due in 20 ms, on one lane of 1 ms runs.
    for (int i = 0; i < 40; ++i) {
      // Every run takes 1.5 ms of the (fake) clock instead of the predicted
      // 1 ms: the callback runs on the one lane, between two dispatches.
      (void)scheduler.Submit(Request("t", model, 1, clock.NowNs() + 20 * kMs),
                             [&clock](Outputs) { clock.AdvanceNs(3 * kMs / 2); });
    }
    scheduler.Resume();
    scheduler.Shutdown();
    const SchedulerStats st = scheduler.Stats();
    return Outcome{st.tenants[0].admitted, st.tenants[0].rejected_deadline, st.tenants[0].dropped,
                   st.tenants[0].completed};
  };
  const Outcome deadline_only = run(1.0);
  EXPECT_EQ(deadline_only.admitted, 20u);  // the 20th completes at 20 ms as predicted
  EXPECT_EQ(deadline_only.rejected, 20u);
  // At 1.5 ms a run, request i starts at 1.5 i ms: from i = 13 on it cannot
  // finish by 20 ms and is dropped after waiting.
  EXPECT_EQ(deadline_only.dropped, 7u);
  const Outcome horizon = run(0.5);
  EXPECT_EQ(horizon.admitted, 11u);  // waits of 0 to 10 ms: half of the 20
  EXPECT_EQ(horizon.rejected, 29u);
  EXPECT_EQ(horizon.dropped, 0u);    // the last starts at 15 ms and ends at 16.5
  EXPECT_EQ(horizon.completed, 11u);
}

TEST(FairSchedulerTest, InFlightLimitIsResourceExhausted) {
  FakeClock clock;
  FairScheduler scheduler(FairSchedulerOptions{.lanes = 1, .clock = &clock, .start_paused = true});
  scheduler.SetTenantPolicy("t", TenantPolicy{.weight = 1, .max_in_flight = 2});
  auto model = ReluModel();
  ASSERT_TRUE(scheduler.Submit(Request("t", model, 1), [](Outputs) {}).ok());
  ASSERT_TRUE(scheduler.Submit(Request("t", model, 1), [](Outputs) {}).ok());
  Status s = scheduler.Submit(Request("t", model, 1), [](Outputs) {});
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(s.message().find("in-flight limit is 2"), std::string::npos) << s.message();
  EXPECT_TRUE(scheduler.Submit(Request("other", model, 1), [](Outputs) {}).ok());  // per tenant
  scheduler.Resume();
  scheduler.Shutdown();
  EXPECT_EQ(scheduler.Stats().tenants[1].rejected_in_flight, 1u);
  EXPECT_EQ(scheduler.completed(), 3u);
}

TEST(FairSchedulerTest, DispatchOrderFollowsWeights) {
  FakeClock clock;  // measured time is 0: charges stay at the predicted 1 ms
  FairScheduler scheduler(FairSchedulerOptions{.lanes = 1, .clock = &clock, .start_paused = true});
  scheduler.Calibrate("relu", 1, 1 * kMs);
  scheduler.SetTenantPolicy("a", TenantPolicy{.weight = 1});
  auto model = ReluModel();
  FinishOrder finished;
  const std::string& order = finished.order;
  for (int i = 0; i < 6; ++i) {
    for (const char* t : {"a", "b"}) {
      InferenceRequest r = Request(t, model, 1);
      if (t[0] == 'b') r.weight = 2;  // a weight carried by the request
      ASSERT_TRUE(scheduler.Submit(std::move(r), finished.Note(t)).ok());
    }
  }
  scheduler.Resume();
  scheduler.Shutdown();
  // Start-time fair queuing, ties by name: a b b a b b a b b a a a.
  EXPECT_EQ(order.substr(0, 9), "abbabbabb");
  EXPECT_EQ(scheduler.Stats().tenants[1].weight, 2.0);
}

// A short request with a tight deadline arriving while a long one runs on
// the only lane waits about one layer of the long one, not all of it.
TEST(FairSchedulerTest, ShortRequestPreemptsLongOneBetweenLayers) {
  constexpr int kLayers = 100;
  constexpr int64_t kWidth = 1 << 19;  // 2 MB per layer
  auto long_model = ChainModel(kLayers);
  auto short_model = ReluModel();
  Tensor big(DType::kFloat32, {1, kWidth});
  for (int64_t i = 0; i < kWidth; ++i) big.data<float>()[i] = static_cast<float>(i % 7) - 3;

  // The longest single layer of the long model, measured directly.
  int64_t longest_step_ns = 0, long_total_ns = 0;
  for (int rep = 0; rep < 3; ++rep) {
    Result<Execution> ex = Execution::Start(*long_model, {NamedTensor{"x", big}});
    ASSERT_TRUE(ex.ok()) << ex.status().ToString();
    while (!ex->done()) ASSERT_TRUE(ex->Step().ok());
    int64_t total = 0;
    for (const StepProfile& p : ex->Profile()) {
      if (rep > 0) longest_step_ns = std::max(longest_step_ns, p.ns);
      total += p.ns;
    }
    long_total_ns = total;
  }

  FairScheduler scheduler(FairSchedulerOptions{.lanes = 1});
  auto run_long = [&](std::promise<int64_t>* done) {
    InferenceRequest r{"long_tenant", long_model, {NamedTensor{"x", big}}};
    r.model_id = "chain";
    return scheduler.Submit(std::move(r), [done](Outputs out) {
      EXPECT_TRUE(out.ok()) << out.status().ToString();
      done->set_value(SteadyClock::Get()->NowNs());
    });
  };
  // Warm-up: both models measured by the scheduler.
  for (int i = 0; i < 2; ++i) {
    std::promise<int64_t> p;
    ASSERT_TRUE(run_long(&p).ok());
    p.get_future().get();
    std::promise<Outputs> q;
    ASSERT_TRUE(scheduler.Submit(Request("short_tenant", short_model, 1), [&](Outputs r) { q.set_value(std::move(r)); }).ok());
    ASSERT_TRUE(q.get_future().get().ok());
  }

  int64_t long_predicted_ns = 0;
  for (const ModelCostStats& m : scheduler.Stats().models) {
    if (m.model_id == "chain") long_predicted_ns = m.estimate_ns.at(1);
  }
  ASSERT_GT(long_predicted_ns, 0);

  // The test thread must submit the short request while the long one runs
  // (~5 ms); on a busy 2-core machine (CI runs two tests at once) it can be
  // kept off its CPU longer than that, and then the short request comes
  // after the long one and tests nothing. Such an attempt (submitted within
  // two layers of the long one's end) is repeated, at most 5 times.
  int64_t long_start = 0, long_end = 0, short_submit = 0, short_end = 0, short_deadline = 0;
  uint64_t preemptions = 0;
  for (int attempt = 0; attempt < 5; ++attempt) {
    const uint64_t preemptions_before = scheduler.Stats().preemptions;
    std::promise<int64_t> long_done;
    long_start = SteadyClock::Get()->NowNs();
    ASSERT_TRUE(run_long(&long_done).ok());
    WaitUntilQueueEmpty(scheduler);  // the long one is on the lane
    std::promise<int64_t> short_done;
    short_submit = SteadyClock::Get()->NowNs();
    // Its deadline, 60% of the long request's predicted time, is before the
    // long one's predicted end: at risk, so it preempts at the next layer.
    short_deadline = short_submit + long_predicted_ns * 6 / 10;
    ASSERT_TRUE(scheduler.Submit(Request("short_tenant", short_model, 1, short_deadline), [&](Outputs r) {
      EXPECT_TRUE(r.ok()) << r.status().ToString();
      short_done.set_value(SteadyClock::Get()->NowNs());
    }).ok());
    short_end = short_done.get_future().get();
    long_end = long_done.get_future().get();
    preemptions = scheduler.Stats().preemptions - preemptions_before;
    if (long_end - short_submit > 2 * longest_step_ns) break;
    std::printf("attempt %d: the short request came %.3f ms after the long one started, too late; again\n",
                attempt, (short_submit - long_start) / 1e6);
  }
  scheduler.Shutdown();

  EXPECT_EQ(preemptions, 1u);
  EXPECT_LT(short_end, long_end);  // it did not wait for the whole long request
  const int64_t short_latency = short_end - short_submit;
  std::printf("long model: %d layers, %.3f ms direct run, longest layer %.3f ms, predicted %.3f ms; "
              "long request took %.3f ms\n"
              "short request: %.3f ms submit to done (its own run included)\n",
              kLayers, long_total_ns / 1e6, longest_step_ns / 1e6, long_predicted_ns / 1e6,
              (long_end - long_start) / 1e6, short_latency / 1e6);
  // Relative, not absolute: within its deadline, i.e. well before the long
  // request it would have waited for without preemption.
  EXPECT_LT(short_end, short_deadline);
}

// No deadline at all: another tenant's request queued while a long one
// runs is put first by fair order (a tie in virtual start; its tenant is
// back from idle), so it runs after the current layer instead of after the
// whole long request. With fair_preemption off it waits for the long one.
// Both are queued before the lane starts ("heavy" goes first: ties go by
// tenant name), so that the light one is surely queued at the first
// preemption point: a test thread that queued it during the run could be
// kept off its CPU until the run ended.
TEST(FairSchedulerTest, AnotherTenantsRequestWaitsOneLayerNotTheWholeRun) {
  constexpr int64_t kWidth = 1 << 19;
  auto long_model = ChainModel(60);
  auto short_model = ReluModel();
  Tensor big(DType::kFloat32, {1, kWidth});
  for (int64_t i = 0; i < kWidth; ++i) big.data<float>()[i] = static_cast<float>(i % 5) - 2;
  for (bool fair : {true, false}) {
    FairScheduler scheduler(
        FairSchedulerOptions{.lanes = 1, .start_paused = true, .max_batch = 1, .fair_preemption = fair});
    std::promise<int64_t> long_done, short_done;
    InferenceRequest r{"heavy", long_model, {NamedTensor{"x", big}}};
    r.model_id = "chain";
    ASSERT_TRUE(scheduler.Submit(std::move(r), [&](Outputs out) {
      EXPECT_TRUE(out.ok()) << out.status().ToString();
      long_done.set_value(SteadyClock::Get()->NowNs());
    }).ok());
    ASSERT_TRUE(scheduler.Submit(Request("light", short_model, 1), [&](Outputs out) {
      EXPECT_TRUE(out.ok()) << out.status().ToString();
      short_done.set_value(SteadyClock::Get()->NowNs());
    }).ok());
    scheduler.Resume();
    const int64_t short_end = short_done.get_future().get();
    const int64_t long_end = long_done.get_future().get();
    scheduler.Shutdown();
    if (fair) {
      EXPECT_LT(short_end, long_end) << "the light tenant waited for the whole heavy request";
      EXPECT_EQ(scheduler.Stats().preemptions, 1u);
    } else {
      EXPECT_GT(short_end, long_end);
      EXPECT_EQ(scheduler.Stats().preemptions, 0u);
    }
  }
}

// Fair preemption never makes an admitted request late: with a deadline
// that leaves no room for another run of the same model, the running
// request is not preempted for the other tenant's; with a loose one it is.
// Both are queued before the lane starts, "first" ahead of "second" (a tie
// in virtual start, broken by tenant name), as in the test above.
TEST(FairSchedulerTest, FairPreemptionKeepsTheRunningRequestsDeadline) {
  constexpr int64_t kWidth = 1 << 19;
  auto model = ChainModel(60);
  Tensor big(DType::kFloat32, {1, kWidth});
  for (int64_t i = 0; i < kWidth; ++i) big.data<float>()[i] = static_cast<float>(i % 5) - 2;
  auto chain_request = [&](const std::string& tenant, int64_t deadline_ns) {
    InferenceRequest r{tenant, model, {NamedTensor{"x", big}}};
    r.model_id = "chain";
    r.deadline_ns = deadline_ns;
    return r;
  };
  for (bool tight : {true, false}) {
    FairScheduler scheduler(FairSchedulerOptions{.lanes = 1, .max_batch = 1});
    // The chain's cost is measured by a third tenant, so that "first" and
    // "second" both start at the virtual time.
    std::promise<void> warm;
    ASSERT_TRUE(scheduler.Submit(chain_request("warm-up", 0), [&](Outputs) { warm.set_value(); }).ok());
    warm.get_future().get();
    int64_t predicted = 0;
    for (const ModelCostStats& m : scheduler.Stats().models) predicted = m.estimate_ns.at(1);
    ASSERT_GT(predicted, 0);
    scheduler.Pause();
    const int64_t deadline = scheduler.NowNs() + (tight ? predicted * 16 / 10 : predicted * 100);
    std::promise<int64_t> first_done, second_done;
    ASSERT_TRUE(scheduler.Submit(chain_request("first", deadline), [&](Outputs) {
      first_done.set_value(SteadyClock::Get()->NowNs());
    }).ok());
    ASSERT_TRUE(scheduler.Submit(chain_request("second", 0), [&](Outputs) {
      second_done.set_value(SteadyClock::Get()->NowNs());
    }).ok());
    scheduler.Resume();
    const int64_t first_end = first_done.get_future().get();
    const int64_t second_end = second_done.get_future().get();
    scheduler.Shutdown();
    if (tight) {
      EXPECT_EQ(scheduler.Stats().preemptions, 0u) << "preempted although the deadline left no room";
      EXPECT_LT(first_end, second_end);
    } else {
      EXPECT_EQ(scheduler.Stats().preemptions, 1u);
      EXPECT_GT(first_end, second_end);
    }
  }
}

// Runs `a_runs` 1 ms requests of tenant a and `b_runs` of b, queued
// alternately, at a standing fake clock: each is charged its predicted
// 1 ms, so a tenant's recent lane share (tau 1 s) becomes runs / 1000.
void UseLaneShares(FairScheduler& scheduler, const ModelCache::ModelPtr& model, int a_runs, int b_runs) {
  for (int i = 0; i < std::max(a_runs, b_runs); ++i) {
    for (const auto& [tenant, runs] : {std::pair{"a", a_runs}, std::pair{"b", b_runs}}) {
      if (i < runs) {
        ASSERT_TRUE(scheduler.Submit(Request(tenant, model, 1), [](Outputs) {}).ok());
      }
    }
  }
  scheduler.Resume();
  while (scheduler.completed() < static_cast<uint64_t>(a_runs + b_runs)) std::this_thread::yield();
  scheduler.Pause();
}

// Heavy tenant a holds two requests admitted at the edge of their deadlines
// (latest starts in 0.5 and 1.9 ms); b's request is the fair pick. Each run
// takes 1 ms (the callbacks move the clock). Returns the order of the
// callbacks: a tenant's letter for an answer, upper case for a drop.
std::string AtRiskOrder(double light_share_fraction, int a_runs, int b_runs, SchedulerStats* stats) {
  FakeClock clock;
  FairScheduler scheduler(FairSchedulerOptions{.lanes = 1, .clock = &clock, .start_paused = true,
                                               .max_batch = 1, .light_share_fraction = light_share_fraction,
                                               .affinity_window_ns = 0, .admission_wait_slack = 0});
  scheduler.Calibrate("relu", 1, 1 * kMs);
  auto model = ReluModel();
  UseLaneShares(scheduler, model, a_runs, b_runs);  // a has run more: b is the fair pick
  std::mutex mu;
  std::string order;
  auto record = [&](char tenant) {
    return [&, tenant](Outputs r) {
      std::lock_guard<std::mutex> lock(mu);
      order += r.ok() ? tenant : static_cast<char>(tenant - 'a' + 'A');
      if (r.ok()) clock.AdvanceNs(1 * kMs);
    };
  };
  const int64_t t0 = clock.NowNs();
  EXPECT_TRUE(scheduler.Submit(Request("a", model, 1, t0 + 1500'000), record('a')).ok());
  EXPECT_TRUE(scheduler.Submit(Request("a", model, 1, t0 + 2900'000), record('a')).ok());
  EXPECT_TRUE(scheduler.Submit(Request("b", model, 1, t0 + 100 * kMs), record('b')).ok());
  scheduler.Resume();
  scheduler.Shutdown();
  *stats = scheduler.Stats();
  return order;
}

// a took 60% of the lane in the last second, b nothing: b's request runs
// first, a's first request can then no longer start in time and is dropped
// before running, its second still makes it. Without the rule a's at-risk
// requests both go first and b waits 2 ms.
TEST(FairSchedulerTest, ALightTenantIsNotKeptWaitingForAHeavyTenantsAtRiskRequests) {
  SchedulerStats st;
  EXPECT_EQ(AtRiskOrder(0.5, 600, 0, &st), "bAa");
  ASSERT_EQ(st.tenants.size(), 2u);
  EXPECT_EQ(st.tenants[0].tenant, "a");
  EXPECT_EQ(st.tenants[0].dropped, 1u) << "the heavy tenant's now-infeasible request";
  EXPECT_EQ(st.tenants[1].dropped, 0u);
  EXPECT_EQ(st.tenants[1].completed, 1u);
  EXPECT_EQ(AtRiskOrder(0, 600, 0, &st), "aab") << "light_share_fraction 0: deadline-at-risk order";
  EXPECT_EQ(st.tenants[0].dropped, 0u);
}

// b's two requests arrive together while a, which took 60% of the lane in
// the last second, has two queued. Fair order alone serves b a b a (b's
// second starts in virtual time where a's next does; ties by name); b is
// far under its share and a over, so both of b's go first.
TEST(FairSchedulerTest, ALightTenantsQueuedRequestsGoBeforeAHeavyTenants) {
  for (double fraction : {0.5, 0.0}) {
    FakeClock clock;
    FairScheduler scheduler(FairSchedulerOptions{.lanes = 1, .clock = &clock, .start_paused = true,
                                                 .max_batch = 1, .light_share_fraction = fraction,
                                                 .affinity_window_ns = 0});
    scheduler.Calibrate("relu", 1, 1 * kMs);
    auto model = ReluModel();
    UseLaneShares(scheduler, model, 600, 0);
    FinishOrder finished;
    const std::string& order = finished.order;
    for (const char* t : {"a", "a", "b", "b"}) {
      ASSERT_TRUE(scheduler.Submit(Request(t, model, 1), finished.Note(t)).ok());
    }
    scheduler.Resume();
    scheduler.Shutdown();
    EXPECT_EQ(order, fraction > 0 ? "bbaa" : "baba") << "light_share_fraction " << fraction;
  }
}

// Between layers: b's request preempts a's running chain although fair
// order puts it later (b's one earlier request was charged 100 ms of
// virtual time, a's run starts 1 ms after the virtual time), because b used
// 10% of the lane in the last second and a 60%.
TEST(FairSchedulerTest, ALightTenantsRequestPreemptsAHeavyTenantsRunOutOfFairOrder) {
  constexpr int64_t kWidth = 1 << 19;
  auto chain = ChainModel(60);
  Tensor big(DType::kFloat32, {1, kWidth});
  for (int64_t i = 0; i < kWidth; ++i) big.data<float>()[i] = static_cast<float>(i % 5) - 2;
  auto model = ReluModel();
  for (double fraction : {0.75, 0.0}) {
    FakeClock clock;  // shares and virtual times from predictions; the chain's run takes real time
    std::promise<int64_t> long_done, short_done;
    std::atomic<FairScheduler*> lane_sees{nullptr};
    // b's request arrives on the lane after the chain's first layer, so it
    // is queued at a preemption point whatever the test thread's luck.
    auto submit_b = [&](const std::string& model_id, size_t steps_done) {
      FairScheduler* scheduler = lane_sees.load();
      if (scheduler == nullptr || model_id != "chain" || steps_done != 1) return;
      EXPECT_TRUE(scheduler->Submit(Request("b", model, 1), [&](Outputs) {
        short_done.set_value(SteadyClock::Get()->NowNs());
      }).ok());
    };
    FairScheduler scheduler(FairSchedulerOptions{.lanes = 1, .clock = &clock, .start_paused = true,
                                                 .light_share_fraction = fraction,
                                                 .after_step_for_test = submit_b});
    scheduler.Calibrate("relu", 1, 1 * kMs);
    scheduler.Calibrate("slow", 1, 100 * kMs);
    scheduler.Calibrate("chain", 1, 1 * kMs);
    UseLaneShares(scheduler, model, 600, 0);
    InferenceRequest slow = Request("b", model, 1);
    slow.model_id = "slow";
    std::promise<void> slow_done;
    ASSERT_TRUE(scheduler.Submit(std::move(slow), [&](Outputs) { slow_done.set_value(); }).ok());
    scheduler.Resume();
    slow_done.get_future().get();
    lane_sees = &scheduler;
    InferenceRequest r{"a", chain, {NamedTensor{"x", big}}};
    r.model_id = "chain";
    ASSERT_TRUE(scheduler.Submit(std::move(r), [&](Outputs) { long_done.set_value(SteadyClock::Get()->NowNs()); }).ok());
    const int64_t short_end = short_done.get_future().get();
    const int64_t long_end = long_done.get_future().get();
    scheduler.Shutdown();
    if (fraction > 0) {
      EXPECT_LT(short_end, long_end) << "the light tenant waited for the heavy tenant's whole run";
      EXPECT_EQ(scheduler.Stats().preemptions, 1u);
    } else {
      EXPECT_GT(short_end, long_end) << "fair order alone puts b's request after a's run";
      EXPECT_EQ(scheduler.Stats().preemptions, 0u);
    }
  }
}

// Two backlogged tenants near their equal shares (45% and 44.9%): neither is
// light nor heavy, so a's at-risk requests still go before b's fair pick
// and nothing is dropped.
TEST(FairSchedulerTest, TenantsNearTheirSharesKeepDeadlineAtRiskOrder) {
  SchedulerStats st;
  EXPECT_EQ(AtRiskOrder(0.5, 450, 449, &st), "aab");
  ASSERT_EQ(st.tenants.size(), 2u);
  EXPECT_EQ(st.tenants[0].dropped, 0u);
  EXPECT_EQ(st.tenants[1].dropped, 0u);
}

}  // namespace
}  // namespace orrery

namespace orrery {
namespace {

// Many submitters, several lanes, a mix of deadlines (some impossible): every
// admitted request gets exactly one callback and the counters add up.
TEST(FairSchedulerTest, ConcurrentSubmittersEveryAdmittedRequestCompletesOnce) {
  FairScheduler scheduler(FairSchedulerOptions{.lanes = 3});
  scheduler.SetTenantPolicy("t1", TenantPolicy{.weight = 1, .max_in_flight = 16});
  auto model = ReluModel();
  constexpr int kThreads = 4, kPerThread = 300;
  std::atomic<int> callbacks{0}, ok{0}, deadline{0}, rejected{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        const std::string tenant = std::vector<std::string>{"t0", "t1", "t2", "t3"}[t];
        // Every 5th has a deadline already in the past, every 7th a tight one.
        int64_t dl = i % 5 == 0 ? scheduler.NowNs() - 1 : i % 7 == 0 ? scheduler.NowNs() + 50'000 : 0;
        Status s = scheduler.Submit(Request(tenant, model, 1, dl), [&](Outputs r) {
          ++callbacks;
          if (r.ok()) ++ok;
          if (r.status().code() == StatusCode::kDeadlineExceeded) ++deadline;
        });
        if (!s.ok()) {
          EXPECT_TRUE(s.code() == StatusCode::kDeadlineExceeded || s.code() == StatusCode::kResourceExhausted)
              << s.ToString();
          ++rejected;
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  scheduler.Shutdown();
  EXPECT_EQ(callbacks.load() + rejected.load(), kThreads * kPerThread);
  EXPECT_EQ(callbacks.load(), ok.load() + deadline.load());
  EXPECT_GE(rejected.load(), kPerThread / 5);  // the past deadlines at least (once the model is measured)
  SchedulerStats st = scheduler.Stats();
  uint64_t admitted = 0, completed = 0, dropped = 0, rejections = 0;
  for (const auto& t : st.tenants) {
    EXPECT_EQ(t.in_flight, 0) << t.tenant;
    EXPECT_EQ(t.queued, 0u) << t.tenant;
    admitted += t.admitted;
    completed += t.completed;
    dropped += t.dropped;
    rejections += t.rejected_deadline + t.rejected_in_flight;
  }
  EXPECT_EQ(admitted, completed + dropped);
  EXPECT_EQ(rejections, static_cast<uint64_t>(rejected.load()));
  EXPECT_EQ(completed, static_cast<uint64_t>(ok.load()));
}

// Real clock, one lane, three backlogged tenants with weights 1:2:4 and
// backlogs of 100:200:400 requests of the same (measured) model: while all
// three are backlogged they are served in proportion to their weights.
TEST(FairSchedulerTest, BackloggedTenantsAreServedByWeight) {
  FairScheduler scheduler(FairSchedulerOptions{.lanes = 1});
  auto model = ChainModel(4);
  Tensor x(DType::kFloat32, {1, 1 << 15});
  for (int64_t i = 0; i < x.num_elements(); ++i) x.data<float>()[i] = 1.0f;
  auto request = [&](const std::string& tenant) {
    InferenceRequest r{tenant, model, {NamedTensor{"x", x}}};
    r.model_id = "chain4";
    return r;
  };
  for (int i = 0; i < 5; ++i) {  // measure the model first
    std::promise<void> p;
    ASSERT_TRUE(scheduler.Submit(request("warmup"), [&](Outputs) { p.set_value(); }).ok());
    p.get_future().get();
  }
  scheduler.Pause();
  const std::map<std::string, double> weights = {{"w1", 1}, {"w2", 2}, {"w4", 4}};
  std::mutex mu;
  std::map<std::string, int> served;  // while all three were backlogged
  std::map<std::string, int> left;
  bool all_backlogged = true;
  for (const auto& [t, w] : weights) {
    scheduler.SetTenantPolicy(t, TenantPolicy{.weight = w});
    left[t] = static_cast<int>(100 * w);
  }
  for (int i = 0; i < 400; ++i) {
    for (const auto& [t, w] : weights) {
      if (i >= 100 * w) continue;
      std::string tenant = t;
      ASSERT_TRUE(scheduler.Submit(request(t), [&, tenant](Outputs out) {
        EXPECT_TRUE(out.ok());
        std::lock_guard<std::mutex> lock(mu);
        if (all_backlogged) ++served[tenant];
        if (--left[tenant] == 0) all_backlogged = false;
      }).ok());
    }
  }
  scheduler.Resume();
  scheduler.Shutdown();
  const double total = served["w1"] + served["w2"] + served["w4"];
  std::printf("served while all backlogged: w1 %d, w2 %d, w4 %d (of %g)\n", served["w1"], served["w2"],
              served["w4"], total);
  for (const ModelCostStats& m : scheduler.Stats().models) {
    std::printf("model %s: estimate %lld ns, |predicted - measured| / measured p50 %.3f p99 %.3f max %.3f over %zu runs\n",
                m.model_id.c_str(), static_cast<long long>(m.estimate_ns.at(1)), m.error_p50, m.error_p99,
                m.error_max, m.window);
  }
  EXPECT_GT(total, 600);  // the backlogs drain together
  for (const auto& [t, w] : weights) {
    EXPECT_NEAR(served[t] / total / (w / 7.0), 1.0, 0.10) << t;
  }
}

}  // namespace
}  // namespace orrery

namespace orrery {
namespace {

void WaitCompleted(const FairScheduler& scheduler, uint64_t n) {
  for (int i = 0; i < 5000 && scheduler.completed() < n; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_EQ(scheduler.completed(), n);
}

InferenceRequest RequestFor(const std::string& tenant, const std::string& model_id, ModelCache::ModelPtr model,
                            int64_t deadline_ns = 0) {
  InferenceRequest r = Request(tenant, std::move(model), 1, deadline_ns);
  r.model_id = model_id;
  return r;
}

// Waits that run longer than predicted (here: the clock moves on while the
// lane is paused) teach admission a larger wait slack, so that a request it
// would have admitted with the default 10% is told at once it cannot make it.
TEST(FairSchedulerTest, WaitSlackIsLearnedFromWaitsThatRanLong) {
  FakeClock clock;
  FairScheduler scheduler(FairSchedulerOptions{.lanes = 1, .clock = &clock, .start_paused = true, .affinity_window_ns = 0,
                                               .admission_wait_slack = 0.1, .wait_slack_min_samples = 20,
                                               .wait_slack_max = 1.0});
  scheduler.Calibrate("relu", 1, 1 * kMs);
  auto model = ReluModel();
  EXPECT_DOUBLE_EQ(scheduler.Stats().admission_wait_slack, 0.1);
  // 25 queued: the k-th is predicted to wait k ms; all of them wait 40 ms.
  for (int i = 0; i < 25; ++i) {
    ASSERT_TRUE(scheduler.Submit(Request("t", model, 1, clock.NowNs() + 500 * kMs), [](Outputs) {}).ok());
  }
  clock.AdvanceNs(40 * kMs);
  scheduler.Resume();
  WaitCompleted(scheduler, 25);
  // 24 samples (the first predicted no wait), every one at least 60% over:
  // the 99th percentile is clamped to wait_slack_max.
  EXPECT_DOUBLE_EQ(scheduler.Stats().admission_wait_slack, 1.0);
  scheduler.Pause();
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(scheduler.Submit(Request("t", model, 1, clock.NowNs() + 500 * kMs), [](Outputs) {}).ok());
  }
  // 5 ms ahead, planned as 10 ms, + 1 ms own: 8 ms is too short (with the
  // default slack it would have fit: 5.5 + 1 ms).
  Status s = scheduler.Submit(Request("t", model, 1, clock.NowNs() + 8 * kMs), [](Outputs) {});
  EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(s.message().find("waiting 10.000 ms"), std::string::npos) << s.message();
  EXPECT_TRUE(scheduler.Submit(Request("t", model, 1, clock.NowNs() + 11 * kMs), [](Outputs) {}).ok());
  scheduler.Resume();
  scheduler.Shutdown();
}

// A clock for lanes whose steps take time: every read moves it `tick` on
// (the lane's reads around a step: that step measured `tick`). The test
// thread reads nothing while the lane runs, so the sequence of reads, and
// every time seen, is the same in every run.
class TickingClock final : public Clock {
 public:
  int64_t NowNs() const override {
    const int64_t tick = tick_.load(std::memory_order_acquire);
    return now_.fetch_add(tick, std::memory_order_acq_rel) + tick;
  }
  void SetTick(int64_t ns) { tick_.store(ns, std::memory_order_release); }
  void AdvanceNs(int64_t ns) { now_.fetch_add(ns, std::memory_order_acq_rel); }

 private:
  mutable std::atomic<int64_t> now_{1'000'000'000};
  std::atomic<int64_t> tick_{0};
};

// In a stall spell every layer runs twice as long as predicted. With the
// recent-speed window on, admission plans the next request's run at that
// speed (a 1 ms request does not fit 1.5 ms), until the spell's steps leave
// the window; off, only the model's long-run bound (1: no history) counts.
TEST(FairSchedulerTest, AdmissionPlansWithTheLanesRecentSpeed) {
  auto chain = ChainModel(4);
  auto relu = ReluModel();
  for (int64_t window : {int64_t{100 * kMs}, int64_t{0}}) {
    TickingClock clock;
    FairScheduler scheduler(FairSchedulerOptions{.lanes = 1, .clock = &clock, .max_batch = 1,
                                                 .affinity_window_ns = 0, .admission_wait_slack = 0,
                                                 .recent_speed_window_ns = window,
                                                 .recent_speed_min_predicted_ns = 2 * kMs});
    scheduler.Calibrate("chain", 1, 4 * kMs);  // 1 ms per layer predicted
    scheduler.Calibrate("relu", 1, 1 * kMs);
    InferenceRequest slow = Request("t", chain, 1);
    slow.model_id = "chain";
    std::promise<void> ran;
    clock.SetTick(2 * kMs);  // each layer measures 2 ms
    ASSERT_TRUE(scheduler.Submit(std::move(slow), [&](Outputs r) {
      EXPECT_TRUE(r.ok());
      ran.set_value();
    }).ok());
    ran.get_future().get();
    clock.SetTick(0);
    const Status s = scheduler.Submit(Request("u", relu, 1, clock.NowNs() + 1500'000), [](Outputs) {});
    if (window > 0) {
      EXPECT_NEAR(scheduler.Stats().recent_speed, 2.0, 1e-9);
      EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded);
      EXPECT_NE(s.message().find("then running 2.000 ms"), std::string::npos) << s.message();
      // The spell's steps leave the window: planned at the prediction again.
      clock.AdvanceNs(window);
      std::promise<void> done;
      EXPECT_TRUE(scheduler.Submit(Request("u", relu, 1, clock.NowNs() + 1500'000), [&](Outputs) {
        done.set_value();
      }).ok());
      done.get_future().get();
    } else {
      EXPECT_DOUBLE_EQ(scheduler.Stats().recent_speed, 1.0);
      EXPECT_TRUE(s.ok()) << s.message();
    }
    scheduler.Shutdown();
  }
}

// This VM runs in spells (every layer 1.5-1.8x slower for tens of runs),
// which a lane sees in its runs of any model. After a run of one model at
// 2x its estimate, the lane predicts another model's next run at its
// speed, 1 + 0.5 x (2 - 1) = 1.5x that model's estimate (what the
// RunReport shows and the error statistics compare); with the speed off,
// at the estimate. Admission and the charges keep the estimate.
TEST(FairSchedulerTest, ALanePredictsTheNextRunWithItsRecentSpeed) {
  auto chain = ChainModel(4);
  auto relu = ReluModel();
  for (double alpha : {0.5, 0.0}) {
    TickingClock clock;
    FairScheduler scheduler(FairSchedulerOptions{.lanes = 1, .clock = &clock, .max_batch = 1,
                                                 .affinity_window_ns = 0, .lane_speed_alpha = alpha});
    scheduler.Calibrate("chain", 1, 4 * kMs);  // 1 ms per layer predicted
    scheduler.Calibrate("relu", 1, 1 * kMs);
    auto run = [&](InferenceRequest request, int64_t tick) {
      RunReport report;
      request.report = &report;
      std::promise<void> ran;
      clock.SetTick(tick);
      EXPECT_TRUE(scheduler.Submit(std::move(request), [&](Outputs r) {
        EXPECT_TRUE(r.ok());
        ran.set_value();
      }).ok());
      ran.get_future().get();
      clock.SetTick(0);
      return report;
    };
    InferenceRequest slow = Request("t", chain, 1);
    slow.model_id = "chain";
    const RunReport first = run(std::move(slow), 2 * kMs);  // each layer measures 2 ms
    EXPECT_EQ(first.lane_ns, 8 * kMs);
    EXPECT_EQ(first.predicted_lane_ns, 4 * kMs);  // a new lane's speed is 1
    const RunReport next = run(Request("u", relu, 1), 1500'000);
    EXPECT_EQ(next.lane_ns, 1500'000);
    EXPECT_EQ(next.predicted_lane_ns, alpha > 0 ? 1500'000 : 1 * kMs);
    // Admission still plans relu at its estimate, 1 ms (the estimate moved
    // by the EWMA to 1.1 ms; the slowdown bound is 1 without history).
    const Status s = scheduler.Submit(Request("u", relu, 1, clock.NowNs() + 5 * kMs), [](Outputs) {});
    EXPECT_TRUE(s.ok()) << s.message();
    scheduler.Shutdown();
    const SchedulerStats stats = scheduler.Stats();
    auto relu_stats = std::find_if(stats.models.begin(), stats.models.end(),
                                   [](const ModelCostStats& m) { return m.model_id == "relu"; });
    ASSERT_NE(relu_stats, stats.models.end());
    EXPECT_NEAR(relu_stats->error_max, alpha > 0 ? 0.0 : 1.0 / 3, 1e-9);
  }
}

// Admission plans a request at its slowdown (here the lanes' recent speed,
// 2x: a 1 ms request is planned at 2 ms), but a queued request past that
// latest start can still make its deadline at its predicted cost. With
// drop_at_predicted_cost it is kept and runs first (in time); without, it
// is dropped, an admitted miss (scenario 5: "planned completion in 7.7 ms
// if started now, deadline in 7.6 ms" for a 2.5 ms run).
TEST(FairSchedulerTest, ARequestPastItsPlannedStartRunsIfItsPredictedCostStillFits) {
  auto chain = ChainModel(4);
  auto relu = ReluModel();
  for (bool at_predicted : {true, false}) {
    TickingClock clock;
    FairScheduler scheduler(FairSchedulerOptions{.lanes = 1, .clock = &clock, .max_batch = 1,
                                                 .affinity_window_ns = 0, .admission_wait_slack = 0,
                                                 .recent_speed_window_ns = 100 * kMs,
                                                 .recent_speed_min_predicted_ns = 2 * kMs,
                                                 .drop_at_predicted_cost = at_predicted});
    scheduler.Calibrate("chain", 1, 4 * kMs);
    scheduler.Calibrate("relu", 1, 1 * kMs);
    InferenceRequest slow = Request("t", chain, 1);
    slow.model_id = "chain";
    std::promise<void> ran;
    clock.SetTick(2 * kMs);  // each layer measures 2 ms: recent speed 2
    ASSERT_TRUE(scheduler.Submit(std::move(slow), [&](Outputs) { ran.set_value(); }).ok());
    ran.get_future().get();
    clock.SetTick(0);
    scheduler.Pause();
    std::promise<Status> ended;
    // Planned 2 ms: latest start +0.5 ms; predicted 1 ms: in time until +1.5 ms.
    ASSERT_TRUE(scheduler.Submit(Request("u", relu, 1, clock.NowNs() + 2500'000),
                                 [&](Outputs r) { ended.set_value(r.status()); }).ok());
    clock.AdvanceNs(1 * kMs);  // the lane comes back 1 ms later
    scheduler.Resume();
    const Status s = ended.get_future().get();
    if (at_predicted) {
      EXPECT_TRUE(s.ok()) << s.message();
    } else {
      EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded);
      EXPECT_NE(s.message().find("dropped before running"), std::string::npos) << s.message();
    }
    scheduler.Shutdown();
    EXPECT_EQ(scheduler.Stats().tenants.at(1).dropped, at_predicted ? 0u : 1u);
  }
}

// A long run (a_slow, 40 ms predicted over 4 layers) is parked for another
// tenant's request (b_mid) that fair order puts first; that one takes 20 ms
// (its callback moves the clock). c_fast's request, due 45 ms after the
// start, was not at risk behind the long run's 30 ms left when b_mid went
// first; behind b_mid's 20 ms and the same 30 ms it is. With
// at_risk_plans_stack the lane looks at the queue before it resumes the
// parked run and runs c_fast first; without, the long run resumes (its
// remaining 30 ms: its callback moves the clock) and c_fast is dropped
// before running.
TEST(FairSchedulerTest, AnAtRiskRequestRunsBeforeAParkedRunResumes) {
  auto chain = ChainModel(4);
  auto relu = ReluModel();
  for (bool plan_stack : {true, false}) {
    FakeClock clock;
    FairScheduler scheduler(FairSchedulerOptions{.lanes = 1, .clock = &clock, .start_paused = true, .max_batch = 1,
                                                 .affinity_window_ns = 0, .admission_wait_slack = 0,
                                                 .at_risk_plans_stack = plan_stack});
    scheduler.Calibrate("chain", 1, 40 * kMs);
    scheduler.Calibrate("relu", 1, 1 * kMs);
    std::mutex mu;
    std::string order;  // a tenant's letter per answer, upper case for a drop
    auto record = [&](char letter, int64_t takes_ns) {
      return [&, letter, takes_ns](Outputs r) {
        std::lock_guard<std::mutex> lock(mu);
        order += r.ok() ? letter : static_cast<char>(letter - 'a' + 'A');
        if (r.ok()) clock.AdvanceNs(takes_ns);
      };
    };
    const int64_t t0 = clock.NowNs();
    InferenceRequest slow = Request("a_slow", chain, 1, t0 + 1000 * kMs);
    slow.model_id = "chain";
    ASSERT_TRUE(scheduler.Submit(std::move(slow), record('a', 30 * kMs)).ok());
    ASSERT_TRUE(scheduler.Submit(Request("b_mid", relu, 1), record('b', 20 * kMs)).ok());
    ASSERT_TRUE(scheduler.Submit(Request("c_fast", relu, 1, t0 + 45 * kMs), record('c', 0)).ok());
    scheduler.Resume();
    scheduler.Shutdown();
    if (plan_stack) {
      EXPECT_EQ(order, "bca");
      EXPECT_EQ(scheduler.Stats().preemptions, 2u);
    } else {
      EXPECT_EQ(order, "baC");
      EXPECT_EQ(scheduler.Stats().preemptions, 1u);
    }
  }
}

// The deadline margin: admission plans to finish a share of the time left
// early (for the answer's way back), at least deadline_margin_min_ns.
TEST(FairSchedulerTest, AdmissionLeavesTheDeadlineMarginForTheWayBack) {
  FakeClock clock;
  FairScheduler scheduler(FairSchedulerOptions{.lanes = 1, .clock = &clock, .start_paused = true,
                                               .admission_wait_slack = 0, .deadline_margin_fraction = 0.1,
                                               .deadline_margin_min_ns = kMs / 2, .deadline_margin_max_ns = 5 * kMs});
  scheduler.Calibrate("relu", 1, 1 * kMs);
  auto model = ReluModel();
  // 1 ms of work fits 1.4 ms, but not with the 0.5 ms minimum margin.
  EXPECT_EQ(scheduler.Submit(Request("t", model, 1, clock.NowNs() + 1400'000), [](Outputs) {}).code(),
            StatusCode::kDeadlineExceeded);
  for (int i = 0; i < 8; ++i) {
    ASSERT_TRUE(scheduler.Submit(Request("t", model, 1, clock.NowNs() + 500 * kMs), [](Outputs) {}).ok());
  }
  // Done in 9 ms: 9.5 ms leaves 0.95 ms of margin, too little; 10 ms leaves 1.
  EXPECT_EQ(scheduler.Submit(Request("t", model, 1, clock.NowNs() + 9500'000), [](Outputs) {}).code(),
            StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(scheduler.Submit(Request("t", model, 1, clock.NowNs() + 10 * kMs), [](Outputs) {}).ok());
  scheduler.Resume();
  scheduler.Shutdown();
}

// Scenario 5's drops, in small: a 10 ms request planned at 8.8 ms (its
// model's 2.5 ms at a slowdown bound of 3, plus answering) on an idle lane.
// With orreryd's old margin floor, 0.5 ms (5% of 10 ms is less), it was
// admitted with 0.7 ms to spare before its latest start; the lane, busy
// for 1 ms more (answering the previous request, a wake-up), came back
// after it and dropped it: an admitted miss. With the 1.5 ms floor
// (orreryd --deadline-margin-min-ms, default 1.5) it is refused at once.
TEST(FairSchedulerTest, TheMarginFloorRefusesTightDeadlinesAdmittedWithNoStartSlack) {
  for (int64_t floor : {kMs / 2, 3 * kMs / 2}) {
    FakeClock clock;
    FairScheduler scheduler(FairSchedulerOptions{.lanes = 1, .clock = &clock, .start_paused = true,
                                                 .admission_wait_slack = 0, .deadline_margin_fraction = 0.05,
                                                 .deadline_margin_min_ns = floor, .deadline_margin_max_ns = 5 * kMs});
    scheduler.Calibrate("relu", 1, 8800 * kMs / 1000);
    auto model = ReluModel();
    std::promise<Status> ended;
    const Status admitted = scheduler.Submit(Request("fast", model, 1, clock.NowNs() + 10 * kMs),
                                             [&](Outputs r) { ended.set_value(r.status()); });
    if (floor == kMs / 2) {
      ASSERT_TRUE(admitted.ok()) << admitted.message();
      clock.AdvanceNs(1 * kMs);  // the lane starts it 1 ms late: past its latest start
      scheduler.Resume();
      const Status s = ended.get_future().get();
      EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded);
      EXPECT_NE(s.message().find("dropped before running"), std::string::npos) << s.message();
    } else {
      EXPECT_EQ(admitted.code(), StatusCode::kDeadlineExceeded);
      EXPECT_NE(admitted.message().find("predicted completion"), std::string::npos) << admitted.message();
      scheduler.Resume();
    }
    scheduler.Shutdown();
    const SchedulerStats st = scheduler.Stats();
    ASSERT_EQ(st.tenants.size(), 1u);
    EXPECT_EQ(st.tenants[0].dropped, floor == kMs / 2 ? 1u : 0u);
    EXPECT_EQ(st.tenants[0].rejected_deadline, floor == kMs / 2 ? 0u : 1u);
  }
}

// With cache affinity a lane keeps running the model it just ran while that
// tenant is within the window of its fair share, instead of alternating.
TEST(FairSchedulerTest, CacheAffinityRunsTheWarmModelWithinTheWindow) {
  for (int64_t window : {int64_t{0}, 2 * kMs}) {
    FakeClock clock;  // measured time is 0: every charge is the predicted 1 ms
    FairScheduler scheduler(
        FairSchedulerOptions{.lanes = 1, .clock = &clock, .start_paused = true, .affinity_window_ns = window});
    scheduler.Calibrate("a/relu", 1, 1 * kMs);
    scheduler.Calibrate("b/relu", 1, 1 * kMs);
    auto model = ReluModel();
    FinishOrder finished;
    const std::string& order = finished.order;
    for (int i = 0; i < 4; ++i) {
      for (const char* t : {"a", "b"}) {
        ASSERT_TRUE(scheduler.Submit(RequestFor(t, std::string(t) + "/relu", model), finished.Note(t)).ok());
      }
    }
    scheduler.Resume();
    scheduler.Shutdown();
    if (window == 0) {
      EXPECT_EQ(order, "abababab");
      EXPECT_EQ(scheduler.Stats().affinity_dispatches, 0u);
    } else {
      // a runs while its start is within 2 ms of b's (0, 1, 2), then b
      // likewise (0..2 while a waits at 3); a's last request alone is not
      // passed over (only a backlogged tenant is), so b's last waits.
      EXPECT_EQ(order, "aaabbbab");
      EXPECT_EQ(scheduler.Stats().affinity_dispatches, 2u);
    }
  }
}

// Affinity never makes a queued request miss its latest start: the warm
// model's run (3 ms) would push another tenant's request (latest start in
// 2 ms) too late, so that one runs first. (b has two queued: affinity only
// ever passes over a backlogged tenant.)
TEST(FairSchedulerTest, CacheAffinityNeverPutsAQueuedDeadlineAtRisk) {
  for (int64_t b_deadline : {3 * kMs, 100 * kMs}) {
    FakeClock clock;
    FairScheduler scheduler(FairSchedulerOptions{.lanes = 1, .clock = &clock, .start_paused = true,
                                                 .affinity_window_ns = 4 * kMs, .admission_wait_slack = 0});
    scheduler.Calibrate("a/big", 1, 3 * kMs);
    scheduler.Calibrate("b/relu", 1, 1 * kMs);
    auto model = ReluModel();
    FinishOrder finished;
    const std::string& order = finished.order;
    ASSERT_TRUE(scheduler.Submit(RequestFor("a", "a/big", model), finished.Note("A")).ok());
    scheduler.Resume();
    WaitCompleted(scheduler, 1);  // the lane now holds a/big warm
    scheduler.Pause();
    ASSERT_TRUE(scheduler.Submit(RequestFor("a", "a/big", model), finished.Note("a")).ok());
    ASSERT_TRUE(
        scheduler.Submit(RequestFor("b", "b/relu", model, clock.NowNs() + b_deadline), finished.Note("b")).ok());
    ASSERT_TRUE(scheduler.Submit(RequestFor("b", "b/relu", model, clock.NowNs() + 100 * kMs), finished.Note("b")).ok());
    scheduler.Resume();
    scheduler.Shutdown();
    // b is the fair pick (a is 3 ms ahead); a is within the 4 ms window.
    EXPECT_EQ(order, b_deadline == 3 * kMs ? "Abba" : "Aabb") << "b's deadline in " << b_deadline / kMs << " ms";
  }
}

// Cache affinity does not put a heavy tenant's warm run before a light
// tenant's fair pick: the lane just ran a's model; b (light) has two
// queued, which would let a's warm run go first.
TEST(FairSchedulerTest, CacheAffinityDoesNotPassOverALightTenant) {
  for (double fraction : {0.75, 0.0}) {
    FakeClock clock;
    FairScheduler scheduler(FairSchedulerOptions{.lanes = 1, .clock = &clock, .start_paused = true,
                                                 .max_batch = 1, .light_share_fraction = fraction});
    scheduler.Calibrate("relu", 1, 1 * kMs);
    scheduler.Calibrate("a/relu", 1, 1 * kMs);
    scheduler.Calibrate("b/relu", 1, 1 * kMs);
    auto model = ReluModel();
    UseLaneShares(scheduler, model, 600, 0);
    std::promise<void> warm;
    ASSERT_TRUE(scheduler.Submit(RequestFor("a", "a/relu", model), [&](Outputs) { warm.set_value(); }).ok());
    scheduler.Resume();
    warm.get_future().get();  // the lane's last model is a's
    scheduler.Pause();
    FinishOrder finished;
    const std::string& order = finished.order;
    for (const char* t : {"a", "b", "b"}) {
      ASSERT_TRUE(scheduler.Submit(RequestFor(t, std::string(t) + "/relu", model), finished.Note(t)).ok());
    }
    scheduler.Resume();
    scheduler.Shutdown();
    EXPECT_EQ(order, fraction > 0 ? "bba" : "abb") << "light_share_fraction " << fraction;
  }
}


// Admission's way back from an over-estimate: answers seen to need 30 ms
// after the lane (a disk stall), a 10 ms estimate, 20 ms deadlines: admission
// alone refuses every request, and since nothing runs nothing corrects it.
// With probes, a request that fits on its predicted cost alone goes in while
// the lanes are idle, at most once per probe interval per model; never
// while anything is queued or running, nor when even its cost does not fit.
TEST(FairSchedulerTest, AnIdleServiceAdmitsAProbePastAnOverEstimate) {
  for (int64_t interval : {50 * kMs, int64_t{0}}) {
    FakeClock clock;
    FairScheduler scheduler(FairSchedulerOptions{.lanes = 1, .clock = &clock, .start_paused = true,
                                                 .admission_wait_slack = 0, .probe_interval_ns = interval});
    scheduler.Calibrate("relu", 1, 10 * kMs);
    for (int i = 0; i < 10; ++i) scheduler.ObserveResponseNs(30 * kMs);
    auto model = ReluModel();
    std::atomic<int> ok{0};
    auto count = [&](Outputs r) { ok += r.ok(); };
    const InferenceRequest probe = Request("t", model, 1, clock.NowNs() + 20 * kMs);
    if (interval == 0) {
      EXPECT_EQ(scheduler.CheckAdmission(probe).code(), StatusCode::kDeadlineExceeded);
      EXPECT_EQ(scheduler.Submit(Request("t", model, 1, clock.NowNs() + 20 * kMs), count).code(),
                StatusCode::kDeadlineExceeded);
      EXPECT_EQ(scheduler.Stats().tenants[0].probes, 0u);
      continue;
    }
    EXPECT_TRUE(scheduler.CheckAdmission(probe).ok()) << "the API's early check lets a probe through";
    ASSERT_TRUE(scheduler.Submit(Request("t", model, 1, clock.NowNs() + 20 * kMs), count).ok());
    // One queued: the lanes are not idle; nor is a probe due for this model.
    EXPECT_EQ(scheduler.Submit(Request("t", model, 1, clock.NowNs() + 20 * kMs), count).code(),
              StatusCode::kDeadlineExceeded);
    scheduler.Resume();
    WaitCompleted(scheduler, 1);
    // Idle again, but the model was admitted less than an interval ago.
    EXPECT_EQ(scheduler.Submit(Request("t", model, 1, clock.NowNs() + 20 * kMs), count).code(),
              StatusCode::kDeadlineExceeded);
    clock.AdvanceNs(interval);
    // Its predicted cost alone (10 ms) does not fit 5 ms: no probe.
    EXPECT_EQ(scheduler.Submit(Request("t", model, 1, clock.NowNs() + 5 * kMs), count).code(),
              StatusCode::kDeadlineExceeded);
    ASSERT_TRUE(scheduler.Submit(Request("t", model, 1, clock.NowNs() + 20 * kMs), count).ok());
    scheduler.Shutdown();
    EXPECT_EQ(ok.load(), 2);
    const SchedulerStats st = scheduler.Stats();
    EXPECT_EQ(st.tenants[0].probes, 2u);
    EXPECT_EQ(st.tenants[0].admitted, 2u);
    EXPECT_EQ(st.tenants[0].rejected_deadline, 3u);
    EXPECT_EQ(st.tenants[0].dropped, 0u) << "a probe is planned at its predicted cost, not dropped at once";
  }
}

// The lanes' time in completion callbacks is counted (a lane in one runs
// nothing): here each callback takes 7 ms on the fake clock.
TEST(FairSchedulerTest, LaneTimeInCallbacksIsCounted) {
  FakeClock clock;
  FairScheduler scheduler(FairSchedulerOptions{.lanes = 1, .clock = &clock, .start_paused = true, .max_batch = 1});
  scheduler.Calibrate("relu", 1, 1 * kMs);
  auto model = ReluModel();
  for (int64_t ms : {7, 3}) {
    ASSERT_TRUE(scheduler.Submit(Request("t", model, 1), [&clock, ms](Outputs) { clock.AdvanceNs(ms * kMs); }).ok());
  }
  scheduler.Resume();
  scheduler.Shutdown();
  const SchedulerStats st = scheduler.Stats();
  EXPECT_EQ(st.lane_callback_ns, 10 * kMs);
  EXPECT_EQ(st.lane_callback_max_ns, 7 * kMs);
  EXPECT_EQ(st.lane_callbacks, 2u);
}

}  // namespace
}  // namespace orrery
