// What the API layer hands to a scheduler: one inference request and the
// callback that receives its outputs or error.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/status.h"
#include "cache/model_cache.h"
#include "cache/model_key.h"
#include "runtime/tensor.h"

namespace orrery {

// What the scheduler measured for one request, on its clock
// (FairScheduler::NowNs()); filled in before the callback runs.
struct RunReport {
  int64_t admitted_ns = 0;  // Submit accepted it
  int64_t started_ns = 0;   // first lane step; 0 = never ran (dropped, or failed to start)
  int64_t ended_ns = 0;     // outcome known
  int64_t lane_ns = 0;      // measured lane time (steps only; parked time excluded)
  // Requests that ran together as one batch (1 = alone), this request's
  // share of the batch (its rows / all rows) and of its lane time; lane_ns
  // above is already that share. Billing charges lane_ns.
  int batch_size = 1;
  double batch_share = 1.0;
  int64_t batch_lane_ns = 0;  // the whole batch's measured lane time
  // The lane time predicted for the run when it started (for the lane's
  // cache state; this request's share when batched): lane_ns vs this is the
  // prediction error. 0 = nothing was predicted.
  int64_t predicted_lane_ns = 0;
  // Measured time of every step, in order; filled for calibration runs only.
  std::vector<int64_t> step_ns = {};
  // Placement (scheduler/device_lanes.h): true when it ran on the device;
  // then lane_ns is 0 and device_ns the device time it held (billed per
  // device-second). bytes_transferred: a host -> device transfer its
  // placement started (its own, or a pre-warm next to a CPU run); billed per
  // GB moved. 0 when it hit or joined a transfer.
  bool on_device = false;
  int64_t device_ns = 0;
  int64_t bytes_transferred = 0;
};

struct InferenceRequest {
  std::string tenant_id;
  ModelCache::ModelPtr model;
  std::vector<NamedTensor> inputs;
  // Cost-model key, e.g. "t_1/mlp@3"; "" = keyed by the model's address.
  std::string model_id = {};
  // Absolute, on the scheduler's clock (FairScheduler::NowNs()); 0 = the
  // tenant's default timeout.
  int64_t deadline_ns = 0;
  // > 0: the tenant's current weight (from tenancy), applied from now on;
  // 0 = leave it as it is.
  double weight = 0;
  uint64_t request_id = 0;  // for messages; 0 = the scheduler assigns one
  // Predicted demand on the resources other than lanes, for the dominant
  // resource share the tenant is charged (fair_queue.h): device time and
  // bytes to load over the link. 0 until the device / cache tiers fill them.
  int64_t device_ns = 0;
  int64_t load_bytes = 0;
  // The model version in the caches; set (tenant non-empty) to let the
  // scheduler place the request on a device (FairSchedulerOptions::device).
  ModelKey cache_key = {};
  // Absolute, on the scheduler's clock: when the model's weights are
  // predicted resident (the host cache load's predicted end); 0 or <= now:
  // they are. Admission predicts completion from the later of this and the
  // lanes' availability (FairScheduler::CheckAdmission before the load).
  int64_t ready_ns = 0;
  // A calibration run (synthetic inputs, see calibration.h): fair-queued and
  // charged to the tenant like any request, but never batched and not
  // recorded in the cost model (the calibration's result is, via
  // FairScheduler::LoadProfile); its RunReport gets per-step times.
  bool calibration = false;
  // Optional; filled before `done` is called, so it must outlive that call
  // (for metering: the API layer bills the measured lane time).
  RunReport* report = nullptr;
};

using InferenceCallback = std::function<void(Result<std::vector<NamedTensor>>)>;

// How requests placed on the device tier run. Empty (the simulated
// device): the model's CPU plan on the device worker's thread. A real device
// (CUDA, runtime/cuda/cuda_executor.h) sets them all: `supports` says whether a
// request's model and inputs run there at all (placement leaves the others
// on the CPU lanes; called under the scheduler's lock, so it must be cheap
// after the first call per model), `run` runs it (on a device worker).
// `upload` and `release` are not the scheduler's: the API layer makes them
// the device tier's transfer and eviction (api/device_tier.h), so that a
// model's weights go to the device on the link action the scheduler
// planned, and leave it when the device cache frees the model.
struct DeviceExecutor {
  std::function<bool(const InferenceRequest&)> supports;
  std::function<Result<std::vector<NamedTensor>>(const InferenceRequest&)> run;
  // Copies `model`'s weights to the device, into `pages` (the device
  // cache's pages for it); blocks (the transfer worker's thread).
  std::function<Status(const ModelKey& key, const CompiledModel& model, const std::vector<uint32_t>& pages)>
      upload = {};
  // Frees what `key` holds on the device; quick (under the device cache's lock).
  std::function<void(const ModelKey& key)> release = {};
};

}  // namespace orrery
