#include "runtime/inputs.h"

#include <algorithm>
#include <string>

namespace orrery::runtime {
namespace {

Status CheckInput(const TensorSpec& spec, const NamedTensor& in) {
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
  if (!spec.rank_known) return Status::Ok();
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
  return Status::Ok();
}

}  // namespace

Status OrderInputs(const ModelSignature& sig, const std::vector<NamedTensor>& inputs,
                   std::span<const Tensor*> ordered) {
  std::fill(ordered.begin(), ordered.end(), nullptr);
  for (size_t j = 0; j < inputs.size(); ++j) {
    const NamedTensor& in = inputs[j];
    // Clients usually send inputs in signature order: try that slot first.
    size_t idx = sig.inputs.size();
    if (j < sig.inputs.size() && sig.inputs[j].name == in.name) {
      idx = j;
    } else {
      for (size_t i = 0; i < sig.inputs.size(); ++i) {
        if (sig.inputs[i].name == in.name) {
          idx = i;
          break;
        }
      }
    }
    if (idx == sig.inputs.size()) {
      std::string names;
      for (const TensorSpec& s : sig.inputs) names += (names.empty() ? "'" : ", '") + s.name + "'";
      return Status::InvalidArgument("unknown input '" + in.name + "' (model inputs: " + names +
                                     ")");
    }
    if (ordered[idx] != nullptr) {
      return Status::InvalidArgument("input '" + in.name + "' given more than once");
    }
    ORRERY_RETURN_IF_ERROR(CheckInput(sig.inputs[idx], in));
    ordered[idx] = &in.tensor;
  }
  for (size_t i = 0; i < sig.inputs.size(); ++i) {
    if (ordered[i] == nullptr) {
      return Status::InvalidArgument("missing input '" + sig.inputs[i].name + "'");
    }
  }
  return Status::Ok();
}

}  // namespace orrery::runtime
