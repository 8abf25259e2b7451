// Execution plans: a graph compiled into a flat list of steps with resolved
// kernel function pointers and value slots, plus liveness (which slots each
// step releases). A Plan is immutable after compilation and may be executed
// from many threads at once.
//
// A Plan is shape-generic. CompiledModel specialises it per set of input
// shapes (runtime/specialize.h: types inferred once, shape computations
// folded, a memory plan) and runs the specialised plan step by step
// (runtime/execution.h). ExecutePlan here is the simple reference executor
// (per-step inference, one heap tensor per value), kept for tests.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "ops/registry.h"
#include "ops/tensor.h"
#include "runtime/graph.h"

namespace orrery::runtime {

struct Step {
  std::string label;    // "node 'fc1' (#0) Gemm", for messages
  std::string name;     // the node's name ("" when unnamed), for profiles
  std::string op_type;
  ops::InferFn infer = nullptr;
  ops::ComputeFn compute = nullptr;
  ops::CostFn cost = nullptr;  // nullptr: ops::BytesMovedCost
  ops::PrepareFn prepare = nullptr;
  uint32_t fusions = 0;  // ops::FusionFlags the kernel implements
  bool overwrites_outputs = false;  // ops::KernelDef::overwrites_outputs
  bool values_checked_in_compute = false;  // ops::KernelDef::values_checked_in_compute
  // Set when prepare is: what the node's preparations share across shapes.
  std::shared_ptr<ops::NodeCache> node_cache;
  ops::PackedInputFn packed_input = nullptr;  // ops::KernelDef::packed_input
  ops::OutputAlloc alloc = ops::OutputAlloc::kPreallocated;
  std::vector<int> inputs;   // slots; -1 for absent optional inputs
  std::vector<int> outputs;  // slots; -1 for absent optional outputs
  std::vector<int> release;  // slots last used by this step
  ops::Attributes attrs;
  // A fused step (runtime/fuse.h) whose fusion is exact only for some input
  // shapes: the original steps, run instead when the shapes do not allow it.
  std::vector<Step> unfused;
};

// Nodes runtime/fuse.h merged into a preceding Conv / Gemm / MatMul.
struct FusionStats {
  size_t batchnorms_folded = 0;
  size_t biases = 0;
  size_t residuals = 0;
  size_t activations = 0;
};

struct Plan {
  int64_t opset = 0;
  size_t num_slots = 0;
  std::vector<std::string> slot_names;
  std::vector<std::pair<int, Tensor>> constants;  // initializers and folded values still read
  std::vector<int> input_slots;   // graph inputs, signature order
  std::vector<int> output_slots;  // graph outputs, signature order
  std::vector<Step> steps;
  size_t folded_nodes = 0;   // evaluated at compile time (Constant nodes included)
  size_t removed_nodes = 0;  // dropped: they do not contribute to any graph output
  FusionStats fusion;
};

// Copies the kernel's entry points and flags from `def` into `step` (and gives
// it a fresh NodeCache when the kernel prepares): what compiling a node and
// loading a model image both do.
void BindKernel(const ops::KernelDef& def, Step& step);

// Compiles `graph` for `backend`: resolves kernels, drops nodes that no graph
// output depends on, folds nodes whose inputs are all constants (bounded, see
// runtime/fold.h) and computes liveness. Inference errors on constant-only
// nodes reject the graph (they would fail every run).
struct CompileOptions {
  bool fuse = true;  // run runtime/fuse.h (off: every node is its own step)
};
Result<Plan> CompilePlan(const Graph& graph, const ops::OpRegistry& registry,
                         ops::Backend backend = ops::Backend::kCpu,
                         const CompileOptions& options = {});

// Type of every slot for the given graph-input types, as far as inference
// can go without computed values (nullopt beyond that). Errors name the step.
Result<std::vector<std::optional<ops::TensorType>>> InferPlanTypes(
    const Plan& plan, const std::vector<ops::TensorType>& input_types);

// Runs the step's inference and checks the result (one type per output,
// sizes within kMaxTensorBytes). Errors are prefixed with the step label;
// UNAVAILABLE (a needed input value is unknown) is passed through.
Status InferStep(const Step& step, int64_t opset, std::span<const ops::TensorType> in_types,
                 std::span<const Tensor* const> values, std::vector<ops::TensorType>* types);

// Computes a step whose output types are known: allocates zero-filled
// outputs for kPreallocated kernels, calls the kernel and checks that the
// outputs have `types`. `outputs` has one tensor per step output.
// Kernels with a Prepare are prepared on the spot (heap scratch).
Status ComputeStep(const Step& step, int64_t opset, std::span<const Tensor* const> inputs,
                   std::span<const ops::TensorType> types, std::span<Tensor> outputs,
                   ops::ThreadGroup* threads = nullptr);

// Infers on the actual inputs, then ComputeStep. Fills `cost` when non-null.
Status RunKernel(const Step& step, int64_t opset, std::span<const Tensor* const> inputs,
                 std::span<Tensor> outputs, ops::OpCost* cost = nullptr,
                 ops::ThreadGroup* threads = nullptr);

// The step's cost for these types (its CostFn, else bytes moved).
ops::OpCost StepCost(const Step& step, std::span<const ops::TensorType> in_types,
                     std::span<const ops::TensorType> out_types);

// Runs one step against `slots` (indexed by slot id).
Status RunStep(const Plan& plan, const Step& step, std::vector<Tensor>& slots);

// Runs the whole plan. `inputs` are in input_slots order and already
// validated against the signature; returns tensors in output_slots order.
Result<std::vector<Tensor>> ExecutePlan(const Plan& plan, std::vector<Tensor> inputs);

}  // namespace orrery::runtime
