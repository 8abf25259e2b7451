#include "cache/device_cache.h"

namespace orrery {

DeviceCache::DeviceCache(const TierOptions& options, const Device* device,
                         std::function<void(const ModelKey&)> on_free, const Clock* clock)
    : TierCache(options, clock),
      device_(device),
      on_free_(std::move(on_free)),
      total_pages_(static_cast<uint32_t>(device->memory_bytes() / device->page_bytes())) {
  free_.reserve(total_pages_);
  for (uint32_t p = total_pages_; p > 0; --p) free_.push_back(p - 1);  // page 0 on top
}

Result<std::unique_ptr<DeviceCache>> DeviceCache::Create(const Device* device, const DeviceCacheOptions& o,
                                                         const Clock* clock) {
  if (device->memory_bytes() / device->page_bytes() > UINT32_MAX) {
    return Status::InvalidArgument("device " + std::string(device->name()) + " has more than 2^32 pages");
  }
  TierOptions t;
  t.name = std::string(device->name()) + " device";
  t.capacity_bytes = device->memory_bytes();
  t.granule_bytes = device->page_bytes();
  t.concurrency = 1;
  t.timeline = device->link();
  t.transfer = {.initial_bytes_per_sec = device->link_bytes_per_sec(),
                .latency_ns = device->link_latency_ns(),
                .ewma_alpha = 0.25};
  t.policy = o.policy;
  t.keepalive = o.keepalive;
  t.keepalive_options = o.keepalive_options;
  t.prewarm_margin_ns = o.prewarm_margin_ns;
  t.rate_tau_ns = o.rate_tau_ns;
  ORRERY_RETURN_IF_ERROR(Validate(t));
  return std::unique_ptr<DeviceCache>(new DeviceCache(t, device, o.on_free, clock));
}

void DeviceCache::OnReserve(const ModelKey& key, int64_t charged_bytes) {
  const int64_t n = charged_bytes / device_->page_bytes();
  std::lock_guard<std::mutex> lock(pages_mu_);
  std::vector<uint32_t>& mine = pages_[key];
  // TierCache's accounting admits a move only when enough pages are free.
  for (int64_t i = 0; i < n && !free_.empty(); ++i) {
    mine.push_back(free_.back());
    free_.pop_back();
  }
}

void DeviceCache::OnFree(const ModelKey& key) {
  {
    std::lock_guard<std::mutex> lock(pages_mu_);
    auto it = pages_.find(key);
    if (it == pages_.end()) return;
    for (auto p = it->second.rbegin(); p != it->second.rend(); ++p) free_.push_back(*p);
    pages_.erase(it);
  }
  if (on_free_) on_free_(key);
}

std::vector<uint32_t> DeviceCache::Pages(const ModelKey& key) const {
  std::lock_guard<std::mutex> lock(pages_mu_);
  auto it = pages_.find(key);
  return it == pages_.end() ? std::vector<uint32_t>{} : it->second;
}

uint32_t DeviceCache::free_pages() const {
  std::lock_guard<std::mutex> lock(pages_mu_);
  return static_cast<uint32_t>(free_.size());
}

}  // namespace orrery
