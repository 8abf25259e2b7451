// DeviceLanes and the scheduler's placement on a simulated device, on a
// FakeClock: the device is chosen only when predicted first (transfer and
// device queue included) and by the deadline; a cold model runs on the CPU
// while its weights move; transfers happen when the test lets them (a
// gate), device runs hold the compute slot for the device's predicted time,
// and admission counts both, so an admitted device request ends by its
// deadline.
#include "scheduler/device_lanes.h"

#include <atomic>
#include <future>
#include <mutex>

#include <gtest/gtest.h>

#include "scheduler/scheduler.h"
#include "tests/unit/common/tiny_models.h"

namespace orrery {
namespace {

constexpr int64_t kMs = kNsPerMs;
constexpr int64_t kModelBytes = 10'000'000;  // 10 ms on the 8 Gb/s link
constexpr int64_t kCopyNs = 10 * kMs + 50'000;  // + 50 us latency
const ModelKey kKey{"t", "m", 1};

// Transfers wait for the test: Open() lets every queued one run, each
// moving the fake clock by its simulated duration.
class Gate {
 public:
  void Open() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = true;
    cv_.notify_all();
  }
  void Close() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = false;
  }
  void Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    ++entered_;
    cv_.notify_all();
    cv_.wait(lock, [this] { return open_; });
  }
  // Blocks until `n` transfers in all have reached the gate.
  void AwaitEntered(int n) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return entered_ >= n; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
  int entered_ = 0;
};

ModelCache::ModelPtr CompiledRelu() {
  Result<std::unique_ptr<CompiledModel>> compiled = CompiledModel::Compile(testing::ReluModelBytes());
  return compiled.ok() ? ModelCache::ModelPtr(std::move(compiled).value()) : nullptr;
}

// Tenant "t", cost-model id "relu", x = [-1.5, -0.5, 0.5, 1.5]; `placeable`
// gives it the device cache key kKey.
InferenceRequest ReluRequest(ModelCache::ModelPtr model, int64_t deadline_ns, bool placeable) {
  Tensor x(DType::kFloat32, {1, 4});
  for (int i = 0; i < 4; ++i) x.data<float>()[i] = static_cast<float>(i) - 1.5f;
  InferenceRequest r{"t", std::move(model), {NamedTensor{"x", x}}};
  r.model_id = "relu";
  r.deadline_ns = deadline_ns;
  if (placeable) r.cache_key = kKey;
  return r;
}

struct Rig {
  explicit Rig(int64_t memory = 64 << 20) {
    SimulatedDeviceConfig config{.memory_bytes = memory, .link_gbps = 8, .latency_us = 50};
    device = std::move(SimulatedDevice::Create(config)).value();
    DeviceCacheOptions cache_options;
    cache_options.keepalive = false;
    cache = std::move(DeviceCache::Create(device.get(), cache_options, &clock)).value();
    DeviceLanesOptions options;
    options.clock = &clock;
    options.wait_until = [this](int64_t t) { clock.AdvanceTo(t); };
    options.copy = [this](const TierAction& a) {
      gate.Wait();
      clock.AdvanceNs(device->CopyNs(a.bytes) * copy_slowdown);
      return Status::Ok();
    };
    lanes = std::make_unique<DeviceLanes>(device.get(), cache.get(), options);
  }
  ~Rig() {
    gate.Open();
    lanes->Shutdown();
  }
  FakeClock clock;
  Gate gate;
  int64_t copy_slowdown = 1;  // a measured copy this many times its prediction
  std::unique_ptr<SimulatedDevice> device;
  std::unique_ptr<DeviceCache> cache;
  std::unique_ptr<DeviceLanes> lanes;
};

// 20 ms of CPU work on the scheduler's paused lane: four requests of a
// model calibrated at 5 ms.
void QueueCpuWork(FairScheduler& scheduler, const ModelCache::ModelPtr& model) {
  scheduler.Calibrate("relu", 1, 5 * kMs);
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(scheduler.Submit(ReluRequest(model, 0, false), [](Result<std::vector<NamedTensor>>) {}).ok());
  }
}

