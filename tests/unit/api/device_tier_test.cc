// The device tier's hooks for a real device (api/device_tier.h): its
// transfers call `upload` for the model instead of the simulated link's
// timed wait, and models leaving the device (evicted, failed) call
// `release`. The device here is the simulated one; the hooks record.
#include "api/device_tier.h"

#include <gtest/gtest.h>

#include <mutex>
#include <vector>

namespace orrery {
namespace {

constexpr int64_t kWaitNs = 10 * kNsPerSec;

struct Recorded {
  std::mutex mu;
  std::vector<ModelKey> uploaded;
  std::vector<ModelKey> released;
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
  hooks.upload = [rec, failing](const ModelKey& key) {
    std::lock_guard<std::mutex> lock(rec->mu);
    rec->uploaded.push_back(key);
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

  // b needs a's pages: a is evicted (released) before b's upload.
  ASSERT_TRUE(tier->lanes->Load(b, kWaitNs).ok());
  EXPECT_EQ(rec.Uploaded(), (std::vector<ModelKey>{a, b}));
  EXPECT_EQ(rec.Released(), std::vector<ModelKey>{a});
  EXPECT_EQ(tier->cache->state(a), Residency::kAbsent);

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

}  // namespace
}  // namespace orrery
