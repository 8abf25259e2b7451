#include "runtime/graph.h"

#include <onnx/checker.h>
#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>

#include <deque>
#include <exception>
#include <limits>
#include <set>

#include "runtime/tensor_proto.h"

namespace orrery::runtime {
namespace {

bool IsDefaultDomain(const std::string& domain) { return domain.empty() || domain == "ai.onnx"; }

bool IsControlFlow(const onnx::NodeProto& node) {
  if (IsDefaultDomain(node.domain()) &&
      (node.op_type() == "If" || node.op_type() == "Loop" || node.op_type() == "Scan")) {
    return true;
  }
  for (const auto& a : node.attribute()) {
    if (a.type() == onnx::AttributeProto::GRAPH || a.type() == onnx::AttributeProto::GRAPHS ||
        a.has_g() || a.graphs_size() > 0) {
      return true;
    }
  }
  return false;
}

Result<ops::AttrValue> ConvertAttribute(const onnx::AttributeProto& a) {
  using AP = onnx::AttributeProto;
  AP::AttributeType type = a.type();
  if (type == AP::UNDEFINED) {  // pre-IR-2 models: infer from the field that is set
    if (a.has_f()) type = AP::FLOAT;
    else if (a.has_i()) type = AP::INT;
    else if (a.has_s()) type = AP::STRING;
    else if (a.has_t()) type = AP::TENSOR;
    else if (a.floats_size() > 0) type = AP::FLOATS;
    else if (a.ints_size() > 0) type = AP::INTS;
    else if (a.strings_size() > 0) type = AP::STRINGS;
  }
  switch (type) {
    case AP::FLOAT: return ops::AttrValue(a.f());
    case AP::INT: return ops::AttrValue(static_cast<int64_t>(a.i()));
    case AP::STRING: return ops::AttrValue(a.s());
    case AP::FLOATS:
      return ops::AttrValue(std::vector<float>(a.floats().begin(), a.floats().end()));
    case AP::INTS:
      return ops::AttrValue(std::vector<int64_t>(a.ints().begin(), a.ints().end()));
    case AP::STRINGS:
      return ops::AttrValue(std::vector<std::string>(a.strings().begin(), a.strings().end()));
    case AP::TENSOR: {
      Result<Tensor> t = TensorFromProto(a.t());
      if (!t.ok()) return t.status();
      return ops::AttrValue(std::move(t).value());
    }
    default:
      return Status::InvalidArgument("attribute '" + a.name() + "' has unsupported type " +
                                     AP::AttributeType_Name(type));
  }
}

// Declared dtype and shape of a graph input or output.
Status ConvertValueInfo(const onnx::ValueInfoProto& info, bool require_type, Value* v) {
  if (!info.has_type()) {
    if (require_type) return Status::InvalidArgument("graph input '" + info.name() + "' has no type");
    return Status::Ok();
  }
  if (!info.type().has_tensor_type()) {
    return Status::InvalidArgument("'" + info.name() +
                                   "' is not a tensor (sequences, maps and optionals are not "
                                   "supported)");
  }
  const auto& tt = info.type().tensor_type();
  const int32_t elem = tt.elem_type();
  const DType dtype = static_cast<DType>(elem);
  if (elem <= 0 || elem > onnx::TensorProto::UINT64 || DTypeSize(dtype) == 0) {
    if (require_type || elem != 0) {
      return Status::InvalidArgument("'" + info.name() + "' has unsupported element type " +
                                     std::to_string(elem));
    }
  } else {
    v->dtype = dtype;
  }
  if (tt.has_shape()) {
    v->has_shape = true;
    for (const auto& d : tt.shape().dim()) {
      if (d.has_dim_value()) {
        if (d.dim_value() < 0) {
          return Status::InvalidArgument("'" + info.name() + "' has negative dim " +
                                         std::to_string(d.dim_value()));
        }
        v->shape.push_back(d.dim_value());
      } else {
        v->shape.push_back(-1);
      }
    }
    // Declared dims are untrusted: the known ones together must make a
    // tensor Orrery could hold.
    Shape known;
    for (int64_t d : v->shape) known.push_back(d <= 0 ? 1 : d);
    if (Result<int64_t> n = CheckedNumElements(known, v->dtype); !n.ok()) {
      return Status::InvalidArgument("'" + info.name() + "' has absurd dims " + ShapeToString(v->shape) + ": " +
                                     n.status().message());
    }
  }
  return Status::Ok();
}

size_t TrimmedSize(const google::protobuf::RepeatedPtrField<std::string>& names) {
  size_t n = static_cast<size_t>(names.size());
  while (n > 0 && names[static_cast<int>(n - 1)].empty()) --n;
  return n;
}

}  // namespace

int Graph::FindValue(std::string_view name) const {
  auto it = value_ids.find(std::string(name));
  return it == value_ids.end() ? -1 : it->second;
}

std::string NodeLabel(std::string_view name, size_t index) {
  if (name.empty()) return "node #" + std::to_string(index);
  return "node '" + std::string(name) + "' (#" + std::to_string(index) + ")";
}

Result<Graph> ImportModel(const onnx::ModelProto& model, const ops::OpRegistry& registry,
                          ops::Backend backend) {
  Graph g;
  g.ir_version = model.ir_version();

  // Opsets.
  bool have_default = false;
  for (const auto& imp : model.opset_import()) {
    if (IsDefaultDomain(imp.domain())) {
      if (have_default) return Status::InvalidArgument("default-domain opset imported twice");
      have_default = true;
      g.opset = imp.version();
    }
  }
  if (!have_default) {
    return Status::InvalidArgument("model does not import the default ONNX opset");
  }
  if (g.opset < kMinOpset) {
    return Status::InvalidArgument("model imports opset " + std::to_string(g.opset) +
                                   "; Orrery supports opsets " + std::to_string(kMinOpset) +
                                   " to " + std::to_string(kMaxOpset));
  }
  if (g.opset > kMaxOpset) {
    return Status::InvalidArgument("model imports opset " + std::to_string(g.opset) +
                                   ", newer than Orrery supports (" + std::to_string(kMaxOpset) +
                                   ")");
  }
  if (!model.has_graph()) return Status::InvalidArgument("model has no graph");
  const onnx::GraphProto& graph = model.graph();
  if (graph.sparse_initializer_size() > 0) {
    return Status::InvalidArgument("sparse initializers are not supported");
  }

  auto add_value = [&g](const std::string& name) -> int {
    const int id = static_cast<int>(g.values.size());
    Value v;
    v.name = name;
    g.values.push_back(std::move(v));
    g.value_ids.emplace(name, id);
    return id;
  };

  // Initializers.
  for (const auto& init : graph.initializer()) {
    if (init.name().empty()) return Status::InvalidArgument("initializer with an empty name");
    if (g.value_ids.count(init.name()) != 0) {
      return Status::InvalidArgument("initializer '" + init.name() + "' is defined twice");
    }
    Result<Tensor> t = TensorFromProto(init);
    if (!t.ok()) return t.status().WithPrefix("initializer '" + init.name() + "'");
    const int id = add_value(init.name());
    g.values[id].dtype = t->dtype();
    g.values[id].shape = t->shape();
    g.values[id].has_shape = true;
    g.initializers.emplace(id, std::move(t).value());
  }

  // Graph inputs (those that are also initializers are constants to Orrery).
  std::set<std::string> input_names;
  for (const auto& in : graph.input()) {
    if (in.name().empty()) return Status::InvalidArgument("graph input with an empty name");
    if (!input_names.insert(in.name()).second) {
      return Status::InvalidArgument("graph input '" + in.name() + "' is declared twice");
    }
    if (g.value_ids.count(in.name()) != 0) continue;  // initializer
    const int id = add_value(in.name());
    ORRERY_RETURN_IF_ERROR(ConvertValueInfo(in, /*require_type=*/true, &g.values[id]));
    g.inputs.push_back(id);
  }

  // Nodes: support checks first, so that the message names the first
  // offending node and lists every unsupported op in the model.
  std::set<std::string> unsupported;
  std::string first_error;
  for (int i = 0; i < graph.node_size(); ++i) {
    const onnx::NodeProto& n = graph.node(i);
    const std::string label = NodeLabel(n.name(), static_cast<size_t>(i));
    std::string err;
    if (IsControlFlow(n)) {
      err = label + ": control flow not supported (op '" + n.op_type() + "')";
    } else if (!IsDefaultDomain(n.domain())) {
      err = label + ": unsupported op '" + n.op_type() + "' in domain '" + n.domain() + "'";
      unsupported.insert(n.domain() + "." + n.op_type());
    } else if (registry.Find(n.op_type(), backend) == nullptr) {
      err = label + ": unsupported op '" + n.op_type() + "'";
      unsupported.insert(n.op_type());
    }
    if (!err.empty() && first_error.empty()) first_error = err;
  }
  if (!first_error.empty()) {
    if (unsupported.size() > 1) {
      first_error += " (unsupported ops in this model:";
      for (const auto& op : unsupported) first_error += " " + op;
      first_error += ")";
    }
    return Status::InvalidArgument(first_error);
  }

  // Node outputs (SSA: each value produced once).
  g.nodes.reserve(static_cast<size_t>(graph.node_size()));
  for (int i = 0; i < graph.node_size(); ++i) {
    const onnx::NodeProto& n = graph.node(i);
    Node node;
    node.name = n.name();
    node.op_type = n.op_type();
    node.index = static_cast<size_t>(i);
    const std::string label = NodeLabel(n.name(), node.index);
    const ops::KernelDef* def = registry.Find(n.op_type(), backend);
    const size_t n_out = TrimmedSize(n.output());
    if (n_out < static_cast<size_t>(def->min_outputs) ||
        n_out > static_cast<size_t>(def->max_outputs)) {
      return Status::InvalidArgument(label + ": " + n.op_type() + " has " +
                                     std::to_string(n_out) + " outputs, expected " +
                                     std::to_string(def->min_outputs) + " to " +
                                     std::to_string(def->max_outputs));
    }
    for (size_t o = 0; o < n_out; ++o) {
      const std::string& name = n.output(static_cast<int>(o));
      if (name.empty()) {
        node.outputs.push_back(-1);
        continue;
      }
      if (g.value_ids.count(name) != 0) {
        return Status::InvalidArgument(label + ": output '" + name +
                                       "' is already defined (values must be produced once)");
      }
      const int id = add_value(name);
      g.values[id].producer = i;
      node.outputs.push_back(id);
    }
    for (const auto& a : n.attribute()) {
      if (!a.name().empty() && a.name()[0] == '_') {
        // Reserved for Orrery's own rewrites (runtime/fuse.h).
        return Status::InvalidArgument(label + ": unsupported attribute '" + a.name() +
                                       "' (names starting with '_' are reserved)");
      }
      Result<ops::AttrValue> v = ConvertAttribute(a);
      if (!v.ok()) return v.status().WithPrefix(label);
      node.attrs.Set(a.name(), std::move(v).value());
    }
    g.nodes.push_back(std::move(node));
  }

  // Node inputs: every name must be defined somewhere.
  for (int i = 0; i < graph.node_size(); ++i) {
    const onnx::NodeProto& n = graph.node(i);
    Node& node = g.nodes[static_cast<size_t>(i)];
    const std::string label = NodeLabel(n.name(), node.index);
    const ops::KernelDef* def = registry.Find(n.op_type(), backend);
    const size_t n_in = TrimmedSize(n.input());
    if (n_in < static_cast<size_t>(def->min_inputs) ||
        n_in > static_cast<size_t>(def->max_inputs)) {
      return Status::InvalidArgument(label + ": " + n.op_type() + " has " +
                                     std::to_string(n_in) + " inputs, expected " +
                                     std::to_string(def->min_inputs) + " to " +
                                     std::to_string(def->max_inputs));
    }
    for (size_t k = 0; k < n_in; ++k) {
      const std::string& name = n.input(static_cast<int>(k));
      if (name.empty()) {
        if (k < static_cast<size_t>(def->min_inputs)) {
          return Status::InvalidArgument(label + ": required input #" + std::to_string(k) +
                                         " is empty");
        }
        node.inputs.push_back(-1);
        continue;
      }
      const int id = g.FindValue(name);
      if (id < 0) {
        return Status::InvalidArgument(label + ": input '" + name +
                                       "' is not produced by any node, graph input or "
                                       "initializer");
      }
      node.inputs.push_back(id);
    }
  }

  // Graph outputs.
  std::set<std::string> output_names;
  for (const auto& out : graph.output()) {
    if (!output_names.insert(out.name()).second) {
      return Status::InvalidArgument("graph output '" + out.name() + "' is listed twice");
    }
    const int id = g.FindValue(out.name());
    if (id < 0) {
      return Status::InvalidArgument("graph output '" + out.name() + "' is never produced");
    }
    Value declared;
    ORRERY_RETURN_IF_ERROR(ConvertValueInfo(out, /*require_type=*/false, &declared));
    Value& v = g.values[id];
    if (v.dtype == DType::kUndefined) v.dtype = declared.dtype;
    if (!v.has_shape && declared.has_shape) {
      v.shape = declared.shape;
      v.has_shape = true;
    }
    g.outputs.push_back(id);
  }
  if (g.outputs.empty()) return Status::InvalidArgument("graph has no outputs");

  // Topological order.
  ORRERY_ASSIGN_OR_RETURN(std::vector<size_t> order, TopologicalOrder(g.nodes, g.values));
  std::vector<Node> sorted;
  sorted.reserve(order.size());
  for (size_t i : order) sorted.push_back(std::move(g.nodes[i]));
  g.nodes = std::move(sorted);
  // producer now refers to positions in the sorted node list.
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    for (int id : g.nodes[i].outputs) {
      if (id >= 0) g.values[static_cast<size_t>(id)].producer = static_cast<int>(i);
    }
  }
  g.original_node_count = static_cast<size_t>(graph.node_size());
  return g;
}

