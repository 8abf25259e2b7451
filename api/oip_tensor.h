// Conversion between Open Inference Protocol tensors and runtime Tensors.
#pragma once

#include <vector>

#include "api/proto/grpc_predict_v2.pb.h"
#include "base/status.h"
#include "runtime/tensor.h"

namespace orrery {

// Decodes every input of the request, from raw_input_contents or from typed
// contents. INVALID_ARGUMENT naming the input on unknown datatypes, negative
// dims, mixed raw/typed data or a byte/element count that does not match.
// RESOURCE_EXHAUSTED, before anything is allocated, when the inputs' shapes
// add up to more than `max_input_bytes` (0 = no limit).
Result<std::vector<NamedTensor>> DecodeInferInputs(const inference::ModelInferRequest& request,
                                                   uint64_t max_input_bytes = 0);

// Appends `tensors` as outputs with raw_output_contents.
void EncodeInferOutputs(const std::vector<NamedTensor>& tensors,
                        inference::ModelInferResponse* response);

}  // namespace orrery
