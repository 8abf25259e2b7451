// Execution plans: a graph compiled into a flat list of steps with resolved
// kernel function pointers and value slots, plus liveness (which slots each
// step releases). A Plan is immutable after compilation and may be executed
// from many threads at once.
//
// Extension points for later work: per-shape plan caching (InferPlanTypes
// already derives every slot's type from input shapes), memory planning
// (the executor owns output allocation for kPreallocated kernels) and
// step-by-step execution (ExecutePlan is a loop over Step; see RunStep).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "ops/registry.h"
#include "ops/tensor.h"
#include "runtime/graph.h"

namespace orrery::runtime {

struct Step {
  std::string label;    // "node 'fc1' (#0) Gemm", for messages
  std::string op_type;
  ops::InferFn infer = nullptr;
  ops::ComputeFn compute = nullptr;
  ops::OutputAlloc alloc = ops::OutputAlloc::kPreallocated;
  std::vector<int> inputs;   // slots; -1 for absent optional inputs
  std::vector<int> outputs;  // slots; -1 for absent optional outputs
  std::vector<int> release;  // slots last used by this step
  ops::Attributes attrs;
};

struct Plan {
  int64_t opset = 0;
  size_t num_slots = 0;
  std::vector<std::string> slot_names;
  std::vector<std::pair<int, Tensor>> constants;  // initializers and folded Constants
  std::vector<int> input_slots;   // graph inputs, signature order
  std::vector<int> output_slots;  // graph outputs, signature order
  std::vector<Step> steps;
};

// Compiles `graph` for `backend`: resolves kernels, folds Constant nodes into
// constants and computes liveness.
Result<Plan> CompilePlan(const Graph& graph, const ops::OpRegistry& registry,
                         ops::Backend backend = ops::Backend::kCpu);

// Type of every slot for the given graph-input types, as far as inference
// can go without computed values (nullopt beyond that). Errors name the step.
Result<std::vector<std::optional<ops::TensorType>>> InferPlanTypes(
    const Plan& plan, const std::vector<ops::TensorType>& input_types);

// Runs one step against `slots` (indexed by slot id).
Status RunStep(const Plan& plan, const Step& step, std::vector<Tensor>& slots);

// Runs the whole plan. `inputs` are in input_slots order and already
// validated against the signature; returns tensors in output_slots order.
Result<std::vector<Tensor>> ExecutePlan(const Plan& plan, std::vector<Tensor> inputs);

}  // namespace orrery::runtime
