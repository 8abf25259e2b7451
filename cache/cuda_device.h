// A CUDA GPU as the caches and placement see it (cache/device.h): memory is
// the physical pages of a runtime::CudaContext (CUDA virtual memory
// management; cache/device_cache.h hands out their numbers and a model's
// weights are mapped onto its pages), the link is the host -> device copy
// path through pinned staging buffers with its bandwidth and latency
// measured when the device opens, and compute is the context's compute
// stream. Plans run on it with runtime/cuda/cuda_plan.h (context()).
//
// Library orrery_cache_cuda (not orrery_cache): linked into the CUDA module
// liborrery_cuda.so, which orreryd loads only when a GPU is asked for
// (cache/cuda_backend.h), and into cuda_tests. In builds without nvcc every
// Open returns UNAVAILABLE "no CUDA device ...". Nothing in this file has run on a
// GPU in this repository's CI machine (it has none): the tests there check
// the stub paths, the flag parsing and the clean skip.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "base/status.h"
#include "cache/device.h"
#include "runtime/cuda/cuda_context.h"

namespace orrery {

struct CudaDeviceOptions {
  runtime::CudaContextOptions context;
  // Predicted device time = CPU lane time / exec_speedup, until plans'
  // measured GPU times feed the cost model (not done yet).
  double exec_speedup = 1.0;
};

class CudaDevice final : public Device {
 public:
  // Opens the GPU (runtime::CudaContext::Open: pages, staging, streams, link
  // measurement). UNAVAILABLE when there is none.
  static Result<std::unique_ptr<CudaDevice>> Open(const CudaDeviceOptions& options);

  std::string_view name() const override { return name_; }
  std::string Describe() const override;
  bool simulated() const override { return false; }
  int64_t memory_bytes() const override;
  int64_t page_bytes() const override;
  int64_t link_latency_ns() const override;
  double link_bytes_per_sec() const override;
  int64_t CopyNs(int64_t bytes) const override;
  int64_t ExecNs(int64_t cpu_exec_ns) const override;
  std::shared_ptr<ResourceTimeline> link() const override { return link_; }
  std::shared_ptr<ResourceTimeline> compute() const override { return compute_; }

  runtime::CudaContext* context() const { return context_.get(); }

 private:
  CudaDevice(std::unique_ptr<runtime::CudaContext> context, const CudaDeviceOptions& options);

  std::unique_ptr<runtime::CudaContext> context_;
  CudaDeviceOptions options_;
  std::string name_;
  std::shared_ptr<ResourceTimeline> link_;
  std::shared_ptr<ResourceTimeline> compute_;
};

// CUDA device `ordinal` with default options, or UNAVAILABLE "no CUDA
// device ..." (no GPU, no driver, or a build without the CUDA backend).
// orreryd reaches it through the module (cache/cuda_backend.h).
Result<std::unique_ptr<Device>> OpenCudaDevice(int ordinal);

}  // namespace orrery
