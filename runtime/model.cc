#include "runtime/model.h"

#include <onnx/onnx_pb.h>

#include <unordered_map>

#include "ops/registry.h"
#include "runtime/graph.h"
#include "runtime/plan.h"

namespace orrery {

struct CompiledModel::Impl {
  ModelSignature signature;
  runtime::Plan plan;
};

namespace {

TensorSpec SpecOf(const runtime::Value& v) {
  return TensorSpec{.name = v.name, .dtype = v.dtype, .shape = v.shape, .rank_known = v.has_shape};
}

bool IsStatic(const TensorSpec& s) {
  if (!s.rank_known) return false;
  for (int64_t d : s.shape) {
    if (d < 0) return false;
  }
  return true;
}

// Static shape inference over the plan. With fully static inputs any error
// is the model's fault and rejects it; with dynamic inputs the pass (dims
// taken as 1) only fills in undeclared output dtypes and ranks.
Status InferSignature(const runtime::Plan& plan, ModelSignature* sig) {
  bool all_static = true;
  std::vector<ops::TensorType> in_types;
  for (const TensorSpec& s : sig->inputs) {
    all_static = all_static && IsStatic(s);
    ops::TensorType t{s.dtype, s.shape};
    for (int64_t& d : t.shape) d = d < 0 ? 1 : d;
    in_types.push_back(std::move(t));
  }
  bool rank_unknown = false;
  for (const TensorSpec& s : sig->inputs) rank_unknown = rank_unknown || !s.rank_known;
  if (rank_unknown) return Status::Ok();
  auto types = runtime::InferPlanTypes(plan, in_types);
  if (!types.ok()) {
    if (all_static) return types.status();
    return Status::Ok();
  }
  for (size_t i = 0; i < sig->outputs.size(); ++i) {
    TensorSpec& out = sig->outputs[i];
    const auto& t = (*types)[static_cast<size_t>(plan.output_slots[i])];
    if (!t.has_value()) continue;
    if (out.dtype == DType::kUndefined) out.dtype = t->dtype;
    if (!out.rank_known) {
      out.rank_known = true;
      out.shape = t->shape;
      if (!all_static) {
        for (int64_t& d : out.shape) d = -1;
      }
    }
  }
  return Status::Ok();
}

}  // namespace

CompiledModel::CompiledModel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CompiledModel::~CompiledModel() = default;

const ModelSignature& CompiledModel::signature() const { return impl_->signature; }

Result<std::unique_ptr<CompiledModel>> CompiledModel::Compile(std::string_view onnx_bytes) {
  onnx::ModelProto model;
  ORRERY_RETURN_IF_ERROR(runtime::ParseModel(onnx_bytes, &model));
  const ops::OpRegistry& registry = ops::OpRegistry::Global();
  ORRERY_ASSIGN_OR_RETURN(runtime::Graph graph, runtime::ImportModel(model, registry));
  ORRERY_RETURN_IF_ERROR(runtime::CheckModel(model));

  auto impl = std::make_unique<Impl>();
  ORRERY_ASSIGN_OR_RETURN(impl->plan, runtime::CompilePlan(graph, registry));
  ModelSignature& sig = impl->signature;
  sig.opset = graph.opset;
  sig.node_count = graph.original_node_count;
  for (int id : graph.inputs) sig.inputs.push_back(SpecOf(graph.values[static_cast<size_t>(id)]));
  for (int id : graph.outputs) sig.outputs.push_back(SpecOf(graph.values[static_cast<size_t>(id)]));
  Status st = InferSignature(impl->plan, &sig);
  if (!st.ok()) return st.WithPrefix("shape inference");
  return std::unique_ptr<CompiledModel>(new CompiledModel(std::move(impl)));
}

Result<std::vector<NamedTensor>> CompiledModel::Run(const std::vector<NamedTensor>& inputs) const {
  const ModelSignature& sig = impl_->signature;
  std::vector<Tensor> ordered(sig.inputs.size());
  std::vector<bool> given(sig.inputs.size(), false);
  for (const NamedTensor& in : inputs) {
    size_t idx = sig.inputs.size();
    for (size_t i = 0; i < sig.inputs.size(); ++i) {
      if (sig.inputs[i].name == in.name) {
        idx = i;
        break;
      }
    }
    if (idx == sig.inputs.size()) {
      std::string names;
      for (const TensorSpec& s : sig.inputs) names += (names.empty() ? "'" : ", '") + s.name + "'";
      return Status::InvalidArgument("unknown input '" + in.name + "' (model inputs: " + names +
                                     ")");
    }
    if (given[idx]) return Status::InvalidArgument("input '" + in.name + "' given more than once");
    given[idx] = true;
    const TensorSpec& spec = sig.inputs[idx];
    const Tensor& t = in.tensor;
    if (t.dtype() != spec.dtype) {
      return Status::InvalidArgument("input '" + in.name + "': expected dtype " +
                                     std::string(DTypeName(spec.dtype)) + ", got " +
                                     std::string(DTypeName(t.dtype())));
    }
    Result<int64_t> n = CheckedNumElements(t.shape(), t.dtype());
    if (!n.ok()) return n.status().WithPrefix("input '" + in.name + "'");
    if (t.raw_data() == nullptr) {
      return Status::InvalidArgument("input '" + in.name + "' has no data");
    }
    if (spec.rank_known) {
      if (t.shape().size() != spec.shape.size()) {
        return Status::InvalidArgument(
            "input '" + in.name + "': expected rank " + std::to_string(spec.shape.size()) + " " +
            ShapeToString(spec.shape) + ", got rank " + std::to_string(t.shape().size()) + " " +
            ShapeToString(t.shape()));
      }
      for (size_t d = 0; d < spec.shape.size(); ++d) {
        if (spec.shape[d] >= 0 && spec.shape[d] != t.shape()[d]) {
          return Status::InvalidArgument(
              "input '" + in.name + "': dim " + std::to_string(d) + " expected " +
              std::to_string(spec.shape[d]) + ", got " + std::to_string(t.shape()[d]) +
              " (expected shape " + ShapeToString(spec.shape) + ", got " +
              ShapeToString(t.shape()) + ")");
        }
      }
    }
    ordered[idx] = t;
  }
  for (size_t i = 0; i < sig.inputs.size(); ++i) {
    if (!given[i]) return Status::InvalidArgument("missing input '" + sig.inputs[i].name + "'");
  }
  ORRERY_ASSIGN_OR_RETURN(std::vector<Tensor> outs,
                          runtime::ExecutePlan(impl_->plan, std::move(ordered)));
  std::vector<NamedTensor> result;
  result.reserve(outs.size());
  for (size_t i = 0; i < outs.size(); ++i) {
    result.push_back(NamedTensor{sig.outputs[i].name, std::move(outs[i])});
  }
  return result;
}

}  // namespace orrery
