#include "api/model_info.h"

namespace orrery {

std::string OipDatatype(int32_t onnx_dtype) {
  return std::string(DTypeToOipName(static_cast<DType>(onnx_dtype)));
}

void SpecToRecord(const TensorSpec& spec, storage::TensorSpecRecord* record) {
  record->set_name(spec.name);
  record->set_dtype(static_cast<int32_t>(spec.dtype));
  for (int64_t d : spec.shape) record->add_shape(d);
}

void RecordToTensorInfo(const storage::TensorSpecRecord& record, v1::TensorInfo* info) {
  info->set_name(record.name());
  info->set_datatype(OipDatatype(record.dtype()));
  for (int64_t d : record.shape()) info->add_shape(d);
}

void RecordToModelInfo(const ModelRecord& record, v1::ModelInfo* info) {
  info->set_name(record.name());
  info->set_version(record.version());
  info->set_size_bytes(record.size_bytes());
  info->set_sha256(record.sha256());
  info->set_created_unix_ms(record.created_unix_ms());
  info->set_opset(record.opset());
  info->set_node_count(record.node_count());
  info->set_upload_id(record.upload_id());
  for (const auto& in : record.inputs()) RecordToTensorInfo(in, info->add_inputs());
  for (const auto& out : record.outputs()) RecordToTensorInfo(out, info->add_outputs());
}

}  // namespace orrery