// Submits `r` with `report` attached, lets the transfers run (opens the
// gate) and waits for its outputs (or the Submit error).
Result<std::vector<NamedTensor>> SubmitAndWait(FairScheduler& scheduler, Rig& rig, InferenceRequest r,
                                               RunReport* report) {
  r.report = report;
  std::promise<Result<std::vector<NamedTensor>>> done;
  Status submitted =
      scheduler.Submit(std::move(r), [&](Result<std::vector<NamedTensor>> out) { done.set_value(std::move(out)); });
  if (!submitted.ok()) return submitted;
  rig.gate.Open();
  return done.get_future().get();
}

TEST(DeviceLanesTest, IdleLanesKeepTheRequestOnTheCpuWithoutMovingAnything) {
  Rig rig;
  ASSERT_TRUE(rig.cache->Register(kKey, kModelBytes).ok());
  const int64_t now = rig.clock.NowNs();
  DevicePlacement p = rig.lanes->Place(kKey, 5 * kMs, now, now, 0);
  EXPECT_FALSE(p.on_device);
  EXPECT_EQ(p.placement.target, PlacementTarget::kCpu);
  EXPECT_EQ(p.placement.cpu_done_ns, now + 5 * kMs);
  EXPECT_EQ(p.placement.device_done_ns, now + kCopyNs + 5 * kMs);
  // The device would only tie once resident: no pre-warm.
  EXPECT_FALSE(p.prewarmed);
  EXPECT_EQ(p.bytes_transferred, 0);
  EXPECT_EQ(rig.cache->state(kKey), Residency::kAbsent);
  // Unknown CPU cost: nothing to compare, the CPU measures it.
  EXPECT_EQ(rig.lanes->Place(kKey, 0, now + 100 * kMs, now, 0).placement.target, PlacementTarget::kCpu);
}

TEST(DeviceLanesTest, BusyLanesSendItToTheDeviceAfterThePlannedTransfer) {
  Rig rig;
  ASSERT_TRUE(rig.cache->Register(kKey, kModelBytes).ok());
  const int64_t now = rig.clock.NowNs();
  DevicePlacement p = rig.lanes->Place(kKey, 5 * kMs, now + 20 * kMs, now, 0);
  ASSERT_TRUE(p.on_device);
  EXPECT_EQ(p.placement.target, PlacementTarget::kDevice);
  EXPECT_EQ(p.bytes_transferred, kModelBytes);
  EXPECT_EQ(p.predicted.start_ns, now + kCopyNs);  // after the transfer on the link
  EXPECT_EQ(p.predicted.duration_ns(), 5 * kMs);    // speedup 1
  EXPECT_EQ(rig.cache->state(kKey), Residency::kMoving);
  // A second one queues behind it on the device: the device queue is in the prediction.
  DevicePlacement q = rig.lanes->Place(kKey, 5 * kMs, now + 40 * kMs, now, 0);
  ASSERT_TRUE(q.on_device);
  EXPECT_EQ(q.bytes_transferred, 0);  // joined the transfer: billed nothing for it
  EXPECT_EQ(q.predicted.start_ns, p.predicted.end_ns);

  std::promise<DeviceRunInfo> first, second;
  auto work = [](std::promise<DeviceRunInfo>* done) {
    DeviceWork w;
    w.run = [](ops::ThreadGroup*) -> Result<std::vector<NamedTensor>> { return std::vector<NamedTensor>{}; };
    w.done = [done](Result<std::vector<NamedTensor>> out, const DeviceRunInfo& info) {
      EXPECT_TRUE(out.ok());
      done->set_value(info);
    };
    return w;
  };
  ASSERT_TRUE(rig.lanes->Start(p.ticket, work(&first)).ok());
  ASSERT_TRUE(rig.lanes->Start(q.ticket, work(&second)).ok());
  rig.gate.Open();
  const DeviceRunInfo a = first.get_future().get();
  const DeviceRunInfo b = second.get_future().get();
  // The run waited for the transfer and held the device for its predicted time.
  EXPECT_EQ(a.started_ns, now + kCopyNs);
  EXPECT_EQ(a.device_ns, 5 * kMs);
  EXPECT_EQ(b.started_ns, a.ended_ns);
  EXPECT_EQ(b.ended_ns, q.predicted.end_ns);
  EXPECT_EQ(rig.cache->state(kKey), Residency::kResident);
  EXPECT_EQ(rig.cache->Info(kKey)->pins, 0);  // unpinned after each run
  rig.lanes->Shutdown();
  const DeviceLanesStats s = rig.lanes->Stats();
  EXPECT_EQ(s.placed_device, 2u);
  EXPECT_EQ(s.transfers, 1u);
  EXPECT_EQ(s.bytes_transferred, kModelBytes);
  EXPECT_EQ(s.transfer_ns, kCopyNs);
  EXPECT_EQ(s.device_busy_ns, 10 * kMs);
  EXPECT_TRUE(s.device.simulated);
}

