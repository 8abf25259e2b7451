// What the API layer hands to a scheduler: one inference request and the
// callback that receives its outputs or error.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/status.h"
#include "cache/model_cache.h"
#include "runtime/tensor.h"

namespace orrery {

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
};

using InferenceCallback = std::function<void(Result<std::vector<NamedTensor>>)>;

}  // namespace orrery
