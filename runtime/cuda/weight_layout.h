// Where a model's constants sit in device memory: one contiguous virtual
// range of whole device pages per model, each constant at a 256-byte aligned
// offset in it, in the plan's constant order. Plain C++ (no CUDA): the CUDA
// weights (runtime/cuda/cuda_plan.h) place the constants with it, the
// server charges the device cache with WeightLayoutBytes at upload
// (api/device_tier.h), and the CPU tests check it. The page count of a
// layout is max(1, ceil(WeightLayoutBytes / page_bytes)), which is exactly
// what the device cache reserves for a model registered with
// WeightLayoutBytes (cache/device_cache.h), so the two always agree.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/status.h"
#include "runtime/plan.h"

namespace orrery::runtime {

// cudaMalloc's alignment: every kernel's and cuBLAS / cuDNN's vector loads
// are aligned at any constant's start.
inline constexpr int64_t kWeightAlignment = 256;

struct WeightSize {
  int slot = -1;      // the plan's value slot
  int64_t bytes = 0;  // >= 0
};

struct WeightPlacement {
  int slot = -1;
  int64_t offset = 0;  // in the model's range, a multiple of kWeightAlignment
  int64_t bytes = 0;
};

struct WeightLayout {
  std::vector<WeightPlacement> constants;  // same order as the sizes given
  int64_t used_bytes = 0;                  // end of the last constant, rounded up to the alignment
  int64_t page_bytes = 0;
  int64_t pages = 0;  // >= 1: the range is pages x page_bytes
  int64_t range_bytes() const { return pages * page_bytes; }
};

// The constants of `plan` (slot, byte size), in plan order.
std::vector<WeightSize> PlanWeightSizes(const Plan& plan);

// Lays the constants out one after the other, each at the next multiple of
// kWeightAlignment. INVALID_ARGUMENT when page_bytes is not a positive
// multiple of kWeightAlignment or a size is negative; OUT_OF_RANGE when the
// total overflows. O(constants).
Result<WeightLayout> LayOutWeights(std::span<const WeightSize> sizes, int64_t page_bytes);

// The bytes a device cache charges for `plan`'s weights: the layout's
// used_bytes, at least 1 (a model without constants still takes a page).
// Independent of the page size. O(constants).
int64_t WeightLayoutBytes(const Plan& plan);

}  // namespace orrery::runtime
