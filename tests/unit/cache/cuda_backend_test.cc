// The way to the CUDA module (cache/cuda_backend.h): --device parsing, the
// loader's errors, and that asking for a GPU without a CUDA driver maps no
// CUDA library. This binary links no CUDA itself, so its /proc/self/maps
// shows exactly what the loader brought in.
#include "cache/cuda_backend.h"

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

namespace orrery {
namespace {

std::string MappedCudaLibraries() {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  std::string found;
  for (const char* lib : {"libcudart", "libcublas", "libcudnn", "liborrery_cuda"}) {
    maps.clear();
    maps.seekg(0);
    while (std::getline(maps, line)) {
      if (line.find(lib) != std::string::npos) {
        found.append(lib).append(" ");
        break;
      }
    }
  }
  return found;
}

TEST(DeviceSelection, ParsesCpuAutoCudaAndOrdinals) {
  Result<DeviceSelection> s = ParseDeviceSelection("cuda:3");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->kind, DeviceSelection::Kind::kCuda);
  EXPECT_EQ(s->ordinal, 3);
  EXPECT_EQ(ParseDeviceSelection("cuda")->ordinal, 0);
  EXPECT_EQ(ParseDeviceSelection("auto")->kind, DeviceSelection::Kind::kAuto);
  EXPECT_EQ(ParseDeviceSelection("cpu")->kind, DeviceSelection::Kind::kCpu);
  for (const char* bad : {"gpu", "cuda:", "cuda:-1", "cuda:x", "cuda:1x", ""}) {
    Result<DeviceSelection> r = ParseDeviceSelection(bad);
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(r.status().message().find("--device"), std::string::npos);
  }
}

TEST(CudaBackendLoader, TheModuleIsLookedForNextToTheExecutable) {
  const std::filesystem::path path = CudaModulePath();
  EXPECT_EQ(path.filename(), "liborrery_cuda.so");
  EXPECT_EQ(path.parent_path(), std::filesystem::read_symlink("/proc/self/exe").parent_path());
}

TEST(CudaBackendLoader, AMissingModuleIsUnavailableNamingIt) {
  Result<CudaBackend*> b = LoadCudaBackend("/nonexistent/liborrery_cuda.so");
  EXPECT_EQ(b.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(b.status().message().find("no CUDA device: cannot load the CUDA backend"), std::string::npos)
      << b.status().message();
  EXPECT_NE(b.status().message().find("/nonexistent/liborrery_cuda.so"), std::string::npos)
      << b.status().message();
}

TEST(CudaBackendLoader, ALibraryWithoutTheEntryPointIsUnavailable) {
  // Any shared object that is not the module: the C library.
  Result<CudaBackend*> b = LoadCudaBackend("libc.so.6");
  EXPECT_EQ(b.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(b.status().message().find("has no orrery_cuda_backend"), std::string::npos) << b.status().message();
}

TEST(CudaBackendLoader, AskingForAGpuWithoutADriverLoadsNoCudaLibrary) {
  if (dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL) != nullptr) {
    GTEST_SKIP() << "a CUDA driver is installed: the no-driver path is not reachable here";
  }
  ASSERT_EQ(std::getenv("ORRERY_CUDA_SKIP_DRIVER_CHECK"), nullptr);
  ASSERT_EQ(MappedCudaLibraries(), "");
  Result<OpenedGpu> gpu = OpenCudaGpu(0);
  EXPECT_EQ(gpu.status().code(), StatusCode::kUnavailable);
  const std::string message = gpu.status().message();
  EXPECT_NE(message.find(CudaModuleBuilt() ? "no CUDA device: no CUDA driver (libcuda.so.1"
                                           : "no CUDA device: this build has no CUDA backend"),
            std::string::npos)
      << message;
  EXPECT_EQ(MappedCudaLibraries(), "") << "the failed open mapped CUDA libraries";
}

}  // namespace
}  // namespace orrery
