#include "cache/placement.h"

#include <gtest/gtest.h>

namespace orrery {
namespace {

constexpr int64_t kMs = kNsPerMs;

// Base: now = 0, CPU run 30 ms on an idle lane, an idle device at the CPU's speed.
PlacementInput Base() {
  PlacementInput in;
  in.now_ns = 0;
  in.cpu_exec_ns = 30 * kMs;
  in.cpu_lane_free_ns = 0;
  in.device_available = true;
  in.transfer_ns = 10 * kMs;
  in.device_exec_ns = 30 * kMs;
  return in;
}

TEST(PlacementTest, ColdModelOnDiskRunsOnTheCpuUnlessTheDeviceIsMuchFaster) {
  PlacementInput in = Base();
  in.host_state = Residency::kAbsent;
  in.host_ready_ns = 50 * kMs;  // the load
  in.device_state = Residency::kAbsent;
  Placement p = ChoosePlacement(in);
  EXPECT_EQ(p.cpu_done_ns, 80 * kMs);     // load + run
  EXPECT_EQ(p.device_done_ns, 90 * kMs);  // load + transfer + run
  EXPECT_TRUE(p.needs_host_load);
  EXPECT_TRUE(p.needs_transfer);
  EXPECT_EQ(p.target, PlacementTarget::kCpu);
  // A device 4x faster pays for the transfer.
  in.device_exec_ns = 30 * kMs / 4;
  p = ChoosePlacement(in);
  EXPECT_EQ(p.device_done_ns, 50 * kMs + 10 * kMs + 7500 * 1000);
  EXPECT_EQ(p.target, PlacementTarget::kDevice);
  // A busy link delays the transfer past the CPU's completion.
  in.link_free_ns = 80 * kMs;
  p = ChoosePlacement(in);
  EXPECT_EQ(p.device_ready_ns, 90 * kMs);
  EXPECT_EQ(p.target, PlacementTarget::kCpu);
}

TEST(PlacementTest, ResidentOnHostOnlyGoesToTheDeviceWhenTheLanesAreBusy) {
  PlacementInput in = Base();
  in.host_state = Residency::kResident;
  in.device_state = Residency::kAbsent;
  Placement p = ChoosePlacement(in);
  EXPECT_FALSE(p.needs_host_load);
  EXPECT_EQ(p.cpu_done_ns, 30 * kMs);
  EXPECT_EQ(p.device_done_ns, 40 * kMs);
  EXPECT_EQ(p.target, PlacementTarget::kCpu);
  in.cpu_lane_free_ns = 40 * kMs;  // lanes busy for 40 ms
  p = ChoosePlacement(in);
  EXPECT_EQ(p.cpu_done_ns, 70 * kMs);
  EXPECT_EQ(p.target, PlacementTarget::kDevice);
}

TEST(PlacementTest, ResidentOnDeviceNeedsNoTransfer) {
  PlacementInput in = Base();
  in.host_state = Residency::kResident;
  in.device_state = Residency::kResident;
  in.transfer_ns = 1000 * kMs;  // ignored: already there
  Placement p = ChoosePlacement(in);
  EXPECT_FALSE(p.needs_transfer);
  EXPECT_EQ(p.device_done_ns, 30 * kMs);
  EXPECT_EQ(p.target, PlacementTarget::kCpu);  // a tie stays on the CPU
  in.cpu_lane_free_ns = 5 * kMs;
  EXPECT_EQ(ChoosePlacement(in).target, PlacementTarget::kDevice);
  in.device_free_ns = 20 * kMs;  // the device is busy longer
  EXPECT_EQ(ChoosePlacement(in).target, PlacementTarget::kCpu);
  // No device at all.
  in.device_available = false;
  p = ChoosePlacement(in);
  EXPECT_EQ(p.target, PlacementTarget::kCpu);
  EXPECT_EQ(p.device_done_ns, INT64_MAX);
  EXPECT_NE(p.Explain(0).find("no device"), std::string::npos);
}

// The same decisions read from real caches on a FakeClock.
TEST(PlacementTest, GathersPredictionsFromTheCaches) {
  FakeClock clock(0);
  HostCacheOptions ho;
  ho.budget_bytes = int64_t{1} << 30;
  ho.disk = {.initial_bytes_per_sec = 1e9, .latency_ns = 0, .ewma_alpha = 0.25};  // 1 byte/ns
  auto host = std::move(HostCache::Create(ho, &clock)).value();
  // 8 Gbit/s = 1 byte/ns link, no latency, device 4x faster than the CPU.
  auto device = std::move(SimulatedDevice::Create("memory=256MiB,link-gbps=8,latency-us=0,page=1MiB,speedup=4")).value();
  auto dcache = std::move(DeviceCache::Create(device.get(), DeviceCacheOptions{}, &clock)).value();
  const ModelKey k{"t", "m", 1};
  const int64_t bytes = 10'000'000;  // 10 ms to load, 10 ms to transfer
  ASSERT_TRUE(host->Register(k, bytes).ok());
  ASSERT_TRUE(dcache->Register(k, bytes).ok());

  // Cold: load 10 + run 30 on the CPU = 40 ms; load 10 + transfer 10 + run 7.5 = 27.5 ms on the device.
  Result<PlacementInput> in = GatherPlacementInput(k, 30 * kMs, 0, *host, dcache.get(), clock);
  ASSERT_TRUE(in.ok()) << in.status().ToString();
  EXPECT_EQ(in->host_state, Residency::kAbsent);
  EXPECT_EQ(in->host_ready_ns, 10 * kMs);
  EXPECT_EQ(in->transfer_ns, 10 * kMs);
  Placement p = ChoosePlacement(*in);
  EXPECT_EQ(p.cpu_done_ns, 40 * kMs);
  EXPECT_EQ(p.device_done_ns, 27'500'000);
  EXPECT_EQ(p.target, PlacementTarget::kDevice);

  // Resident on host: the device still wins (10 + 7.5 < 30).
  Result<Acquisition> a = host->Acquire(k);
  ASSERT_TRUE(a.ok());
  clock.AdvanceTo(a->action->predicted.end_ns);
  ASSERT_TRUE(host->FinishMove(a->action->id, 0, Status::Ok()).ok());
  in = GatherPlacementInput(k, 30 * kMs, 0, *host, dcache.get(), clock);
  ASSERT_TRUE(in.ok());
  p = ChoosePlacement(*in);
  EXPECT_FALSE(p.needs_host_load);
  EXPECT_EQ(p.device_done_ns - clock.NowNs(), 17'500'000);
  EXPECT_EQ(p.target, PlacementTarget::kDevice);

  // Transfer in flight, then resident on the device: no transfer left to pay.
  Result<Acquisition> d = dcache->Acquire(k);
  ASSERT_TRUE(d.ok());
  in = GatherPlacementInput(k, 30 * kMs, 0, *host, dcache.get(), clock);
  ASSERT_TRUE(in.ok());
  EXPECT_EQ(in->device_state, Residency::kMoving);
  EXPECT_EQ(ChoosePlacement(*in).device_ready_ns, d->action->predicted.end_ns);
  clock.AdvanceTo(d->action->predicted.end_ns);
  ASSERT_TRUE(dcache->FinishMove(d->action->id, d->action->predicted.start_ns, Status::Ok()).ok());
  in = GatherPlacementInput(k, 30 * kMs, 0, *host, dcache.get(), clock);
  ASSERT_TRUE(in.ok());
  p = ChoosePlacement(*in);
  EXPECT_FALSE(p.needs_transfer);
  EXPECT_EQ(p.device_done_ns - clock.NowNs(), 7'500'000);
  EXPECT_EQ(p.target, PlacementTarget::kDevice);

  // Without a device cache the CPU is the only choice; unknown models are NOT_FOUND.
  in = GatherPlacementInput(k, 30 * kMs, 0, *host, nullptr, clock);
  ASSERT_TRUE(in.ok());
  EXPECT_EQ(ChoosePlacement(*in).target, PlacementTarget::kCpu);
  EXPECT_EQ(GatherPlacementInput({"t", "x", 1}, 1, 0, *host, dcache.get(), clock).status().code(),
            StatusCode::kNotFound);
}

}  // namespace
}  // namespace orrery
