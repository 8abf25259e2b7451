#include "runtime/fold.h"

#include <algorithm>

namespace orrery::runtime {
namespace {

// Outputs differ from run to run: never folded.
bool IsNondeterministic(std::string_view op_type) {
  static constexpr std::string_view kOps[] = {"RandomNormal",     "RandomUniform",
                                              "RandomNormalLike", "RandomUniformLike",
                                              "Multinomial",      "Bernoulli"};
  return std::find(std::begin(kOps), std::end(kOps), op_type) != std::end(kOps);
}

}  // namespace

bool IsShapeOnlyOp(std::string_view op_type) { return op_type == "Shape" || op_type == "Size"; }

bool TryFold(const Step& step, int64_t opset, std::span<const ops::TensorType> in_types,
             std::span<const Tensor* const> in_values, std::span<const ops::TensorType> out_types,
             FoldBudget* budget, std::vector<Tensor>* outputs) {
  if (IsNondeterministic(step.op_type)) return false;
  const bool shape_only = IsShapeOnlyOp(step.op_type);
  for (size_t i = 0; i < in_types.size(); ++i) {
    if (in_types[i].present() && in_values[i] == nullptr && !shape_only) return false;
  }
  int64_t bytes = 0;
  for (const ops::TensorType& t : out_types) {
    Result<int64_t> n = CheckedNumElements(t.shape, t.dtype);
    if (!n.ok()) return false;
    const int64_t b = *n * static_cast<int64_t>(DTypeSize(t.dtype));
    if (b > kMaxFoldedTensorBytes) return false;
    bytes += b;  // at most a few outputs of <= 64 MiB each
  }
  const ops::OpCost cost = StepCost(step, in_types, out_types);
  if (bytes > budget->bytes || cost.flops > kMaxFoldFlops || cost.flops > budget->flops) {
    return false;
  }

  // Shape-only ops read nothing but the input's shape: give them a
  // buffer-less stand-in rather than the (unknown) value.
  std::vector<Tensor> stand_ins(in_types.size());
  std::vector<const Tensor*> inputs(in_values.begin(), in_values.end());
  for (size_t i = 0; i < in_types.size(); ++i) {
    if (in_types[i].present() && inputs[i] == nullptr) {
      stand_ins[i] = Tensor::Unbound(in_types[i].dtype, in_types[i].shape);
      inputs[i] = &stand_ins[i];
    }
  }
  std::vector<Tensor> out(out_types.size());
  if (!ComputeStep(step, opset, inputs, out_types, out).ok()) return false;
  budget->bytes -= bytes;
  budget->flops -= cost.flops;
  *outputs = std::move(out);
  return true;
}

}  // namespace orrery::runtime
