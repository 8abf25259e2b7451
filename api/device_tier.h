// The device tier as orreryd wires it: a Device (the simulated accelerator
// of --sim-device, or a GPU opened with --device), its DeviceCache (model
// weights in device pages) and the DeviceLanes that run device-placed
// requests and perform the tier's transfers (scheduler/device_lanes.h).
// Every stored model version is registered with the device cache; one
// larger than the device memory never goes there (logged once, listed by
// CacheList as "too_large") and always runs on the CPU lanes.
#pragma once

#include <functional>
#include <memory>
#include <string>

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
  // Performs the transfer of `key`: DeviceLanesOptions::copy, on the
  // transfer worker's thread, blocking; its measured time is what the
  // device cache learns the link from. orreryd with a GPU: the executor's
  // Upload of the model's weights (api/server.cc).
  std::function<Status(const ModelKey& key)> upload = {};
  // DeviceCacheOptions::on_free: the model left the device (evicted,
  // unregistered, or its transfer failed). orreryd: the executor's Release.
  std::function<void(const ModelKey& key)> release = {};
};

// The tier over `device`. `place` false: kept and listed, but the scheduler
// never places a request on it (a device without an executor).
Result<std::unique_ptr<DeviceTier>> MakeDeviceTier(std::shared_ptr<Device> device, bool place,
                                                   DeviceTierHooks hooks = {});

// Registers a stored version with the device cache (its segment size, as
// the host tier charges it). A model that can never fit is logged and left
// unregistered: placement then keeps it on the CPU.
void RegisterWithDevice(DeviceTier* tier, const ModelRecord& record);
// Forgets a deleted version (one still pinned or moving stays until restart).
void UnregisterFromDevice(DeviceTier* tier, const ModelRecord& record);

}  // namespace orrery
