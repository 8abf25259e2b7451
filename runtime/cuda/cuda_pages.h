// The device's memory as physical pages, through CUDA's virtual memory
// management (driver API: cuMemCreate, cuMemAddressReserve, cuMemMap,
// cuMemSetAccess, cuMemUnmap, cuMemAddressFree, cuMemRelease): the
// PageMapper (runtime/cuda/page_mapping.h) of a CudaContext. The driver's
// entry points are taken from the CUDA runtime (cudaGetDriverEntryPoint-
// ByVersion), so nothing links libcuda: cuda_tests and the module still
// load on a machine without a driver (they then find no device).
//
// Built only with nvcc (cuda_pages.cc); no CUDA types here. Never run on a
// GPU in this repository (its machine has none).
#pragma once

#include <cstdint>
#include <memory>

#include "base/status.h"
#include "runtime/cuda/page_mapping.h"

namespace orrery::runtime {

// Creates `num_pages` physical pages of `page_bytes` on device `ordinal`
// (the current device). INVALID_ARGUMENT when page_bytes is not a multiple
// of the device's allocation granularity (typically 2 MiB), naming it;
// UNAVAILABLE when the driver lacks the entry points; RESOURCE_EXHAUSTED
// when the memory is not there. The pages are released when the mapper is
// destroyed: every MappedPages over it must be gone by then.
Result<std::unique_ptr<PageMapper>> CreateCudaPages(int ordinal, int64_t page_bytes, int64_t num_pages);

}  // namespace orrery::runtime
