#include "runtime/plan.h"

#include <algorithm>

namespace orrery::runtime {
namespace {

std::string StepLabel(const Node& node) {
  return NodeLabel(node.name, node.index) + " (" + node.op_type + ")";
}

// Runs infer and checks the result; fills `types` with one type per output.
Status InferStep(const Plan& plan, const Step& step, std::span<const ops::TensorType> in_types,
                 std::span<const Tensor* const> values, std::vector<ops::TensorType>* types) {
  types->clear();
  ops::InferContext ctx{in_types, values, step.attrs, plan.opset};
  Status st = step.infer(ctx, types);
  if (!st.ok()) return st.WithPrefix(step.label);
  if (types->size() != step.outputs.size()) {
    return Status::Internal(step.label + ": kernel inferred " + std::to_string(types->size()) +
                            " outputs for " + std::to_string(step.outputs.size()));
  }
  for (const ops::TensorType& t : *types) {
    Result<int64_t> n = CheckedNumElements(t.shape, t.dtype);
    if (!n.ok()) return n.status().WithPrefix(step.label + ": output");
  }
  return Status::Ok();
}

}  // namespace

Result<Plan> CompilePlan(const Graph& graph, const ops::OpRegistry& registry,
                         ops::Backend backend) {
  Plan plan;
  plan.opset = graph.opset;
  plan.num_slots = graph.values.size();
  for (const Value& v : graph.values) plan.slot_names.push_back(v.name);
  for (const auto& [id, t] : graph.initializers) plan.constants.emplace_back(id, t);
  plan.input_slots = graph.inputs;
  plan.output_slots = graph.outputs;

  std::vector<Tensor> scratch(plan.num_slots);  // for folding Constant nodes
  for (const Node& node : graph.nodes) {
    const ops::KernelDef* def = registry.Find(node.op_type, backend);
    if (def == nullptr) {
      return Status::InvalidArgument(NodeLabel(node.name, node.index) + ": unsupported op '" +
                                     node.op_type + "'");
    }
    Step step;
    step.label = StepLabel(node);
    step.op_type = node.op_type;
    step.infer = def->infer;
    step.compute = def->compute;
    step.alloc = def->alloc;
    step.inputs = node.inputs;
    step.outputs = node.outputs;
    step.attrs = node.attrs;
    if (node.inputs.empty()) {
      // Nodes without inputs (Constant) are evaluated once, here.
      ORRERY_RETURN_IF_ERROR(RunStep(plan, step, scratch));
      for (int id : node.outputs) {
        if (id >= 0) plan.constants.emplace_back(id, std::move(scratch[static_cast<size_t>(id)]));
      }
      continue;
    }
    plan.steps.push_back(std::move(step));
  }

  // Liveness: release each slot after its last reader, or right after its
  // producer when nothing reads it. Graph outputs are never released.
  std::vector<int> last_use(plan.num_slots, -1);
  std::vector<bool> is_output(plan.num_slots, false);
  for (int id : plan.output_slots) is_output[static_cast<size_t>(id)] = true;
  for (size_t s = 0; s < plan.steps.size(); ++s) {
    for (int id : plan.steps[s].inputs) {
      if (id >= 0) last_use[static_cast<size_t>(id)] = static_cast<int>(s);
    }
    for (int id : plan.steps[s].outputs) {
      if (id >= 0) {
        last_use[static_cast<size_t>(id)] =
            std::max(last_use[static_cast<size_t>(id)], static_cast<int>(s));
      }
    }
  }
  for (size_t id = 0; id < plan.num_slots; ++id) {
    if (is_output[id] || last_use[id] < 0) continue;
    plan.steps[static_cast<size_t>(last_use[id])].release.push_back(static_cast<int>(id));
  }
  return plan;
}

Result<std::vector<std::optional<ops::TensorType>>> InferPlanTypes(
    const Plan& plan, const std::vector<ops::TensorType>& input_types) {
  std::vector<std::optional<ops::TensorType>> types(plan.num_slots);
  std::vector<const Tensor*> values(plan.num_slots, nullptr);
  for (const auto& [id, t] : plan.constants) {
    types[static_cast<size_t>(id)] = ops::TensorType{t.dtype(), t.shape()};
    values[static_cast<size_t>(id)] = &t;
  }
  for (size_t i = 0; i < plan.input_slots.size() && i < input_types.size(); ++i) {
    types[static_cast<size_t>(plan.input_slots[i])] = input_types[i];
  }
  std::vector<ops::TensorType> in_types, out_types;
  std::vector<const Tensor*> in_values;
  for (const Step& step : plan.steps) {
    in_types.clear();
    in_values.clear();
    bool known = true;
    for (int id : step.inputs) {
      if (id < 0) {
        in_types.emplace_back();
        in_values.push_back(nullptr);
        continue;
      }
      if (!types[static_cast<size_t>(id)].has_value()) {
        known = false;
        break;
      }
      in_types.push_back(*types[static_cast<size_t>(id)]);
      in_values.push_back(values[static_cast<size_t>(id)]);
    }
    if (!known) continue;
    Status st = InferStep(plan, step, in_types, in_values, &out_types);
    if (st.code() == StatusCode::kUnavailable) continue;  // needs a computed value
    ORRERY_RETURN_IF_ERROR(st);
    for (size_t o = 0; o < step.outputs.size(); ++o) {
      if (step.outputs[o] >= 0) types[static_cast<size_t>(step.outputs[o])] = out_types[o];
    }
  }
  return types;
}

Status RunStep(const Plan& plan, const Step& step, std::vector<Tensor>& slots) {
  std::vector<ops::TensorType> in_types;
  std::vector<const Tensor*> in_ptrs;
  in_types.reserve(step.inputs.size());
  in_ptrs.reserve(step.inputs.size());
  for (int id : step.inputs) {
    if (id < 0) {
      in_types.emplace_back();
      in_ptrs.push_back(nullptr);
      continue;
    }
    const Tensor& t = slots[static_cast<size_t>(id)];
    if (t.empty()) {
      return Status::Internal(step.label + ": input '" + plan.slot_names[static_cast<size_t>(id)] +
                              "' has no value");
    }
    in_types.push_back(ops::TensorType{t.dtype(), t.shape()});
    in_ptrs.push_back(&t);
  }
  std::vector<ops::TensorType> out_types;
  Status st = InferStep(plan, step, in_types, in_ptrs, &out_types);
  if (st.code() == StatusCode::kUnavailable) {
    return Status::Internal(st.message());  // every value is known at run time
  }
  ORRERY_RETURN_IF_ERROR(st);

  std::vector<Tensor> outputs(step.outputs.size());
  if (step.alloc == ops::OutputAlloc::kPreallocated) {
    for (size_t o = 0; o < outputs.size(); ++o) {
      Result<Tensor> t = Tensor::Allocate(out_types[o].dtype, out_types[o].shape);
      if (!t.ok()) return t.status().WithPrefix(step.label);
      outputs[o] = std::move(t).value();
    }
  }
  ops::KernelContext kctx{in_ptrs, step.attrs, plan.opset};
  st = step.compute(kctx, outputs);
  if (!st.ok()) return st.WithPrefix(step.label);
  for (size_t o = 0; o < outputs.size(); ++o) {
    if (outputs[o].dtype() != out_types[o].dtype || outputs[o].shape() != out_types[o].shape) {
      return Status::Internal(step.label + ": kernel produced " +
                              std::string(DTypeName(outputs[o].dtype())) + " " +
                              ShapeToString(outputs[o].shape()) + ", inferred " +
                              std::string(DTypeName(out_types[o].dtype)) + " " +
                              ShapeToString(out_types[o].shape));
    }
    if (step.outputs[o] >= 0) slots[static_cast<size_t>(step.outputs[o])] = std::move(outputs[o]);
  }
  return Status::Ok();
}

Result<std::vector<Tensor>> ExecutePlan(const Plan& plan, std::vector<Tensor> inputs) {
  if (inputs.size() != plan.input_slots.size()) {
    return Status::InvalidArgument("expected " + std::to_string(plan.input_slots.size()) +
                                   " inputs, got " + std::to_string(inputs.size()));
  }
  std::vector<Tensor> slots(plan.num_slots);
  for (const auto& [id, t] : plan.constants) slots[static_cast<size_t>(id)] = t;
  for (size_t i = 0; i < inputs.size(); ++i) {
    slots[static_cast<size_t>(plan.input_slots[i])] = std::move(inputs[i]);
  }
  for (const Step& step : plan.steps) {
    ORRERY_RETURN_IF_ERROR(RunStep(plan, step, slots));
    for (int id : step.release) slots[static_cast<size_t>(id)] = Tensor();
  }
  std::vector<Tensor> outputs;
  outputs.reserve(plan.output_slots.size());
  for (int id : plan.output_slots) {
    const Tensor& t = slots[static_cast<size_t>(id)];
    if (t.empty()) {
      return Status::Internal("output '" + plan.slot_names[static_cast<size_t>(id)] +
                              "' has no value");
    }
    outputs.push_back(t);
  }
  return outputs;
}

}  // namespace orrery::runtime
