// libFuzzer target over the upload/import path: the bytes a tenant uploads go
// through CompiledModel::Compile (protobuf parse, ONNX checker, graph
// validation, initializer decoding, constant folding, plan building) and,
// as inference inputs arrive as TensorProtos in the CLI, ParseTensorProto.
// Any crash, leak, hang or sanitizer report is a bug; error Statuses are fine.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "runtime/model.h"
#include "runtime/tensor_proto.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  (void)orrery::CompiledModel::Compile(bytes);
  (void)orrery::ParseTensorProto(bytes);
  return 0;
}
