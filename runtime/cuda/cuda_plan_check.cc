#include <map>
#include <optional>

#include "ops/cuda/kernel_params.h"
#include "runtime/cuda/cuda_plan.h"

namespace orrery::runtime {

Status CheckCudaPlan(const Plan& plan, const std::vector<ops::TensorType>& input_types) {
  ORRERY_ASSIGN_OR_RETURN(std::vector<std::optional<ops::TensorType>> types,
                          InferPlanTypes(plan, input_types));
  std::map<int, const Tensor*> constants;
  for (const auto& [slot, value] : plan.constants) constants[slot] = &value;
  for (const Step& step : plan.steps) {
    std::vector<ops::TensorType> in, out;
    std::vector<const Tensor*> values;
    bool known = true;
    for (int s : step.inputs) {
      if (s < 0) {
        in.emplace_back();
        values.push_back(nullptr);
        continue;
      }
      known = known && types[static_cast<size_t>(s)].has_value();
      in.push_back(types[static_cast<size_t>(s)].value_or(ops::TensorType{}));
      const auto c = constants.find(s);
      values.push_back(c == constants.end() ? nullptr : c->second);
    }
    for (int s : step.outputs) {
      if (s < 0) continue;
      known = known && types[static_cast<size_t>(s)].has_value();
      out.push_back(types[static_cast<size_t>(s)].value_or(ops::TensorType{}));
    }
    if (!known) {
      return Status::Unimplemented(step.label + ": " + step.op_type +
                                   " on CUDA: its shapes depend on values computed at run time");
    }
    Status st = ops::cuda::CheckCudaSupport(step.op_type, step.attrs, plan.opset, in, values, out);
    if (!st.ok()) return Status(st.code(), step.label + ": " + st.message());
    // A fused residual must have exactly the output's shape (the CPU runs
    // the unfused steps otherwise; the GPU path has no such fallback).
    if (step.attrs.Has("_fused_residual") && (in.empty() || in.back().shape != out[0].shape)) {
      return Status::Unimplemented(step.label + ": " + step.op_type +
                                   " on CUDA: a fused residual that broadcasts");
    }
  }
  return Status::Ok();
}

}  // namespace orrery::runtime
