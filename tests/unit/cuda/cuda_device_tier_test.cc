// A GPU as orreryd's device tier (--device cuda): the same DeviceCache and
// DeviceLanes as the simulated device, with placement off (orreryd turns it
// on with its CudaExecutor; scheduler/README.md). Skips with a message without a GPU (or without the CUDA backend).
#include <gtest/gtest.h>

#include "cache/cuda_device.h"
#include "cache/device_cache.h"
#include "runtime/cuda/cuda_context.h"
#include "scheduler/device_lanes.h"

namespace orrery {
namespace {

TEST(CudaDeviceTierTest, TheGpuIsACacheTierButNothingIsPlacedOnIt) {
  Result<std::unique_ptr<Device>> gpu = OpenCudaDevice(0);
  if (!gpu.ok()) {
    GTEST_SKIP() << gpu.status().message() << ": the GPU device-tier test did not run";
  }
  DeviceCacheOptions cache_options;
  cache_options.keepalive = false;
  Result<std::unique_ptr<DeviceCache>> cache = DeviceCache::Create(gpu->get(), cache_options, SteadyClock::Get());
  ASSERT_TRUE(cache.ok()) << cache.status().ToString();
  DeviceLanesOptions options;
  options.place = false;
  DeviceLanes lanes(gpu->get(), cache->get(), options);
  const ModelKey key{"t", "m", 1};
  ASSERT_TRUE((*cache)->Register(key, (*gpu)->page_bytes()).ok());
  ASSERT_TRUE(lanes.OperatorPin(key, 30 * kNsPerSec).ok());
  EXPECT_EQ((*cache)->state(key), Residency::kResident);
  const int64_t now = SteadyClock::Get()->NowNs();
  DevicePlacement p = lanes.Place(key, 5 * kNsPerMs, now + kNsPerSec, now, 0);
  EXPECT_FALSE(p.on_device);
  EXPECT_FALSE(lanes.Stats().device.simulated);
}

}  // namespace
}  // namespace orrery
