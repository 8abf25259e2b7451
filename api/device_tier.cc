#include "api/device_tier.h"

#include <spdlog/spdlog.h>

#include "cache/host_tier.h"

namespace orrery {

Result<std::unique_ptr<DeviceTier>> MakeDeviceTier(std::shared_ptr<Device> device, bool place,
                                                   DeviceTierHooks hooks) {
  auto tier = std::make_unique<DeviceTier>();
  tier->device = std::move(device);
  // Keep-alive expiry needs a periodic caller; the device tier evicts by
  // expected miss cost only.
  DeviceCacheOptions cache_options;
  cache_options.keepalive = false;
  cache_options.on_free = std::move(hooks.release);
  ORRERY_ASSIGN_OR_RETURN(tier->cache, DeviceCache::Create(tier->device.get(), cache_options, SteadyClock::Get()));
  DeviceLanesOptions lanes_options;
  lanes_options.place = place;
  if (hooks.upload) {
    lanes_options.copy = [upload = std::move(hooks.upload), cache = tier->cache.get()](const TierAction& action) {
      return upload(action.key, cache->Pages(action.key));
    };
  }
  tier->lanes = std::make_unique<DeviceLanes>(tier->device.get(), tier->cache.get(), lanes_options);
  return tier;
}

void RegisterWithDevice(DeviceTier* tier, const ModelRecord& record) {
  if (tier == nullptr) return;
  const ModelKey key = HostTier::KeyOf(record);
  const int64_t bytes = DeviceBytesOf(record, *tier->device);
  if (bytes == 0) {
    spdlog::info("{} device: {} was stored before device weight layouts were recorded: it runs on the CPU "
                 "lanes only (upload it again to use the device)",
                 tier->device->name(), key.ToString());
    return;
  }
  Status s = tier->cache->Register(key, bytes);
  if (s.code() == StatusCode::kResourceExhausted) {
    spdlog::info("{} device: {} never fits the device memory ({}): it runs on the CPU lanes only",
                 tier->device->name(), key.ToString(), s.message());
  } else if (!s.ok()) {
    spdlog::warn("{} device: cannot register {}: {}", tier->device->name(), key.ToString(), s.message());
  }
}

int64_t DeviceBytesOf(const ModelRecord& record, const Device& device) {
  if (device.simulated()) return HostTier::BytesOf(record);
  return static_cast<int64_t>(record.device_weight_bytes());
}

void UnregisterFromDevice(DeviceTier* tier, const ModelRecord& record) {
  if (tier == nullptr) return;
  const ModelKey key = HostTier::KeyOf(record);
  if (!tier->cache->Info(key).has_value()) return;
  if (Status s = tier->cache->Unregister(key); !s.ok()) {
    spdlog::info("{} device: {} stays registered until restart: {}", tier->device->name(), key.ToString(),
                 s.message());
  }
}

}  // namespace orrery