TEST(DeviceLanesTest, ColdModelRunsOnTheCpuWhileItsWeightsMove) {
  Rig rig;
  ASSERT_TRUE(rig.cache->Register(kKey, kModelBytes).ok());
  const int64_t now = rig.clock.NowNs();
  // CPU done at +13 ms beats the device's +15.05 ms (transfer first), but
  // once resident the device would take 5 ms: move the weights now.
  DevicePlacement p = rig.lanes->Place(kKey, 5 * kMs, now + 8 * kMs, now, 0);
  EXPECT_FALSE(p.on_device);
  EXPECT_TRUE(p.prewarmed);
  EXPECT_EQ(p.bytes_transferred, kModelBytes);
  EXPECT_EQ(rig.cache->state(kKey), Residency::kMoving);
  EXPECT_EQ(rig.cache->Info(kKey)->pins, 0);  // a pre-warm pins nothing
  // The next one sees the transfer in flight and does not start another.
  DevicePlacement q = rig.lanes->Place(kKey, 5 * kMs, now + 8 * kMs, now, 0);
  EXPECT_FALSE(q.prewarmed);
  EXPECT_EQ(q.bytes_transferred, 0);
  EXPECT_EQ(q.placement.device_ready_ns, now + kCopyNs);
  rig.gate.Open();
  ASSERT_TRUE(rig.lanes->WaitResident(kKey, 10 * kNsPerSec).ok());
  // Resident now: with the lanes busy, the device wins outright.
  DevicePlacement r = rig.lanes->Place(kKey, 5 * kMs, rig.clock.NowNs() + 8 * kMs, rig.clock.NowNs(), 0);
  EXPECT_TRUE(r.on_device);
  EXPECT_EQ(r.predicted.start_ns, rig.clock.NowNs());
  rig.lanes->Abandon(r.ticket);
  EXPECT_EQ(rig.cache->Info(kKey)->pins, 0);
}

TEST(DeviceLanesTest, TheDeviceIsChosenOnlyWhenItMeetsTheDeadline) {
  Rig rig;
  ASSERT_TRUE(rig.cache->Register(kKey, kModelBytes).ok());
  const int64_t now = rig.clock.NowNs();
  // Device predicted at +15.05 ms: a +12 ms deadline keeps it on the CPU
  // (where admission then rejects it) and pins nothing on the device.
  DevicePlacement p = rig.lanes->Place(kKey, 5 * kMs, now + 20 * kMs, now, now + 12 * kMs);
  EXPECT_FALSE(p.on_device);
  EXPECT_EQ(p.placement.target, PlacementTarget::kCpu);
  EXPECT_EQ(rig.cache->Info(kKey)->pins, 0);
  DevicePlacement q = rig.lanes->Place(kKey, 5 * kMs, now + 20 * kMs, now, now + 16 * kMs);
  EXPECT_TRUE(q.on_device);
  rig.lanes->Abandon(q.ticket);
}

TEST(DeviceLanesTest, AModelLargerThanTheDeviceNeverGoesThere) {
  Rig rig(16 << 20);
  EXPECT_EQ(rig.cache->Register(kKey, 20 << 20).code(), StatusCode::kResourceExhausted);
  const int64_t now = rig.clock.NowNs();
  DevicePlacement p = rig.lanes->Place(kKey, 5 * kMs, now + 100 * kMs, now, 0);
  EXPECT_FALSE(p.on_device);
  EXPECT_EQ(p.placement.device_done_ns, INT64_MAX);
  EXPECT_FALSE(p.prewarmed);
}

