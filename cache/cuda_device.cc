#include "cache/cuda_device.h"

#include <cstdio>

namespace orrery {

Result<std::unique_ptr<CudaDevice>> CudaDevice::Open(const CudaDeviceOptions& options) {
  if (!(options.exec_speedup > 0)) {
    return Status::InvalidArgument("CUDA device: exec_speedup must be positive");
  }
  ORRERY_ASSIGN_OR_RETURN(std::unique_ptr<runtime::CudaContext> context,
                          runtime::CudaContext::Open(options.context));
  return std::unique_ptr<CudaDevice>(new CudaDevice(std::move(context), options));
}

CudaDevice::CudaDevice(std::unique_ptr<runtime::CudaContext> context,
                       const CudaDeviceOptions& options)
    : context_(std::move(context)),
      options_(options),
      name_(context_->info().name),
      link_(std::make_shared<ResourceTimeline>(1)),
      compute_(std::make_shared<ResourceTimeline>(1)) {}

int64_t CudaDevice::memory_bytes() const { return context_->num_pages() * context_->page_bytes(); }
int64_t CudaDevice::page_bytes() const { return context_->page_bytes(); }
int64_t CudaDevice::link_latency_ns() const { return context_->link_latency_ns(); }
double CudaDevice::link_bytes_per_sec() const { return context_->link_bytes_per_sec(); }

int64_t CudaDevice::CopyNs(int64_t bytes) const {
  const double bw = link_bytes_per_sec();
  return link_latency_ns() + (bw > 0 ? static_cast<int64_t>(static_cast<double>(bytes) / bw * 1e9) : 0);
}

int64_t CudaDevice::ExecNs(int64_t cpu_exec_ns) const {
  return static_cast<int64_t>(static_cast<double>(cpu_exec_ns) / options_.exec_speedup);
}

std::string CudaDevice::Describe() const {
  const runtime::CudaDeviceInfo& info = context_->info();
  char buf[512];
  std::snprintf(buf, sizeof(buf),
                "CUDA device %d: %s (compute %d.%d), %lld bytes in %lld pages of %lld "
                "(of %lld total), link %.2f GB/s + %.1f us measured",
                info.ordinal, info.name.c_str(), info.compute_major, info.compute_minor,
                static_cast<long long>(memory_bytes()),
                static_cast<long long>(context_->num_pages()),
                static_cast<long long>(page_bytes()), static_cast<long long>(info.total_bytes),
                link_bytes_per_sec() / 1e9, static_cast<double>(link_latency_ns()) / 1e3);
  return buf;
}

Result<std::unique_ptr<Device>> OpenCudaDevice(int ordinal) {
  CudaDeviceOptions options;
  options.context.ordinal = ordinal;
  ORRERY_ASSIGN_OR_RETURN(std::unique_ptr<CudaDevice> device, CudaDevice::Open(options));
  return std::unique_ptr<Device>(std::move(device));
}

}  // namespace orrery
