// The kernel registry: (op_type, backend) -> KernelDef.
//
// A KernelDef pairs a shape/dtype inference function with a compute function.
// Both are plain function pointers, resolved once when the runtime compiles a
// plan; kernels loop over elements without virtual calls.
//
// Contract between the executor and a kernel:
//   1. Infer(ctx, &outputs) is called with the input types (and the values of
//      inputs known at that time, e.g. Reshape's shape). It fills one
//      TensorType per output or returns INVALID_ARGUMENT naming the problem.
//   2. The executor checks the inferred shapes (CheckedNumElements) and, for
//      kernels with alloc == kPreallocated, allocates zero-filled outputs.
//   3. Compute(ctx, outputs) fills them. Kernels with alloc == kByKernel
//      (views such as Reshape / Identity) assign the outputs themselves,
//      usually by sharing the input buffer. The executor verifies that the
//      result matches the inferred type.
// The runtime infers once per set of input shapes (a cached, specialised
// plan), not once per run: Infer sees the values of constant inputs only and
// returns UNAVAILABLE when it needs one it does not get (the step is then
// inferred at run time). Compute must therefore validate any input *values*
// it depends on (indices, counts) itself. Preallocated outputs may live in a
// shared arena: they are zero-filled before each call, must not be replaced
// and must not be referenced after Compute returns.
// Kernels are stateless and must be safe to run concurrently.
//
// Optionally a kernel has a Prepare function, run once per specialised plan
// (input types known, constant inputs such as weights known): it parses
// attributes, computes geometry, packs weights and says how much scratch
// memory one call needs. Compute then finds the result in ctx.prepared and
// its scratch in ctx.scratch, so that steady-state runs allocate nothing.
// Compute must also work without them (ctx.prepared == nullptr: the
// reference executor, dynamic steps), typically by calling its own Prepare
// and allocating scratch on the spot.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"
#include "ops/attributes.h"
#include "ops/parallel.h"
#include "ops/tensor.h"

namespace orrery::ops {

enum class Backend : int { kCpu = 0 };
std::string_view BackendName(Backend backend);

struct TensorType {
  DType dtype = DType::kUndefined;  // kUndefined: an absent optional input
  Shape shape;

  bool present() const { return dtype != DType::kUndefined; }
  bool operator==(const TensorType&) const = default;
};

struct InferContext {
  std::span<const TensorType> inputs;
  // Same length as inputs; nullptr where the value is not known.
  std::span<const Tensor* const> values;
  const Attributes& attrs;
  int64_t opset = 0;  // default-domain opset of the model
  // Outputs the node declares (Split, Dropout's optional mask); 0 = unknown.
  size_t num_outputs = 0;

  const Tensor* value(size_t i) const { return i < values.size() ? values[i] : nullptr; }
};

// What a kernel's Prepare derived for one node and one set of input types.
// Immutable once built; shared by every concurrent run of the plan.
class PreparedKernel {
 public:
  virtual ~PreparedKernel() = default;
};

struct KernelContext {
  std::span<const Tensor* const> inputs;  // nullptr for absent optional inputs
  const Attributes& attrs;
  int64_t opset = 0;
  // From the kernel's Prepare for exactly these input types, or nullptr.
  const PreparedKernel* prepared = nullptr;
  // Scratch for every thread of `threads`, each slice at least
  // Prepared::scratch_bytes and 64-byte aligned (see ThreadScratch).
  // Empty when the kernel asked for none. Contents are undefined on entry.
  std::span<std::byte> scratch = {};
  // Threads lent by the caller (ops/parallel.h); nullptr = this thread only.
  ThreadGroup* threads = nullptr;
};

// Rounds a per-thread scratch size up to the alignment of each slice.
inline size_t ScratchStride(int64_t scratch_bytes) {
  const int64_t a = static_cast<int64_t>(kTensorAlignment);
  return scratch_bytes <= 0 ? 0 : static_cast<size_t>((scratch_bytes + a - 1) / a * a);
}

// Thread `thread`'s slice of ctx.scratch.
inline std::span<std::byte> ThreadScratch(const KernelContext& ctx, int thread) {
  const size_t stride = ctx.scratch.size() / static_cast<size_t>(NumThreads(ctx.threads));
  return ctx.scratch.subspan(static_cast<size_t>(thread) * stride, stride);
}

// Shape-independent state of one node (packed weights), shared by the
// node's preparations for every set of input shapes, so that a model
// specialised for several shapes packs its weights once. Thread-safe.
class NodeCache {
 public:
  using MakeFn = FunctionRef<Result<std::shared_ptr<const PreparedKernel>>()>;
  // The value stored under `key`, made by `make` on first use (under a lock:
  // concurrent callers wait rather than pack twice). Errors are not cached.
  Result<std::shared_ptr<const PreparedKernel>> GetOrMake(uint32_t key, MakeFn make);
  // Every stored (key, value), by key: what the runtime exports
  // (runtime/packed_weights.h). Cost: copies the shared_ptrs under the lock.
  std::vector<std::pair<uint32_t, std::shared_ptr<const PreparedKernel>>> Snapshot() const;
  // Stores `value` under `key` unless one is there: an imported value that
  // GetOrMake then returns instead of making one. Kernels must check that
  // what they get fits (and remake it otherwise); see ops/cpu/packed_state.h.
  void Insert(uint32_t key, std::shared_ptr<const PreparedKernel> value);