TEST(DeviceLanesTest, OperatorPinMovesTheWeightsAndKeepsThem) {
  Rig rig;
  ASSERT_TRUE(rig.cache->Register(kKey, kModelBytes).ok());
  rig.gate.Open();
  ASSERT_TRUE(rig.lanes->OperatorPin(kKey, 10 * kNsPerSec).ok());
  EXPECT_EQ(rig.cache->state(kKey), Residency::kResident);
  EXPECT_EQ(rig.cache->Info(kKey)->operator_pins, 1);
  EXPECT_EQ(rig.cache->Evict(kKey).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(rig.lanes->Stats().transfers, 1u);
}

// The scheduler: four requests queued on one paused lane (20 ms of work).
// A request due in 12 ms meets its deadline nowhere and is rejected; one due
// in 16 ms is admitted on the device (transfer 10.05 ms + 5 ms run) and ends
// by its deadline; its RunReport says where it ran.
TEST(DeviceLanesTest, SchedulerAdmitsOnTheDeviceIncludingTheTransfer) {
  Rig rig;
  ASSERT_TRUE(rig.cache->Register(kKey, kModelBytes).ok());
  FairScheduler scheduler(FairSchedulerOptions{
      .lanes = 1, .clock = &rig.clock, .start_paused = true, .device = rig.lanes.get()});
  ModelCache::ModelPtr model = CompiledRelu();
  ASSERT_NE(model, nullptr);
  QueueCpuWork(scheduler, model);
  auto request = [&](int64_t deadline_ns, bool placeable) { return ReluRequest(model, deadline_ns, placeable); };
  const int64_t now = rig.clock.NowNs();
  Status late = scheduler.Submit(request(now + 12 * kMs, true), [](Result<std::vector<NamedTensor>>) {});
  EXPECT_EQ(late.code(), StatusCode::kDeadlineExceeded);
  RunReport report;
  Result<std::vector<NamedTensor>> out = SubmitAndWait(scheduler, rig, request(now + 16 * kMs, true), &report);
  ASSERT_TRUE(out.ok());
  ASSERT_EQ(out->size(), 1u);
  EXPECT_EQ(out->at(0).tensor.data<float>()[0], 0.0f);  // Relu(-1.5)
  EXPECT_EQ(out->at(0).tensor.data<float>()[3], 1.5f);
  EXPECT_TRUE(report.on_device);
  EXPECT_EQ(report.lane_ns, 0);
  EXPECT_EQ(report.device_ns, 5 * kMs);
  EXPECT_LE(report.ended_ns, now + 16 * kMs);
  // The rejected request's placement had started the transfer (a pre-warm);
  // this one joined it.
  EXPECT_EQ(report.bytes_transferred, 0);
  const SchedulerStats st = scheduler.Stats();
  ASSERT_TRUE(st.has_device);
  EXPECT_EQ(st.device.placed_device, 1u);
  ASSERT_EQ(st.tenants.size(), 1u);
  EXPECT_EQ(st.tenants[0].device_runs, 1u);
  EXPECT_EQ(st.tenants[0].rejected_deadline, 1u);
  scheduler.Resume();
  scheduler.Shutdown();
  EXPECT_EQ(scheduler.completed(), 5u);
}

// Device work that records which tenant ran, in order, and when it finished.
struct RunLog {
  std::mutex mu;
  std::vector<std::string> order;
  std::vector<std::promise<DeviceRunInfo>> done{16};
  DeviceWork Work(const std::string& tenant, int i) {
    DeviceWork w;
    w.run = [this, tenant](ops::ThreadGroup*) -> Result<std::vector<NamedTensor>> {
      std::lock_guard<std::mutex> lock(mu);
      order.push_back(tenant);
      return std::vector<NamedTensor>{};
    };
    w.done = [this, i](Result<std::vector<NamedTensor>>, const DeviceRunInfo& info) { done[i].set_value(info); };
    return w;
  }
};

const ModelKey kKeyA{"a", "m", 1};
const ModelKey kKeyB{"b", "m", 1};

// Tenant a's and tenant b's 1 MiB models, both on the device.
void BothResident(Rig& rig) {
  ASSERT_TRUE(rig.cache->Register(kKeyA, 1 << 20).ok());
  ASSERT_TRUE(rig.cache->Register(kKeyB, 1 << 20).ok());
  rig.gate.Open();
  ASSERT_TRUE(rig.lanes->Load(kKeyA, 10 * kNsPerSec).ok());
  ASSERT_TRUE(rig.lanes->Load(kKeyB, 10 * kNsPerSec).ok());
}

// Tenant a has four 5 ms requests queued on the device (virtual starts 0,
// 5, 10, 15 ms) when tenant b places its first ones. Start-time fair
// queuing puts b's first (virtual start 0) right after a's first, not after
// all of a's backlog; with weight 2 b's second (virtual start 2.5 ms) also
// goes before a's second, with weight 1 (5 ms, a tie) after it. The compute
// reservations behind are re-timed, and the device runs in exactly that
// order. Everything is placed before anything starts, so the fake clock
// stands still while deciding.
TEST(DeviceLanesFairTest, AnotherTenantsRequestGoesAheadOfABacklogByVirtualStart) {
  for (const double weight_b : {1.0, 2.0}) {
    SCOPED_TRACE(weight_b);
    Rig rig;
    ASSERT_NO_FATAL_FAILURE(BothResident(rig));
    const int64_t now = rig.clock.NowNs();
    const int64_t cpu_free = now + kNsPerSec;  // busy lanes: the device wins
    std::vector<DevicePlacement> a, b;
    for (int i = 0; i < 4; ++i) a.push_back(rig.lanes->Place(kKeyA, 5 * kMs, cpu_free, now, 0));
    for (int i = 0; i < 2; ++i) b.push_back(rig.lanes->Place(kKeyB, 5 * kMs, cpu_free, now, 0, weight_b));
    for (const DevicePlacement& p : a) ASSERT_TRUE(p.on_device);
    for (const DevicePlacement& p : b) ASSERT_TRUE(p.on_device);
    EXPECT_EQ(a[0].predicted.start_ns, now);
    EXPECT_EQ(b[0].predicted.start_ns, now + 5 * kMs);
    EXPECT_EQ(b[1].predicted.start_ns, now + (weight_b == 2.0 ? 10 : 15) * kMs);
    EXPECT_EQ(rig.lanes->Stats().fair_reordered, 2u);

    RunLog log;
    int i = 0;
    for (const DevicePlacement& p : a) ASSERT_TRUE(rig.lanes->Start(p.ticket, log.Work("a", i++)).ok());
    for (const DevicePlacement& p : b) ASSERT_TRUE(rig.lanes->Start(p.ticket, log.Work("b", i++)).ok());
    std::vector<DeviceRunInfo> runs;
    for (int k = 0; k < i; ++k) runs.push_back(log.done[k].get_future().get());
    const std::vector<std::string> expected = weight_b == 2.0
                                                  ? std::vector<std::string>{"a", "b", "b", "a", "a", "a"}
                                                  : std::vector<std::string>{"a", "b", "a", "b", "a", "a"};
    EXPECT_EQ(log.order, expected);
    // Each ran when its (re-timed) prediction said: b's first at +5 ms, a's
    // last at +25 ms.
    EXPECT_EQ(runs[4].started_ns, now + 5 * kMs);
    EXPECT_EQ(runs[3].ended_ns, now + 30 * kMs);
  }
}

// b's request does not go ahead of a queued request that would then miss
// its deadline: a's second is due exactly at its predicted end, so b's
// request goes behind it (and ahead of a's third and fourth, which have
// none).
TEST(DeviceLanesFairTest, AFairPlacementNeverPushesAQueuedRequestPastItsDeadline) {
  Rig rig;
  ASSERT_NO_FATAL_FAILURE(BothResident(rig));
  const int64_t now = rig.clock.NowNs();
  const int64_t cpu_free = now + kNsPerSec;
  std::vector<DevicePlacement> a;
  for (int i = 0; i < 4; ++i) {
    a.push_back(rig.lanes->Place(kKeyA, 5 * kMs, cpu_free, now, i == 1 ? now + 10 * kMs : 0));
    ASSERT_TRUE(a.back().on_device);
  }
  EXPECT_EQ(a[1].predicted.end_ns, now + 10 * kMs);
  DevicePlacement b = rig.lanes->Place(kKeyB, 5 * kMs, cpu_free, now, 0);
  ASSERT_TRUE(b.on_device);
  EXPECT_EQ(b.predicted.start_ns, now + 10 * kMs);
  RunLog log;
  int i = 0;
  for (const DevicePlacement& p : a) ASSERT_TRUE(rig.lanes->Start(p.ticket, log.Work("a", i++)).ok());
  ASSERT_TRUE(rig.lanes->Start(b.ticket, log.Work("b", i++)).ok());
  std::vector<DeviceRunInfo> runs;
  for (int k = 0; k < i; ++k) runs.push_back(log.done[k].get_future().get());
  EXPECT_EQ(log.order, (std::vector<std::string>{"a", "a", "b", "a", "a"}));
  EXPECT_EQ(runs[1].ended_ns, now + 10 * kMs);  // by its deadline
  EXPECT_EQ(runs[4].started_ns, now + 10 * kMs);
  const DeviceLanesStats s = rig.lanes->Stats();
  EXPECT_EQ(s.late, 0u);
  EXPECT_EQ(s.fair_reordered, 1u);
}

// The device holds one model; both are one tenant's (another tenant's could
// not be displaced past the share). "cold" was loaded and never asked for
// since; "hot" is asked for, the lanes serve it (its transfer would lose)
// but the device would win once it is there: the request counts as demand
// in the device tier, so its pre-warm displaces "cold". (Without that
// demand "hot" would be worth nothing to the device and displace nothing.)
TEST(DeviceLanesTest, DemandServedOnTheCpuLetsAModelDisplaceAColderOneOnTheDevice) {
  Rig rig(12 << 20);  // one 10 MB model in 2 MiB pages
  const ModelKey cold{"t", "cold", 1};
  const ModelKey hot{"t", "hot", 1};
  ASSERT_TRUE(rig.cache->Register(cold, kModelBytes).ok());
  ASSERT_TRUE(rig.cache->Register(hot, kModelBytes).ok());
  rig.gate.Open();
  ASSERT_TRUE(rig.lanes->Load(cold, 10 * kNsPerSec).ok());
  const int64_t now = rig.clock.NowNs();
  DevicePlacement p = rig.lanes->Place(hot, 5 * kMs, now + 8 * kMs, now, 0);
  EXPECT_FALSE(p.on_device);
  EXPECT_TRUE(p.prewarmed);
  EXPECT_EQ(rig.cache->state(cold), Residency::kAbsent);
  ASSERT_TRUE(rig.lanes->WaitResident(hot, 10 * kNsPerSec).ok());
  EXPECT_EQ(rig.cache->Stats().misses, 0u);  // demand, not a request of the tier
}

// A device run while a transfer is on the link: both busy for the run's
// 5 ms (the transfer starts first and ends after it).
TEST(DeviceLanesTest, OverlapCountsTimeTheLinkAndTheDeviceAreBothBusy) {
  Rig rig;
  ASSERT_TRUE(rig.cache->Register(kKeyA, 1 << 20).ok());
  ASSERT_TRUE(rig.cache->Register(kKeyB, kModelBytes).ok());
  rig.gate.Open();
  ASSERT_TRUE(rig.lanes->Load(kKeyA, 10 * kNsPerSec).ok());  // 1 transfer through the gate
  rig.gate.Close();
  const int64_t t0 = rig.clock.NowNs();
  auto load_b = std::async(std::launch::async, [&] { return rig.lanes->Load(kKeyB, 10 * kNsPerSec); });
  rig.gate.AwaitEntered(2);  // b's transfer has started at t0
  DevicePlacement p = rig.lanes->Place(kKeyA, 5 * kMs, t0 + kNsPerSec, t0, 0);
  ASSERT_TRUE(p.on_device);
  RunLog log;
  ASSERT_TRUE(rig.lanes->Start(p.ticket, log.Work("a", 0)).ok());
  const DeviceRunInfo run = log.done[0].get_future().get();
  EXPECT_EQ(run.started_ns, t0);
  EXPECT_EQ(run.ended_ns, t0 + 5 * kMs);
  rig.gate.Open();
  ASSERT_TRUE(load_b.get().ok());
  const DeviceLanesStats s = rig.lanes->Stats();
  EXPECT_EQ(s.transfers, 2u);
  EXPECT_EQ(s.overlap_ns, 5 * kMs);
  EXPECT_EQ(s.device_busy_ns, 5 * kMs);
}

// A planned transfer that takes twice its prediction makes its request late:
// counted as late because of a slow transfer, not an unplanned one (nothing
// else went onto the link).
TEST(DeviceLanesTest, ALateRunIsAttributedToItsSlowPlannedTransfer) {
  Rig rig;
  rig.copy_slowdown = 2;
  ASSERT_TRUE(rig.cache->Register(kKey, kModelBytes).ok());
  const int64_t now = rig.clock.NowNs();
  DevicePlacement p = rig.lanes->Place(kKey, 5 * kMs, now + kNsPerSec, now, now + kCopyNs + 5 * kMs);
  ASSERT_TRUE(p.on_device);
  RunLog log;
  ASSERT_TRUE(rig.lanes->Start(p.ticket, log.Work("t", 0)).ok());
  rig.gate.Open();
  const DeviceRunInfo run = log.done[0].get_future().get();
  EXPECT_EQ(run.started_ns, now + 2 * kCopyNs);
  const DeviceLanesStats s = rig.lanes->Stats();
  EXPECT_EQ(s.late, 1u);
  EXPECT_EQ(s.late_slow_transfer, 1u);
  EXPECT_EQ(s.late_unplanned_transfer, 0u);
  EXPECT_EQ(s.waited_unplanned_transfer, 0u);
}

}  // namespace
}  // namespace orrery

