// Unary float32 activations: Relu, Sigmoid, Tanh.
#include <cmath>

#include "ops/cpu/cpu_kernels.h"
#include "ops/kernel_util.h"

namespace orrery::ops::cpu {
namespace {

struct ReluOp {
  static float Apply(float x) { return x > 0.0f ? x : (x == x ? 0.0f : x); }  // NaN stays NaN
};
struct SigmoidOp {
  static float Apply(float x) {
    if (x >= 0.0f) return 1.0f / (1.0f + std::exp(-x));
    const float e = std::exp(x);
    return e / (1.0f + e);
  }
};
struct TanhOp {
  static float Apply(float x) { return std::tanh(x); }
};

Status InferUnaryFloat(const InferContext& ctx, std::vector<TensorType>* outputs) {
  ORRERY_RETURN_IF_ERROR(RequireDType(ctx.inputs[0], "input X", {DType::kFloat32}));
  outputs->assign(1, ctx.inputs[0]);
  return Status::Ok();
}

template <typename Op>
Status ComputeUnary(const KernelContext& ctx, std::span<Tensor> outputs) {
  const Tensor& x = *ctx.inputs[0];
  const float* __restrict xd = x.data<float>();
  float* __restrict yd = outputs[0].data<float>();
  const int64_t n = x.num_elements();
  for (int64_t i = 0; i < n; ++i) yd[i] = Op::Apply(xd[i]);
  return Status::Ok();
}

KernelDef Unary(const char* op_type, ComputeFn compute) {
  return KernelDef{.op_type = op_type,
                   .backend = Backend::kCpu,
                   .min_inputs = 1,
                   .max_inputs = 1,
                   .infer = InferUnaryFloat,
                   .compute = compute};
}

}  // namespace

Status RegisterActivationKernels(OpRegistry* registry) {
  ORRERY_RETURN_IF_ERROR(registry->Register(Unary("Relu", ComputeUnary<ReluOp>)));
  ORRERY_RETURN_IF_ERROR(registry->Register(Unary("Sigmoid", ComputeUnary<SigmoidOp>)));
  ORRERY_RETURN_IF_ERROR(registry->Register(Unary("Tanh", ComputeUnary<TanhOp>)));
  return Status::Ok();
}

}  // namespace orrery::ops::cpu
