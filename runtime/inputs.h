// Validation of a run's inputs against a model's signature.
#pragma once

#include <span>
#include <vector>

#include "base/status.h"
#include "runtime/model.h"

namespace orrery::runtime {

// Matches `inputs` to the signature by name and checks dtype, data and
// shape (INVALID_ARGUMENT naming the input otherwise, or a missing / unknown
// / repeated one). On success ordered[i] points at the tensor given for
// signature input i. `ordered` has one element per signature input.
// Allocates nothing unless it fails.
Status OrderInputs(const ModelSignature& sig, const std::vector<NamedTensor>& inputs,
                   std::span<const Tensor*> ordered);

}  // namespace orrery::runtime
