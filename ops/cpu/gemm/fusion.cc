#include "ops/cpu/gemm/fusion.h"

#include <cfloat>
#include <string>

#include "ops/kernel_util.h"

namespace orrery::ops::cpu {
namespace {

Result<bool> ReadFlag(const Attributes& attrs, std::string_view name, std::string_view op) {
  ORRERY_ASSIGN_OR_RETURN(int64_t v, attrs.GetInt(name, 0));
  if (v != 0 && v != 1) {
    return Status::InvalidArgument(std::string(op) + ": " + std::string(name) +
                                   " must be 0 or 1, got " + std::to_string(v));
  }
  return v == 1;
}

}  // namespace

Result<Fusion> ReadFusion(const Attributes& attrs, std::string_view op) {
  Fusion f;
  if (attrs.Has("_fused_activation")) {
    ORRERY_ASSIGN_OR_RETURN(std::string name, attrs.GetString("_fused_activation", ""));
    Result<Activation> act = ParseActivation(name);
    if (!act.ok()) return act.status().WithPrefix(std::string(op));
    f.act = *act;
  }
  float alpha = 0.0f, beta = 0.0f;
  switch (f.act) {
    case Activation::kClip:
      alpha = -FLT_MAX;
      beta = FLT_MAX;
      break;
    case Activation::kLeakyRelu: alpha = 0.01f; break;
    case Activation::kHardSigmoid:
      alpha = 0.2f;
      beta = 0.5f;
      break;
    default: break;
  }
  ORRERY_ASSIGN_OR_RETURN(f.alpha, attrs.GetFloat("_fused_alpha", alpha));
  ORRERY_ASSIGN_OR_RETURN(f.beta, attrs.GetFloat("_fused_beta", beta));
  ORRERY_ASSIGN_OR_RETURN(f.residual, ReadFlag(attrs, "_fused_residual", op));
  ORRERY_ASSIGN_OR_RETURN(f.bias, ReadFlag(attrs, "_fused_bias", op));
  if (f.bias && op != "MatMul") {
    return Status::InvalidArgument(std::string(op) + ": _fused_bias is only valid on MatMul");
  }
  return f;
}

Status CheckFusedInputs(std::span<const TensorType> inputs, const Fusion& fusion, size_t max_own,
                        const Shape& out, std::string_view op) {
  const size_t extra = (fusion.residual ? 1 : 0);
  if (inputs.size() > max_own + extra) {
    return Status::InvalidArgument(std::string(op) + ": " + std::to_string(inputs.size()) +
                                   " inputs, at most " + std::to_string(max_own + extra) +
                                   " without _fused_residual");
  }
  if (!fusion.residual) return Status::Ok();
  if (inputs.size() < 3 || !inputs.back().present()) {
    return Status::InvalidArgument(std::string(op) +
                                   ": _fused_residual needs the residual Z as the last input");
  }
  const TensorType& z = inputs.back();
  ORRERY_RETURN_IF_ERROR(RequireDType(z, "residual Z", {DType::kFloat32}));
  if (z.shape != out) {
    return Status::InvalidArgument(std::string(op) + ": residual Z has shape " +
                                   ShapeToString(z.shape) + ", the output is " +
                                   ShapeToString(out));
  }
  return Status::Ok();
}

}  // namespace orrery::ops::cpu
