#include "cache/device.h"

#include <algorithm>

#include <gtest/gtest.h>

#include "cache/device_cache.h"

namespace orrery {
namespace {

TEST(ParseByteSizeTest, SuffixesAndErrors) {
  EXPECT_EQ(*ParseByteSize("1000"), 1000);
  EXPECT_EQ(*ParseByteSize("8GiB"), int64_t{8} << 30);
  EXPECT_EQ(*ParseByteSize("8G"), int64_t{8} << 30);
  EXPECT_EQ(*ParseByteSize("512M"), int64_t{512} << 20);
  EXPECT_EQ(*ParseByteSize("2MB"), 2'000'000);
  EXPECT_EQ(ParseByteSize("").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseByteSize("-1").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseByteSize("12XB").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseByteSize("99999999999T").status().code(), StatusCode::kInvalidArgument);
}

TEST(SimulatedDeviceSpecTest, ParsesTheFlag) {
  Result<SimulatedDeviceConfig> c = ParseSimulatedDeviceSpec("memory=1GiB,link-gbps=100,latency-us=10");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->memory_bytes, int64_t{1} << 30);
  EXPECT_DOUBLE_EQ(c->link_gbps, 100);
  EXPECT_DOUBLE_EQ(c->latency_us, 10);
  EXPECT_EQ(c->page_bytes, int64_t{2} << 20);
  c = ParseSimulatedDeviceSpec("latency-us=0.5,memory=64M,link-gbps=8,page=64K,speedup=4");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->page_bytes, 64 << 10);
  EXPECT_DOUBLE_EQ(c->speedup, 4);
}

TEST(SimulatedDeviceSpecTest, ErrorsNameTheBadField) {
  struct Case {
    const char* spec;
    const char* names;
  };
  for (const Case& t : {Case{"", "empty"},
                        Case{"memory=1G,link-gbps=10", "latency-us"},
                        Case{"memory=1G,link-gbps=abc,latency-us=1", "link-gbps"},
                        Case{"memory=1G,link-gbps=0,latency-us=1", "link-gbps"},
                        Case{"memory=1G,link-gbps=10,latency-us=-1", "latency-us"},
                        Case{"memory=lots,link-gbps=10,latency-us=1", "memory"},
                        Case{"memory=1K,link-gbps=10,latency-us=1", "memory"},
                        Case{"memory=1G,link-gbps=10,latency-us=1,color=red", "color"},
                        Case{"memory=1G,memory=2G,link-gbps=10,latency-us=1", "twice"},
                        Case{"memory=1G,,link-gbps=10,latency-us=1", "field=value"},
                        Case{"memory=1G,link-gbps=10,latency-us=1,speedup=0", "speedup"}}) {
    Result<SimulatedDeviceConfig> c = ParseSimulatedDeviceSpec(t.spec);
    ASSERT_FALSE(c.ok()) << t.spec;
    EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument) << t.spec;
    EXPECT_NE(c.status().message().find(t.names), std::string::npos) << t.spec << ": " << c.status().message();
  }
}

