// Running a SpecializedPlan against a RunState: bind a run's inputs, run
// steps one at a time, collect the outputs, unbind. Used by Execution.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "base/status.h"
#include "ops/tensor.h"
#include "runtime/run_state.h"
#include "runtime/specialize.h"

namespace orrery::runtime {

// Binds the graph inputs (validated, in graph-input order, with exactly the
// plan's input types) and allocates the graph outputs' buffers.
Status BeginRun(const SpecializedPlan& plan, std::span<const Tensor* const> inputs,
                RunState& state);

// Runs step `index`. Static steps call the kernel on arena-bound tensors
// (outputs zero-filled first) without inference; dynamic steps infer and
// allocate. Errors name the step.
// `threads` (may be null) are lent to the kernel; the state's scratch grows
// on first use with a larger group, so steady-state steps allocate nothing.
Status RunPlannedStep(const SpecializedPlan& plan, size_t index, RunState& state,
                      ops::ThreadGroup* threads = nullptr);

// The graph outputs after the last step; values that live in the arena (a
// kernel's view of an arena slot) are copied out.
Result<std::vector<NamedTensor>> CollectOutputs(const SpecializedPlan& plan, RunState& state);

// Drops the run's references (inputs, outputs, kernel-assigned values) so a
// pooled state holds no caller memory.
void EndRun(const SpecializedPlan& plan, RunState& state);

// Kernel calls so far (process-wide) that found their scratch smaller than
// their own sizing asked for and ran on heap scratch instead: a kernel's
// sizing bug, 0 when all is well (ops/cpu/gemm/sgemm.h,
// SgemmScratchShortfalls). One atomic load.
int64_t KernelScratchShortfalls();

}  // namespace orrery::runtime
