#include "cache/policy_sim.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <queue>
#include <tuple>
#include <vector>

#include "cache/host_cache.h"

namespace orrery {
namespace {

// splitmix64: small, fast and fully specified, so traces are identical everywhere.
class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed) {}
  uint64_t Next() {
    uint64_t z = (s_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }  // [0, 1)
  double Exponential(double mean) { return -mean * std::log(1.0 - Uniform()); }

 private:
  uint64_t s_;
};

struct Arrival {
  int64_t t_ns;
  int model;
};

enum class EventType { kArrival, kLoadDone, kExecDone, kTick, kRetry };
struct Event {
  int64_t t_ns;
  uint64_t seq;
  EventType type;
  int model;
  uint64_t action = 0;
  int64_t started_ns = 0;
  bool operator>(const Event& o) const { return std::tie(t_ns, seq) > std::tie(o.t_ns, o.seq); }
};

}  // namespace

std::string_view SimPolicyName(SimPolicy p) {
  switch (p) {
    case SimPolicy::kLru: return "lru";
    case SimPolicy::kMissCost: return "miss-cost";
    case SimPolicy::kMissCostKeepAlive: return "miss-cost+keep-alive";
  }
  return "?";
}

std::string PolicySimResult::ToJson(SimPolicy policy) const {
  char buf[768];
  std::snprintf(buf, sizeof(buf),
                "{\"policy\":\"%s\",\"requests\":%llu,\"hits\":%llu,\"cold_loads\":%llu,"
                "\"joined_loads\":%llu,\"periodic_requests\":%llu,\"periodic_cold_loads\":%llu,\"prewarms\":%llu,\"loads\":%llu,\"gb_loaded\":%.3f,"
                "\"idle_resident_gb_s\":%.1f,\"idle_fraction_of_budget\":%.3f,\"mean_wait_ms\":%.3f,"
                "\"unavailable_retries\":%llu}",
                std::string(SimPolicyName(policy)).c_str(), static_cast<unsigned long long>(requests),
                static_cast<unsigned long long>(hits), static_cast<unsigned long long>(cold_loads),
                static_cast<unsigned long long>(joined_loads), static_cast<unsigned long long>(periodic_requests),
                static_cast<unsigned long long>(periodic_cold_loads), static_cast<unsigned long long>(prewarms),
                static_cast<unsigned long long>(loads), bytes_loaded / 1e9, idle_byte_seconds / 1e9,
                idle_byte_seconds / (budget_bytes * duration_s), mean_wait_ms,
                static_cast<unsigned long long>(unavailable_retries));
  return buf;
}

