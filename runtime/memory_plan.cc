#include "runtime/memory_plan.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <string>

#include "ops/tensor.h"

namespace orrery::runtime {
namespace {

bool LiveTogether(const BufferRequest& a, const BufferRequest& b) {
  return a.first <= b.last && b.first <= a.last;
}

bool IsSlice(const BufferRequest& r) { return r.parent >= 0; }

Status CheckSlice(std::span<const BufferRequest> requests, const MemoryPlan& plan, size_t i) {
  const BufferRequest& r = requests[i];
  const std::string name = "slice " + std::to_string(i);
  if (static_cast<size_t>(r.parent) >= requests.size() || IsSlice(requests[static_cast<size_t>(r.parent)])) {
    return Status::Internal(name + " has parent " + std::to_string(r.parent) +
                            ", not an unsliced buffer");
  }
  const BufferRequest& p = requests[static_cast<size_t>(r.parent)];
  if (r.parent_offset < 0 || r.parent_offset + r.bytes > p.bytes) {
    return Status::Internal(name + " [+" + std::to_string(r.parent_offset) + ", +" +
                            std::to_string(r.bytes) + ") runs past its parent (" +
                            std::to_string(p.bytes) + " bytes)");
  }
  if (r.first < p.first || r.last > p.last) {
    return Status::Internal(name + " (steps " + std::to_string(r.first) + "-" +
                            std::to_string(r.last) + ") outlives its parent (steps " +
                            std::to_string(p.first) + "-" + std::to_string(p.last) + ")");
  }
  if (plan.offsets[i] != plan.offsets[static_cast<size_t>(r.parent)] + r.parent_offset) {
    return Status::Internal(name + " is at " + std::to_string(plan.offsets[i]) +
                            ", not at its parent's offset + " + std::to_string(r.parent_offset));
  }
  return Status::Ok();
}

}  // namespace

int64_t AlignedBytes(int64_t bytes) {
  constexpr int64_t kAlign = static_cast<int64_t>(kTensorAlignment);
  return (bytes + kAlign - 1) / kAlign * kAlign;
}

MemoryPlan PlanMemory(std::span<const BufferRequest> requests) {
  MemoryPlan plan;
  plan.offsets.assign(requests.size(), 0);
  std::vector<int64_t> size(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    // Slices take no space of their own: placed with their parents below.
    size[i] = IsSlice(requests[i]) ? 0 : AlignedBytes(requests[i].bytes);
    plan.naive_bytes += size[i];
  }
  std::vector<size_t> order(requests.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (size[a] != size[b]) return size[a] > size[b];
    return requests[a].first < requests[b].first;
  });

  std::vector<size_t> placed;  // sorted by offset
  std::vector<size_t> overlapping;
  for (size_t r : order) {
    if (size[r] == 0) continue;  // offset 0, occupies nothing
    overlapping.clear();
    for (size_t p : placed) {
      if (LiveTogether(requests[r], requests[p])) overlapping.push_back(p);
    }
    // Walk the gaps between overlapping buffers in address order.
    int64_t cursor = 0;
    int64_t best = -1;
    int64_t best_gap = std::numeric_limits<int64_t>::max();
    for (size_t p : overlapping) {
      const int64_t gap = plan.offsets[p] - cursor;
      if (gap >= size[r] && gap < best_gap) {
        best = cursor;
        best_gap = gap;
      }
      cursor = std::max(cursor, plan.offsets[p] + size[p]);
    }
    plan.offsets[r] = best >= 0 ? best : cursor;
    plan.peak_bytes = std::max(plan.peak_bytes, plan.offsets[r] + size[r]);
    auto at = std::upper_bound(placed.begin(), placed.end(), r, [&](size_t a, size_t b) {
      return plan.offsets[a] < plan.offsets[b];
    });
    placed.insert(at, r);
  }
  for (size_t i = 0; i < requests.size(); ++i) {
    if (IsSlice(requests[i])) {
      plan.offsets[i] =
          plan.offsets[static_cast<size_t>(requests[i].parent)] + requests[i].parent_offset;
    }
  }
  return plan;
}

Status CheckMemoryPlan(std::span<const BufferRequest> requests, const MemoryPlan& plan) {
  if (plan.offsets.size() != requests.size()) {
    return Status::Internal("memory plan has " + std::to_string(plan.offsets.size()) +
                            " offsets for " + std::to_string(requests.size()) + " buffers");
  }
  constexpr int64_t kAlign = static_cast<int64_t>(kTensorAlignment);
  for (size_t i = 0; i < requests.size(); ++i) {
    if (IsSlice(requests[i])) ORRERY_RETURN_IF_ERROR(CheckSlice(requests, plan, i));
    const int64_t off = plan.offsets[i];
    if (off < 0 || off % kAlign != 0) {
      return Status::Internal("buffer " + std::to_string(i) + " has misaligned offset " +
                              std::to_string(off));
    }
    if (off + requests[i].bytes > plan.peak_bytes) {
      return Status::Internal("buffer " + std::to_string(i) + " ends past the arena (" +
                              std::to_string(off + requests[i].bytes) + " > " +
                              std::to_string(plan.peak_bytes) + ")");
    }
  }
  for (size_t i = 0; i < requests.size(); ++i) {
    for (size_t j = i + 1; j < requests.size(); ++j) {
      const BufferRequest& a = requests[i];
      const BufferRequest& b = requests[j];
      if (a.bytes == 0 || b.bytes == 0 || !LiveTogether(a, b)) continue;
      // A slice shares its parent's bytes by design.
      if (a.parent == static_cast<int>(j) || b.parent == static_cast<int>(i)) continue;
      const int64_t a0 = plan.offsets[i], b0 = plan.offsets[j];
      if (a0 < b0 + b.bytes && b0 < a0 + a.bytes) {
        return Status::Internal("buffers " + std::to_string(i) + " [" + std::to_string(a0) +
                                ", +" + std::to_string(a.bytes) + ") and " + std::to_string(j) +
                                " [" + std::to_string(b0) + ", +" + std::to_string(b.bytes) +
                                ") are live together (steps " + std::to_string(a.first) + "-" +
                                std::to_string(a.last) + " and " + std::to_string(b.first) +
                                "-" + std::to_string(b.last) + ") and overlap");
      }
    }
  }
  return Status::Ok();
}

}  // namespace orrery::runtime
