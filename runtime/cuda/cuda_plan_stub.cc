// CudaPlan and CudaWeights in builds without nvcc: the check still runs,
// then UNAVAILABLE.
#include "runtime/cuda/cuda_plan.h"

namespace orrery::runtime {

namespace {
constexpr const char* kNoBackend =
    "no CUDA device: this build has no CUDA backend (nvcc not found, or a sanitizer build)";
}  // namespace

struct CudaWeights::Impl {
  std::shared_ptr<const Plan> plan;
  std::vector<uint32_t> pages;
};

Result<std::shared_ptr<const CudaWeights>> CudaWeights::Upload(std::shared_ptr<const Plan>, CudaContext*,
                                                               std::span<const uint32_t>) {
  return Status::Unavailable(kNoBackend);
}

CudaWeights::CudaWeights(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CudaWeights::~CudaWeights() = default;
const Plan& CudaWeights::plan() const { return *impl_->plan; }
int64_t CudaWeights::device_bytes() const { return 0; }
const std::vector<uint32_t>& CudaWeights::pages() const { return impl_->pages; }
void* CudaWeights::at(int) const { return nullptr; }

struct CudaPlan::Impl {};

Result<std::unique_ptr<CudaPlan>> CudaPlan::Compile(std::shared_ptr<const Plan> plan,
                                                    const std::vector<ops::TensorType>& input_types,
                                                    CudaContext*, std::shared_ptr<const CudaWeights>) {
  ORRERY_RETURN_IF_ERROR(CheckCudaPlan(*plan, input_types));
  return Status::Unavailable(kNoBackend);
}

CudaPlan::CudaPlan(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CudaPlan::~CudaPlan() = default;

Result<std::vector<Tensor>> CudaPlan::Run(const std::vector<Tensor>&) {
  return Status::Unavailable("no CUDA device");
}

int64_t CudaPlan::device_bytes() const { return 0; }

}  // namespace orrery::runtime
