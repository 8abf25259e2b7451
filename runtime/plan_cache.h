// Specialised plans of one model, keyed by the graph inputs' dtypes and
// shapes: a small LRU (default 16 entries) so that a client cycling through
// shapes costs at most `capacity` plans (and their pooled arenas, capped by
// an ArenaBudget) of memory. Lookups are thread-safe and allocate nothing;
// a miss specialises outside the lock (failures are not cached).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "base/status.h"
#include "ops/registry.h"
#include "runtime/model.h"
#include "runtime/plan.h"
#include "runtime/specialize.h"

namespace orrery::runtime {

inline constexpr size_t kDefaultPlanCacheCapacity = 16;

class PlanCache {
 public:
  explicit PlanCache(std::shared_ptr<const Plan> base,
                     size_t capacity = kDefaultPlanCacheCapacity,
                     int64_t pooled_arena_bytes = kDefaultPooledArenaBytes);

  // The plan for these graph inputs (in graph-input order, already
  // validated against the signature).
  Result<std::shared_ptr<const SpecializedPlan>> Get(std::span<const Tensor* const> inputs);

  PlanCacheStats stats() const;
  const std::shared_ptr<const Plan>& base() const { return base_; }

 private:
  struct Slot {
    uint64_t hash = 0;
    uint64_t last_used = 0;
    std::shared_ptr<const SpecializedPlan> plan;
  };
  // Index of the slot for these inputs, or -1. Requires mu_.
  int Find(uint64_t hash, std::span<const Tensor* const> inputs) const;

  const std::shared_ptr<const Plan> base_;
  const size_t capacity_;
  const std::shared_ptr<ArenaBudget> budget_;
  mutable std::mutex mu_;
  std::vector<Slot> slots_;  // at most capacity_, scanned linearly
  uint64_t tick_ = 0;
  uint64_t hits_ = 0, misses_ = 0, evictions_ = 0;
};

}  // namespace orrery::runtime
