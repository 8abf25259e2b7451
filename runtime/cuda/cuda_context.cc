#include "runtime/cuda/cuda_context.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/cuda_pages.h"

namespace orrery::runtime {

using cuda_detail::Check;

namespace {

// Copies used to measure the link at Open.
constexpr int kBandwidthCopies = 3;
constexpr int kLatencyCopies = 10;

}  // namespace

struct CudaContext::Impl {
  CudaDeviceInfo info;
  int64_t page_bytes = 0;
  std::unique_ptr<PageMapper> pages;  // the device memory the cache hands out
  char* staging[2] = {nullptr, nullptr};
  int64_t staging_bytes = 0;
  cudaEvent_t staged[2] = {nullptr, nullptr};  // the copy out of staging[i] is done
  cudaStream_t copy = nullptr;
  cudaStream_t compute = nullptr;
  cublasHandle_t cublas = nullptr;
  cudnnHandle_t cudnn = nullptr;
  double link_bytes_per_sec = 0;
  int64_t link_latency_ns = 0;
  std::mutex copy_mu;
  mutable std::mutex compute_mu;

  ~Impl() {
    // Errors are ignored here: nothing useful can be done with them.
    if (copy != nullptr) cudaStreamSynchronize(copy);
    if (compute != nullptr) cudaStreamSynchronize(compute);
    if (cudnn != nullptr) cudnnDestroy(cudnn);
    if (cublas != nullptr) cublasDestroy(cublas);
    for (cudaEvent_t e : staged) {
      if (e != nullptr) cudaEventDestroy(e);
    }
    if (copy != nullptr) cudaStreamDestroy(copy);
    if (compute != nullptr) cudaStreamDestroy(compute);
    for (char* s : staging) {
      if (s != nullptr) cudaFreeHost(s);
    }
    pages.reset();  // releases the physical pages, after the streams are idle
  }

  // Into a temporary device buffer, freed before the pages are created.
  Status MeasureLink() {
    void* target = nullptr;
    ORRERY_RETURN_IF_ERROR(Check(cudaMalloc(&target, static_cast<size_t>(staging_bytes)), "cudaMalloc (link test)"));
    Status st = MeasureLinkInto(target);
    cudaFree(target);
    return st;
  }

  Status MeasureLinkInto(void* target) {
    // Large copies from pinned memory: bandwidth. Small ones: latency.
    const int64_t bytes = staging_bytes;
    cudaEvent_t start = nullptr, stop = nullptr;
    ORRERY_RETURN_IF_ERROR(Check(cudaEventCreate(&start), "cudaEventCreate"));
    Status st = Check(cudaEventCreate(&stop), "cudaEventCreate");
    float best_ms = 0;
    for (int i = 0; st.ok() && i < kBandwidthCopies; ++i) {
      st = Check(cudaEventRecord(start, copy), "cudaEventRecord");
      if (st.ok()) {
        st = Check(cudaMemcpyAsync(target, staging[0], static_cast<size_t>(bytes),
                                   cudaMemcpyHostToDevice, copy),
                   "cudaMemcpyAsync");
      }
      if (st.ok()) st = Check(cudaEventRecord(stop, copy), "cudaEventRecord");
      if (st.ok()) st = Check(cudaEventSynchronize(stop), "cudaEventSynchronize");
      float ms = 0;
      if (st.ok()) st = Check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
      if (st.ok() && ms > 0 && (best_ms == 0 || ms < best_ms)) best_ms = ms;
    }
    int64_t best_ns = 0;
    for (int i = 0; st.ok() && i < kLatencyCopies; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      st = Check(cudaMemcpyAsync(target, staging[0], 4, cudaMemcpyHostToDevice, copy),
                 "cudaMemcpyAsync");
      if (st.ok()) st = Check(cudaStreamSynchronize(copy), "cudaStreamSynchronize");
      const int64_t ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                             std::chrono::steady_clock::now() - t0)
                             .count();
      if (best_ns == 0 || ns < best_ns) best_ns = ns;
    }
    cudaEventDestroy(start);
    if (stop != nullptr) cudaEventDestroy(stop);
    ORRERY_RETURN_IF_ERROR(st);
    link_bytes_per_sec = best_ms > 0 ? static_cast<double>(bytes) / (best_ms * 1e-3) : 0;
    link_latency_ns = best_ns;
    if (link_bytes_per_sec <= 0) return Status::Internal("CUDA link measurement gave no time");
    return Status::Ok();
  }
};

