// The internal `_fused_*` attributes the runtime's fusion pass puts on Conv,
// Gemm and MatMul (user models never carry them: the importer rejects
// them), and the extra inputs they bring:
//   _fused_activation  string, one of Relu Clip LeakyRelu HardSigmoid
//                      HardSwish Sigmoid Tanh Gelu (absent: none)
//   _fused_alpha/_beta floats: Clip min/max, LeakyRelu alpha, HardSigmoid
//                      alpha/beta (ONNX defaults when absent)
//   _fused_residual    int 1: the LAST input is Z, exactly the output's shape,
//                      added before the activation
//   _fused_bias        int 1, MatMul only: input #2 is a bias [N]
#pragma once

#include <span>
#include <string_view>

#include "base/status.h"
#include "ops/attributes.h"
#include "ops/cpu/gemm/sgemm.h"
#include "ops/registry.h"

namespace orrery::ops::cpu {

struct Fusion {
  Activation act = Activation::kNone;
  float alpha = 0.0f;
  float beta = 0.0f;
  bool residual = false;
  bool bias = false;  // MatMul's _fused_bias

  // Copies the activation into `ep` (biases and residual are set by the op).
  void ApplyTo(Epilogue* ep) const {
    ep->act = act;
    ep->act_alpha = alpha;
    ep->act_beta = beta;
  }
};

// INVALID_ARGUMENT (naming `op`) for an unknown activation, flags other than
// 0 / 1, or _fused_bias on an op other than MatMul.
Result<Fusion> ReadFusion(const Attributes& attrs, std::string_view op);

// Checks the residual input Z (the last input, when fusion.residual): present,
// float32 and exactly `out`; and that no input beyond `max_own` (the op's own
// inputs) appears without a fusion attribute that explains it.
Status CheckFusedInputs(std::span<const TensorType> inputs, const Fusion& fusion, size_t max_own,
                        const Shape& out, std::string_view op);

}  // namespace orrery::ops::cpu
