// The device tier's hooks for a real device (api/device_tier.h): its
// transfers call `upload` for the model instead of the simulated link's
// timed wait, and models leaving the device (evicted, failed) call
// `release`. The device here is the simulated one; the hooks record.
#include "api/device_tier.h"

#include <gtest/gtest.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace orrery {
namespace {

constexpr int64_t kWaitNs = 10 * kNsPerSec;

struct Recorded {
  std::mutex mu;
  std::vector<ModelKey> uploaded;
  std::vector<ModelKey> released;
  std::vector<std::vector<uint32_t>> pages;  // what each upload was given
  std::vector<ModelKey> Uploaded() {
    std::lock_guard<std::mutex> lock(mu);
    return uploaded;
  }
  std::vector<ModelKey> Released() {
    std::lock_guard<std::mutex> lock(mu);
    return released;
  }
};

// 5 pages of 1000 bytes; models of 3000 bytes: one fits at a time.
std::unique_ptr<DeviceTier> TierWithHooks(Recorded* rec, const ModelKey& failing) {
  std::shared_ptr<Device> device =
      std::move(SimulatedDevice::Create("memory=5000,link-gbps=8,latency-us=1,page=1000")).value();
  DeviceTierHooks hooks;
  hooks.upload = [rec, failing](const ModelKey& key, const std::vector<uint32_t>& pages) {
    std::lock_guard<std::mutex> lock(rec->mu);
    rec->uploaded.push_back(key);
    rec->pages.push_back(pages);
    return key == failing ? Status::Internal("upload failed") : Status::Ok();
  };
  hooks.release = [rec](const ModelKey& key) {
    std::lock_guard<std::mutex> lock(rec->mu);
    rec->released.push_back(key);
  };
  Result<std::unique_ptr<DeviceTier>> tier = MakeDeviceTier(device, /*place=*/false, std::move(hooks));
  EXPECT_TRUE(tier.ok()) << tier.status().ToString();
  return tier.ok() ? std::move(tier).value() : nullptr;
}

TEST(DeviceTierHooksTest, TransfersCallUploadForTheModelAndEvictionCallsRelease) {
  Recorded rec;
  const ModelKey a{"t", "a", 1}, b{"t", "b", 1}, bad{"t", "bad", 1};
  std::unique_ptr<DeviceTier> tier = TierWithHooks(&rec, bad);
  ASSERT_NE(tier, nullptr);
  for (const ModelKey& k : {a, b, bad}) ASSERT_TRUE(tier->cache->Register(k, 3000).ok());

  ASSERT_TRUE(tier->lanes->Load(a, kWaitNs).ok());
  EXPECT_EQ(rec.Uploaded(), std::vector<ModelKey>{a});
  EXPECT_TRUE(rec.Released().empty());
  EXPECT_EQ(tier->lanes->Stats().transfers, 1u);
  // The upload is given the pages the cache reserved for the model: 3 x 1000.
  EXPECT_EQ(rec.pages.at(0).size(), 3u);
  EXPECT_EQ(rec.pages.at(0), tier->cache->Pages(a));

  // b needs a's pages: a is evicted (released) before b's upload.
  ASSERT_TRUE(tier->lanes->Load(b, kWaitNs).ok());
  EXPECT_EQ(rec.Uploaded(), (std::vector<ModelKey>{a, b}));
  EXPECT_EQ(rec.Released(), std::vector<ModelKey>{a});
  EXPECT_EQ(tier->cache->state(a), Residency::kAbsent);
  EXPECT_EQ(rec.pages.at(1), tier->cache->Pages(b));

  // A failed upload fails the transfer and frees what it held.
  Status s = tier->lanes->Load(bad, kWaitNs);
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
  EXPECT_EQ(rec.Uploaded(), (std::vector<ModelKey>{a, b, bad}));
  EXPECT_EQ(rec.Released(), (std::vector<ModelKey>{a, b, bad}));
  EXPECT_EQ(tier->cache->state(bad), Residency::kAbsent);
  EXPECT_EQ(tier->lanes->Stats().transfers_failed, 1u);

  // An operator eviction releases too.
  ASSERT_TRUE(tier->lanes->Load(a, kWaitNs).ok());
  ASSERT_TRUE(tier->cache->Evict(a).ok());
  EXPECT_EQ(rec.Released(), (std::vector<ModelKey>{a, b, bad, a}));
}

TEST(DeviceTierHooksTest, WithoutHooksTheSimulatedLinkStillMovesTheWeights) {
  std::shared_ptr<Device> device =
      std::move(SimulatedDevice::Create("memory=5000,link-gbps=8,latency-us=1,page=1000")).value();
  Result<std::unique_ptr<DeviceTier>> tier = MakeDeviceTier(device, /*place=*/true);
  ASSERT_TRUE(tier.ok()) << tier.status().ToString();
  const ModelKey a{"t", "a", 1};
  ASSERT_TRUE((*tier)->cache->Register(a, 3000).ok());
  ASSERT_TRUE((*tier)->lanes->Load(a, kWaitNs).ok());
  const DeviceLanesStats stats = (*tier)->lanes->Stats();
  EXPECT_EQ(stats.transfers, 1u);
  EXPECT_EQ(stats.bytes_transferred, 3000);
  // Timed as the simulated link: latency + bytes at 1 byte/ns, at least.
  EXPECT_GE(stats.transfer_ns, 1000 + 3000);
}

// A real device charges a model its weight layout's bytes (recorded at
// upload), so the cache reserves the pages the weights are mapped onto, and
// leaves a record from before the field on the CPU; the simulated one
// charges the segment's size.
class NotSimulated final : public Device {
 public:
  explicit NotSimulated(std::shared_ptr<Device> d) : d_(std::move(d)) {}
  std::string_view name() const override { return "fake-gpu"; }
  std::string Describe() const override { return "a simulated device that says it is not"; }
  bool simulated() const override { return false; }
  int64_t memory_bytes() const override { return d_->memory_bytes(); }
  int64_t page_bytes() const override { return d_->page_bytes(); }
  int64_t link_latency_ns() const override { return d_->link_latency_ns(); }
  double link_bytes_per_sec() const override { return d_->link_bytes_per_sec(); }
  int64_t CopyNs(int64_t bytes) const override { return d_->CopyNs(bytes); }
  int64_t ExecNs(int64_t cpu_exec_ns) const override { return d_->ExecNs(cpu_exec_ns); }
  std::shared_ptr<ResourceTimeline> link() const override { return d_->link(); }
  std::shared_ptr<ResourceTimeline> compute() const override { return d_->compute(); }

