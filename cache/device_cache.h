// The device cache: model weights in device memory, managed in fixed-size
// pages (the device's page size). A model takes ceil(bytes / page) pages from
// a free list, in any order: its weights need not be contiguous, so there is
// no fragmentation and a model fits whenever enough pages are free.
//
// States, pinning, eviction by expected miss cost, fair per-tenant share and
// keep-alive are TierCache's (cache/tier_cache.h); a "move" here is a host ->
// device transfer, an action on the device's link timeline (shared with any
// other copy on that link), predicted as latency + bytes / link bandwidth and
// learned from measured copies. The model's weights must be resident in the
// host cache while its transfer runs (the caller pins both).
//
// Thread-safe. Pages() and the page counts take a second, inner lock.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "base/status.h"
#include "base/clock.h"
#include "cache/device.h"
#include "cache/tier_cache.h"

namespace orrery {

struct DeviceCacheOptions {
  EvictionPolicy policy = EvictionPolicy::kMissCost;
  bool keepalive = true;
  KeepAliveOptions keepalive_options;
  int64_t prewarm_margin_ns = 50 * kNsPerMs;
  int64_t rate_tau_ns = 30 * kNsPerSec;
  // Called with a model's key when its device pages are freed (evicted,
  // expired, unregistered while resident, or its transfer failed), under the
  // cache's lock: it must be quick and must not call this cache. A real
  // device frees what the model holds there (orreryd: the GPU executor's
  // Release, api/device_tier.h). Empty: nothing (the simulated device).
  std::function<void(const ModelKey&)> on_free = {};
};

class DeviceCache : public TierCache {
 public:
  // `device` must outlive the cache.
  static Result<std::unique_ptr<DeviceCache>> Create(const Device* device, const DeviceCacheOptions& options,
                                                     const Clock* clock);

  const Device& device() const { return *device_; }
  // The pages holding `key` (moving or resident), in allocation order; empty if absent.
  std::vector<uint32_t> Pages(const ModelKey& key) const;
  uint32_t total_pages() const { return total_pages_; }
  uint32_t free_pages() const;

 protected:
  void OnReserve(const ModelKey& key, int64_t charged_bytes) override;
  void OnFree(const ModelKey& key) override;

 private:
  DeviceCache(const TierOptions& options, const Device* device, std::function<void(const ModelKey&)> on_free,
              const Clock* clock);

  const Device* device_;
  std::function<void(const ModelKey&)> on_free_;
  uint32_t total_pages_;
  mutable std::mutex pages_mu_;
  std::vector<uint32_t> free_;  // a stack: the most recently freed page is reused first
  std::map<ModelKey, std::vector<uint32_t>> pages_;
};

}  // namespace orrery
