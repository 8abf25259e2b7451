#include "runtime/execution.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <span>
#include <string>
#include <string_view>

#include "ops/parallel.h"
#include "runtime/executor.h"
#include "runtime/inputs.h"
#include "runtime/model_impl.h"
#include "runtime/run_state.h"
#include "runtime/specialize.h"

namespace orrery {

struct Execution::RowSplit {
  // A row being run, on an arena of its own (slot 0's is the Execution's).
  struct Slot {
    std::unique_ptr<runtime::RunState> state;  // null in slot 0
    std::vector<Tensor> inputs;                // its row of each batch input
    std::vector<const Tensor*> refs;
    int64_t row = -1;    // the batch row `inputs` hold
    bool bound = false;  // between BeginRun and EndRun
    Status status;       // of its last step
  };
  int64_t rows = 0;
  int64_t width = 1;  // rows run at once, one per thread
  int64_t wave = 0;   // rows [wave * width, wave * width + active()) run now
  size_t steps_per_row = 0;
  std::vector<Tensor> batch_inputs;  // graph-input order
  std::vector<Slot> slots;           // width of them
  std::vector<NamedTensor> outputs;  // the batch's, filled row by row or by the tails
  std::vector<int64_t> step_ns;      // per step of the whole batch
  PlanStats stats;                   // the row plan's, scaled to the batch
  // The tail (SpecializedPlan::split_cut): once every row has run the first
  // steps_per_row steps, a plan for tail_rows rows runs the rest, once per
  // slot (slot t's rows [t x tail_rows, (t + 1) x tail_rows), one slot per
  // thread: each on its own core, as the rows), on an arena where each of
  // its rows' cut values was copied.
  struct Tail {
    std::unique_ptr<runtime::RunState> state;
    std::vector<Tensor> inputs;  // its rows of each batch input
    bool bound = false;          // between its BeginRun and EndRun
    Status status;               // of its last step
  };
  std::shared_ptr<const runtime::SpecializedPlan> tail_plan;  // null: rows to the end
  std::vector<Tail> tails;  // one per slot
  int64_t tail_rows = 0;
  size_t row_steps = 0;  // steps before the tail: waves x steps_per_row
  int row_entry = -1;    // the cut value in the row plan ...
  int tail_entry = -1;   // ... and in the tail plan

  int64_t active() const { return std::min(width, rows - wave * width); }
  // The row slot t runs in the current wave: with tails, the slot's own
  // rows in order; otherwise wave by wave across the slots.
  int64_t RowOf(size_t t) const {
    return tail_plan != nullptr ? static_cast<int64_t>(t) * tail_rows + wave
                                : wave * width + static_cast<int64_t>(t);
  }

  // Points the slot's inputs at row `r` of each batch input: a view when
  // the row starts where a tensor buffer may (kTensorAlignment), else a copy.
  // Nothing when they hold it already (row 0, bound by StartRows to find
  // the row plan, then by the first wave).
  Status BindRow(Slot& slot, int64_t r) const {
    if (slot.row == r) return Status::Ok();
    slot.row = -1;
    slot.inputs.resize(batch_inputs.size());
    slot.refs.resize(batch_inputs.size());
    for (size_t i = 0; i < batch_inputs.size(); ++i) {
      ORRERY_ASSIGN_OR_RETURN(slot.inputs[i], RowsOf(batch_inputs[i], r, 1));
      slot.refs[i] = &slot.inputs[i];
    }
    slot.row = r;
    return Status::Ok();
  }

