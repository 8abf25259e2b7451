#include "cache/policy_sim.h"

#include <cstdio>

#include <gtest/gtest.h>

namespace orrery {
namespace {

TEST(PolicySimTest, IsDeterministic) {
  PolicySimParams p;
  p.duration_s = 60;
  PolicySimResult a = RunPolicySim(p, SimPolicy::kMissCostKeepAlive);
  PolicySimResult b = RunPolicySim(p, SimPolicy::kMissCostKeepAlive);
  EXPECT_EQ(a.ToJson(SimPolicy::kMissCostKeepAlive), b.ToJson(SimPolicy::kMissCostKeepAlive));
  EXPECT_GT(a.requests, 1000u);
}

// Zipf background + periodic models, the cache holding a quarter of the
// weights: memory is always full whatever the policy (idle resident bytes
// stay ~ the budget), so the comparison is cold loads. Prints one JSON line
// per policy (the numbers in cache/README.md).
TEST(PolicySimTest, UnderMemoryPressureKeepAliveHasFewerColdLoadsThanLru) {
  PolicySimParams p;
  PolicySimResult lru = RunPolicySim(p, SimPolicy::kLru);
  PolicySimResult cost = RunPolicySim(p, SimPolicy::kMissCost);
  PolicySimResult ka = RunPolicySim(p, SimPolicy::kMissCostKeepAlive);
  std::printf("budget 25%%:\n%s\n%s\n%s\n", lru.ToJson(SimPolicy::kLru).c_str(),
              cost.ToJson(SimPolicy::kMissCost).c_str(), ka.ToJson(SimPolicy::kMissCostKeepAlive).c_str());
  EXPECT_EQ(lru.requests, ka.requests);
  EXPECT_LT(cost.cold_loads, lru.cold_loads);
  EXPECT_LT(ka.cold_loads, lru.cold_loads);
  EXPECT_LT(ka.periodic_cold_loads, cost.periodic_cold_loads);  // pre-warming catches periodic calls
  for (const PolicySimResult* r : {&lru, &cost, &ka}) {
    EXPECT_LE(static_cast<double>(r->max_used_bytes), r->budget_bytes);
    EXPECT_EQ(r->unavailable_retries, 0u);
  }
}

// The same trace with room for every model: LRU never evicts, so every model
// once loaded stays resident and idle; keep-alive unloads the ones not
// expected soon (and pre-warms the periodic ones), trading some cold loads
// for much less idle memory.
TEST(PolicySimTest, WithAmpleMemoryKeepAliveHoldsLessIdleMemoryThanLru) {
  PolicySimParams p;
  p.budget_fraction = 1.0;
  PolicySimResult lru = RunPolicySim(p, SimPolicy::kLru);
  PolicySimResult ka = RunPolicySim(p, SimPolicy::kMissCostKeepAlive);
  std::printf("budget 100%%:\n%s\n%s\n", lru.ToJson(SimPolicy::kLru).c_str(),
              ka.ToJson(SimPolicy::kMissCostKeepAlive).c_str());
  EXPECT_LT(ka.idle_byte_seconds, lru.idle_byte_seconds);
  // LRU with room for all: exactly one cold load per model, never an eviction.
  EXPECT_EQ(lru.cold_loads, 220u);
  EXPECT_EQ(lru.loads, 220u);
  EXPECT_GT(ka.cold_loads, lru.cold_loads);  // the price of unloading
}

}  // namespace
}  // namespace orrery
