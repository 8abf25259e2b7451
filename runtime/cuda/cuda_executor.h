// Runs inference requests of compiled models on a CUDA GPU: what the
// scheduler's device workers call for a request placed on the GPU
// (scheduler/scheduler.h, DeviceExecutor).
//
// A model's weights (CudaWeights: its constants in device memory) are
// uploaded by Upload into the device pages the device cache assigned the
// model (mapped into one range, runtime/cuda/page_mapping.h), which the
// device tier's transfer of that model calls on the transfer worker's
// thread (scheduler/device_lanes.h, `copy`: wired in api/server.cc), and
// unmapped by Release when the device cache frees those pages.
// One CudaPlan per (model plan, input types) borrows them; it is compiled
// on first use (value buffers, cuDNN choices; no weight copy) and kept in a
// small LRU, since it holds device memory too. A Run whose model has no
// uploaded weights (a transfer that found the model out of host RAM, or a
// caller without the device tier) uploads them itself, blocking, into a
// cudaMalloc'ed range outside the pages (it knows no pages), and counts it
// (fallback_uploads). Plain C++ over CudaPlan: it builds without nvcc too,
// where Upload and Run are UNAVAILABLE and Supports still answers
// (CheckCudaPlan needs no device). None of this has run on a GPU in this
// repository (its CI machine has none).
//
// Thread-safe; runs of one plan are serialised by CudaPlan, runs of
// different plans overlap their copies and kernels (cuda_plan.h).
#pragma once

#include <cstddef>
#include <list>
#include <memory>
#include <mutex>
#include <span>
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

  // Uploads `model`'s weights under `model_id` (e.g. "tenant/model@3")
  // into `pages` (the device cache's pages for the model: exactly the
  // weight layout's page count, else FAILED_PRECONDITION; empty: a
  // cudaMalloc'ed range): blocks until they are on the device. OK at once
  // when they are there already for this model's plan on these pages (or
  // on any, when `pages` is empty). UNAVAILABLE without a device.
  Status Upload(const std::string& model_id, const CompiledModel& model, std::span<const uint32_t> pages = {});
  // Drops `model_id`'s weights and compiled plans; their pages are unmapped
  // (or their memory freed) when the last run using them ends. The device
  // cache reuses the pages at once, which is safe because it never frees a
  // model a device run pins (scheduler/device_lanes.h). No-op when absent.
  // Cheap (no device call unless it unmaps).
  void Release(const std::string& model_id);

  // One inference on the GPU: outputs in signature order, named. Compiles
  // the plan for these input types on first use, over the weights uploaded
  // under `model_id` (uploading them first when absent: a fallback upload).
  // An empty `model_id` keys the weights by the model's plan.
  Result<std::vector<NamedTensor>> Run(const std::string& model_id, const CompiledModel& model,
                                       const std::vector<NamedTensor>& inputs);
  Result<std::vector<NamedTensor>> Run(const CompiledModel& model, const std::vector<NamedTensor>& inputs) {
    return Run(std::string(), model, inputs);
  }

  size_t compiled_plans() const;
  struct WeightStats {
    uint64_t uploads = 0;           // by Upload (transfers)
    uint64_t fallback_uploads = 0;  // by Run, weights absent
    uint64_t releases = 0;          // Release calls that dropped weights
    size_t resident = 0;            // models with weights on the device now
    int64_t resident_bytes = 0;
  };
  WeightStats weight_stats() const;

 private:
  struct Entry {
    std::shared_ptr<const Plan> plan;  // keeps the key's address unique
    std::string weights_id;            // its weights_ key
    std::unique_ptr<CudaPlan> cuda;
    std::list<std::string>::iterator lru;
  };
  // The weights of `model` under `id`, uploading them (into `pages`) when
  // absent, uploaded for another plan or on other pages (`*uploaded` then true).
  Result<std::shared_ptr<const CudaWeights>> WeightsFor(const std::string& id, const CompiledModel& model,
                                                        std::span<const uint32_t> pages, bool* uploaded);
  static std::string PlanId(const CompiledModel& model);
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
  std::unordered_map<std::string, std::shared_ptr<const CudaWeights>> weights_;
  WeightStats weight_stats_;
};

}  // namespace orrery::runtime
