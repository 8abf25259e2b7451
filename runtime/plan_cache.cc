#include "runtime/plan_cache.h"

#include <algorithm>

namespace orrery::runtime {
namespace {

uint64_t Mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
  return h;
}

uint64_t HashInputs(std::span<const Tensor* const> inputs) {
  uint64_t h = inputs.size();
  for (const Tensor* t : inputs) {
    h = Mix(h, static_cast<uint64_t>(t->dtype()));
    h = Mix(h, t->shape().size());
    for (int64_t d : t->shape()) h = Mix(h, static_cast<uint64_t>(d));
  }
  return h;
}

}  // namespace

PlanCache::PlanCache(std::shared_ptr<const Plan> base, size_t capacity,
                     int64_t pooled_arena_bytes)
    : base_(std::move(base)),
      capacity_(std::max<size_t>(capacity, 1)),
      budget_(std::make_shared<ArenaBudget>(pooled_arena_bytes)) {
  slots_.reserve(capacity_);
}

int PlanCache::Find(uint64_t hash, std::span<const Tensor* const> inputs) const {
  for (size_t s = 0; s < slots_.size(); ++s) {
    if (slots_[s].hash != hash) continue;
    const std::vector<ops::TensorType>& key = slots_[s].plan->input_types;
    if (key.size() != inputs.size()) continue;
    bool same = true;
    for (size_t i = 0; i < key.size() && same; ++i) {
      same = key[i].dtype == inputs[i]->dtype() && key[i].shape == inputs[i]->shape();
    }
    if (same) return static_cast<int>(s);
  }
  return -1;
}

Result<std::shared_ptr<const SpecializedPlan>> PlanCache::Get(
    std::span<const Tensor* const> inputs) {
  const uint64_t hash = HashInputs(inputs);
  {
    std::lock_guard<std::mutex> lock(mu_);
    const int s = Find(hash, inputs);
    if (s >= 0) {
      ++hits_;
      slots_[static_cast<size_t>(s)].last_used = ++tick_;
      return slots_[static_cast<size_t>(s)].plan;
    }
    ++misses_;
  }
  std::vector<ops::TensorType> types;
  types.reserve(inputs.size());
  for (const Tensor* t : inputs) types.push_back(ops::TensorType{t->dtype(), t->shape()});
  ORRERY_ASSIGN_OR_RETURN(std::shared_ptr<SpecializedPlan> built,
                          Specialize(base_, std::move(types), budget_));

  std::shared_ptr<const SpecializedPlan> evicted;  // freed after unlocking
  std::lock_guard<std::mutex> lock(mu_);
  const int s = Find(hash, inputs);  // another thread may have built it meanwhile
  if (s >= 0) {
    slots_[static_cast<size_t>(s)].last_used = ++tick_;
    return slots_[static_cast<size_t>(s)].plan;
  }
  Slot slot{hash, ++tick_, std::move(built)};
  if (slots_.size() < capacity_) {
    slots_.push_back(slot);
  } else {
    auto lru = std::min_element(slots_.begin(), slots_.end(), [](const Slot& a, const Slot& b) {
      return a.last_used < b.last_used;
    });
    evicted = std::move(lru->plan);  // running Executions keep it alive
    *lru = slot;
    ++evictions_;
  }
  return slot.plan;
}

PlanCacheStats PlanCache::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return PlanCacheStats{.hits = hits_,
                        .misses = misses_,
                        .evictions = evictions_,
                        .entries = slots_.size(),
                        .capacity = capacity_};
}

}  // namespace orrery::runtime
