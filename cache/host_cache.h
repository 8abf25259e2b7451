// The host cache: packed weights of models in RAM, bounded by a byte budget
// (`--host-cache-bytes`). Loads from disk (the io_uring segment reader,
// storage/segment_reader.h) are actions on the loader timeline, up to
// `load_concurrency` in flight, each predicted as latency + bytes / disk
// bandwidth, the bandwidth learned from measured loads. States, pinning,
// eviction by expected miss cost, the fair per-tenant share and the
// keep-alive / pre-warm windows are TierCache's (cache/tier_cache.h).
//
// Usage by the server (the caller owns the loader threads and the bytes):
//   Register(key, segment bytes) at upload / start-up (refuses what never fits);
//   Acquire(key) per request -> if it returns an action, a loader thread reads
//     the segment and calls FinishMove(action.id, started, status);
//     the request runs once the key is resident, then Release(key);
//   periodically: ExpireIdle(), and Prewarm(k) for k in PrewarmDue(now).
#pragma once

#include <cstdint>
#include <memory>

#include "base/status.h"
#include "base/clock.h"
#include "cache/tier_cache.h"

namespace orrery {

struct HostCacheOptions {
  int64_t budget_bytes = int64_t{4} << 30;  // --host-cache-bytes
  int load_concurrency = 4;                 // loads in flight (the disk's useful concurrency)
  // Disk: per-load latency and the bandwidth assumed until the first load is measured.
  TransferModel::Options disk{.initial_bytes_per_sec = 1e9, .latency_ns = 200'000, .ewma_alpha = 0.25};
  EvictionPolicy policy = EvictionPolicy::kMissCost;
  bool keepalive = true;
  KeepAliveOptions keepalive_options;
  int64_t prewarm_margin_ns = 50 * kNsPerMs;
  int64_t rate_tau_ns = 30 * kNsPerSec;
  // Loads are predicted this much longer at most, by how late recent loads
  // ended (TierOptions::move_slack; 0 = off).
  double load_slack_max = 1.0;
};

class HostCache : public TierCache {
 public:
  // INVALID_ARGUMENT for a budget <= 0 or a concurrency < 1.
  static Result<std::unique_ptr<HostCache>> Create(const HostCacheOptions& options, const Clock* clock);

  static TierOptions ToTierOptions(const HostCacheOptions& options);

 private:
  HostCache(const TierOptions& options, const Clock* clock) : TierCache(options, clock) {}
};

}  // namespace orrery
