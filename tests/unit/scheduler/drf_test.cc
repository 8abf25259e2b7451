// Dominant resource fairness in the FairQueue: deterministic (no clock, no
// threads), the measured lane time equal to the prediction unless stated.
#include <map>

#include <gtest/gtest.h>

#include "scheduler/fair_queue.h"

namespace orrery {
namespace {

constexpr int64_t kKiB = 1024;

// Pops `n` items, completing each with its predicted lane time; returns
// the dispatches per tenant.
std::map<std::string, int> Serve(FairQueue* q, int n) {
  std::map<std::string, int> served;
  for (int i = 0; i < n; ++i) {
    std::optional<FairQueue::Dispatch> d = q->Pop();
    EXPECT_TRUE(d.has_value());
    if (!d) break;
    ++served[d->tenant];
    q->Complete(*d, d->item.cost_ns);
  }
  return served;
}

TEST(DrfTest, ChargeIsTheDominantShareInLaneNs) {
  FairQueue q;
  q.SetCapacity({.lanes = 2, .devices = 1, .link_bytes_per_ns = 1});
  // Lane-only: the lane time itself.
  EXPECT_EQ(q.ChargeNs({.cost_ns = 1000}), 1000);
  // 1000 lane-ns on 2 lanes is 500 ns of the system; 2 KiB over a
  // 1 byte/ns link is 2048 ns: dominant, charged as 2 x 2048 lane-ns.
  EXPECT_EQ(q.ChargeNs({.cost_ns = 1000, .link_bytes = 2 * kKiB}), 4096);
  EXPECT_EQ(q.ChargeNs({.cost_ns = 1000, .device_ns = 700}), 1400);
  // Unmodelled resources (capacity 0) are ignored.
  q.SetCapacity({.lanes = 2});
  EXPECT_EQ(q.ChargeNs({.cost_ns = 1000, .device_ns = 700, .link_bytes = 2 * kKiB}), 1000);
}

TEST(DrfTest, TenantsDominatingDifferentResourcesGetEqualDominantShares) {
  // Tenant "compute": 100 us of lane per request, nothing to load. Tenant
  // "loader": 10 us of lane but 100 KB over a 1 GB/s link (100 us of link).
  // Both have a dominant share of 100 us per request, so with equal weights
  // they get equally many dispatches. Charged by lane time alone, "loader"
  // would get 10 dispatches for each of "compute"'s.
  auto run = [](FairQueue::Capacity capacity) {
    FairQueue q;
    q.SetCapacity(capacity);
    uint64_t id = 1;
    for (int i = 0; i < 1000; ++i) {
      q.Push("compute", {.id = id++, .model_id = "c", .cost_ns = 100'000});
      q.Push("loader", {.id = id++, .model_id = "l", .cost_ns = 10'000, .link_bytes = 100'000});
    }
    return Serve(&q, 440);
  };
  std::map<std::string, int> drf = run({.lanes = 1, .link_bytes_per_ns = 1});
  EXPECT_NEAR(drf["compute"], 220, 1);
  EXPECT_NEAR(drf["loader"], 220, 1);
  std::map<std::string, int> lane_only = run({.lanes = 1});
  EXPECT_NEAR(lane_only["compute"], 40, 1);
  EXPECT_NEAR(lane_only["loader"], 400, 1);
}

TEST(DrfTest, WeightsScaleDominantShares) {
  FairQueue q;
  q.SetCapacity({.lanes = 1, .devices = 1});
  q.SetWeight("gpu", 2);
  uint64_t id = 1;
  for (int i = 0; i < 1000; ++i) {
    q.Push("cpu", {.id = id++, .model_id = "c", .cost_ns = 50'000});
    q.Push("gpu", {.id = id++, .model_id = "g", .cost_ns = 5'000, .device_ns = 50'000});
  }
  std::map<std::string, int> served = Serve(&q, 300);
  EXPECT_NEAR(served["gpu"], 200, 1);
  EXPECT_NEAR(served["cpu"], 100, 1);
}

TEST(DrfTest, MeasuredLaneTimeCorrectsTheChargeOnlyWhenItBecomesDominant) {
  FairQueue q;
  q.SetCapacity({.lanes = 1, .link_bytes_per_ns = 1});
  q.Push("t", {.id = 1, .model_id = "m", .cost_ns = 10, .link_bytes = 100});
  q.Push("t", {.id = 2, .model_id = "m", .cost_ns = 10, .link_bytes = 100});
  std::optional<FairQueue::Dispatch> d = q.Pop();
  ASSERT_TRUE(d.has_value());
  EXPECT_DOUBLE_EQ(q.Tenants()[0].virtual_finish, 100);  // the link dominates
  q.Complete(*d, 50);  // slower on the lane, still below the link share
  EXPECT_DOUBLE_EQ(q.Tenants()[0].virtual_finish, 100);
  d = q.Pop();
  ASSERT_TRUE(d.has_value());
  EXPECT_DOUBLE_EQ(q.Tenants()[0].virtual_finish, 200);
  q.Complete(*d, 300);  // now the lane dominates: charged 300 instead of 100
  EXPECT_DOUBLE_EQ(q.Tenants()[0].virtual_finish, 400);
  EXPECT_EQ(q.Tenants()[0].service_ns, 400);
}

TEST(DrfTest, WorkAheadCountsLaneTimeOverDominantSpans) {
  FairQueue q;
  q.SetCapacity({.lanes = 1, .link_bytes_per_ns = 1});
  // "loader" has 10 items of 10 lane-ns / 100 link-ns: its virtual span is
  // 1000 but only 100 of lane work. A new request of "other" (idle, starts
  // at the virtual time, 0) goes before all of it: nothing ahead. A new
  // request of "loader" has its own 100 lane-ns ahead.
  for (uint64_t i = 1; i <= 10; ++i) q.Push("loader", {.id = i, .model_id = "m", .cost_ns = 10, .link_bytes = 100});
  EXPECT_EQ(q.WorkAheadNs("other"), 0);
  EXPECT_EQ(q.WorkAheadNs("loader"), 100);
  q.Push("other", {.id = 11, .model_id = "m", .cost_ns = 500});
  // "other"'s next request starts at virtual 500: half of loader's span
  // (500 of 1000) is before it, i.e. half of its lane work (50).
  EXPECT_EQ(q.WorkAheadNs("other"), 500 + 50);
}

}  // namespace
}  // namespace orrery