 private:
  std::shared_ptr<Device> d_;
};

TEST(DeviceTierHooksTest, ARealDeviceChargesTheWeightLayoutBytes) {
  std::shared_ptr<Device> sim =
      std::move(SimulatedDevice::Create("memory=5000,link-gbps=8,latency-us=1,page=1000")).value();
  NotSimulated gpu(sim);
  ModelRecord r;
  r.set_tenant_id("t");
  r.set_name("m");
  r.set_version(1);
  r.set_segment_bytes(8192);
  EXPECT_EQ(DeviceBytesOf(r, gpu), 0);  // no layout recorded
  r.set_device_weight_bytes(2100);
  EXPECT_EQ(DeviceBytesOf(r, gpu), 2100);
  EXPECT_EQ(DeviceBytesOf(r, *sim), 8192);

  Result<std::unique_ptr<DeviceTier>> tier =
      MakeDeviceTier(std::make_shared<NotSimulated>(sim), /*place=*/false);
  ASSERT_TRUE(tier.ok()) << tier.status().ToString();
  ModelRecord old = r;
  old.set_version(3);
  old.clear_device_weight_bytes();
  RegisterWithDevice(tier->get(), old);
  EXPECT_FALSE((*tier)->cache->Info({"t", "m", 3}).has_value());
  RegisterWithDevice(tier->get(), r);
  ASSERT_TRUE((*tier)->lanes->Load({"t", "m", 1}, kWaitNs).ok());
  EXPECT_EQ((*tier)->cache->Pages({"t", "m", 1}).size(), 3u);  // 2100 bytes in pages of 1000
  // A layout larger than the device is never registered.
  r.set_version(2);
  r.set_device_weight_bytes(6000);
  RegisterWithDevice(tier->get(), r);
  EXPECT_FALSE((*tier)->cache->Info({"t", "m", 2}).has_value());
}

}  // namespace
}  // namespace orrery