  // Rows [first, first + count) of a batch input: a view when they start
  // where a tensor buffer may (kTensorAlignment), else a copy.
  Result<Tensor> RowsOf(const Tensor& batch, int64_t first, int64_t count) const {
    Shape shape = batch.shape();
    shape[0] = count;
    const size_t row_bytes = batch.byte_size() / static_cast<size_t>(rows);
    const size_t offset = row_bytes * static_cast<size_t>(first);
    if (offset % kTensorAlignment == 0) return Tensor::ViewOf(batch, offset, batch.dtype(), std::move(shape));
    return Tensor::FromBytes(batch.dtype(), std::move(shape),
                             batch.bytes().substr(offset, row_bytes * static_cast<size_t>(count)));
  }
};

Result<Execution> Execution::Start(const CompiledModel& model,
                                   const std::vector<NamedTensor>& inputs,
                                   const ExecutionOptions& options) {
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
  if (plan->split_rows > 1) return StartRows(*impl.cache, std::move(plan), ordered, options);
  ORRERY_ASSIGN_OR_RETURN(std::unique_ptr<runtime::RunState> state, plan->AcquireState());
  Execution ex(std::move(plan), std::move(state));
  ORRERY_RETURN_IF_ERROR(runtime::BeginRun(*ex.plan_, ordered, *ex.state_));
  return ex;
}

namespace {

// The cut value of `batch_plan` (split_cut_entry, of some rows) in
// `row_plan`, when the row plan begins with the same split_cut steps: -1
// otherwise (the batch then runs row by row to the end).
int RowEntryAtCut(const runtime::SpecializedPlan& row_plan, const runtime::SpecializedPlan& batch_plan) {
  const size_t cut = batch_plan.split_cut;
  if (batch_plan.split_cut_entry < 0 || row_plan.steps.size() < cut) return -1;
  for (size_t i = 0; i < cut; ++i) {
    if (row_plan.steps[i].step != batch_plan.steps[i].step) return -1;
  }
  const runtime::Entry& tail = batch_plan.entries[static_cast<size_t>(batch_plan.split_cut_entry)];
  for (size_t e = 0; e < row_plan.entries.size(); ++e) {
    const runtime::Entry& row = row_plan.entries[e];
    if (row.slot != tail.slot || row.kind != runtime::EntryKind::kArena || !row.typed) continue;
    const bool fits = row.type.dtype == tail.type.dtype && !tail.type.shape.empty() &&
                      NumElements(row.type.shape) * tail.type.shape[0] == NumElements(tail.type.shape);
    return fits ? static_cast<int>(e) : -1;
  }
  return -1;
}

// The plan the tails run from split_cut on, for rows / width rows each:
// the batch plan itself for one slot, else the plan for that many rows when
// it switches at the same step. Null when there is none: no cut, slots
// that do not divide the rows or get fewer than two each, or that plan
// failing to specialise (the rows then run to the end).
std::shared_ptr<const runtime::SpecializedPlan> TailPlanFor(
    runtime::PlanCache& cache, std::shared_ptr<const runtime::SpecializedPlan> batch_plan,
    const std::vector<Tensor>& batch_inputs, int64_t rows, int64_t width) {
  if (batch_plan->split_cut_entry < 0 || rows % width != 0 || rows / width < 2) return nullptr;
  const int64_t sub = rows / width;
  if (sub == rows) return batch_plan;
  std::vector<Tensor> types;  // no buffers: the cache keys on dtypes and shapes
  std::vector<const Tensor*> refs;
  types.reserve(batch_inputs.size());
  for (const Tensor& t : batch_inputs) {
    Shape shape = t.shape();
    shape[0] = sub;
    types.push_back(Tensor::Unbound(t.dtype(), std::move(shape)));
  }
  for (const Tensor& t : types) refs.push_back(&t);
  Result<std::shared_ptr<const runtime::SpecializedPlan>> plan = cache.Get(refs);
  if (!plan.ok() || (*plan)->split_cut != batch_plan->split_cut || (*plan)->split_cut_entry < 0) return nullptr;
  return std::move(plan).value();
}

// Copies `part` into piece `index` of `pieces` equal pieces along dim 0 of
// `batch` (output `name`); INTERNAL, naming `what` gave it, when it is not
// such a piece.
Status PlacePiece(const Tensor& part, size_t pieces, size_t index, Tensor& batch, std::string_view name,
                  const std::string& what) {
  if (part.dtype() != batch.dtype() || part.byte_size() * pieces != batch.byte_size()) {
    return Status::Internal("output '" + std::string(name) + "': " + what + " gave " + ShapeToString(part.shape()) +
                            " for a batch of " + ShapeToString(batch.shape()));
  }
  if (part.byte_size() > 0) {
    std::memcpy(static_cast<std::byte*>(batch.raw_data()) + part.byte_size() * index, part.raw_data(),
                part.byte_size());
  }
  return Status::Ok();
}

}  // namespace

Result<Execution> Execution::StartRows(runtime::PlanCache& cache,
                                       std::shared_ptr<const runtime::SpecializedPlan> batch_plan_ptr,
                                       std::span<const Tensor* const> ordered, const ExecutionOptions& options) {
  const runtime::SpecializedPlan& batch_plan = *batch_plan_ptr;
  const int64_t batch_flops = batch_plan.stats.flops;
  const int64_t batch_output_bytes = batch_plan.stats.output_bytes;
  auto split = std::make_unique<RowSplit>();
  split->rows = batch_plan.split_rows;
  split->width = std::clamp<int64_t>(options.threads, 1, split->rows);
  split->slots.resize(static_cast<size_t>(split->width));
  for (const Tensor* t : ordered) split->batch_inputs.push_back(*t);  // shares the buffer
  ORRERY_RETURN_IF_ERROR(split->BindRow(split->slots[0], 0));
  ORRERY_ASSIGN_OR_RETURN(std::shared_ptr<const runtime::SpecializedPlan> row_plan,
                          cache.Get(split->slots[0].refs));
  // The same graph for one row: the same outputs, and steps (the batch
  // plan's arena holds at least one step's output).
  if (row_plan->steps.empty() || row_plan->output_entries.size() != batch_plan.output_entries.size()) {
    return Status::Internal("the plan for one row of " + std::to_string(split->rows) + " has " +
                            std::to_string(row_plan->steps.size()) + " steps and " +
                            std::to_string(row_plan->output_entries.size()) + " outputs");
  }
  split->tail_plan = TailPlanFor(cache, batch_plan_ptr, split->batch_inputs, split->rows, split->width);
  split->tail_rows = split->rows / split->width;
  if (split->tail_plan != nullptr) split->row_entry = RowEntryAtCut(*row_plan, *split->tail_plan);
  if (split->row_entry >= 0) {
    split->tail_entry = split->tail_plan->split_cut_entry;
    split->tails.resize(static_cast<size_t>(split->width));
    for (RowSplit::Tail& tail : split->tails) {
      ORRERY_ASSIGN_OR_RETURN(tail.state, split->tail_plan->AcquireState());
    }
  } else {
    split->tail_plan = nullptr;
  }
  // The batch's outputs, filled by the rows or the tails (one tail's own
  // outputs are the batch's).
  if (split->tail_plan == nullptr || split->width > 1) {
    for (size_t o = 0; o < batch_plan.output_entries.size(); ++o) {
      const ops::TensorType& type = batch_plan.entries[static_cast<size_t>(batch_plan.output_entries[o])].type;
      ORRERY_ASSIGN_OR_RETURN(Tensor out, Tensor::Allocate(type.dtype, type.shape));
      split->outputs.push_back(NamedTensor{batch_plan.output_names[o], std::move(out)});
    }
  }
  ORRERY_ASSIGN_OR_RETURN(std::unique_ptr<runtime::RunState> state, row_plan->AcquireState());
  Execution ex(std::move(row_plan), std::move(state));
  ex.rows_ = std::move(split);
  RowSplit& rs = *ex.rows_;
  for (size_t t = 1; t < rs.slots.size(); ++t) {
    ORRERY_ASSIGN_OR_RETURN(rs.slots[t].state, ex.plan_->AcquireState());
  }
  const int64_t waves = (rs.rows + rs.width - 1) / rs.width;  // tail_rows with tails
  rs.steps_per_row = rs.tail_plan != nullptr ? rs.tail_plan->split_cut : ex.num_steps_;
  rs.row_steps = rs.steps_per_row * static_cast<size_t>(waves);
  const size_t tail_steps = rs.tail_plan != nullptr ? rs.tail_plan->steps.size() - rs.steps_per_row : 0;
  ex.num_steps_ = rs.row_steps + tail_steps;
  rs.step_ns.assign(ex.num_steps_, 0);
  rs.stats = ex.plan_->stats;
  rs.stats.num_steps = ex.num_steps_;
  rs.stats.dynamic_steps *= static_cast<size_t>(waves);
  rs.stats.flops *= rs.rows;
  rs.stats.output_bytes *= rs.rows;
  rs.stats.arena_bytes *= rs.width;
  rs.stats.naive_bytes *= rs.width;
  if (rs.tail_plan != nullptr) {
    // The batch's FLOPs and outputs are the batch plan's; the tails' arenas
    // are held too.
    rs.stats.flops = batch_flops;
    rs.stats.output_bytes = batch_output_bytes;
    rs.stats.arena_bytes += rs.width * rs.tail_plan->stats.arena_bytes;
    rs.stats.naive_bytes += rs.width * rs.tail_plan->stats.naive_bytes;
    for (size_t t = 0; t < rs.tails.size(); ++t) {
      RowSplit::Tail& tail = rs.tails[t];
      std::vector<const Tensor*> refs;
      for (const Tensor& batch : rs.batch_inputs) {
        ORRERY_ASSIGN_OR_RETURN(Tensor rows, rs.RowsOf(batch, static_cast<int64_t>(t) * rs.tail_rows, rs.tail_rows));
        tail.inputs.push_back(std::move(rows));
      }
      for (const Tensor& in : tail.inputs) refs.push_back(&in);
      ORRERY_RETURN_IF_ERROR(runtime::BeginRun(*rs.tail_plan, refs, *tail.state));
      tail.bound = true;
    }
  }
  ORRERY_RETURN_IF_ERROR(ex.BeginWave());
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
    rows_ = std::move(other.rows_);
  }
  return *this;
}

