// A plan specialised for one set of graph-input dtypes and shapes.
//
// Specialize runs shape inference once, folds everything computable from
// constants and input shapes (runtime/fold.h), turns view ops into aliases
// (and channel Concats at batch 1 into slices their producers write in
// place), and plans memory: every value produced by a step with known type and
// kernel-preallocated outputs gets a slot in one arena (memory_plan.h).
// Steps whose types depend on values computed at run time (e.g. Reshape to
// a shape read from an input tensor) stay "dynamic": inferred and heap
// allocated at run time, as the reference executor does.
//
// Values are "entries"; each executed step's outputs are consecutive
// entries, so a run state's tensors can be handed to kernels as spans
// without copying. A SpecializedPlan is immutable after Specialize except
// for its pool of run states (runtime/run_state.h), which is thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/status.h"
#include "ops/registry.h"
#include "runtime/execution.h"
#include "runtime/memory_plan.h"
#include "runtime/plan.h"

namespace orrery::runtime {

struct RunState;

enum class EntryKind : uint8_t {
  kConstant,  // constants[index]; bound once per run state
  kInput,     // graph input #index; bound per run
  kArena,     // arena bytes at `offset`; bound once per run state
  kOutput,    // a graph output's own buffer, allocated per run (the caller keeps it)
  kView,      // entry #index's buffer (always a root, never a view) with this shape
  kKernel,    // assigned by its kernel every run (dynamic steps, kByKernel kernels)
};

struct Entry {
  EntryKind kind = EntryKind::kKernel;
  bool typed = false;  // type known at specialisation (all but dynamic outputs)
  ops::TensorType type;
  int index = -1;
  int64_t offset = 0;
  int slot = -1;  // base plan slot, -1 for an absent optional output
};

struct PlannedStep {
  const Step* step = nullptr;  // in SpecializedPlan::base
  // Types known only at run time: infer and heap-allocate every run.
  bool dynamic = false;
  // Static, but reads integer values computed at run time (indices,
  // counts): inference re-runs with those values each run, so a kernel that
  // validates values in Infer stays safe.
  bool recheck = false;
  uint32_t in_begin = 0, in_count = 0;    // range of SpecializedPlan::step_inputs
  uint32_t out_begin = 0, out_count = 0;  // consecutive entries
  std::vector<int> release;               // kKernel entries last needed here
  ops::OpCost cost;                       // static steps (dynamic: per run)
  ops::Prepared prepared;                 // static steps of kernels with a Prepare
};

// Idle run states are pooled per plan; this caps the bytes their arenas
// hold across all plans of one CompiledModel (shared by its PlanCache).
struct ArenaBudget {
  explicit ArenaBudget(int64_t limit_bytes) : limit(limit_bytes) {}
  const int64_t limit;
  std::atomic<int64_t> pooled{0};
};

inline constexpr int64_t kDefaultPooledArenaBytes = int64_t{1} << 30;
inline constexpr size_t kMaxIdleRunStates = 8;  // per plan

class SpecializedPlan {
 public:
  SpecializedPlan() = default;
  ~SpecializedPlan();
  SpecializedPlan(const SpecializedPlan&) = delete;
  SpecializedPlan& operator=(const SpecializedPlan&) = delete;

  std::shared_ptr<const Plan> base;
  std::vector<ops::TensorType> input_types;  // the specialisation key
  std::vector<Entry> entries;
  std::vector<Tensor> constants;  // the base plan's constants plus values folded here
  std::vector<int> step_inputs;   // entry per step input, -1 when absent
  std::vector<PlannedStep> steps;
  std::vector<int> input_entries;   // per graph input
  std::vector<int> output_entries;  // per graph output
  std::vector<std::string> output_names;
  std::vector<int> per_run_views;   // kView entries rooted at kInput / kOutput
  std::vector<int> output_buffers;  // kOutput entries
  std::vector<int> kernel_entries;  // kKernel entries
  std::vector<BufferRequest> buffers;  // one per kArena entry ...
  std::vector<int> buffer_entries;     // ... namely these
  MemoryPlan memory;
  // N when Execution runs this batch of N rows one row at a time on the
  // plan for a single row (runtime/row_split.h); 0: as one batch.
  int64_t split_rows = 0;
  // Of a batch of separable rows: the steps that run row by row before the
  // batch switches to a tail plan (RowSplitCut), from entry split_cut_entry
  // (-1 when split_cut is steps.size(): rows to the end). With split_rows
  // this plan is that tail (only its steps from split_cut on ever run);
  // without, it may serve as the per-thread tail of a larger batch.
  size_t split_cut = 0;
  int split_cut_entry = -1;
  // Largest per-thread scratch of any static step (ops::ScratchStride'd).
  size_t scratch_stride = 0;
  PlanStats stats;

  // A run state for one run (from the pool, else new); give it back with
  // ReleaseState. Thread-safe; no allocation when the pool has one.
  Result<std::unique_ptr<RunState>> AcquireState() const;
  void ReleaseState(std::unique_ptr<RunState> state) const;
  size_t idle_states() const;

 private:
  friend Result<std::shared_ptr<SpecializedPlan>> Specialize(
      std::shared_ptr<const Plan>, std::vector<ops::TensorType>, std::shared_ptr<ArenaBudget>);
  std::shared_ptr<ArenaBudget> budget_;
  mutable std::mutex pool_mu_;
  mutable std::vector<std::unique_ptr<RunState>> idle_;
};

// The entry whose buffer `e` uses (itself unless it is a view).
inline int RootOf(const SpecializedPlan& plan, int e) {
  return plan.entries[static_cast<size_t>(e)].kind == EntryKind::kView
             ? plan.entries[static_cast<size_t>(e)].index
             : e;
}

// Errors are those a run with these input types would report (inference
// errors name the step). `budget` may be null (no pooling cap).
Result<std::shared_ptr<SpecializedPlan>> Specialize(std::shared_ptr<const Plan> base,
                                                    std::vector<ops::TensorType> input_types,
                                                    std::shared_ptr<ArenaBudget> budget);

}  // namespace orrery::runtime