 private:
  mutable std::mutex mu_;
  std::map<uint32_t, std::shared_ptr<const PreparedKernel>> values_;
};

struct PrepareContext {
  std::span<const TensorType> inputs;     // !present() for absent optional inputs
  std::span<const Tensor* const> values;  // constant inputs (weights), else nullptr
  std::span<const TensorType> outputs;    // as Infer returned them
  const Attributes& attrs;
  int64_t opset = 0;
  NodeCache* node_cache = nullptr;  // may be null (no sharing across shapes)

  const Tensor* value(size_t i) const { return i < values.size() ? values[i] : nullptr; }
};

struct Prepared {
  std::shared_ptr<const PreparedKernel> kernel;  // may be null: nothing to keep
  int64_t scratch_bytes = 0;                     // per thread, per call
};

using InferFn = Status (*)(const InferContext& ctx, std::vector<TensorType>* outputs);
using ComputeFn = Status (*)(const KernelContext& ctx, std::span<Tensor> outputs);
// Errors are reported as the node's errors (the plan is rejected).
using PrepareFn = Result<Prepared> (*)(const PrepareContext& ctx);
// Optional, for kernels whose NodeCache holds packed weights: the bytes of
// one cache entry, and back. Deserialize returns INVALID_ARGUMENT for bytes
// it does not recognise (the runtime then ignores them and repacks).
using SerializeCachedFn = Result<std::vector<std::byte>> (*)(const PreparedKernel& cached);
using DeserializeCachedFn = Result<std::shared_ptr<const PreparedKernel>> (*)(
    uint32_t key, std::span<const std::byte> bytes);

enum class OutputAlloc { kPreallocated, kByKernel };

// Work one kernel call does, for profiles and (later) scheduling:
// floating-point operations and bytes read plus written.
struct OpCost {
  int64_t flops = 0;
  int64_t bytes = 0;
};

struct CostContext {
  std::span<const TensorType> inputs;  // !present() for absent optional inputs
  std::span<const TensorType> outputs;
  const Attributes& attrs;
};

// Optional per kernel. Without one the runtime reports BytesMovedCost.
// Must not overflow on hostile shapes (saturate instead).
using CostFn = OpCost (*)(const CostContext& ctx);

// Bytes of every present input and output; 0 FLOPs.
OpCost BytesMovedCost(const CostContext& ctx);

// Fusions a kernel implements (see runtime/fuse.h), as internal attributes
// the runtime's fusion pass may set on its nodes:
//   kFuseBias: `_fused_bias` = 1, input #2 is a bias [N] added to every row;
//   kFuseResidual: `_fused_residual` = 1, the last input Z has exactly the
//     output's shape and is added (after any bias);
//   kFuseActivation: `_fused_activation` (Relu, LeakyRelu, Clip,
//     HardSigmoid, HardSwish, Sigmoid, Tanh) applied last, with
//     `_fused_alpha` / `_fused_beta` (LeakyRelu alpha, Clip min / max,
//     HardSigmoid alpha / beta).
// Inference must reject malformed fused inputs with INVALID_ARGUMENT.
enum FusionFlags : uint32_t {
  kFuseBias = 1u << 0,
  kFuseResidual = 1u << 1,
  kFuseActivation = 1u << 2,
};

// KernelDef::packed_input.
using PackedInputFn = int (*)(uint32_t cache_key);

struct KernelDef {
  std::string op_type;
  Backend backend = Backend::kCpu;
  int min_inputs = 0;
  int max_inputs = 0;
  int min_outputs = 1;
  int max_outputs = 1;
  InferFn infer = nullptr;
  ComputeFn compute = nullptr;
  OutputAlloc alloc = OutputAlloc::kPreallocated;
  CostFn cost = nullptr;  // optional, see CostFn
  PrepareFn prepare = nullptr;  // optional, see the top of this file
  uint32_t fusions = 0;         // FusionFlags
  // kPreallocated kernels that write every element of every output: the
  // executor then skips zero-filling their arena outputs (a pass over
  // memory per step). Tests set ORRERY_POISON_OUTPUTS=1 to fill those
  // outputs with NaN instead, so a kernel that relies on zeros fails.
  bool overwrites_outputs = false;
  // The kernel's Compute validates every input value it depends on and its
  // Infer derives nothing from values it would not get at planning time,
  // so the runtime need not re-run Infer each run on steps whose integer
  // inputs are computed at run time (PlannedStep::recheck). Re-running
  // Infer allocates; this keeps such steps allocation-free.
  bool values_checked_in_compute = false;
  // Both set or both null; see SerializeCachedFn. Bump
  // kCachedStateVersion below whenever what a kernel stores changes meaning.
  SerializeCachedFn serialize_cached = nullptr;
  DeserializeCachedFn deserialize_cached = nullptr;
  // With serialize_cached: the input whose constant values the NodeCache
  // entry under `cache_key` packs (-1: none). A model image leaves such a
  // constant's raw values out when the entry is stored beside it
  // (runtime/model_image.h): the kernel's Prepare and Compute do not read
  // that input's values while a fitting entry is there, and Prepare returns
  // FAILED_PRECONDITION instead of packing values that are not there.
  PackedInputFn packed_input = nullptr;
};

// Version of every kernel's serialised NodeCache state taken together: the
// runtime stores it with exported weights and ignores exports of another
// version.
inline constexpr uint32_t kCachedStateVersion = 1;

// Runs `def` on inputs whose output types are known: Prepare (when the
// kernel has one, with every input value known) with heap scratch, then
// Compute. For the reference executor, dynamic steps and tests; planned
// steps prepare once instead. `outputs` must already be sized and, for
// kPreallocated kernels, allocated.
Status PrepareAndCompute(PrepareFn prepare, ComputeFn compute, const KernelContext& ctx,
                         std::span<const TensorType> output_types, std::span<Tensor> outputs);

class OpRegistry {
 public:
  // INVALID_ARGUMENT if incomplete, ALREADY_EXISTS if (op_type, backend) is taken.
  Status Register(KernelDef def);
  // nullptr when not registered.
  const KernelDef* Find(std::string_view op_type, Backend backend) const;
  // Attaches a cost function to a registered kernel that has none
  // (NOT_FOUND if the kernel is not registered).
  Status SetCost(std::string_view op_type, Backend backend, CostFn cost);
  // Set KernelDef::overwrites_outputs / values_checked_in_compute
  // (NOT_FOUND if not registered).
  Status SetOverwritesOutputs(std::string_view op_type, Backend backend);
  Status SetValuesCheckedInCompute(std::string_view op_type, Backend backend);
  std::vector<std::string> OpTypes(Backend backend) const;

  // The process-wide registry with every built-in kernel, built on first use
  // (thread-safe; no static initializers that a linker could drop).
  static const OpRegistry& Global();

 private:
  // The registered definition, or NOT_FOUND naming the op.
  Result<KernelDef*> Mutable(std::string_view op_type, Backend backend);

  std::map<std::pair<std::string, Backend>, KernelDef, std::less<>> kernels_;
};

// Registers every CPU kernel (ops/cpu/*.cc).
Status RegisterCpuKernels(OpRegistry* registry);
// Attaches cost functions (ops/cpu/cost.cc) to the registered CPU kernels
// that have none; Global() calls it after RegisterCpuKernels.
Status RegisterCpuCosts(OpRegistry* registry);

}  // namespace orrery::ops
