// Conversions between Tensor and onnx::TensorProto (the ONNX test-data format
// used by orrery-run, the CLI and the conformance tests).
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"
#include "runtime/tensor.h"

namespace onnx { class TensorProto; }

namespace orrery {

// Accepts raw_data and the typed fields (float_data, int64_data, ...).
// External data is rejected.
Result<Tensor> TensorFromProto(const onnx::TensorProto& proto);
void TensorToProto(const Tensor& tensor, const std::string& name, onnx::TensorProto* proto);

// Serialized TensorProto bytes <-> NamedTensor (name from the proto).
Result<NamedTensor> ParseTensorProto(std::string_view bytes);
std::string SerializeTensorProto(const NamedTensor& tensor);

}  // namespace orrery