Execution::~Execution() { Finish(); }

void Execution::Finish() {
  if (state_ == nullptr) return;
  if (rows_ != nullptr) {
    EndRows();
    for (size_t t = 1; t < rows_->slots.size(); ++t) {
      if (rows_->slots[t].state != nullptr) plan_->ReleaseState(std::move(rows_->slots[t].state));
    }
    EndTail();
    for (RowSplit::Tail& tail : rows_->tails) {
      if (tail.state != nullptr) rows_->tail_plan->ReleaseState(std::move(tail.state));
    }
  }
  if (!run_ended_) runtime::EndRun(*plan_, *state_);
  run_ended_ = true;
  plan_->ReleaseState(std::move(state_));
}

// How far ExpectParallelStep looks for the next parallel step (a bound on
// its cost per step; the groups' spin time is the real limit).
constexpr size_t kExpectLookaheadSteps = 16;

void Execution::ExpectParallelStep(const runtime::SpecializedPlan& plan, const runtime::RunState& state,
                                   ops::ThreadGroup& threads, size_t index) {
  // A parallel step wakes the workers itself and leaves them spinning.
  if (state.step_parallel[index] != 0) return;
  int64_t in_ns = 0;
  const size_t end = std::min(plan.steps.size(), index + kExpectLookaheadSteps);
  for (size_t s = index; s < end; ++s) {
    if (state.step_parallel[s] != 0) return threads.ExpectJob(in_ns);
    in_ns += state.step_ns[s];  // the previous run's time
  }
}