TEST(SimulatedDeviceTest, IsNamedSimulatedAndPredictsCopies) {
  // 8 Gbit/s = 1 byte/ns; 10 us latency; 5 pages of 1000 bytes (+ a partial page dropped).
  auto d = SimulatedDevice::Create("memory=5500,link-gbps=8,latency-us=10,page=1000,speedup=2");
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  const SimulatedDevice& dev = **d;
  EXPECT_EQ(dev.name(), "simulated");
  EXPECT_TRUE(dev.simulated());
  EXPECT_NE(dev.Describe().find("simulated"), std::string::npos);
  EXPECT_EQ(dev.memory_bytes(), 5000);
  EXPECT_EQ(dev.CopyNs(1000), 10'000 + 1000);
  EXPECT_EQ(dev.ExecNs(1000), 500);
  // Concurrent copies queue on the one link.
  Interval a, b;
  dev.link()->Reserve(0, dev.CopyNs(1000), &a);
  dev.link()->Reserve(0, dev.CopyNs(1000), &b);
  EXPECT_EQ(b.start_ns, a.end_ns);
  DeviceStats s = dev.Stats(0, 2 * 11'000);
  EXPECT_EQ(s.name, "simulated");
  EXPECT_TRUE(s.simulated);
  EXPECT_EQ(s.link_busy_ns, 22'000);
  EXPECT_DOUBLE_EQ(s.link_utilisation, 1.0);
  EXPECT_EQ(s.compute_busy_ns, 0);
}

class DeviceCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    device_ = std::move(SimulatedDevice::Create("memory=5000,link-gbps=8,latency-us=1,page=1000")).value();
    DeviceCacheOptions o;
    o.keepalive = false;
    cache_ = std::move(DeviceCache::Create(device_.get(), o, &clock_)).value();
  }
  void Load(const ModelKey& k) {
    Result<Acquisition> a = cache_->Acquire(k);
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    ASSERT_TRUE(a->action.has_value());
    clock_.AdvanceTo(a->action->predicted.end_ns);
    ASSERT_TRUE(cache_->FinishMove(a->action->id, a->action->predicted.start_ns, Status::Ok()).ok());
    ASSERT_TRUE(cache_->Release(k).ok());
  }
  FakeClock clock_{0};
  std::unique_ptr<SimulatedDevice> device_;
  std::unique_ptr<DeviceCache> cache_;
};

TEST_F(DeviceCacheTest, ModelsTakeWholePagesAndAModelLargerThanTheDeviceIsRefused) {
  EXPECT_EQ(cache_->total_pages(), 5u);
  Status s = cache_->Register({"t", "huge", 1}, 5001);
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(s.message().find("6 pages of 1000"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("simulated"), std::string::npos) << s.message();
  ASSERT_TRUE(cache_->Register({"t", "a", 1}, 1500).ok());  // 2 pages
  Load({"t", "a", 1});
  EXPECT_EQ(cache_->Pages({"t", "a", 1}).size(), 2u);
  EXPECT_EQ(cache_->free_pages(), 3u);
  EXPECT_EQ(cache_->Stats().resident_bytes, 2000);
}

TEST_F(DeviceCacheTest, PagesNeedNotBeContiguousSoFreedPagesAreAlwaysUsable) {
  for (const char* m : {"a", "b", "c"}) ASSERT_TRUE(cache_->Register({"t", m, 1}, 2000).ok());
  ASSERT_TRUE(cache_->Register({"t", "d", 1}, 3000).ok());
  Load({"t", "a", 1});  // pages 0,1
  Load({"t", "b", 1});  // pages 2,3
  ASSERT_TRUE(cache_->Evict({"t", "a", 1}).ok());
  EXPECT_EQ(cache_->free_pages(), 3u);  // 0, 1 and 4: not contiguous
  Load({"t", "d", 1});
  std::vector<uint32_t> pages = cache_->Pages({"t", "d", 1});
  ASSERT_EQ(pages.size(), 3u);
  std::vector<uint32_t> sorted = pages;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, (std::vector<uint32_t>{0, 1, 4}));
  EXPECT_EQ(cache_->free_pages(), 0u);
  // Loading c evicts one model (by miss cost, d here: larger, used as often)
  // and reuses its pages.
  const std::vector<uint32_t> b_pages = cache_->Pages({"t", "b", 1});
  Load({"t", "c", 1});
  EXPECT_EQ(cache_->state({"t", "b", 1}), Residency::kResident);
  EXPECT_EQ(cache_->state({"t", "d", 1}), Residency::kAbsent);
  std::vector<uint32_t> c = cache_->Pages({"t", "c", 1});
  ASSERT_EQ(c.size(), 2u);
  for (uint32_t page : c) EXPECT_NE(std::find(pages.begin(), pages.end(), page), pages.end()) << page;
  EXPECT_EQ(cache_->Pages({"t", "b", 1}), b_pages);
  EXPECT_EQ(cache_->free_pages(), 1u);
}

TEST_F(DeviceCacheTest, OnFreeIsCalledWithTheKeyWheneverAModelsPagesAreFreed) {
  std::vector<ModelKey> freed;
  DeviceCacheOptions o;
  o.keepalive = false;
  o.on_free = [&freed](const ModelKey& k) { freed.push_back(k); };
  cache_ = std::move(DeviceCache::Create(device_.get(), o, &clock_)).value();
  const ModelKey a{"t", "a", 1}, b{"t", "b", 1}, c{"t", "c", 1};
  for (const ModelKey& k : {a, b, c}) ASSERT_TRUE(cache_->Register(k, 2000).ok());
  Load(a);
  Load(b);
  EXPECT_TRUE(freed.empty());
  // c needs room: the victim the cache chose is freed, with its key.
  Result<Acquisition> acq = cache_->Acquire(c);
  ASSERT_TRUE(acq.ok() && acq->action.has_value());
  ASSERT_EQ(acq->evicted.size(), 1u);
  EXPECT_EQ(freed, acq->evicted);
  // A failed transfer frees c's pages.
  ASSERT_TRUE(cache_->FinishMove(acq->action->id, 0, Status::Internal("link error")).ok());
  ASSERT_TRUE(cache_->Release(c).ok());
  ASSERT_EQ(freed.size(), 2u);
  EXPECT_EQ(freed[1], c);
  // Operator eviction and unregistering a resident model free too.
  const ModelKey kept = acq->evicted[0] == a ? b : a;
  ASSERT_TRUE(cache_->Evict(kept).ok());
  ASSERT_EQ(freed.size(), 3u);
  EXPECT_EQ(freed[2], kept);
  Load(c);
  ASSERT_TRUE(cache_->Unregister(c).ok());
  ASSERT_EQ(freed.size(), 4u);
  EXPECT_EQ(freed[3], c);
  EXPECT_EQ(cache_->free_pages(), 5u);
}

TEST_F(DeviceCacheTest, TransfersQueueOnTheLinkWithPredictedTimes) {
  ASSERT_TRUE(cache_->Register({"t", "a", 1}, 1000).ok());
  ASSERT_TRUE(cache_->Register({"t", "b", 1}, 1000).ok());
  Result<Acquisition> a = cache_->Acquire({"t", "a", 1});
  Result<Acquisition> b = cache_->Acquire({"t", "b", 1});
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->action->predicted.start_ns, 0);
  EXPECT_EQ(a->action->predicted.end_ns, 1000 + 1000);  // 1 us + 1000 bytes at 1 byte/ns
  EXPECT_EQ(b->action->predicted.start_ns, 2000);      // queued behind a on the one link
  EXPECT_EQ(b->ready_ns, 4000);
  // A copy someone else reserves on the same link queues behind both.
  Interval other = device_->link()->Predict(0, 10);
  EXPECT_EQ(other.start_ns, 4000);
  // A failed transfer frees its pages.
  clock_.AdvanceTo(2000);
  ASSERT_TRUE(cache_->FinishMove(a->action->id, 0, Status::Internal("link error")).ok());
  EXPECT_EQ(cache_->state({"t", "a", 1}), Residency::kAbsent);
  EXPECT_TRUE(cache_->Pages({"t", "a", 1}).empty());
  EXPECT_EQ(cache_->free_pages(), 4u);
}

}  // namespace
}  // namespace orrery
