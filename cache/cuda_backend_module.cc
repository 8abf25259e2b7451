// The entry point of liborrery_cuda.so (cache/cuda_backend.h): the CUDA
// backend behind the plain C++ interfaces orreryd sees. Compiled into
// orrery_cache_cuda; only the module exports the entry (cuda_tests link the
// backend directly and never call it).
#include <memory>
#include <string>
#include <vector>

#include "cache/cuda_backend.h"
#include "cache/cuda_device.h"
#include "runtime/cuda/cuda_executor.h"

namespace orrery {
namespace {

class CudaGpuExecutor final : public GpuExecutor {
 public:
  explicit CudaGpuExecutor(runtime::CudaContext* context) : executor_(context) {}

  Status Supports(const CompiledModel& model,
                  const std::vector<NamedTensor>& inputs) override {
    return executor_.Supports(model, inputs);
  }
  Status Upload(const std::string& model_id, const CompiledModel& model,
                const std::vector<uint32_t>& pages) override {
    return executor_.Upload(model_id, model, pages);
  }
  void Release(const std::string& model_id) override { executor_.Release(model_id); }
  Result<std::vector<NamedTensor>> Run(const std::string& model_id, const CompiledModel& model,
                                       const std::vector<NamedTensor>& inputs) override {
    return executor_.Run(model_id, model, inputs);
  }

 private:
  runtime::CudaExecutor executor_;
};

class CudaBackendImpl final : public CudaBackend {
 public:
  Result<OpenedGpu> Open(int ordinal) override {
    CudaDeviceOptions options;
    options.context.ordinal = ordinal;
    ORRERY_ASSIGN_OR_RETURN(std::unique_ptr<CudaDevice> device, CudaDevice::Open(options));
    OpenedGpu gpu;
    gpu.executor = std::make_unique<CudaGpuExecutor>(device->context());
    gpu.device = std::move(device);
    return gpu;
  }
};

}  // namespace
}  // namespace orrery

extern "C" __attribute__((visibility("default"))) orrery::CudaBackend* orrery_cuda_backend(int abi) {
  static orrery::CudaBackendImpl backend;
  return abi == orrery::kCudaBackendAbi ? &backend : nullptr;
}
