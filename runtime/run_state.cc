#include "runtime/run_state.h"

#include "runtime/specialize.h"

namespace orrery::runtime {

Result<std::unique_ptr<RunState>> NewRunState(const SpecializedPlan& plan) {
  auto state = std::make_unique<RunState>();
  ORRERY_ASSIGN_OR_RETURN(state->arena,
                          Tensor::Allocate(DType::kUint8, {plan.memory.peak_bytes}));
  state->entries.resize(plan.entries.size());
  for (size_t e = 0; e < plan.entries.size(); ++e) {
    const Entry& entry = plan.entries[e];
    Tensor& t = state->entries[e];
    switch (entry.kind) {
      case EntryKind::kConstant:
        t = plan.constants[static_cast<size_t>(entry.index)];
        break;
      case EntryKind::kArena: {
        Result<Tensor> view = Tensor::ViewOf(state->arena, static_cast<size_t>(entry.offset),
                                             entry.type.dtype, entry.type.shape);
        if (!view.ok()) return view.status().WithPrefix("memory plan");
        t = std::move(view).value();
        break;
      }
      case EntryKind::kView: {
        t = Tensor::Unbound(entry.type.dtype, entry.type.shape);
        // Roots precede their views; constant and arena roots are bound now.
        const Tensor& root = state->entries[static_cast<size_t>(entry.index)];
        if (root.raw_data() != nullptr) ORRERY_RETURN_IF_ERROR(t.ShareBuffer(root));
        break;
      }
      case EntryKind::kInput:
      case EntryKind::kOutput:
        t = Tensor::Unbound(entry.type.dtype, entry.type.shape);
        break;
      case EntryKind::kKernel:
        break;
    }
  }
  state->step_inputs.reserve(plan.step_inputs.size());
  for (int e : plan.step_inputs) {
    state->step_inputs.push_back(e < 0 ? nullptr : &state->entries[static_cast<size_t>(e)]);
  }
  state->step_ns.assign(plan.steps.size(), 0);
  state->step_parallel.assign(plan.steps.size(), 0);
  state->step_cost.resize(plan.steps.size());
  for (size_t s = 0; s < plan.steps.size(); ++s) state->step_cost[s] = plan.steps[s].cost;
  return state;
}

SpecializedPlan::~SpecializedPlan() {
  if (budget_ == nullptr) return;
  for (const auto& state : idle_) budget_->pooled.fetch_sub(state->arena.num_elements());
}

Result<std::unique_ptr<RunState>> SpecializedPlan::AcquireState() const {
  {
    std::lock_guard<std::mutex> lock(pool_mu_);
    if (!idle_.empty()) {
      std::unique_ptr<RunState> state = std::move(idle_.back());
      idle_.pop_back();
      if (budget_ != nullptr) budget_->pooled.fetch_sub(state->arena.num_elements());
      return state;
    }
  }
  return NewRunState(*this);
}

void SpecializedPlan::ReleaseState(std::unique_ptr<RunState> state) const {
  if (state == nullptr || state->poisoned) return;
  const int64_t bytes = state->arena.num_elements();
  if (budget_ != nullptr) {
    // Reserve the bytes first so concurrent releases cannot overshoot.
    if (budget_->pooled.fetch_add(bytes) + bytes > budget_->limit) {
      budget_->pooled.fetch_sub(bytes);
      return;  // over the model's budget: free the arena instead
    }
  }
  std::lock_guard<std::mutex> lock(pool_mu_);
  if (idle_.size() >= kMaxIdleRunStates) {
    if (budget_ != nullptr) budget_->pooled.fetch_sub(bytes);
    return;
  }
  idle_.push_back(std::move(state));  // capacity reserved: no allocation
}

size_t SpecializedPlan::idle_states() const {
  std::lock_guard<std::mutex> lock(pool_mu_);
  return idle_.size();
}

}  // namespace orrery::runtime
