// Runs inference requests of compiled models on a CUDA GPU: what the
// scheduler's device workers call for a request placed on the GPU
// (scheduler/scheduler.h, DeviceExecutor).
//
// One CudaPlan per (model plan, input types), compiled on first use (its
// constants uploaded then, blocking) and kept in a small LRU, since a
// compiled plan holds device memory. Plain C++ over CudaPlan: it builds
// without nvcc too, where every Run is UNAVAILABLE and Supports still
// answers (CheckCudaPlan needs no device).
//
// Thread-safe; runs of one plan are serialised by CudaPlan, runs of
// different plans overlap their copies and kernels (cuda_plan.h).
#pragma once

#include <cstddef>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "runtime/cuda/cuda_plan.h"
#include "runtime/model.h"

namespace orrery::runtime {

class CudaExecutor {
 public:
  // `context` (may be null: every Run is UNAVAILABLE) must outlive this.
  explicit CudaExecutor(CudaContext* context, size_t max_plans = 32);

  // OK when every step of the model runs on the GPU for these inputs (all
  // graph inputs given by name, matching dtypes); else UNIMPLEMENTED naming
  // the first step that does not, or INVALID_ARGUMENT for the inputs.
  // Remembered per (plan, input types): O(steps) once, then a map lookup.
  Status Supports(const CompiledModel& model, const std::vector<NamedTensor>& inputs);

  // One inference on the GPU: outputs in signature order, named. Compiles
  // the plan for these input types on first use.
  Result<std::vector<NamedTensor>> Run(const CompiledModel& model, const std::vector<NamedTensor>& inputs);

  size_t compiled_plans() const;

 private:
  struct Entry {
    std::shared_ptr<const Plan> plan;  // keeps the key's address unique
    std::unique_ptr<CudaPlan> cuda;
    std::list<std::string>::iterator lru;
  };
  // Graph-input order tensors and the cache key of (plan, their types).
  Status Arrange(const CompiledModel& model, const std::vector<NamedTensor>& inputs, std::vector<Tensor>* ordered,
                 std::vector<ops::TensorType>* types, std::string* key) const;

  CudaContext* context_;
  size_t max_plans_;
  mutable std::mutex mu_;
  struct Support {
    std::shared_ptr<const Plan> plan;  // keeps the key's address unique
    Status status;                     // CheckCudaPlan
  };
  std::unordered_map<std::string, Support> support_;
  std::unordered_map<std::string, std::shared_ptr<Entry>> plans_;
  std::list<std::string> lru_;  // most recent first
};

}  // namespace orrery::runtime
