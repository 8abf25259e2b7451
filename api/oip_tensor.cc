#include "api/oip_tensor.h"

#include <cstring>
#include <string>

namespace orrery {
namespace {

// Copies typed repeated contents of element type Src into a Tensor of
// element type Dst, checking the element count.
template <typename Dst, typename Field>
Result<Tensor> FromTyped(const std::string& name, DType dtype, const Shape& shape, const Field& field) {
  const int64_t n = NumElements(shape);
  if (static_cast<int64_t>(field.size()) != n) {
    return Status::InvalidArgument("input '" + name + "': shape " + ShapeToString(shape) + " needs " +
                                   std::to_string(n) + " elements, contents has " +
                                   std::to_string(field.size()));
  }
  Tensor t(dtype, shape);
  Dst* out = t.data<Dst>();
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<Dst>(field[static_cast<int>(i)]);
  return t;
}

Result<Tensor> DecodeTyped(const inference::ModelInferRequest::InferInputTensor& in, DType dtype,
                           const Shape& shape) {
  const auto& c = in.contents();
  const std::string& name = in.name();
  switch (dtype) {
    case DType::kFloat32: return FromTyped<float>(name, dtype, shape, c.fp32_contents());
    case DType::kFloat64: return FromTyped<double>(name, dtype, shape, c.fp64_contents());
    case DType::kInt64: return FromTyped<int64_t>(name, dtype, shape, c.int64_contents());
    case DType::kInt32: return FromTyped<int32_t>(name, dtype, shape, c.int_contents());
    case DType::kInt16: return FromTyped<int16_t>(name, dtype, shape, c.int_contents());
    case DType::kInt8: return FromTyped<int8_t>(name, dtype, shape, c.int_contents());
    case DType::kUint64: return FromTyped<uint64_t>(name, dtype, shape, c.uint64_contents());
    case DType::kUint32: return FromTyped<uint32_t>(name, dtype, shape, c.uint_contents());
    case DType::kUint16: return FromTyped<uint16_t>(name, dtype, shape, c.uint_contents());
    case DType::kUint8: return FromTyped<uint8_t>(name, dtype, shape, c.uint_contents());
    case DType::kBool: return FromTyped<bool>(name, dtype, shape, c.bool_contents());
    default:
      return Status::InvalidArgument("input '" + name + "': datatype " + in.datatype() +
                                     " must be sent in raw_input_contents");
  }
}

}  // namespace

Result<std::vector<NamedTensor>> DecodeInferInputs(const inference::ModelInferRequest& request,
                                                   uint64_t max_input_bytes) {
  const bool raw = request.raw_input_contents_size() > 0;
  if (raw && request.raw_input_contents_size() != request.inputs_size()) {
    return Status::InvalidArgument("raw_input_contents has " +
                                   std::to_string(request.raw_input_contents_size()) +
                                   " entries but the request has " + std::to_string(request.inputs_size()) +
                                   " inputs");
  }
  // First pass: datatypes and shapes of every input, so that a request over
  // the size limit is refused before any tensor is allocated.
  std::vector<DType> dtypes;
  std::vector<Shape> shapes;
  dtypes.reserve(request.inputs_size());
  shapes.reserve(request.inputs_size());
  uint64_t total_bytes = 0;
  for (const auto& in : request.inputs()) {
    const std::string where = "input '" + in.name() + "'";
    DType dtype = DTypeFromOipName(in.datatype());
    if (dtype == DType::kUndefined || dtype == DType::kString) {
      return Status::InvalidArgument(where + ": unsupported datatype '" + in.datatype() + "'");
    }
    Shape shape(in.shape().begin(), in.shape().end());
    // Bound the element count before multiplying, so hostile shapes cannot overflow.
    // The non-zero dims are bounded even beside a 0 dim: [0, 2^62, 2^62] has
    // no elements but overflows any stride computed from it.
    int64_t elements = 1;
    bool zero = false;
    for (int64_t d : shape) {
      if (d < 0) return Status::InvalidArgument(where + ": negative dimension in shape " + ShapeToString(shape));
      if (d == 0) {
        zero = true;
        continue;
      }
      if (elements > (int64_t{1} << 40) / d) {
        return Status::InvalidArgument(where + ": shape " + ShapeToString(shape) + " is too large");
      }
      elements *= d;
    }
    if (zero) elements = 0;
    total_bytes += static_cast<uint64_t>(elements) * DTypeSize(dtype);
    if (max_input_bytes != 0 && total_bytes > max_input_bytes) {
      return Status::ResourceExhausted(where + ": the inputs need more than " + std::to_string(max_input_bytes) +
                                       " bytes, the server's --max-input-bytes limit");
    }
    dtypes.push_back(dtype);
    shapes.push_back(std::move(shape));
  }

  std::vector<NamedTensor> out;
  out.reserve(request.inputs_size());
  for (int i = 0; i < request.inputs_size(); ++i) {
    const auto& in = request.inputs(i);
    const std::string where = "input '" + in.name() + "'";
    const size_t k = static_cast<size_t>(i);
    if (raw) {
      if (in.has_contents()) {
        return Status::InvalidArgument(where + ": both raw_input_contents and contents are set");
      }
      Result<Tensor> t = Tensor::FromBytes(dtypes[k], shapes[k], request.raw_input_contents(i));
      if (!t.ok()) return t.status().WithPrefix(where);
      out.push_back(NamedTensor{in.name(), std::move(t).value()});
    } else {
      ORRERY_ASSIGN_OR_RETURN(Tensor t, DecodeTyped(in, dtypes[k], shapes[k]));
      out.push_back(NamedTensor{in.name(), std::move(t)});
    }
  }
  return out;
}

void EncodeInferOutputs(const std::vector<NamedTensor>& tensors, inference::ModelInferResponse* response) {
  for (const NamedTensor& nt : tensors) {
    auto* out = response->add_outputs();
    out->set_name(nt.name);
    out->set_datatype(std::string(DTypeToOipName(nt.tensor.dtype())));
    for (int64_t d : nt.tensor.shape()) out->add_shape(d);
    response->add_raw_output_contents(std::string(nt.tensor.bytes()));
  }
}

}  // namespace orrery
