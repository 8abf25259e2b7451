// How orreryd reaches a CUDA GPU without linking CUDA. The backend
// (runtime/cuda, ops/cuda, cache/cuda_device.h) is built into a separate
// module, liborrery_cuda.so, next to the orreryd binary; it is loaded
// (dlopen) only when a GPU is asked for and the CUDA driver reports one, so
// a server on the CPU (and one asked for a GPU on a machine without a
// driver) never maps cudart, cuBLAS or cuDNN: about 145 MiB of resident
// memory otherwise (cache/README.md, memory bound).
//
// Plain C++ with no CUDA types: every build has it. The module resolves
// Orrery's own symbols (runtime, ops, base) against the executable that
// loads it, so that executable must export them (orreryd: ENABLE_EXPORTS).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "cache/device.h"
#include "runtime/model.h"

namespace orrery {

// Runs inference requests of compiled models on an opened GPU (in the
// module: runtime::CudaExecutor). Thread-safe.
class GpuExecutor {
 public:
  virtual ~GpuExecutor() = default;
  // OK when every step of the model runs on the GPU for these inputs;
  // else UNIMPLEMENTED naming the first step that does not.
  virtual Status Supports(const CompiledModel& model,
                          const std::vector<NamedTensor>& inputs) = 0;
  // The device tier's transfer of `model` (what DeviceLanesOptions::copy
  // performs for a GPU): uploads its weights under `model_id`
  // (ModelKey::ToString()) into `pages`, the device pages the device cache
  // assigned it (DeviceCache::Pages), on the copy stream; blocks until they
  // are on the device. FAILED_PRECONDITION when the page count is not what
  // the weights' layout needs (runtime/cuda/weight_layout.h).
  virtual Status Upload(const std::string& model_id, const CompiledModel& model,
                        const std::vector<uint32_t>& pages) = 0;
  // The device cache freed `model_id` (evicted, or its transfer failed):
  // drops its weights and plans (its pages are unmapped once no run holds
  // them). No-op when absent.
  virtual void Release(const std::string& model_id) = 0;
  // One inference on the GPU: outputs in signature order, named. Uses the
  // weights uploaded under `model_id` (uploads them when absent: counted as
  // a fallback, runtime/cuda/cuda_executor.h).
  virtual Result<std::vector<NamedTensor>> Run(const std::string& model_id, const CompiledModel& model,
                                               const std::vector<NamedTensor>& inputs) = 0;
};

// An opened GPU: the Device for the caches and placement, and what runs
// plans on it. The executor uses the device's context: destroy it first
// while plans may still run, or keep the device alive until it is gone.
struct OpenedGpu {
  std::unique_ptr<Device> device;
  std::unique_ptr<GpuExecutor> executor;
};

// The module's one object (never freed: the module is never unloaded).
class CudaBackend {
 public:
  // UNAVAILABLE "no CUDA device ..." when the driver reports none or
  // `ordinal` is out of range; RESOURCE_EXHAUSTED when the device pages or the
  // staging buffers cannot be allocated.
  virtual Result<OpenedGpu> Open(int ordinal) = 0;

 protected:
  ~CudaBackend() = default;
};

// The module's entry point, extern "C": CudaBackend* orrery_cuda_backend(int
// abi). It returns null when `abi` differs from the module's. The module
// shares Orrery's C++ types with orreryd, so the two must come from the same
// build (deploy them together); bump the number when these interfaces change.
inline constexpr int kCudaBackendAbi = 3;
inline constexpr const char* kCudaBackendEntry = "orrery_cuda_backend";

// <directory of the running executable>/liborrery_cuda.so.
std::string CudaModulePath();

// Loads the module at `path` (dlopen, RTLD_NOW: an unresolved symbol fails
// here, not at a later call) and returns its backend. UNAVAILABLE "no CUDA
// device: cannot load <path>: <dlerror>" (or naming the ABI mismatch).
// Loading twice returns the same backend. Loads the CUDA libraries.
Result<CudaBackend*> LoadCudaBackend(const std::string& path);

// What orreryd calls for --device cuda[:N] / auto: UNAVAILABLE "no CUDA
// device: ..." without loading any CUDA library when the build has no CUDA
// backend, or the CUDA driver (libcuda.so.1) is missing or reports no
// device; else loads the module (CudaModulePath()) and opens the GPU. The
// driver check dlopens libcuda.so.1 and calls cuInit / cuDeviceGetCount;
// the driver stays loaded when present. Setting ORRERY_CUDA_SKIP_DRIVER_CHECK
// (tests) loads the module even without a driver, to check that it loads.
Result<OpenedGpu> OpenCudaGpu(int ordinal);

// True when this build has the CUDA module (nvcc was found).
bool CudaModuleBuilt();

// orreryd's --device value: "cpu", "auto" (the first GPU if any, else the
// CPU) or "cuda" / "cuda:N". INVALID_ARGUMENT naming the value otherwise.
struct DeviceSelection {
  enum class Kind { kCpu, kAuto, kCuda };
  Kind kind = Kind::kCpu;
  int ordinal = 0;
};
Result<DeviceSelection> ParseDeviceSelection(std::string_view value);

}  // namespace orrery
