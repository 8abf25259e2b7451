#include "cache/cuda_backend.h"

#include <dlfcn.h>

#include <charconv>
#include <cstdlib>
#include <filesystem>

namespace orrery {
namespace {

#ifdef ORRERY_CUDA_MODULE_BUILT
constexpr bool kModuleBuilt = true;
#else
constexpr bool kModuleBuilt = false;
#endif

constexpr const char* kSkipDriverCheckEnv = "ORRERY_CUDA_SKIP_DRIVER_CHECK";

std::string DlError() {
  const char* e = dlerror();
  return e != nullptr ? e : "unknown error";
}

// Asks the CUDA driver, through its C ABI (cuda.h is not needed), whether
// there is a device, before anything loads cudart / cuBLAS / cuDNN.
Status CheckDriverHasDevice() {
  void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (driver == nullptr) {
    return Status::Unavailable(std::string("no CUDA device: no CUDA driver (").append(DlError()).append(")"));
  }
  using CuInit = int (*)(unsigned int);
  using CuDeviceGetCount = int (*)(int*);
  auto init = reinterpret_cast<CuInit>(dlsym(driver, "cuInit"));
  auto count = reinterpret_cast<CuDeviceGetCount>(dlsym(driver, "cuDeviceGetCount"));
  if (init == nullptr || count == nullptr) {
    return Status::Unavailable("no CUDA device: libcuda.so.1 has no cuInit / cuDeviceGetCount");
  }
  // CUDA_ERROR_NO_DEVICE (100) from cuInit is the usual "no GPU" answer.
  if (const int err = init(0); err != 0) {
    return Status::Unavailable("no CUDA device (the driver's cuInit returned CUresult " + std::to_string(err) +
                               ")");
  }
  int n = 0;
  if (const int err = count(&n); err != 0 || n == 0) {
    return Status::Unavailable("no CUDA device (the driver reports none)");
  }
  return Status::Ok();
}

}  // namespace

bool CudaModuleBuilt() { return kModuleBuilt; }

std::string CudaModulePath() {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return (ec ? std::filesystem::path(".") : exe.parent_path()) / "liborrery_cuda.so";
}

Result<CudaBackend*> LoadCudaBackend(const std::string& path) {
  // Never dlclose'd: the backend's objects and vtables live in the module.
  void* module = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (module == nullptr) {
    return Status::Unavailable(std::string("no CUDA device: cannot load the CUDA backend: ").append(DlError()));
  }
  using Entry = CudaBackend* (*)(int);
  auto entry = reinterpret_cast<Entry>(dlsym(module, kCudaBackendEntry));
  if (entry == nullptr) {
    return Status::Unavailable("no CUDA device: " + path + " has no " + kCudaBackendEntry);
  }
  CudaBackend* backend = entry(kCudaBackendAbi);
  if (backend == nullptr) {
    return Status::Unavailable("no CUDA device: " + path + " is from another build (ABI " +
                               std::to_string(kCudaBackendAbi) + " not supported)");
  }
  return backend;
}

Result<OpenedGpu> OpenCudaGpu(int ordinal) {
  if (!kModuleBuilt) {
    return Status::Unavailable(
        "no CUDA device: this build has no CUDA backend (nvcc not found, -DORRERY_CUDA=OFF, or a sanitizer "
        "build)");
  }
  if (std::getenv(kSkipDriverCheckEnv) == nullptr) ORRERY_RETURN_IF_ERROR(CheckDriverHasDevice());
  ORRERY_ASSIGN_OR_RETURN(CudaBackend * backend, LoadCudaBackend(CudaModulePath()));
  return backend->Open(ordinal);
}

Result<DeviceSelection> ParseDeviceSelection(std::string_view value) {
  DeviceSelection s;
  if (value == "cpu") return s;
  if (value == "auto") {
    s.kind = DeviceSelection::Kind::kAuto;
    return s;
  }
  if (value == "cuda") {
    s.kind = DeviceSelection::Kind::kCuda;
    return s;
  }
  if (value.starts_with("cuda:")) {
    const std::string_view n = value.substr(5);
    int ordinal = -1;
    const auto [end, ec] = std::from_chars(n.data(), n.data() + n.size(), ordinal);
    if (ec == std::errc() && end == n.data() + n.size() && !n.empty() && ordinal >= 0) {
      s.kind = DeviceSelection::Kind::kCuda;
      s.ordinal = ordinal;
      return s;
    }
  }
  return Status::InvalidArgument("--device: expected cpu, auto, cuda or cuda:N, got '" +
                                 std::string(value) + "'");
}

}  // namespace orrery
