// Forwarding header: Tensor lives in ops/tensor.h so that kernels (ops/) and
// the runtime share it without ops depending on runtime. Keep including
// "runtime/tensor.h" from code above the runtime.
#pragma once

#include "ops/tensor.h"  // IWYU pragma: export
