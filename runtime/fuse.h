// Operator fusion on a compiled Plan, so that a convolution or matrix
// product writes its final value once instead of making several passes
// over memory:
//   - Conv followed by an inference BatchNormalization with constant
//     parameters: the BN is folded into new constant weights and bias;
//   - MatMul with a constant [K, N] right operand followed by Add of a
//     constant [N] bias: the bias moves into the MatMul (`_fused_bias`);
//   - Conv / Gemm / MatMul followed by Add of another tensor (a residual):
//     the Add moves into the kernel (`_fused_residual`, the last input);
//   - then a following activation (Relu, LeakyRelu, Clip with constant
//     bounds, HardSigmoid, HardSwish, Sigmoid, Tanh):
//     `_fused_activation`, `_fused_alpha`, `_fused_beta`.
// A fused node absorbs a successor only when it is the sole reader of the
// intermediate value (Shape nodes that read it are pointed at the fused
// result, which has the same shape) and that value is no graph output.
//
// The residual needs the Add's operands to have equal shapes, which only a
// specialisation knows: such steps keep the original steps in
// Step::unfused, and Specialize (or the reference executor, which always
// runs them) falls back to them when the shapes differ or are unknown.
// The `_fused_*` attributes are internal: ImportModel rejects user models
// that carry attributes starting with '_'.
#pragma once

#include <cstddef>

#include "base/status.h"
#include "runtime/plan.h"

namespace orrery::runtime {

// Rewrites `plan` in place (steps and constants; releases are left for the
// caller to recompute). Fails only on internal inconsistencies.
Result<FusionStats> FusePlan(Plan* plan);

}  // namespace orrery::runtime
