// CudaPlan in builds without nvcc: the check still runs, then UNAVAILABLE.
#include "runtime/cuda/cuda_plan.h"

namespace orrery::runtime {

struct CudaPlan::Impl {};

Result<std::unique_ptr<CudaPlan>> CudaPlan::Compile(std::shared_ptr<const Plan> plan,
                                                    const std::vector<ops::TensorType>& input_types,
                                                    CudaContext*) {
  ORRERY_RETURN_IF_ERROR(CheckCudaPlan(*plan, input_types));
  return Status::Unavailable("no CUDA device: this build has no CUDA backend (nvcc not found, or a sanitizer build)");
}

CudaPlan::CudaPlan(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CudaPlan::~CudaPlan() = default;

Result<std::vector<Tensor>> CudaPlan::Run(const std::vector<Tensor>&) {
  return Status::Unavailable("no CUDA device");
}

int64_t CudaPlan::device_bytes() const { return 0; }

}  // namespace orrery::runtime
