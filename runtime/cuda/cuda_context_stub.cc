// The CUDA context in builds without nvcc: no device, ever.
#include "runtime/cuda/cuda_context.h"

namespace orrery::runtime {

struct CudaContext::Impl {
  CudaDeviceInfo info;
  mutable std::mutex mu;
};

bool CudaBackendBuilt() { return false; }
int CudaDeviceCount() { return 0; }

Result<std::unique_ptr<CudaContext>> CudaContext::Open(const CudaContextOptions&) {
  return Status::Unavailable("no CUDA device: this build has no CUDA backend (nvcc not found, or a sanitizer build)");
}

CudaContext::CudaContext(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CudaContext::~CudaContext() = default;
const CudaDeviceInfo& CudaContext::info() const { return impl_->info; }
int64_t CudaContext::page_bytes() const { return 0; }
int64_t CudaContext::num_pages() const { return 0; }
PageMapper* CudaContext::page_mapper() const { return nullptr; }
double CudaContext::link_bytes_per_sec() const { return 0; }
int64_t CudaContext::link_latency_ns() const { return 0; }
Status CudaContext::CopyToDevice(const void*, void*, int64_t) {
  return Status::Unavailable("no CUDA device");
}
Status CudaContext::CopyToHost(const void*, void*, int64_t) {
  return Status::Unavailable("no CUDA device");
}
void* CudaContext::copy_stream() const { return nullptr; }
void* CudaContext::compute_stream() const { return nullptr; }
void* CudaContext::cublas() const { return nullptr; }
void* CudaContext::cudnn() const { return nullptr; }
std::mutex& CudaContext::compute_mutex() const { return impl_->mu; }

}  // namespace orrery::runtime
