#include "cache/placement.h"

#include <algorithm>
#include <cstdio>

namespace orrery {

std::string_view PlacementTargetName(PlacementTarget t) {
  return t == PlacementTarget::kCpu ? "cpu" : "device";
}

Placement ChoosePlacement(const PlacementInput& in) {
  Placement p;
  p.host_ready_ns = std::max(in.now_ns, in.host_ready_ns);
  p.needs_host_load = in.host_state != Residency::kResident;
  p.cpu_done_ns = std::max({in.now_ns, p.host_ready_ns, in.cpu_lane_free_ns}) + in.cpu_exec_ns;
  if (in.device_available) {
    switch (in.device_state) {
      case Residency::kResident: p.device_ready_ns = in.now_ns; break;
      case Residency::kMoving: p.device_ready_ns = std::max(in.now_ns, in.device_ready_ns); break;
      case Residency::kAbsent:
        p.needs_transfer = true;
        p.device_ready_ns = std::max(p.host_ready_ns, in.link_free_ns) + in.transfer_ns;
        break;
    }
    p.device_done_ns = std::max({in.now_ns, p.device_ready_ns, in.device_free_ns}) + in.device_exec_ns;
  }
  p.target = p.device_done_ns < p.cpu_done_ns ? PlacementTarget::kDevice : PlacementTarget::kCpu;
  return p;
}

std::string Placement::Explain(int64_t now_ns) const {
  char buf[200];
  auto ms = [&](int64_t t) { return static_cast<double>(t - now_ns) / 1e6; };
  if (device_done_ns == INT64_MAX) {
    std::snprintf(buf, sizeof(buf), "cpu: done at +%.3f ms (host ready +%.3f ms); no device", ms(cpu_done_ns),
                  ms(host_ready_ns));
  } else {
    std::snprintf(buf, sizeof(buf), "%s: cpu done at +%.3f ms, device at +%.3f ms (host ready +%.3f ms, device ready +%.3f ms%s)",
                  std::string(PlacementTargetName(target)).c_str(), ms(cpu_done_ns), ms(device_done_ns),
                  ms(host_ready_ns), ms(device_ready_ns), needs_transfer ? ", with a transfer" : "");
  }
  return buf;
}

Result<PlacementInput> GatherPlacementInput(const ModelKey& key, int64_t cpu_exec_ns, int64_t cpu_lane_free_ns,
                                            const HostCache& host, const DeviceCache* device_cache,
                                            const Clock& clock) {
  PlacementInput in;
  in.now_ns = clock.NowNs();
  in.cpu_exec_ns = cpu_exec_ns;
  in.cpu_lane_free_ns = cpu_lane_free_ns;
  in.host_state = host.state(key);
  ORRERY_ASSIGN_OR_RETURN(in.host_ready_ns, host.PredictReadyNs(key));
  ORRERY_RETURN_IF_ERROR(AddDevicePlacementInput(key, device_cache, &in));
  return in;
}

Status AddDevicePlacementInput(const ModelKey& key, const DeviceCache* device_cache, PlacementInput* in) {
  if (device_cache == nullptr || !device_cache->Info(key).has_value()) return Status::Ok();
  const Device& device = device_cache->device();
  in->device_available = true;
  in->device_state = device_cache->state(key);
  if (in->device_state == Residency::kMoving) {
    ORRERY_ASSIGN_OR_RETURN(in->device_ready_ns, device_cache->PredictReadyNs(key));
  } else if (in->device_state == Residency::kAbsent) {
    ORRERY_ASSIGN_OR_RETURN(Interval copy, device_cache->PredictMove(key, in->host_ready_ns));
    in->transfer_ns = copy.duration_ns();
    in->link_free_ns = copy.start_ns;  // already includes the link's queue
  } else {
    in->device_ready_ns = in->now_ns;
  }
  in->device_exec_ns = device.ExecNs(in->cpu_exec_ns);
  in->device_free_ns = device.compute()->FreeAtNs();
  return Status::Ok();
}

}  // namespace orrery
