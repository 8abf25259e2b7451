#include "runtime/executor.h"

#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>

#include "ops/cpu/gemm/sgemm.h"

namespace orrery::runtime {
namespace {

std::string TypeString(DType dtype, const Shape& shape) {
  return std::string(DTypeName(dtype)) + " " + ShapeToString(shape);
}

// ORRERY_POISON_OUTPUTS=1 (tests): kernels that declare overwrites_outputs
// get NaN-filled outputs instead of none, so one that leaves an element
// unwritten is caught.
bool PoisonOutputs() {
  static const bool poison = [] {
    const char* v = std::getenv("ORRERY_POISON_OUTPUTS");
    return v != nullptr && v[0] == '1';
  }();
  return poison;
}

bool InArena(const RunState& state, const Tensor& t) {
  const auto* base = static_cast<const uint8_t*>(state.arena.raw_data());
  const auto* p = static_cast<const uint8_t*>(t.raw_data());
  if (base == nullptr || p == nullptr) return false;
  std::less_equal<const uint8_t*> le;
  return le(base, p) && !le(base + state.arena.byte_size(), p);
}

// Re-runs inference with this run's values (see PlannedStep::recheck) and
// checks that the types are still the planned ones.
Status Recheck(const SpecializedPlan& plan, const PlannedStep& ps,
               std::span<const Tensor* const> inputs) {
  std::vector<ops::TensorType> in_types;
  in_types.reserve(inputs.size());
  for (const Tensor* t : inputs) {
    in_types.push_back(t == nullptr ? ops::TensorType{} : ops::TensorType{t->dtype(), t->shape()});
  }
  std::vector<ops::TensorType> out_types;
  ORRERY_RETURN_IF_ERROR(InferStep(*ps.step, plan.base->opset, in_types, inputs, &out_types));
  for (uint32_t o = 0; o < ps.out_count; ++o) {
    if (out_types[o] != plan.entries[ps.out_begin + o].type) {
      return Status::Internal(ps.step->label + ": inferred " +
                              TypeString(out_types[o].dtype, out_types[o].shape) +
                              " from run-time values, planned " +
                              TypeString(plan.entries[ps.out_begin + o].type.dtype,
                                         plan.entries[ps.out_begin + o].type.shape));
    }
  }
  return Status::Ok();
}

// With ORRERY_POISON_OUTPUTS=1 (tests) the bytes right after a step's
// scratch hold this pattern, checked after the kernel (ScratchGuardHolds):
// a kernel that writes past its declared scratch_bytes fails its step
// instead of overwriting what follows (a shared scratch sized for a
// larger step would otherwise hide it).
constexpr size_t kScratchGuardBytes = 256;
constexpr std::byte kScratchGuardByte{0xA5};

Result<std::span<std::byte>> Scratch(const SpecializedPlan& plan, const PlannedStep& ps,
                                     RunState& state, ops::ThreadGroup* threads) {
  const size_t stride = ops::ScratchStride(ps.prepared.scratch_bytes);
  if (stride == 0) return std::span<std::byte>();
  const size_t threads_n = static_cast<size_t>(ops::NumThreads(threads));
  const size_t guard = PoisonOutputs() ? kScratchGuardBytes : 0;
  if (static_cast<size_t>(state.scratch.byte_size()) < plan.scratch_stride * threads_n + guard) {
    // Sized for the largest step so it grows once per thread count.
    ORRERY_ASSIGN_OR_RETURN(state.scratch,
                            Tensor::Allocate(DType::kUint8, {static_cast<int64_t>(
                                                                plan.scratch_stride * threads_n + guard)}));
  }
  auto* base = static_cast<std::byte*>(state.scratch.raw_data());
  if (guard > 0) std::memset(base + stride * threads_n, static_cast<int>(kScratchGuardByte), guard);
  // Each thread's slice is `stride` bytes: ThreadScratch divides evenly.
  return std::span<std::byte>(base, stride * threads_n);
}

bool ScratchGuardHolds(std::span<const std::byte> scratch) {
  if (!PoisonOutputs() || scratch.empty()) return true;
  const std::byte* end = scratch.data() + scratch.size();
  for (size_t i = 0; i < kScratchGuardBytes; ++i) {
    if (end[i] != kScratchGuardByte) return false;
  }
  return true;
}

Status RunStatic(const SpecializedPlan& plan, const PlannedStep& ps,
                 std::span<const Tensor* const> inputs, std::span<Tensor> outputs,
                 RunState& state, ops::ThreadGroup* threads) {
  const Step& step = *ps.step;
  if (ps.recheck) ORRERY_RETURN_IF_ERROR(Recheck(plan, ps, inputs));
  const bool preallocated = step.alloc == ops::OutputAlloc::kPreallocated;
  // Kernels may rely on zero-filled outputs (e.g. GEMM accumulates) unless
  // they declare that they overwrite them.
  if (preallocated && (!step.overwrites_outputs || PoisonOutputs())) {
    const int fill = step.overwrites_outputs ? 0xFF : 0;  // 0xFF..: a NaN
    for (Tensor& t : outputs) {
      if (t.byte_size() > 0) std::memset(t.raw_data(), fill, t.byte_size());
    }
  }
  ORRERY_ASSIGN_OR_RETURN(std::span<std::byte> scratch, Scratch(plan, ps, state, threads));
  ops::KernelContext kctx{.inputs = inputs,
                          .attrs = step.attrs,
                          .opset = plan.base->opset,
                          .prepared = ps.prepared.kernel.get(),
                          .scratch = scratch,
                          .threads = threads};
  Status st = step.compute(kctx, outputs);
  if (!st.ok()) return st.WithPrefix(step.label);
  if (!ScratchGuardHolds(scratch)) {
    return Status::Internal(step.label + ": the kernel wrote past its scratch (" +
                            std::to_string(ps.prepared.scratch_bytes) + " bytes a thread)");
  }
  for (uint32_t o = 0; o < ps.out_count; ++o) {
    const ops::TensorType& want = plan.entries[ps.out_begin + o].type;
    const Tensor& got = outputs[o];
    if (got.dtype() != want.dtype || got.shape() != want.shape) {
      state.poisoned = preallocated;
      return Status::Internal(step.label + ": kernel produced " +
                              TypeString(got.dtype(), got.shape()) + ", planned " +
                              TypeString(want.dtype, want.shape));
    }
    if (got.unbound()) {
      state.poisoned = preallocated;
      return Status::Internal(step.label + ": kernel left output #" + std::to_string(o) +
                              " without a buffer");
    }
  }
  // A kernel that replaced an arena-bound output would leave the pooled
  // state bound elsewhere (and its result unplanned).
  const auto* arena = static_cast<const uint8_t*>(state.arena.raw_data());
  for (uint32_t o = 0; o < ps.out_count; ++o) {
    const Entry& entry = plan.entries[ps.out_begin + o];
    if (entry.kind == EntryKind::kArena && outputs[o].raw_data() != arena + entry.offset) {
      state.poisoned = true;
      return Status::Internal(step.label + ": kernel replaced its preallocated output #" +
                              std::to_string(o));
    }
  }
  return Status::Ok();
}

}  // namespace

Status BeginRun(const SpecializedPlan& plan, std::span<const Tensor* const> inputs,
                RunState& state) {
  if (inputs.size() != plan.input_entries.size()) {
    return Status::InvalidArgument("expected " + std::to_string(plan.input_entries.size()) +
                                   " inputs, got " + std::to_string(inputs.size()));
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    Tensor& t = state.entries[static_cast<size_t>(plan.input_entries[i])];
    if (inputs[i]->dtype() != t.dtype() || inputs[i]->shape() != t.shape()) {
      return Status::Internal("input #" + std::to_string(i) + " does not match the plan");
    }
    ORRERY_RETURN_IF_ERROR(t.ShareBuffer(*inputs[i]));
  }
  for (int e : plan.output_buffers) {
    const ops::TensorType& type = plan.entries[static_cast<size_t>(e)].type;
    ORRERY_ASSIGN_OR_RETURN(state.entries[static_cast<size_t>(e)],
                            Tensor::Allocate(type.dtype, type.shape));
  }
  for (int e : plan.per_run_views) {
    const int root = plan.entries[static_cast<size_t>(e)].index;
    ORRERY_RETURN_IF_ERROR(
        state.entries[static_cast<size_t>(e)].ShareBuffer(state.entries[static_cast<size_t>(root)]));
  }
  return Status::Ok();
}

Status RunPlannedStep(const SpecializedPlan& plan, size_t index, RunState& state,
                      ops::ThreadGroup* threads) {
  const PlannedStep& ps = plan.steps[index];
  std::span<const Tensor* const> inputs(state.step_inputs.data() + ps.in_begin, ps.in_count);
  std::span<Tensor> outputs(state.entries.data() + ps.out_begin, ps.out_count);
  if (ps.dynamic) {
    ORRERY_RETURN_IF_ERROR(
        RunKernel(*ps.step, plan.base->opset, inputs, outputs, &state.step_cost[index], threads));
  } else {
    ORRERY_RETURN_IF_ERROR(RunStatic(plan, ps, inputs, outputs, state, threads));
  }
  for (int e : ps.release) state.entries[static_cast<size_t>(e)] = Tensor();
  return Status::Ok();
}

Result<std::vector<NamedTensor>> CollectOutputs(const SpecializedPlan& plan, RunState& state) {
  std::vector<NamedTensor> out;
  out.reserve(plan.output_entries.size());
  for (size_t i = 0; i < plan.output_entries.size(); ++i) {
    const Tensor& t = state.entries[static_cast<size_t>(plan.output_entries[i])];
    if (t.empty() || t.unbound()) {
      return Status::Internal("output '" + plan.output_names[i] + "' has no value");
    }
    if (InArena(state, t)) {
      // The next run reuses the arena: the caller gets its own copy.
      ORRERY_ASSIGN_OR_RETURN(Tensor copy, Tensor::FromBytes(t.dtype(), t.shape(), t.bytes()));
      out.push_back(NamedTensor{plan.output_names[i], std::move(copy)});
    } else {
      out.push_back(NamedTensor{plan.output_names[i], t});
    }
  }
  return out;
}

void EndRun(const SpecializedPlan& plan, RunState& state) {
  for (int e : plan.input_entries) state.entries[static_cast<size_t>(e)].ResetBuffer();
  for (int e : plan.per_run_views) state.entries[static_cast<size_t>(e)].ResetBuffer();
  for (int e : plan.output_buffers) state.entries[static_cast<size_t>(e)].ResetBuffer();
  for (int e : plan.kernel_entries) state.entries[static_cast<size_t>(e)] = Tensor();
}

int64_t KernelScratchShortfalls() { return ops::cpu::SgemmScratchShortfalls(); }

}  // namespace orrery::runtime
