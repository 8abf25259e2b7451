// One CUDA GPU as the runtime uses it: device memory as fixed-size physical
// pages (CUDA virtual memory management, runtime/cuda/cuda_pages.h) that the
// device cache hands out and models' weights are mapped onto
// (runtime/cuda/page_mapping.h), two pinned host staging buffers (cudaHostAlloc), one
// copy stream and one compute stream (events order them, so that a copy for
// the next request overlaps the current request's kernels), the cuBLAS and
// cuDNN handles bound to the compute stream, and the host -> device link's
// bandwidth and latency measured when it opens.
//
// This header has no CUDA types, so every build can include it: without
// nvcc (ORRERY_HAVE_CUDA off: cuda_context_stub.cc), Open returns
// UNAVAILABLE and CudaDeviceCount() is 0. cache/cuda_device.h adapts it to
// the caches' Device interface; runtime/cuda/cuda_plan.h runs plans on it.
//
// Thread-safety: info and sizes are immutable; CopyToDevice / CopyToHost
// lock the staging buffers (one copy at a time, as on the link); the
// compute stream and the library handles are used under compute_mutex().
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "base/status.h"
#include "runtime/cuda/page_mapping.h"

namespace orrery::runtime {

// True when this binary was built with the CUDA backend.
bool CudaBackendBuilt();

// Number of CUDA devices the driver reports; 0 when there is no driver, no
// device, or no CUDA backend in this build. Cheap after the first call.
int CudaDeviceCount();

struct CudaContextOptions {
  int ordinal = 0;
  // A multiple of the device's allocation granularity (2 MiB on current
  // GPUs), else Open fails naming both.
  int64_t page_bytes = int64_t{2} << 20;
  // Memory in pages: this fraction of the memory free at Open, in whole
  // pages (the rest is left for cuBLAS / cuDNN workspaces and plans'
  // buffers)...
  double memory_fraction = 0.5;
  // ...or exactly this many bytes (rounded down to pages) when > 0.
  int64_t memory_bytes = 0;
  int64_t staging_bytes = int64_t{16} << 20;  // each of the two pinned buffers
};

struct CudaDeviceInfo {
  int ordinal = 0;
  std::string name;  // e.g. "NVIDIA A100-SXM4-40GB"
  int compute_major = 0;
  int compute_minor = 0;
  int64_t total_bytes = 0;  // cudaMemGetInfo at Open
  int64_t free_bytes = 0;
};

class CudaContext {
 public:
  // Selects the device, creates the physical pages (cuMemCreate, one per
  // page) and staging buffers, streams, events and handles, and measures the
  // link (a few 16 MiB copies: tens of milliseconds). UNAVAILABLE "no CUDA
  // device" when the build has no CUDA backend, the driver reports no device
  // or `ordinal` is out of range (or lacks virtual memory management);
  // INVALID_ARGUMENT when page_bytes is not a multiple of the allocation
  // granularity; RESOURCE_EXHAUSTED when the pages or staging cannot be
  // allocated.
  static Result<std::unique_ptr<CudaContext>> Open(const CudaContextOptions& options);
  ~CudaContext();
  CudaContext(const CudaContext&) = delete;
  CudaContext& operator=(const CudaContext&) = delete;

  const CudaDeviceInfo& info() const;
  int64_t page_bytes() const;
  int64_t num_pages() const;
  // The pages' virtual memory operations (MappedPages / MapWeightPages map
  // a model's pages into one range); null in a build without CUDA.
  // Everything mapped through it must be unmapped before the context goes.
  PageMapper* page_mapper() const;

  // Measured at Open with pinned memory: bytes per second of a large copy,
  // and the time of a 4-byte copy.
  double link_bytes_per_sec() const;
  int64_t link_latency_ns() const;

  // Copies `bytes` from pageable host memory to device memory through the
  // pinned staging buffers on the copy stream (double-buffered: the next
  // chunk is staged while the previous one is on the link). Blocks until
  // the copy is complete; the caller is the thread performing a link action.
  Status CopyToDevice(const void* host, void* device, int64_t bytes);
  // The reverse, also blocking.
  Status CopyToHost(const void* device, void* host, int64_t bytes);

  // For runtime/cuda: cudaStream_t, cublasHandle_t and cudnnHandle_t as
  // opaque pointers, and the mutex that serialises work on the compute
  // stream (the handles are not thread-safe).
  void* copy_stream() const;
  void* compute_stream() const;
  void* cublas() const;
  void* cudnn() const;
  std::mutex& compute_mutex() const;

  struct Impl;

 private:
  explicit CudaContext(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace orrery::runtime