Result<std::vector<size_t>> TopologicalOrder(const std::vector<Node>& nodes,
                                             const std::vector<Value>& values) {
  const size_t n = nodes.size();
  std::vector<size_t> pending(n, 0);
  std::vector<std::vector<size_t>> consumers(n);
  for (size_t i = 0; i < n; ++i) {
    for (int id : nodes[i].inputs) {
      if (id < 0 || static_cast<size_t>(id) >= values.size()) continue;
      const int p = values[static_cast<size_t>(id)].producer;
      if (p < 0) continue;
      if (static_cast<size_t>(p) >= n) {
        return Status::InvalidArgument("value '" + values[static_cast<size_t>(id)].name +
                                       "' has an invalid producer");
      }
      ++pending[i];
      consumers[static_cast<size_t>(p)].push_back(i);
    }
  }
  std::deque<size_t> ready;
  for (size_t i = 0; i < n; ++i) {
    if (pending[i] == 0) ready.push_back(i);
  }
  std::vector<size_t> order;
  order.reserve(n);
  while (!ready.empty()) {
    const size_t i = ready.front();
    ready.pop_front();
    order.push_back(i);
    for (size_t c : consumers[i]) {
      if (--pending[c] == 0) ready.push_back(c);
    }
  }
  if (order.size() != n) {
    for (size_t i = 0; i < n; ++i) {
      if (pending[i] != 0) {
        return Status::InvalidArgument("graph has a cycle through " +
                                       NodeLabel(nodes[i].name, nodes[i].index) + " ('" +
                                       nodes[i].op_type + "')");
      }
    }
  }
  return order;
}

