// A deterministic discrete-event simulation of the host cache under a
// synthetic trace, to compare eviction / keep-alive policies on the same
// requests (used by tests/unit/cache/policy_sim_test.cc; not linked into the
// server). Time is a FakeClock; the "disk" has `load_concurrency` slots and a
// true bandwidth the cache has to learn; a request pins its model for
// `exec_ns` once resident.
//
// Trace: `zipf_models` models called as one Poisson stream of `zipf_rate`
// requests/s with Zipf(`zipf_s`) popularity, plus `periodic_models` models
// each called every period (uniform in [periodic_min_s, periodic_max_s]) with
// +-`periodic_jitter` relative jitter. Model sizes are log-uniform in
// [min_bytes, max_bytes]; the cache budget is `budget_fraction` of the total.
// Everything derives from `seed` (own RNG arithmetic, so results do not depend
// on the standard library's distributions).
#pragma once

#include <cstdint>
#include <string>

#include "cache/tier_cache.h"

namespace orrery {

struct PolicySimParams {
  uint64_t seed = 42;
  double duration_s = 600;
  int zipf_models = 200;
  double zipf_s = 1.0;
  double zipf_rate = 50;  // requests/s over all Zipf models
  int periodic_models = 20;
  double periodic_min_s = 5;
  double periodic_max_s = 30;
  double periodic_jitter = 0.02;
  int64_t min_bytes = 4 << 20;
  int64_t max_bytes = 64 << 20;
  double budget_fraction = 0.25;
  double disk_bytes_per_sec = 2e9;  // true bandwidth
  int64_t disk_latency_ns = 1'000'000;
  int load_concurrency = 4;
  int64_t exec_ns = 5'000'000;
  int64_t tick_ns = 100'000'000;  // keep-alive policy: ExpireIdle + PrewarmDue period
};

enum class SimPolicy { kLru, kMissCost, kMissCostKeepAlive };
std::string_view SimPolicyName(SimPolicy p);

struct PolicySimResult {
  uint64_t requests = 0;
  uint64_t hits = 0;
  uint64_t cold_loads = 0;     // requests that found their model absent
  uint64_t joined_loads = 0;   // requests that waited on a load already in flight
  uint64_t periodic_requests = 0;
  uint64_t periodic_cold_loads = 0;  // of which: requests to periodic models that found them absent
  uint64_t prewarms = 0;
  uint64_t loads = 0;          // all loads, demand + prewarm
  double bytes_loaded = 0;
  double idle_byte_seconds = 0;  // resident, unpinned bytes integrated over time
  double mean_wait_ms = 0;       // from arrival to weights resident, over all requests
  double budget_bytes = 0;
  double duration_s = 0;
  uint64_t unavailable_retries = 0;
  int64_t max_used_bytes = 0;  // sampled after every event: must stay <= budget_bytes

  // One JSON object, for logs and cache/README.md.
  std::string ToJson(SimPolicy policy) const;
};

PolicySimResult RunPolicySim(const PolicySimParams& params, SimPolicy policy);

}  // namespace orrery