Status Execution::Step(ops::ThreadGroup* threads) {
  if (!error_.ok()) return error_;
  if (state_ == nullptr || next_ >= num_steps_) {
    return Status::FailedPrecondition("execution is done (" + std::to_string(num_steps_) +
                                      " steps)");
  }
  if (rows_ != nullptr) return next_ < rows_->row_steps ? StepRows(threads) : StepTail(threads);
  const auto t0 = std::chrono::steady_clock::now();
  Status st = RunStep(*plan_, *state_, next_, threads);
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

Status Execution::RunStep(const runtime::SpecializedPlan& plan, runtime::RunState& state, size_t index,
                          ops::ThreadGroup* threads) {
  const bool group = threads != nullptr && threads->size() > 1;
  const int64_t jobs = group ? threads->jobs() : 0;
  if (group) ExpectParallelStep(plan, state, *threads, index);
  Status st = runtime::RunPlannedStep(plan, index, state, threads);
  if (group) state.step_parallel[index] = threads->jobs() != jobs ? 1 : 0;
  return st;
}

Status Execution::StepTail(ops::ThreadGroup* threads) {
  RowSplit& split = *rows_;
  const size_t index = split.steps_per_row + (next_ - split.row_steps);
  runtime::RunState& first = *split.tails[0].state;
  const auto t0 = std::chrono::steady_clock::now();
  Status st;
  if (split.tails.size() == 1) {
    st = RunStep(*split.tail_plan, first, index, threads);
  } else {
    // A tail per thread, single-threaded on its own rows, as the rows ran.
    ops::ParallelFor(threads, static_cast<int64_t>(split.tails.size()), [&](int64_t t, int /*thread*/) {
      RowSplit::Tail& tail = split.tails[static_cast<size_t>(t)];
      tail.status = runtime::RunPlannedStep(*split.tail_plan, index, *tail.state, nullptr);
    });
    for (size_t t = 0; t < split.tails.size() && st.ok(); ++t) st = split.tails[t].status;
  }
  const auto t1 = std::chrono::steady_clock::now();
  first.step_ns[index] = std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count();
  split.step_ns[next_] = first.step_ns[index];
  if (!st.ok()) {
    error_ = st;
    EndTail();
    return st;
  }
  ++next_;
  return Status::Ok();
}

void Execution::EndTail() {
  if (rows_ == nullptr) return;
  for (RowSplit::Tail& tail : rows_->tails) {
    if (!tail.bound) continue;
    runtime::EndRun(*rows_->tail_plan, *tail.state);
    tail.bound = false;
  }
}

runtime::RunState& Execution::RowState(size_t slot) {
  return slot == 0 ? *state_ : *rows_->slots[slot].state;
}

Status Execution::StepRows(ops::ThreadGroup* threads) {
  RowSplit& split = *rows_;
  const size_t index = next_ % split.steps_per_row;
  const auto active = static_cast<size_t>(split.active());
  const auto t0 = std::chrono::steady_clock::now();
  Status st;
  if (active == 1) {
    // One row (one thread, or the last wave when the threads do not divide
    // the rows): the group works on its steps as on any single run.
    st = RunStep(*plan_, *state_, index, threads);
  } else {
    // A row per thread, each step single-threaded on its row's arena: no
    // image is shared between cores.
    ops::ParallelFor(threads, static_cast<int64_t>(active), [&](int64_t t, int /*thread*/) {
      const auto slot = static_cast<size_t>(t);
      split.slots[slot].status = runtime::RunPlannedStep(*plan_, index, RowState(slot), nullptr);
    });
    for (size_t t = 0; t < active && st.ok(); ++t) st = split.slots[t].status;
  }
  const auto t1 = std::chrono::steady_clock::now();
  state_->step_ns[index] = std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count();
  split.step_ns[next_] = state_->step_ns[index];
  if (st.ok()) {
    ++next_;
    if (index + 1 == split.steps_per_row) st = FinishWave();
  }
  if (!st.ok()) {
    error_ = st;
    EndRows();
  }
  return st;
}

Status Execution::BeginWave() {
  RowSplit& split = *rows_;
  for (size_t t = 0; t < static_cast<size_t>(split.active()); ++t) {
    RowSplit::Slot& slot = split.slots[t];
    ORRERY_RETURN_IF_ERROR(split.BindRow(slot, split.RowOf(t)));
    ORRERY_RETURN_IF_ERROR(runtime::BeginRun(*plan_, slot.refs, RowState(t)));
    slot.bound = true;
    if (t == 0) run_ended_ = false;
  }
  return Status::Ok();
}

Status Execution::FinishWave() {
  RowSplit& split = *rows_;
  for (size_t t = 0; t < static_cast<size_t>(split.active()); ++t) {
    const auto row_index = static_cast<size_t>(split.RowOf(t));
    if (split.tail_plan != nullptr) {
      // The row's cut value into its tail's rows: the slot's wave-th.
      ORRERY_RETURN_IF_ERROR(PlacePiece(RowState(t).entries[static_cast<size_t>(split.row_entry)],
                                        static_cast<size_t>(split.tail_rows), static_cast<size_t>(split.wave),
                                        split.tails[t].state->entries[static_cast<size_t>(split.tail_entry)],
                                        "(the tail's input)", "row " + std::to_string(row_index)));
      continue;
    }
    Result<std::vector<NamedTensor>> outs = runtime::CollectOutputs(*plan_, RowState(t));
    if (!outs.ok()) return outs.status();
    for (size_t o = 0; o < outs->size(); ++o) {
      ORRERY_RETURN_IF_ERROR(PlacePiece((*outs)[o].tensor, static_cast<size_t>(split.rows), row_index,
                                        split.outputs[o].tensor, split.outputs[o].name,
                                        "row " + std::to_string(row_index)));
    }
  }
  EndRows();
  if (++split.wave * split.width >= split.rows) return Status::Ok();
  return BeginWave();
}

void Execution::EndRows() {
  for (size_t t = 0; t < rows_->slots.size(); ++t) {
    if (!rows_->slots[t].bound) continue;
    runtime::EndRun(*plan_, RowState(t));
    rows_->slots[t].bound = false;
  }
  run_ended_ = true;
}

Result<std::vector<NamedTensor>> Execution::TailOutputs() {
  RowSplit& split = *rows_;
  if (split.tails.size() == 1) return runtime::CollectOutputs(*split.tail_plan, *split.tails[0].state);
  for (size_t t = 0; t < split.tails.size(); ++t) {
    ORRERY_ASSIGN_OR_RETURN(std::vector<NamedTensor> outs, runtime::CollectOutputs(*split.tail_plan, *split.tails[t].state));
    for (size_t o = 0; o < outs.size() && o < split.outputs.size(); ++o) {
      ORRERY_RETURN_IF_ERROR(PlacePiece(outs[o].tensor, split.tails.size(), t, split.outputs[o].tensor,
                                        split.outputs[o].name, "tail " + std::to_string(t)));
    }
  }
  return std::move(split.outputs);
}

Result<std::vector<NamedTensor>> Execution::TakeOutputs() {
  if (!error_.ok()) return error_;
  if (state_ == nullptr || taken_) return Status::FailedPrecondition("outputs already taken");
  if (next_ < num_steps_) {
    return Status::FailedPrecondition("execution not done: " + std::to_string(next_) + " of " +
                                      std::to_string(num_steps_) + " steps run");
  }
  taken_ = true;
  if (rows_ != nullptr && rows_->tail_plan != nullptr) {
    Result<std::vector<NamedTensor>> outputs = TailOutputs();
    EndTail();
    return outputs;
  }
  if (rows_ != nullptr) return std::move(rows_->outputs);  // every row already ended its run
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
    const bool tail = rows_ != nullptr && s >= rows_->row_steps;
    const runtime::SpecializedPlan& plan = tail ? *rows_->tail_plan : *plan_;
    const runtime::RunState& state = tail ? *rows_->tails[0].state : *state_;
    const size_t index = tail ? rows_->steps_per_row + (s - rows_->row_steps)
                         : rows_ != nullptr ? s % rows_->steps_per_row
                                            : s;
    const runtime::Step& step = *plan.steps[index].step;
    out.push_back(StepProfile{.op_type = step.op_type,
                              .name = step.name,
                              .ns = step_ns(s),
                              .flops = state.step_cost[index].flops,
                              .bytes = state.step_cost[index].bytes});
  }
  return out;
}

int64_t Execution::step_ns(size_t step) const {
  if (state_ == nullptr || step >= num_steps_) return 0;
  return rows_ != nullptr ? rows_->step_ns[step] : state_->step_ns[step];
}

const PlanStats& Execution::plan_stats() const { return rows_ != nullptr ? rows_->stats : plan_->stats; }

}  // namespace orrery
