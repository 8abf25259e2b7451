// Conversions from catalog records and runtime signatures to API messages.
#pragma once

#include "api/proto/orrery.pb.h"
#include "runtime/model.h"
#include "storage/catalog.h"

namespace orrery {

void SpecToRecord(const TensorSpec& spec, storage::TensorSpecRecord* record);
void RecordToTensorInfo(const storage::TensorSpecRecord& record, v1::TensorInfo* info);
void RecordToModelInfo(const ModelRecord& record, v1::ModelInfo* info);
// OIP datatype name of a stored dtype ("FP32", ...).
std::string OipDatatype(int32_t onnx_dtype);

}  // namespace orrery
