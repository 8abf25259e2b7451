#include "runtime/tensor_proto.h"

#include <onnx/onnx_pb.h>

#include <cstring>
#include <limits>

namespace orrery {
namespace {

std::string Describe(const onnx::TensorProto& proto) {
  return proto.name().empty() ? std::string("tensor") : "tensor '" + proto.name() + "'";
}

Status CountMismatch(const onnx::TensorProto& proto, const char* field, int64_t got,
                     int64_t want) {
  return Status::InvalidArgument(Describe(proto) + ": " + field + " has " + std::to_string(got) +
                                 " values, shape needs " + std::to_string(want));
}

// Copies a repeated field into the tensor, converting each element to T.
template <typename T, typename Field>
Status CopyTyped(const onnx::TensorProto& proto, const char* name, const Field& field,
                 Tensor& t) {
  const int64_t n = t.num_elements();
  if (field.size() != n) return CountMismatch(proto, name, field.size(), n);
  T* out = t.data<T>();
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<T>(field.Get(static_cast<int>(i)));
  return Status::Ok();
}

// Number of values in the typed field that carries `dtype`, and its name.
int64_t TypedCount(const onnx::TensorProto& proto, DType dtype, const char** field) {
  switch (dtype) {
    case DType::kFloat32: *field = "float_data"; return proto.float_data_size();
    case DType::kFloat64: *field = "double_data"; return proto.double_data_size();
    case DType::kInt64: *field = "int64_data"; return proto.int64_data_size();
    case DType::kUint32:
    case DType::kUint64: *field = "uint64_data"; return proto.uint64_data_size();
    default: *field = "int32_data"; return proto.int32_data_size();
  }
}

}  // namespace

Result<Tensor> TensorFromProto(const onnx::TensorProto& proto) {
  if (proto.data_location() == onnx::TensorProto::EXTERNAL || proto.external_data_size() > 0) {
    return Status::InvalidArgument(Describe(proto) + " uses external data, which is not supported");
  }
  if (proto.has_segment()) {
    return Status::InvalidArgument(Describe(proto) + " is segmented, which is not supported");
  }
  if (!onnx::TensorProto_DataType_IsValid(proto.data_type())) {
    return Status::InvalidArgument(Describe(proto) + " has invalid data_type " +
                                   std::to_string(proto.data_type()));
  }
  const DType dtype = static_cast<DType>(proto.data_type());
  const bool known = proto.data_type() <= onnx::TensorProto::UINT64;
  if (!known || DTypeSize(dtype) == 0) {
    return Status::InvalidArgument(
        Describe(proto) + " has unsupported data type " +
        onnx::TensorProto_DataType_Name(static_cast<onnx::TensorProto_DataType>(proto.data_type())));
  }
  Shape shape(proto.dims().begin(), proto.dims().end());
  // Bounded with zero dims read as 1 as well: CheckedNumElements accepts any
  // dims beside a 0, but [2^62, 114, 0] overflows int64 in NumElements and in
  // stride arithmetic (found by the import fuzzer).
  Shape nonzero = shape;
  for (int64_t& d : nonzero) d = d == 0 ? 1 : d;
  Result<int64_t> checked = CheckedNumElements(nonzero, dtype);
  if (checked.ok()) checked = CheckedNumElements(shape, dtype);
  if (!checked.ok()) {
    // Dims that overflow or exceed the largest tensor are a malformed file,
    // not a server limit.
    return Status::InvalidArgument(Describe(proto) + ": absurd dims " + ShapeToString(shape) + ": " +
                                   checked.status().message());
  }
  const int64_t n = *checked;
  // The data must match the dims before anything is allocated, so a tiny
  // file cannot make the server allocate what its dims claim.
  if (proto.has_raw_data()) {
    const uint64_t want = static_cast<uint64_t>(n) * DTypeSize(dtype);
    if (proto.raw_data().size() != want) {
      return Status::InvalidArgument(Describe(proto) + ": raw_data has " + std::to_string(proto.raw_data().size()) +
                                     " bytes, dims " + ShapeToString(shape) + " need " + std::to_string(want));
    }
  } else {
    const char* field = "";
    const int64_t count = TypedCount(proto, dtype, &field);
    if (count != n) return CountMismatch(proto, field, count, n);
  }
  if (proto.has_raw_data()) {
    Result<Tensor> t = Tensor::FromBytes(dtype, std::move(shape), proto.raw_data());
    if (!t.ok()) return t.status().WithPrefix(Describe(proto) + " raw_data");
    return t;
  }
  ORRERY_ASSIGN_OR_RETURN(Tensor t, Tensor::Allocate(dtype, std::move(shape)));
  switch (dtype) {
    case DType::kFloat32:
      ORRERY_RETURN_IF_ERROR(CopyTyped<float>(proto, "float_data", proto.float_data(), t));
      break;
    case DType::kFloat64:
      ORRERY_RETURN_IF_ERROR(CopyTyped<double>(proto, "double_data", proto.double_data(), t));
      break;
    case DType::kInt64:
      ORRERY_RETURN_IF_ERROR(CopyTyped<int64_t>(proto, "int64_data", proto.int64_data(), t));
      break;
    case DType::kInt32:
      ORRERY_RETURN_IF_ERROR(CopyTyped<int32_t>(proto, "int32_data", proto.int32_data(), t));
      break;
    case DType::kInt16:
      ORRERY_RETURN_IF_ERROR(CopyTyped<int16_t>(proto, "int32_data", proto.int32_data(), t));
      break;
    case DType::kInt8:
      ORRERY_RETURN_IF_ERROR(CopyTyped<int8_t>(proto, "int32_data", proto.int32_data(), t));
      break;
    case DType::kUint16:
    case DType::kFloat16:  // bit patterns in int32_data
      ORRERY_RETURN_IF_ERROR(CopyTyped<uint16_t>(proto, "int32_data", proto.int32_data(), t));
      break;
    case DType::kUint8:
      ORRERY_RETURN_IF_ERROR(CopyTyped<uint8_t>(proto, "int32_data", proto.int32_data(), t));
      break;
    case DType::kBool: {
      const auto& f = proto.int32_data();
      if (f.size() != n) return CountMismatch(proto, "int32_data", f.size(), n);
      uint8_t* out = t.data<uint8_t>();
      for (int64_t i = 0; i < n; ++i) out[i] = f.Get(static_cast<int>(i)) != 0 ? 1 : 0;
      break;
    }
    case DType::kUint32:
      ORRERY_RETURN_IF_ERROR(CopyTyped<uint32_t>(proto, "uint64_data", proto.uint64_data(), t));
      break;
    case DType::kUint64:
      ORRERY_RETURN_IF_ERROR(CopyTyped<uint64_t>(proto, "uint64_data", proto.uint64_data(), t));
      break;
    default:
      return Status::InvalidArgument(Describe(proto) + " has unsupported data type");
  }
  return t;
}

void TensorToProto(const Tensor& tensor, const std::string& name, onnx::TensorProto* proto) {
  proto->Clear();
  proto->set_name(name);
  proto->set_data_type(static_cast<int32_t>(tensor.dtype()));
  for (int64_t d : tensor.shape()) proto->add_dims(d);
  if (!tensor.empty()) proto->set_raw_data(std::string(tensor.bytes()));
}

Result<NamedTensor> ParseTensorProto(std::string_view bytes) {
  onnx::TensorProto proto;
  if (bytes.size() > static_cast<size_t>(std::numeric_limits<int>::max()) ||
      !proto.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return Status::InvalidArgument("cannot parse TensorProto (" + std::to_string(bytes.size()) +
                                   " bytes)");
  }
  ORRERY_ASSIGN_OR_RETURN(Tensor t, TensorFromProto(proto));
  return NamedTensor{proto.name(), std::move(t)};
}

std::string SerializeTensorProto(const NamedTensor& tensor) {
  onnx::TensorProto proto;
  TensorToProto(tensor.tensor, tensor.name, &proto);
  return proto.SerializeAsString();
}

}  // namespace orrery
