#include "runtime/execution.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <span>

#include "runtime/executor.h"
#include "runtime/inputs.h"
#include "runtime/model_impl.h"
#include "runtime/run_state.h"
#include "runtime/specialize.h"

namespace orrery {

Result<Execution> Execution::Start(const CompiledModel& model,
                                   const std::vector<NamedTensor>& inputs) {
  const CompiledModel::Impl& impl = *model.impl_;
  const size_t n = impl.signature.inputs.size();
  // The ordered inputs live on the stack for the usual handful of inputs.
  constexpr size_t kInline = 16;
  std::array<const Tensor*, kInline> inline_refs{};
  std::vector<const Tensor*> heap_refs;
  if (n > kInline) heap_refs.resize(n);
  std::span<const Tensor*> ordered =
      n > kInline ? std::span<const Tensor*>(heap_refs) : std::span<const Tensor*>(inline_refs.data(), n);
  ORRERY_RETURN_IF_ERROR(runtime::OrderInputs(impl.signature, inputs, ordered));

  ORRERY_ASSIGN_OR_RETURN(std::shared_ptr<const runtime::SpecializedPlan> plan,
                          impl.cache->Get(ordered));
  ORRERY_ASSIGN_OR_RETURN(std::unique_ptr<runtime::RunState> state, plan->AcquireState());
  Execution ex(std::move(plan), std::move(state));
  ORRERY_RETURN_IF_ERROR(runtime::BeginRun(*ex.plan_, ordered, *ex.state_));
  return ex;
}

Execution::Execution(std::shared_ptr<const runtime::SpecializedPlan> plan,
                     std::unique_ptr<runtime::RunState> state)
    : plan_(std::move(plan)), state_(std::move(state)), num_steps_(plan_->steps.size()) {}

Execution::Execution(Execution&& other) noexcept = default;

Execution& Execution::operator=(Execution&& other) noexcept {
  if (this != &other) {
    Finish();
    plan_ = std::move(other.plan_);
    state_ = std::move(other.state_);
    num_steps_ = other.num_steps_;
    next_ = other.next_;
    taken_ = other.taken_;
    run_ended_ = other.run_ended_;
    error_ = std::move(other.error_);
  }
  return *this;
}

Execution::~Execution() { Finish(); }

void Execution::Finish() {
  if (state_ == nullptr) return;
  if (!run_ended_) runtime::EndRun(*plan_, *state_);
  run_ended_ = true;
  plan_->ReleaseState(std::move(state_));
}

// How far ExpectParallelStep looks for the next parallel step (a bound on
// its cost per step; the groups' spin time is the real limit).
constexpr size_t kExpectLookaheadSteps = 16;

void Execution::ExpectParallelStep(ops::ThreadGroup& threads) const {
  // A parallel step wakes the workers itself and leaves them spinning.
  if (state_->step_parallel[next_] != 0) return;
  int64_t in_ns = 0;
  const size_t end = std::min(num_steps_, next_ + kExpectLookaheadSteps);
  for (size_t s = next_; s < end; ++s) {
    if (state_->step_parallel[s] != 0) return threads.ExpectJob(in_ns);
    in_ns += state_->step_ns[s];  // the previous run's time
  }
}

Status Execution::Step(ops::ThreadGroup* threads) {
  if (!error_.ok()) return error_;
  if (state_ == nullptr || next_ >= num_steps_) {
    return Status::FailedPrecondition("execution is done (" + std::to_string(num_steps_) +
                                      " steps)");
  }
  const auto t0 = std::chrono::steady_clock::now();
  const bool group = threads != nullptr && threads->size() > 1;
  const int64_t jobs = group ? threads->jobs() : 0;
  if (group) ExpectParallelStep(*threads);
  Status st = runtime::RunPlannedStep(*plan_, next_, *state_, threads);
  if (group) state_->step_parallel[next_] = threads->jobs() != jobs ? 1 : 0;
  const auto t1 = std::chrono::steady_clock::now();
  state_->step_ns[next_] = std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count();
  if (!st.ok()) {
    error_ = st;
    runtime::EndRun(*plan_, *state_);
    run_ended_ = true;
    return st;
  }
  ++next_;
  return Status::Ok();
}

Result<std::vector<NamedTensor>> Execution::TakeOutputs() {
  if (!error_.ok()) return error_;
  if (state_ == nullptr || taken_) return Status::FailedPrecondition("outputs already taken");
  if (next_ < num_steps_) {
    return Status::FailedPrecondition("execution not done: " + std::to_string(next_) + " of " +
                                      std::to_string(num_steps_) + " steps run");
  }
  taken_ = true;
  Result<std::vector<NamedTensor>> outputs = runtime::CollectOutputs(*plan_, *state_);
  runtime::EndRun(*plan_, *state_);
  run_ended_ = true;
  return outputs;
}

std::vector<StepProfile> Execution::Profile() const {
  std::vector<StepProfile> out;
  if (state_ == nullptr) return out;
  // A failed step is reported too.
  const size_t n = std::min(num_steps_, next_ + (error_.ok() ? 0 : 1));
  out.reserve(n);
  for (size_t s = 0; s < n; ++s) {
    const runtime::Step& step = *plan_->steps[s].step;
    out.push_back(StepProfile{.op_type = step.op_type,
                              .name = step.name,
                              .ns = state_->step_ns[s],
                              .flops = state_->step_cost[s].flops,
                              .bytes = state_->step_cost[s].bytes});
  }
  return out;
}

int64_t Execution::step_ns(size_t step) const {
  return state_ != nullptr && step < num_steps_ ? state_->step_ns[step] : 0;
}

const PlanStats& Execution::plan_stats() const { return plan_->stats; }

}  // namespace orrery
