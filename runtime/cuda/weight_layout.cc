#include "runtime/cuda/weight_layout.h"

#include <limits>
#include <string>

namespace orrery::runtime {

namespace {

constexpr int64_t kMaxBytes = std::numeric_limits<int64_t>::max() / 2;

int64_t AlignUp(int64_t v) { return (v + kWeightAlignment - 1) / kWeightAlignment * kWeightAlignment; }

}  // namespace

std::vector<WeightSize> PlanWeightSizes(const Plan& plan) {
  std::vector<WeightSize> sizes;
  sizes.reserve(plan.constants.size());
  for (const auto& [slot, value] : plan.constants) {
    sizes.push_back(WeightSize{slot, static_cast<int64_t>(value.byte_size())});
  }
  return sizes;
}

Result<WeightLayout> LayOutWeights(std::span<const WeightSize> sizes, int64_t page_bytes) {
  if (page_bytes <= 0 || page_bytes % kWeightAlignment != 0) {
    return Status::InvalidArgument("weight layout: page size " + std::to_string(page_bytes) +
                                   " is not a positive multiple of " + std::to_string(kWeightAlignment));
  }
  WeightLayout layout;
  layout.page_bytes = page_bytes;
  layout.constants.reserve(sizes.size());
  int64_t end = 0;
  for (const WeightSize& w : sizes) {
    if (w.bytes < 0) {
      return Status::InvalidArgument("weight layout: constant slot " + std::to_string(w.slot) +
                                     " has a negative size");
    }
    if (w.bytes > kMaxBytes - end) return Status::OutOfRange("weight layout: the constants' total overflows");
    layout.constants.push_back(WeightPlacement{w.slot, end, w.bytes});
    end = AlignUp(end + w.bytes);
  }
  layout.used_bytes = end;
  layout.pages = end == 0 ? 1 : (end + page_bytes - 1) / page_bytes;
  return layout;
}

int64_t WeightLayoutBytes(const Plan& plan) {
  const std::vector<WeightSize> sizes = PlanWeightSizes(plan);
  // Byte sizes of real tensors: never negative, never near overflow.
  Result<WeightLayout> layout = LayOutWeights(sizes, kWeightAlignment);
  return layout.ok() && layout->used_bytes > 0 ? layout->used_bytes : 1;
}

}  // namespace orrery::runtime