PolicySimResult RunPolicySim(const PolicySimParams& p, SimPolicy policy) {
  Rng rng(p.seed);
  const int n = p.zipf_models + p.periodic_models;
  const int64_t end_ns = static_cast<int64_t>(p.duration_s * 1e9);

  // Models: sizes log-uniform.
  std::vector<int64_t> bytes(static_cast<size_t>(n));
  double total = 0;
  for (int i = 0; i < n; ++i) {
    const double lo = std::log(static_cast<double>(p.min_bytes));
    const double hi = std::log(static_cast<double>(p.max_bytes));
    bytes[static_cast<size_t>(i)] = static_cast<int64_t>(std::exp(lo + (hi - lo) * rng.Uniform()));
    total += static_cast<double>(bytes[static_cast<size_t>(i)]);
  }
  // The budget must hold the largest model.
  const int64_t budget = std::max<int64_t>(static_cast<int64_t>(total * p.budget_fraction),
                                           *std::max_element(bytes.begin(), bytes.end()));

  // Trace.
  std::vector<Arrival> trace;
  std::vector<double> cdf(static_cast<size_t>(p.zipf_models));
  double z = 0;
  for (int i = 0; i < p.zipf_models; ++i) {
    z += 1.0 / std::pow(i + 1, p.zipf_s);
    cdf[static_cast<size_t>(i)] = z;
  }
  for (double& c : cdf) c /= z;
  for (double t = rng.Exponential(1.0 / p.zipf_rate); t < p.duration_s; t += rng.Exponential(1.0 / p.zipf_rate)) {
    const double u = rng.Uniform();
    const int m = static_cast<int>(std::lower_bound(cdf.begin(), cdf.end(), u) - cdf.begin());
    trace.push_back({static_cast<int64_t>(t * 1e9), std::min(m, p.zipf_models - 1)});
  }
  for (int j = 0; j < p.periodic_models; ++j) {
    const double period = p.periodic_min_s + (p.periodic_max_s - p.periodic_min_s) * rng.Uniform();
    for (double t = period * rng.Uniform(); t < p.duration_s;
         t += period * (1 + p.periodic_jitter * (2 * rng.Uniform() - 1))) {
      trace.push_back({static_cast<int64_t>(t * 1e9), p.zipf_models + j});
    }
  }

  FakeClock clock(0);
  HostCacheOptions o;
  o.budget_bytes = budget;
  o.load_concurrency = p.load_concurrency;
  // The cache starts with a wrong guess (half the real bandwidth) and learns.
  o.disk = {.initial_bytes_per_sec = p.disk_bytes_per_sec / 2, .latency_ns = p.disk_latency_ns,
            .ewma_alpha = 0.25};
  o.policy = policy == SimPolicy::kLru ? EvictionPolicy::kLru : EvictionPolicy::kMissCost;
  o.keepalive = policy == SimPolicy::kMissCostKeepAlive;
  o.prewarm_margin_ns = p.tick_ns + 50 * kNsPerMs;  // covers the polling period
  std::unique_ptr<HostCache> cache = std::move(HostCache::Create(o, &clock)).value();
  std::vector<ModelKey> keys;
  for (int i = 0; i < n; ++i) {
    // Appended, not "t" + to_string(): g++ 12 -O3 misreports -Wrestrict on the latter.
    ModelKey key;
    key.tenant.append("t").append(std::to_string(i % 10));
    key.model.append("m").append(std::to_string(i));
    key.version = 1;
    keys.push_back(std::move(key));
    (void)cache->Register(keys.back(), bytes[static_cast<size_t>(i)]);
  }
  std::map<ModelKey, int> index;
  for (int i = 0; i < n; ++i) index[keys[static_cast<size_t>(i)]] = i;

  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events;
  uint64_t seq = 0;
  for (const Arrival& a : trace) events.push({a.t_ns, seq++, EventType::kArrival, a.model});
  if (o.keepalive) events.push({p.tick_ns, seq++, EventType::kTick, -1});

  std::vector<int64_t> slot_free(static_cast<size_t>(p.load_concurrency), 0);
  std::vector<std::vector<int64_t>> waiting(static_cast<size_t>(n));  // arrival times
  PolicySimResult r;
  double wait_ns_sum = 0;

  auto start_load = [&](const TierAction& action, int64_t now) {
    auto slot = std::min_element(slot_free.begin(), slot_free.end());
    const int64_t start = std::max(now, *slot);
    const int64_t dur = p.disk_latency_ns +
                        static_cast<int64_t>(static_cast<double>(action.bytes) / p.disk_bytes_per_sec * 1e9);
    *slot = start + dur;
    events.push({start + dur, seq++, EventType::kLoadDone, index[action.key], action.id, start});
  };

  while (!events.empty()) {
    const Event ev = events.top();
    events.pop();
    if (ev.t_ns > end_ns && ev.type == EventType::kTick) continue;
    clock.AdvanceTo(ev.t_ns);
    const int64_t now = clock.NowNs();
    switch (ev.type) {
      case EventType::kArrival:
      case EventType::kRetry: {
        const ModelKey& k = keys[static_cast<size_t>(ev.model)];
        Result<Acquisition> a = cache->Acquire(k);
        if (!a.ok()) {
          ++r.unavailable_retries;
          events.push({now + kNsPerMs, seq++, EventType::kRetry, ev.model});
          break;
        }
        ++r.requests;
        const bool periodic = ev.model >= p.zipf_models;
        r.periodic_requests += periodic;
        r.periodic_cold_loads += periodic && a->state_before == Residency::kAbsent;
        if (a->state_before == Residency::kResident) {
          ++r.hits;
          events.push({now + p.exec_ns, seq++, EventType::kExecDone, ev.model});
        } else {
          ++(a->state_before == Residency::kAbsent ? r.cold_loads : r.joined_loads);
          waiting[static_cast<size_t>(ev.model)].push_back(now);
          if (a->action.has_value()) start_load(*a->action, now);
        }
        break;
      }
      case EventType::kLoadDone: {
        (void)cache->FinishMove(ev.action, ev.started_ns, Status::Ok());
        for (int64_t arrived : waiting[static_cast<size_t>(ev.model)]) {
          wait_ns_sum += static_cast<double>(now - arrived);
          events.push({now + p.exec_ns, seq++, EventType::kExecDone, ev.model});
        }
        waiting[static_cast<size_t>(ev.model)].clear();
        break;
      }
      case EventType::kExecDone:
        (void)cache->Release(keys[static_cast<size_t>(ev.model)]);
        break;
      case EventType::kTick: {
        cache->ExpireIdle();
        for (const ModelKey& k : cache->PrewarmDue(now)) {
          Result<std::optional<TierAction>> pw = cache->Prewarm(k);
          if (pw.ok() && pw->has_value()) start_load(**pw, now);
        }
        events.push({now + p.tick_ns, seq++, EventType::kTick, -1});
        break;
      }
    }
    r.max_used_bytes = std::max(r.max_used_bytes, cache->Stats().used_bytes);
  }
  clock.AdvanceTo(end_ns);
  const TierStats s = cache->Stats();
  r.prewarms = s.prewarms;
  r.loads = s.moves_started;
  r.bytes_loaded = static_cast<double>(s.bytes_moved);
  r.idle_byte_seconds = s.idle_byte_ns / 1e9;
  r.mean_wait_ms = r.requests ? wait_ns_sum / static_cast<double>(r.requests) / 1e6 : 0;
  r.budget_bytes = static_cast<double>(budget);
  r.duration_s = static_cast<double>(std::max(end_ns, clock.NowNs())) / 1e9;
  return r;
}

}  // namespace orrery
