#include "runtime/plan.h"

#include <algorithm>

#include "runtime/fold.h"
#include "runtime/fuse.h"

namespace orrery::runtime {

void BindKernel(const ops::KernelDef& def, Step& step) {
  step.infer = def.infer;
  step.compute = def.compute;
  step.cost = def.cost;
  step.prepare = def.prepare;
  step.fusions = def.fusions;
  step.overwrites_outputs = def.overwrites_outputs;
  step.values_checked_in_compute = def.values_checked_in_compute;
  step.packed_input = def.packed_input;
  if (def.prepare != nullptr) step.node_cache = std::make_shared<ops::NodeCache>();
  step.alloc = def.alloc;
}

namespace {

std::string StepLabel(const Node& node) {
  return NodeLabel(node.name, node.index) + " (" + node.op_type + ")";
}

Result<Step> ResolveStep(const Node& node, const ops::OpRegistry& registry,
                         ops::Backend backend) {
  const ops::KernelDef* def = registry.Find(node.op_type, backend);
  if (def == nullptr) {
    return Status::InvalidArgument(NodeLabel(node.name, node.index) + ": unsupported op '" +
                                   node.op_type + "'");
  }
  Step step;
  step.label = StepLabel(node);
  step.name = node.name;
  step.op_type = node.op_type;
  BindKernel(*def, step);
  step.inputs = node.inputs;
  step.outputs = node.outputs;
  step.attrs = node.attrs;
  return step;
}

// Marks the nodes some graph output depends on (nodes are topologically
// ordered, so one backward sweep suffices).
std::vector<bool> LiveNodes(const Graph& graph) {
  std::vector<bool> needed(graph.values.size(), false);
  for (int id : graph.outputs) needed[static_cast<size_t>(id)] = true;
  std::vector<bool> live(graph.nodes.size(), false);
  for (size_t n = graph.nodes.size(); n-- > 0;) {
    const Node& node = graph.nodes[n];
    for (int id : node.outputs) {
      if (id >= 0 && needed[static_cast<size_t>(id)]) live[n] = true;
    }
    if (!live[n]) continue;
    for (int id : node.inputs) {
      if (id >= 0) needed[static_cast<size_t>(id)] = true;
    }
  }
  return live;
}

// Liveness: release each slot after its last reader, or right after its
// producer when nothing reads it. Graph outputs are never released.
void ComputeReleases(Plan* plan) {
  std::vector<int> last_use(plan->num_slots, -1);
  std::vector<bool> is_output(plan->num_slots, false);
  for (int id : plan->output_slots) is_output[static_cast<size_t>(id)] = true;
  for (size_t s = 0; s < plan->steps.size(); ++s) {
    plan->steps[s].release.clear();
    for (int id : plan->steps[s].inputs) {
      if (id >= 0) last_use[static_cast<size_t>(id)] = static_cast<int>(s);
    }
    for (int id : plan->steps[s].outputs) {
      if (id >= 0) {
        last_use[static_cast<size_t>(id)] =
            std::max(last_use[static_cast<size_t>(id)], static_cast<int>(s));
      }
    }
  }
  for (size_t id = 0; id < plan->num_slots; ++id) {
    if (is_output[id] || last_use[id] < 0) continue;
    plan->steps[static_cast<size_t>(last_use[id])].release.push_back(static_cast<int>(id));
  }
}

// Drops constants that no remaining step reads and no graph output is (e.g.
// a weight consumed only by a folded Transpose).
void PruneConstants(Plan* plan) {
  std::vector<bool> used(plan->num_slots, false);
  for (const Step& s : plan->steps) {
    for (int id : s.inputs) {
      if (id >= 0) used[static_cast<size_t>(id)] = true;
    }
    for (const Step& u : s.unfused) {
      for (int id : u.inputs) {
        if (id >= 0) used[static_cast<size_t>(id)] = true;
      }
    }
  }
  for (int id : plan->output_slots) used[static_cast<size_t>(id)] = true;
  std::erase_if(plan->constants,
                [&used](const auto& c) { return !used[static_cast<size_t>(c.first)]; });
}

}  // namespace

Status InferStep(const Step& step, int64_t opset, std::span<const ops::TensorType> in_types,
                 std::span<const Tensor* const> values, std::vector<ops::TensorType>* types) {
  types->clear();
  ops::InferContext ctx{in_types, values, step.attrs, opset, step.outputs.size()};
  Status st = step.infer(ctx, types);
  if (st.code() == StatusCode::kUnavailable) return st;
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

Status ComputeStep(const Step& step, int64_t opset, std::span<const Tensor* const> inputs,
                   std::span<const ops::TensorType> types, std::span<Tensor> outputs,
                   ops::ThreadGroup* threads) {
  if (step.alloc == ops::OutputAlloc::kPreallocated) {
    for (size_t o = 0; o < outputs.size(); ++o) {
      Result<Tensor> t = Tensor::Allocate(types[o].dtype, types[o].shape);
      if (!t.ok()) return t.status().WithPrefix(step.label);
      outputs[o] = std::move(t).value();
    }
  }
  ops::KernelContext kctx{.inputs = inputs, .attrs = step.attrs, .opset = opset, .threads = threads};
  Status st = ops::PrepareAndCompute(step.prepare, step.compute, kctx, types, outputs);
  if (!st.ok()) return st.WithPrefix(step.label);
  for (size_t o = 0; o < outputs.size(); ++o) {
    if (outputs[o].dtype() != types[o].dtype || outputs[o].shape() != types[o].shape) {
      return Status::Internal(step.label + ": kernel produced " +
                              std::string(DTypeName(outputs[o].dtype())) + " " +
                              ShapeToString(outputs[o].shape()) + ", inferred " +
                              std::string(DTypeName(types[o].dtype)) + " " +
                              ShapeToString(types[o].shape));
    }
  }
  return Status::Ok();
}

Status RunKernel(const Step& step, int64_t opset, std::span<const Tensor* const> inputs,
                 std::span<Tensor> outputs, ops::OpCost* cost, ops::ThreadGroup* threads) {
  std::vector<ops::TensorType> in_types;
  in_types.reserve(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor* t = inputs[i];
    if (t == nullptr) {
      in_types.emplace_back();
      continue;
    }
    if (t->empty() || t->unbound()) {
      return Status::Internal(step.label + ": input #" + std::to_string(i) + " has no value");
    }
    in_types.push_back(ops::TensorType{t->dtype(), t->shape()});
  }
  std::vector<ops::TensorType> out_types;
  Status st = InferStep(step, opset, in_types, inputs, &out_types);
  if (st.code() == StatusCode::kUnavailable) {
    // Every value is known at run time.
    return Status::Internal(step.label + ": " + st.message());
  }
  ORRERY_RETURN_IF_ERROR(st);
  if (cost != nullptr) *cost = StepCost(step, in_types, out_types);
  return ComputeStep(step, opset, inputs, out_types, outputs, threads);
}

ops::OpCost StepCost(const Step& step, std::span<const ops::TensorType> in_types,
                     std::span<const ops::TensorType> out_types) {
  ops::CostContext ctx{in_types, out_types, step.attrs};
  return step.cost != nullptr ? step.cost(ctx) : ops::BytesMovedCost(ctx);
}

Result<Plan> CompilePlan(const Graph& graph, const ops::OpRegistry& registry,
                         ops::Backend backend, const CompileOptions& options) {
  Plan plan;
  plan.opset = graph.opset;
  plan.num_slots = graph.values.size();
  for (const Value& v : graph.values) plan.slot_names.push_back(v.name);
  plan.input_slots = graph.inputs;
  plan.output_slots = graph.outputs;

  // Known values: initializers, then folded node outputs.
  std::vector<Tensor> known(plan.num_slots);
  for (const auto& [id, t] : graph.initializers) known[static_cast<size_t>(id)] = t;

  const std::vector<bool> live = LiveNodes(graph);
  FoldBudget budget = kCompileFoldBudget;
  std::vector<ops::TensorType> in_types, out_types;
  std::vector<const Tensor*> in_values;
  std::vector<Tensor> folded;
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    const Node& node = graph.nodes[n];
    ORRERY_ASSIGN_OR_RETURN(Step step, ResolveStep(node, registry, backend));
    if (!live[n]) {
      ++plan.removed_nodes;
      continue;
    }
    bool constant = true;
    in_types.clear();
    in_values.clear();
    for (int id : step.inputs) {
      const Tensor* v = id >= 0 ? &known[static_cast<size_t>(id)] : nullptr;
      if (v != nullptr && v->empty()) {
        constant = false;
        break;
      }
      in_types.push_back(v != nullptr ? ops::TensorType{v->dtype(), v->shape()}
                                      : ops::TensorType{});
      in_values.push_back(v);
    }
    if (constant) {
      Status st = InferStep(step, plan.opset, in_types, in_values, &out_types);
      if (st.code() != StatusCode::kUnavailable) ORRERY_RETURN_IF_ERROR(st);
      if (st.ok() &&
          TryFold(step, plan.opset, in_types, in_values, out_types, &budget, &folded)) {
        for (size_t o = 0; o < step.outputs.size(); ++o) {
          if (step.outputs[o] >= 0) known[static_cast<size_t>(step.outputs[o])] = folded[o];
        }
        ++plan.folded_nodes;
        continue;
      }
    }
    plan.steps.push_back(std::move(step));
  }
  for (size_t id = 0; id < plan.num_slots; ++id) {
    if (!known[id].empty()) plan.constants.emplace_back(static_cast<int>(id), known[id]);
  }
  if (options.fuse) {
    ORRERY_ASSIGN_OR_RETURN(plan.fusion, FusePlan(&plan));
  }
  PruneConstants(&plan);
  ComputeReleases(&plan);
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
  // Fused steps with a fallback are inferred through their original steps:
  // the types are the same, and only those accept every shape.
  std::vector<const Step*> order;
  for (const Step& step : plan.steps) {
    if (step.unfused.empty()) {
      order.push_back(&step);
    } else {
      for (const Step& u : step.unfused) order.push_back(&u);
    }
  }
  for (const Step* sp : order) {
    const Step& step = *sp;
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
    Status st = InferStep(step, plan.opset, in_types, in_values, &out_types);
    if (st.code() == StatusCode::kUnavailable) continue;  // needs a computed value
    ORRERY_RETURN_IF_ERROR(st);
    for (size_t o = 0; o < step.outputs.size(); ++o) {
      if (step.outputs[o] >= 0) types[static_cast<size_t>(step.outputs[o])] = out_types[o];
    }
  }
  return types;
}

Status RunStep(const Plan& plan, const Step& step, std::vector<Tensor>& slots) {
  std::vector<const Tensor*> in_ptrs;
  in_ptrs.reserve(step.inputs.size());
  for (int id : step.inputs) {
    if (id < 0) {
      in_ptrs.push_back(nullptr);
      continue;
    }
    const Tensor& t = slots[static_cast<size_t>(id)];
    if (t.empty()) {
      return Status::Internal(step.label + ": input '" + plan.slot_names[static_cast<size_t>(id)] +
                              "' has no value");
    }
    in_ptrs.push_back(&t);
  }
  std::vector<Tensor> outputs(step.outputs.size());
  ORRERY_RETURN_IF_ERROR(RunKernel(step, plan.opset, in_ptrs, outputs));
  for (size_t o = 0; o < outputs.size(); ++o) {
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
    if (step.unfused.empty()) {
      ORRERY_RETURN_IF_ERROR(RunStep(plan, step, slots));
    } else {
      // The reference semantics: the original steps, whatever the shapes.
      for (const Step& u : step.unfused) ORRERY_RETURN_IF_ERROR(RunStep(plan, u, slots));
      for (size_t u = 0; u + 1 < step.unfused.size(); ++u) {
        for (int id : step.unfused[u].outputs) {
          if (id >= 0) slots[static_cast<size_t>(id)] = Tensor();
        }
      }
    }
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
