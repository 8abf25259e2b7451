// Orrery's graph IR: an ONNX graph imported into plain C++ structures
// (values by id, nodes in topological order, initializers as Tensors).
// Only runtime/ sees onnx protobufs; everything after import uses this IR.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "ops/attributes.h"
#include "ops/registry.h"
#include "ops/tensor.h"

namespace onnx { class ModelProto; }

namespace orrery::runtime {

// Default-domain opsets Orrery imports. Older models use semantics Orrery does
// not implement; newer ones may change ops in ways it does not know yet.
inline constexpr int64_t kMinOpset = 7;
inline constexpr int64_t kMaxOpset = 23;

struct Value {
  std::string name;
  DType dtype = DType::kUndefined;  // declared type; kUndefined when not declared
  Shape shape;                      // declared dims, -1 where unknown
  bool has_shape = false;           // false when the rank is unknown
  int producer = -1;                // node index, -1 for graph inputs and initializers
};

struct Node {
  std::string name;
  std::string op_type;
  size_t index = 0;          // position in the original ONNX graph (for messages)
  std::vector<int> inputs;   // value ids; -1 for an absent optional input
  std::vector<int> outputs;  // value ids; -1 for an absent optional output
  ops::Attributes attrs;
};

struct Graph {
  int64_t ir_version = 0;
  int64_t opset = 0;  // default-domain opset import
  std::vector<Value> values;
  std::vector<Node> nodes;  // topologically ordered
  std::map<int, Tensor> initializers;
  std::vector<int> inputs;   // graph inputs that are not initializers
  std::vector<int> outputs;
  size_t original_node_count = 0;

  // -1 when there is no such value.
  int FindValue(std::string_view name) const;

  std::unordered_map<std::string, int> value_ids;
};

// "node 'conv1' (#3)" or "node #3" when unnamed.
std::string NodeLabel(std::string_view name, size_t index);

// Imports a parsed model: opset and domain checks, initializers (external data
// rejected), typed graph inputs/outputs, SSA and defined-before-use checks,
// op support against `registry` for `backend`, control-flow rejection and
// topological ordering. Every failure is INVALID_ARGUMENT (or
// RESOURCE_EXHAUSTED for oversized tensors). Does not run the ONNX checker.
Result<Graph> ImportModel(const onnx::ModelProto& model, const ops::OpRegistry& registry,
                          ops::Backend backend = ops::Backend::kCpu);

// Kahn's algorithm over `nodes` (whose inputs refer to `producer` of values).
// Returns node positions in execution order; INVALID_ARGUMENT naming a node on
// a cycle otherwise.
Result<std::vector<size_t>> TopologicalOrder(const std::vector<Node>& nodes,
                                             const std::vector<Value>& values);

// Parses ONNX bytes and runs onnx::checker::check_model where the installed
// onnx knows the model's opset and IR version (newer models get only
// Orrery's own import checks). INVALID_ARGUMENT on failure.
Status ParseModel(std::string_view bytes, onnx::ModelProto* model);
Status CheckModel(const onnx::ModelProto& model);

}  // namespace orrery::runtime
