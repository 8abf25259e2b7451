// Calibration: measuring a model's plan on a lane before real traffic, so
// that its first requests are admitted, charged and batched on measured
// costs instead of none.
//
// A calibration is scheduled work: one synthetic (zero-filled) request per
// run, submitted through the FairScheduler for the tenant that owns the
// model, so it is fair-queued against that tenant's share and other tenants
// see it only as that tenant's load. Runs go one at a time (each callback
// submits the next), two per batch size (the first warms the plan's arenas
// and specialisations up; the faster of the two is kept).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "cache/model_cache.h"
#include "runtime/tensor.h"

namespace orrery {

class FairScheduler;

// One batch size's measurement.
struct BatchProfile {
  int batch = 1;
  int64_t total_ns = 0;          // lane time of the whole run (steps only)
  std::vector<int64_t> step_ns;  // per step, in plan order
};

// A model's calibration; batches in increasing size (those whose runs failed
// are absent).
struct CostProfile {
  std::string model_id;
  std::vector<BatchProfile> batches;
  int64_t lane_ns = 0;  // every calibration run together (what it cost the tenant)
  int runs = 0;
};

// The batch sizes to calibrate: 1, 2, 4, 8 up to `max_batch` when every
// input's first dim is dynamic (-1); the fixed size only when it is fixed
// (the same in every input); {1} for a model without inputs or ranks.
std::vector<int> CalibrationBatchSizes(const ModelSignature& signature, int max_batch);

// Zero-filled inputs for a run at `batch`: dim 0 = batch, other dynamic dims
// 1. INVALID_ARGUMENT for an input of undeclared rank with a batch > 1.
Result<std::vector<NamedTensor>> CalibrationInputs(const ModelSignature& signature, int batch);

// Starts calibrating `model` for `tenant_id` on `scheduler` (asynchronous;
// returns at once). `done` is called once, on a lane thread, with the
// profile of the batch sizes that ran (fewer when a run failed or the
// scheduler began shutting down). An error means nothing was submitted and
// `done` is never called. Cost: 2 runs per batch size.
Status StartCalibration(FairScheduler* scheduler, const std::string& tenant_id, ModelCache::ModelPtr model,
                        const std::string& model_id, std::vector<int> batches,
                        std::function<void(CostProfile)> done);

}  // namespace orrery
