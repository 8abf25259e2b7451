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
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"
#include "ops/attributes.h"
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

struct KernelContext {
  std::span<const Tensor* const> inputs;  // nullptr for absent optional inputs
  const Attributes& attrs;
  int64_t opset = 0;
};

using InferFn = Status (*)(const InferContext& ctx, std::vector<TensorType>* outputs);
using ComputeFn = Status (*)(const KernelContext& ctx, std::span<Tensor> outputs);

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
};

class OpRegistry {
 public:
  // INVALID_ARGUMENT if incomplete, ALREADY_EXISTS if (op_type, backend) is taken.
  Status Register(KernelDef def);
  // nullptr when not registered.
  const KernelDef* Find(std::string_view op_type, Backend backend) const;
  // Attaches a cost function to a registered kernel that has none
  // (NOT_FOUND if the kernel is not registered).
  Status SetCost(std::string_view op_type, Backend backend, CostFn cost);
  std::vector<std::string> OpTypes(Backend backend) const;

  // The process-wide registry with every built-in kernel, built on first use
  // (thread-safe; no static initializers that a linker could drop).
  static const OpRegistry& Global();

 private:
  std::map<std::pair<std::string, Backend>, KernelDef, std::less<>> kernels_;
};

// Registers every CPU kernel (ops/cpu/*.cc).
Status RegisterCpuKernels(OpRegistry* registry);
// Attaches cost functions (ops/cpu/cost.cc) to the registered CPU kernels
// that have none; Global() calls it after RegisterCpuKernels.
Status RegisterCpuCosts(OpRegistry* registry);

}  // namespace orrery::ops
