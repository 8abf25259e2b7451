// Placement of one request: CPU lanes or the device, whichever is predicted
// to complete first, counting every move the path needs. Pure arithmetic on
// predictions (ChoosePlacement) plus a helper that reads them from the caches
// (GatherPlacementInput); it starts nothing. The scheduler acts on the
// decision: acquire in the host cache, and for the device path also in the
// device cache (whose transfer waits for the host load).
//
//   CPU:    max(now, host ready, lane free) + cpu_exec
//   device: max(now, device ready, device free) + device_exec, where device
//           ready is now when resident there, the transfer's predicted end
//           when moving, else the end of a new transfer on the link that
//           starts no earlier than the host copy is ready.
// Ties go to the CPU (no transfer, no device memory). A cold model may thus
// run on the CPU while its weights move to the device for later requests
// (the scheduler may start that transfer with DeviceCache::Prewarm).
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"
#include "cache/device.h"
#include "cache/device_cache.h"
#include "cache/host_cache.h"

namespace orrery {

enum class PlacementTarget { kCpu, kDevice };
std::string_view PlacementTargetName(PlacementTarget t);

struct PlacementInput {
  int64_t now_ns = 0;
  int64_t cpu_exec_ns = 0;       // predicted run time on the CPU lanes
  int64_t cpu_lane_free_ns = 0;  // earliest a lane can start it (scheduler's queue)
  Residency host_state = Residency::kAbsent;
  int64_t host_ready_ns = 0;     // now / load end / a new load's predicted end
  bool device_available = false; // a device exists and the model can fit it
  Residency device_state = Residency::kAbsent;
  int64_t device_ready_ns = 0;   // now / transfer end (moving); ignored when absent
  int64_t transfer_ns = 0;       // a transfer's duration (absent on the device)
  int64_t link_free_ns = 0;      // earliest the link takes a new copy
  int64_t device_exec_ns = 0;
  int64_t device_free_ns = 0;    // earliest the device's compute queue is free
};

struct Placement {
  PlacementTarget target = PlacementTarget::kCpu;
  int64_t cpu_done_ns = 0;
  int64_t device_done_ns = INT64_MAX;  // INT64_MAX without a usable device
  int64_t host_ready_ns = 0;
  int64_t device_ready_ns = INT64_MAX;
  bool needs_host_load = false;       // the model is not (yet) in host RAM
  bool needs_transfer = false;        // the device path includes a new transfer
  // "cpu: done at +80.0 ms (load 50.0 ms) vs device +90.0 ms", for logs.
  std::string Explain(int64_t now_ns) const;
};

Placement ChoosePlacement(const PlacementInput& in);

// Reads the caches' current predictions for `key`. `device_cache` may be
// null (no device). The model must be registered in the host cache
// (NOT_FOUND otherwise); one not registered with the device cache (e.g. too
// large for it) makes the device unavailable for it.
Result<PlacementInput> GatherPlacementInput(const ModelKey& key, int64_t cpu_exec_ns, int64_t cpu_lane_free_ns,
                                            const HostCache& host, const DeviceCache* device_cache,
                                            const Clock& clock);

// The device half of GatherPlacementInput, for a caller that knows the host
// side already (the scheduler: the request's handler holds the host pin, so
// the weights are in RAM). `in` must have now_ns, cpu_exec_ns and
// host_ready_ns set; fills the device fields. No-op (device unavailable)
// when `device_cache` is null or `key` is not registered with it.
Status AddDevicePlacementInput(const ModelKey& key, const DeviceCache* device_cache, PlacementInput* in);

}  // namespace orrery
