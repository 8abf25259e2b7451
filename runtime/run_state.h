// The mutable half of a run: the arena and the tensors bound into it. One
// RunState serves one run at a time; SpecializedPlan pools them so that
// steady-state runs allocate no arena and no tensor objects.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "base/status.h"
#include "ops/registry.h"
#include "ops/tensor.h"

namespace orrery::runtime {

class SpecializedPlan;

struct RunState {
  Tensor arena;                 // kUint8 [memory.peak_bytes], 64-byte aligned
  Tensor scratch;               // kUint8, kernels' scratch; grown for more threads
  std::vector<Tensor> entries;  // one per plan entry (SpecializedPlan::entries)
  std::vector<const Tensor*> step_inputs;  // parallel to SpecializedPlan::step_inputs
  std::vector<int64_t> step_ns;            // per step, last run
  // Per step: 1 when its kernel handed tasks to other threads the last
  // time it ran on a group of more than one (Execution wakes them ahead).
  std::vector<uint8_t> step_parallel;
  std::vector<ops::OpCost> step_cost;      // per step (dynamic steps: last run)
  // Set when a kernel broke the arena binding (replaced a preallocated
  // output): the state is then discarded instead of pooled.
  bool poisoned = false;
};

// A fresh state for `plan`: allocates the arena and binds constants, arena
// slots and views of them; inputs and outputs are bound per run.
Result<std::unique_ptr<RunState>> NewRunState(const SpecializedPlan& plan);

}  // namespace orrery::runtime