bool CudaBackendBuilt() { return true; }

int CudaDeviceCount() {
  static const int count = [] {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
      cudaGetLastError();  // clear the sticky "no driver" error
      return 0;
    }
    return n;
  }();
  return count;
}

Result<std::unique_ptr<CudaContext>> CudaContext::Open(const CudaContextOptions& options) {
  const int count = CudaDeviceCount();
  if (count == 0) return Status::Unavailable("no CUDA device (the driver reports none)");
  if (options.ordinal < 0 || options.ordinal >= count) {
    return Status::Unavailable("no CUDA device " + std::to_string(options.ordinal) + " (" +
                               std::to_string(count) + " present)");
  }
  if (options.page_bytes <= 0 || options.staging_bytes <= 0) {
    return Status::InvalidArgument("CUDA context: page and staging sizes must be positive");
  }
  auto impl = std::make_unique<Impl>();
  impl->info.ordinal = options.ordinal;
  ORRERY_RETURN_IF_ERROR(Check(cudaSetDevice(options.ordinal), "cudaSetDevice"));
  cudaDeviceProp prop{};
  ORRERY_RETURN_IF_ERROR(
      Check(cudaGetDeviceProperties(&prop, options.ordinal), "cudaGetDeviceProperties"));
  impl->info.name = prop.name;
  impl->info.compute_major = prop.major;
  impl->info.compute_minor = prop.minor;
  size_t free_bytes = 0, total_bytes = 0;
  ORRERY_RETURN_IF_ERROR(Check(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo"));
  impl->info.free_bytes = static_cast<int64_t>(free_bytes);
  impl->info.total_bytes = static_cast<int64_t>(total_bytes);

  const int64_t memory = options.memory_bytes > 0
                             ? std::min<int64_t>(options.memory_bytes, impl->info.free_bytes)
                             : static_cast<int64_t>(static_cast<double>(free_bytes) *
                                                    std::clamp(options.memory_fraction, 0.0, 1.0));
  impl->page_bytes = options.page_bytes;
  const int64_t num_pages = memory / options.page_bytes;
  if (num_pages == 0) {
    return Status::ResourceExhausted("CUDA device " + impl->info.name + ": " +
                                     std::to_string(free_bytes) +
                                     " bytes free, less than one page");
  }
  impl->staging_bytes = options.staging_bytes;
  for (int i = 0; i < 2; ++i) {
    void* p = nullptr;
    ORRERY_RETURN_IF_ERROR(Check(cudaHostAlloc(&p, static_cast<size_t>(options.staging_bytes),
                                               cudaHostAllocDefault),
                                 "cudaHostAlloc (staging)"));
    impl->staging[i] = static_cast<char*>(p);
    ORRERY_RETURN_IF_ERROR(
        Check(cudaEventCreateWithFlags(&impl->staged[i], cudaEventDisableTiming), "cudaEventCreate"));
  }
  ORRERY_RETURN_IF_ERROR(
      Check(cudaStreamCreateWithFlags(&impl->copy, cudaStreamNonBlocking), "cudaStreamCreate"));
  ORRERY_RETURN_IF_ERROR(
      Check(cudaStreamCreateWithFlags(&impl->compute, cudaStreamNonBlocking), "cudaStreamCreate"));
  ORRERY_RETURN_IF_ERROR(Check(cublasCreate(&impl->cublas), "cublasCreate"));
  ORRERY_RETURN_IF_ERROR(Check(cublasSetStream(impl->cublas, impl->compute), "cublasSetStream"));
  ORRERY_RETURN_IF_ERROR(Check(cudnnCreate(&impl->cudnn), "cudnnCreate"));
  ORRERY_RETURN_IF_ERROR(Check(cudnnSetStream(impl->cudnn, impl->compute), "cudnnSetStream"));
  std::memset(impl->staging[0], 0, static_cast<size_t>(options.staging_bytes));
  ORRERY_RETURN_IF_ERROR(impl->MeasureLink());
  ORRERY_ASSIGN_OR_RETURN(impl->pages, CreateCudaPages(options.ordinal, options.page_bytes, num_pages));
  return std::unique_ptr<CudaContext>(new CudaContext(std::move(impl)));
}

CudaContext::CudaContext(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CudaContext::~CudaContext() = default;

const CudaDeviceInfo& CudaContext::info() const { return impl_->info; }
int64_t CudaContext::page_bytes() const { return impl_->page_bytes; }
int64_t CudaContext::num_pages() const { return impl_->pages->num_pages(); }
PageMapper* CudaContext::page_mapper() const { return impl_->pages.get(); }
double CudaContext::link_bytes_per_sec() const { return impl_->link_bytes_per_sec; }
int64_t CudaContext::link_latency_ns() const { return impl_->link_latency_ns; }

Status CudaContext::CopyToDevice(const void* host, void* device, int64_t bytes) {
  std::lock_guard<std::mutex> lock(impl_->copy_mu);
  ORRERY_RETURN_IF_ERROR(Check(cudaSetDevice(impl_->info.ordinal), "cudaSetDevice"));
  const char* src = static_cast<const char*>(host);
  char* dst = static_cast<char*>(device);
  int buf = 0;
  for (int64_t done = 0; done < bytes; done += impl_->staging_bytes, buf ^= 1) {
    const size_t n = static_cast<size_t>(std::min(impl_->staging_bytes, bytes - done));
    // Wait until the copy that last used this buffer has left it; the other
    // buffer's copy keeps the link busy meanwhile.
    ORRERY_RETURN_IF_ERROR(Check(cudaEventSynchronize(impl_->staged[buf]), "cudaEventSynchronize"));
    std::memcpy(impl_->staging[buf], src + done, n);
    ORRERY_RETURN_IF_ERROR(Check(
        cudaMemcpyAsync(dst + done, impl_->staging[buf], n, cudaMemcpyHostToDevice, impl_->copy),
        "cudaMemcpyAsync (host to device)"));
    ORRERY_RETURN_IF_ERROR(Check(cudaEventRecord(impl_->staged[buf], impl_->copy), "cudaEventRecord"));
  }
  return Check(cudaStreamSynchronize(impl_->copy), "cudaStreamSynchronize (copy)");
}

Status CudaContext::CopyToHost(const void* device, void* host, int64_t bytes) {
  std::lock_guard<std::mutex> lock(impl_->copy_mu);
  ORRERY_RETURN_IF_ERROR(Check(cudaSetDevice(impl_->info.ordinal), "cudaSetDevice"));
  const char* src = static_cast<const char*>(device);
  char* dst = static_cast<char*>(host);
  for (int64_t done = 0; done < bytes; done += impl_->staging_bytes) {
    const size_t n = static_cast<size_t>(std::min(impl_->staging_bytes, bytes - done));
    ORRERY_RETURN_IF_ERROR(Check(
        cudaMemcpyAsync(impl_->staging[0], src + done, n, cudaMemcpyDeviceToHost, impl_->copy),
        "cudaMemcpyAsync (device to host)"));
    ORRERY_RETURN_IF_ERROR(Check(cudaStreamSynchronize(impl_->copy), "cudaStreamSynchronize"));
    std::memcpy(dst + done, impl_->staging[0], n);
  }
  return Status::Ok();
}

void* CudaContext::copy_stream() const { return impl_->copy; }
void* CudaContext::compute_stream() const { return impl_->compute; }
void* CudaContext::cublas() const { return impl_->cublas; }
void* CudaContext::cudnn() const { return impl_->cudnn; }
std::mutex& CudaContext::compute_mutex() const { return impl_->compute_mu; }

}  // namespace orrery::runtime
