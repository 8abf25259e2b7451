// Step-by-step execution of a compiled model, for schedulers that run a
// request layer by layer on the lane they choose and interleave other work
// between steps. CompiledModel::Run is a loop over Step().
//
//   ORRERY_ASSIGN_OR_RETURN(Execution ex, Execution::Start(model, inputs));
//   while (!ex.done()) ORRERY_RETURN_IF_ERROR(ex.Step());
//   ORRERY_ASSIGN_OR_RETURN(std::vector<NamedTensor> outputs, ex.TakeOutputs());
//
// Start validates the inputs, picks the plan specialised for their shapes
// (cached in the model) and takes a run state (the arena) from that plan's
// pool; the destructor gives it back. After warm-up, Start allocates only the
// graph outputs' buffers and Step allocates nothing (kernels aside; dynamic
// steps, see runtime/specialize.h, allocate their outputs).
//
// An Execution is move-only and used by one thread at a time; different
// Executions of one model run concurrently, each with its own arena. It
// keeps its plan (and the inputs' buffers) alive, not the CompiledModel.
//
// A large batch whose rows the model computes apart (runtime/row_split.h)
// runs on the plan for one row, ExecutionOptions::threads rows at a time
// (one per thread, each on its own arena): its steps are that plan's steps
// once per wave of rows (num_steps() = ceil(rows / threads) x steps per row;
// Profile() names them so), each row's outputs are copied into the batch's,
// and plan_stats() describes the row plan scaled to the batch (FLOPs x rows,
// arena x rows at once). When the batch plan has a tail (split_cut: from a
// block boundary where the weights outweigh one row's activations), the
// rows run only the steps before it, each row's value at the boundary is
// copied into a tail's arena, and the tail's steps run once per thread for
// that thread's rows (threads dividing the rows, at least two each; one
// thread: the batch plan, with the whole group), so each weight is read
// once per tail instead of once per row (num_steps() = waves x split_cut +
// the tail's steps; plan_stats() adds the tails' arenas).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "runtime/model.h"
#include "runtime/tensor.h"

namespace orrery {

namespace runtime {
class PlanCache;
class SpecializedPlan;
struct RunState;
}  // namespace runtime

// One executed step of a run.
struct StepProfile {
  std::string op_type;
  std::string name;  // the ONNX node name ("" when unnamed)
  int64_t ns = 0;    // wall time of Step()
  int64_t flops = 0;  // from the kernel's CostFn; 0 when it has none
  int64_t bytes = 0;  // bytes read + written
};

// The plan for one set of input shapes.
struct PlanStats {
  size_t num_steps = 0;      // steps a run executes
  size_t dynamic_steps = 0;  // of which inferred and heap-allocated at run time
  size_t view_nodes = 0;     // Reshape/Flatten/Squeeze/... and Concats written in place
                             // by their producers, resolved to aliases (no step)
  size_t folded_nodes = 0;   // evaluated at compile or specialisation time
  size_t removed_nodes = 0;  // not contributing to any graph output
  size_t fused_nodes = 0;    // merged into a Conv / Gemm / MatMul (runtime/fuse.h)
  int64_t arena_bytes = 0;   // one arena per concurrently running Execution
  int64_t naive_bytes = 0;   // the same values without buffer reuse
  int64_t output_bytes = 0;  // graph outputs, allocated per run outside the arena
  int64_t flops = 0;         // per run, by the kernels' CostFns (static steps)
};

struct ExecutionOptions {
  // Threads in the groups Step will be lent (ops::NumThreads). Only a batch
  // run row by row uses it: that many rows at once, one per thread.
  int threads = 1;
};

class Execution {
 public:
  // Validates `inputs` like CompiledModel::Run (INVALID_ARGUMENT naming the
  // input) and errors from specialising the plan for their shapes.
  static Result<Execution> Start(const CompiledModel& model, const std::vector<NamedTensor>& inputs,
                                 const ExecutionOptions& options = {});

  Execution(Execution&& other) noexcept;
  Execution& operator=(Execution&& other) noexcept;
  Execution(const Execution&) = delete;
  Execution& operator=(const Execution&) = delete;
  ~Execution();

  // Runs the next step, lending `threads` (may be null: this thread only)
  // to its kernel; each step may get a different group. An error ends the
  // execution (done() turns true and TakeOutputs returns it);
  // FAILED_PRECONDITION when already done. With a group of several
  // threads, a step that runs on the caller alone first tells the group
  // (ThreadGroup::ExpectJob) when the next step that used the group in the
  // previous run of this arena is due by that run's step times, so that
  // sleeping workers wake while this step runs, not when that one starts.
  Status Step(ops::ThreadGroup* threads = nullptr);
  bool done() const { return !error_.ok() || next_ >= num_steps_; }
  size_t step_index() const { return next_; }  // steps completed
  size_t num_steps() const { return num_steps_; }

  // The graph outputs in signature order, once done(). Only once.
  Result<std::vector<NamedTensor>> TakeOutputs();

  // The steps run so far (allocates; call it off the hot path).
  std::vector<StepProfile> Profile() const;
  // Wall time of step `step` (< step_index()), as in Profile(); allocates
  // nothing, so a benchmark can record every run's steps.
  int64_t step_ns(size_t step) const;
  const PlanStats& plan_stats() const;

 private:
  Execution(std::shared_ptr<const runtime::SpecializedPlan> plan,
            std::unique_ptr<runtime::RunState> state);
  // Start for a plan with split_rows: the plan for one row, `threads` rows
  // at once.
  static Result<Execution> StartRows(runtime::PlanCache& cache,
                                     std::shared_ptr<const runtime::SpecializedPlan> batch_plan,
                                     std::span<const Tensor* const> ordered, const ExecutionOptions& options);
  void Finish();  // drops per-run references and returns the run state
  // Runs step `index` of `plan` on `state` with `threads` (see Step).
  static Status RunStep(const runtime::SpecializedPlan& plan, runtime::RunState& state, size_t index,
                        ops::ThreadGroup* threads);
  // ExpectJob for the next parallel step of `plan` after step `index`
  // (see Step), when one is near.
  static void ExpectParallelStep(const runtime::SpecializedPlan& plan, const runtime::RunState& state,
                                 ops::ThreadGroup& threads, size_t index);
  // Row by row (rows_ set): Step for the rows of the current wave; binding
  // a wave's rows; after its last step, their outputs into the batch's and
  // the next wave bound; ending the bound rows' runs (errors, Finish).
  Status StepRows(ops::ThreadGroup* threads);
  Status BeginWave();
  Status FinishWave();
  void EndRows();
  // The batch plan's tail after the rows (SpecializedPlan::split_cut):
  // Step for its steps; ending its run (TakeOutputs, errors, Finish).
  Status StepTail(ops::ThreadGroup* threads);
  void EndTail();
  // The batch's outputs from the tails' (one tail: its own).
  Result<std::vector<NamedTensor>> TailOutputs();
  runtime::RunState& RowState(size_t slot);

  struct RowSplit;  // the batch, when it runs row by row

  std::shared_ptr<const runtime::SpecializedPlan> plan_;
  std::unique_ptr<runtime::RunState> state_;
  size_t num_steps_ = 0;
  size_t next_ = 0;
  bool taken_ = false;
  bool run_ended_ = false;
  Status error_;
  std::unique_ptr<RowSplit> rows_;  // null: the plan runs the whole input at once
};

}  // namespace orrery