Status ParseModel(std::string_view bytes, onnx::ModelProto* model) {
  if (bytes.empty()) return Status::InvalidArgument("model is empty");
  if (bytes.size() > static_cast<size_t>(std::numeric_limits<int>::max()) ||
      !model->ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return Status::InvalidArgument("cannot parse ONNX model (" + std::to_string(bytes.size()) +
                                   " bytes are not a valid ModelProto)");
  }
  return Status::Ok();
}

Status CheckModel(const onnx::ModelProto& model) {
  // The installed onnx rejects opsets and IR versions newer than it knows;
  // Orrery's import is the authority for those models.
  if (model.ir_version() > onnx::IR_VERSION) return Status::Ok();
  const auto ranges = onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map();
  for (const auto& imp : model.opset_import()) {
    const std::string domain = imp.domain() == "ai.onnx" ? std::string() : imp.domain();
    auto it = ranges.find(domain);
    if (it != ranges.end() && imp.version() > it->second.second) return Status::Ok();
  }
  try {
    onnx::checker::check_model(model);
  } catch (const std::exception& e) {
    std::string what = e.what();
    while (!what.empty() && (what.back() == '\n' || what.back() == ' ')) what.pop_back();
    return Status::InvalidArgument("ONNX checker: " + what);
  }
  return Status::Ok();
}

}  // namespace orrery::runtime