namespace orrery {
namespace {

// A device with an executor (a GPU's, runtime/cuda/cuda_executor.h) runs the
// requests placed on it through the executor, and placement only considers
// the requests the executor supports.
TEST(DeviceLanesTest, DevicePlacedRequestsRunThroughTheDeviceExecutor) {
  Rig rig;
  ASSERT_TRUE(rig.cache->Register(kKey, kModelBytes).ok());
  bool supported = false;
  std::atomic<int> runs{0};
  DeviceExecutor executor;
  executor.supports = [&](const InferenceRequest&) { return supported; };
  executor.run = [&](const InferenceRequest&) -> Result<std::vector<NamedTensor>> {
    ++runs;
    Tensor y(DType::kFloat32, {1});
    y.data<float>()[0] = 42;
    return std::vector<NamedTensor>{NamedTensor{"y", y}};
  };
  FairScheduler scheduler(FairSchedulerOptions{.lanes = 1, .clock = &rig.clock, .start_paused = true,
                                               .device = rig.lanes.get(), .device_executor = executor});
  ModelCache::ModelPtr model = CompiledRelu();
  ASSERT_NE(model, nullptr);
  QueueCpuWork(scheduler, model);
  auto request = [&](int64_t deadline_ns, bool placeable) { return ReluRequest(model, deadline_ns, placeable); };
  const int64_t now = rig.clock.NowNs();
  // Unsupported: only the CPU lanes (20 ms queued) are considered.
  Status s = scheduler.Submit(request(now + 16 * kMs, true), [](Result<std::vector<NamedTensor>>) {});
  EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded) << s.message();
  EXPECT_EQ(scheduler.Stats().device.placed_device + scheduler.Stats().device.placed_cpu, 0u);
  // Supported: placed on the device, run by the executor.
  supported = true;
  RunReport report;
  Result<std::vector<NamedTensor>> out = SubmitAndWait(scheduler, rig, request(now + 16 * kMs, true), &report);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_EQ(out->size(), 1u);
  EXPECT_EQ(out->at(0).tensor.data<float>()[0], 42.0f);
  EXPECT_EQ(runs.load(), 1);
  EXPECT_TRUE(report.on_device);
  scheduler.Resume();
  scheduler.Shutdown();
  EXPECT_EQ(runs.load(), 1);  // the CPU requests ran on the lane
  EXPECT_EQ(scheduler.completed(), 5u);
}

}  // namespace
}  // namespace orrery
