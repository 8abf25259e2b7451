// The device tier as orreryd wires it: a Device (the simulated accelerator
// of --sim-device, or a GPU opened with --device), its DeviceCache (model
// weights in device pages) and the DeviceLanes that run device-placed
// requests and perform the tier's transfers (scheduler/device_lanes.h).
// Every stored model version is registered with the device cache; one
// larger than the device memory never goes there (logged once, listed by
// CacheList as "too_large") and always runs on the CPU lanes.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "cache/device.h"
#include "cache/device_cache.h"
#include "scheduler/device_lanes.h"
#include "storage/catalog.h"

namespace orrery {

struct DeviceTier {
  // Declaration order is destruction order in reverse: the lanes stop first.
  std::shared_ptr<Device> device;
  std::unique_ptr<DeviceCache> cache;
  std::unique_ptr<DeviceLanes> lanes;
};

// What a real device does for the tier; empty for the simulated device,
// whose transfers are timed waits on its link (scheduler/device_lanes.h).
struct DeviceTierHooks {
  // Performs the transfer of `key` into `pages` (DeviceCache::Pages: what
  // the cache reserved for it): DeviceLanesOptions::copy, on the transfer
  // worker's thread, blocking; its measured time is what the device cache
  // learns the link from. orreryd with a GPU: the executor's Upload of the
  // model's weights (api/server.cc).
  std::function<Status(const ModelKey& key, const std::vector<uint32_t>& pages)> upload = {};
  // DeviceCacheOptions::on_free: the model left the device (evicted,
  // unregistered, or its transfer failed). orreryd: the executor's Release.
  std::function<void(const ModelKey& key)> release = {};
};

// The tier over `device`. `place` false: kept and listed, but the scheduler
// never places a request on it (a device without an executor).
Result<std::unique_ptr<DeviceTier>> MakeDeviceTier(std::shared_ptr<Device> device, bool place,
                                                   DeviceTierHooks hooks = {});

// Registers a stored version with the device cache, charged
// DeviceBytesOf(record, device). A model that can never fit is logged and
// left unregistered: placement then keeps it on the CPU.
void RegisterWithDevice(DeviceTier* tier, const ModelRecord& record);
// What the device cache charges for a version: on a real device the weight
// layout's bytes recorded at upload (ModelRecord::device_weight_bytes,
// runtime/cuda/weight_layout.h), so the cache reserves exactly the pages
// the weights are mapped onto, or 0 for a record from before that field
// (not registered: it stays on the CPU until uploaded again); on the
// simulated device, which runs the CPU plan, the host tier's charge (the
// segment).
int64_t DeviceBytesOf(const ModelRecord& record, const Device& device);
// Forgets a deleted version (one still pinned or moving stays until restart).
void UnregisterFromDevice(DeviceTier* tier, const ModelRecord& record);

}  // namespace orrery
