// Constant folding, shared by CompilePlan (values known at compile time:
// initializers and Constant nodes) and Specialize (also input shapes, so
// Shape -> Gather -> Concat -> Reshape chains become constants).
//
// Folding runs the node's own kernel once. It is bounded so that a hostile
// model cannot make compilation exhaust memory or time: one folded output
// is at most kMaxFoldedTensorBytes, one folded node at most kMaxFoldFlops
// (by its CostFn), and each compile / specialisation has a total budget.
// A node that is not folded simply stays a step.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "ops/registry.h"
#include "ops/tensor.h"
#include "runtime/plan.h"

namespace orrery::runtime {

inline constexpr int64_t kMaxFoldedTensorBytes = int64_t{64} << 20;
inline constexpr int64_t kMaxFoldFlops = int64_t{1} << 28;

struct FoldBudget {
  int64_t bytes = 0;  // total bytes of folded outputs still allowed
  int64_t flops = 0;  // total FLOPs still allowed
};

// Per CompiledModel::Compile: folded values live as long as the model.
inline constexpr FoldBudget kCompileFoldBudget{int64_t{256} << 20, int64_t{1} << 32};
// Per specialised plan (up to PlanCache capacity of them per model): shape
// computations are tiny, anything large stays a step.
inline constexpr FoldBudget kSpecializeFoldBudget{int64_t{4} << 20, int64_t{1} << 26};

// Shape and Size: their output depends only on the input's type, so they
// fold as soon as the type is known (the kernel sees a buffer-less input).
bool IsShapeOnlyOp(std::string_view op_type);

// Evaluates `step` if every present input value is known (or the op is
// shape-only and the types are known), the op is deterministic and the
// limits allow; `out_types` come from InferStep on the same inputs. Returns
// true and fills `outputs` (one per step output) when folded. A kernel error
// leaves the node unfolded: it will report the error when it runs.
bool TryFold(const Step& step, int64_t opset, std::span<const ops::TensorType> in_types,
             std::span<const Tensor* const> in_values, std::span<const ops::TensorType> out_types,
             FoldBudget* budget, std::vector<Tensor>* outputs);

}  // namespace orrery::runtime
