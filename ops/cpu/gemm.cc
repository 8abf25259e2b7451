// Gemm: Y = alpha * op(A) * op(B) + beta * C, C unidirectionally broadcast.
#include <string>

#include "ops/broadcast.h"
#include "ops/cpu/cpu_kernels.h"
#include "ops/cpu/gemm/sgemm.h"
#include "ops/kernel_util.h"

namespace orrery::ops::cpu {
namespace {

struct GemmParams {
  float alpha = 1.0f;
  float beta = 1.0f;
  bool trans_a = false;
  bool trans_b = false;
};

Result<GemmParams> ReadParams(const Attributes& attrs) {
  GemmParams p;
  ORRERY_ASSIGN_OR_RETURN(p.alpha, attrs.GetFloat("alpha", 1.0f));
  ORRERY_ASSIGN_OR_RETURN(p.beta, attrs.GetFloat("beta", 1.0f));
  ORRERY_ASSIGN_OR_RETURN(int64_t ta, attrs.GetInt("transA", 0));
  ORRERY_ASSIGN_OR_RETURN(int64_t tb, attrs.GetInt("transB", 0));
  p.trans_a = ta != 0;
  p.trans_b = tb != 0;
  return p;
}

Status InferGemm(const InferContext& ctx, std::vector<TensorType>* outputs) {
  const TensorType& a = ctx.inputs[0];
  const TensorType& b = ctx.inputs[1];
  ORRERY_RETURN_IF_ERROR(RequireDType(a, "input A", {DType::kFloat32}));
  ORRERY_RETURN_IF_ERROR(RequireDType(b, "input B", {DType::kFloat32}));
  if (a.shape.size() != 2 || b.shape.size() != 2) {
    return Status::InvalidArgument("A and B must be 2-D, got " + ShapeToString(a.shape) +
                                   " and " + ShapeToString(b.shape));
  }
  ORRERY_ASSIGN_OR_RETURN(GemmParams p, ReadParams(ctx.attrs));
  const int64_t m = p.trans_a ? a.shape[1] : a.shape[0];
  const int64_t ka = p.trans_a ? a.shape[0] : a.shape[1];
  const int64_t kb = p.trans_b ? b.shape[1] : b.shape[0];
  const int64_t n = p.trans_b ? b.shape[0] : b.shape[1];
  if (ka != kb) {
    return Status::InvalidArgument("inner dimensions differ: op(A) is " + std::to_string(m) +
                                   "x" + std::to_string(ka) + ", op(B) is " +
                                   std::to_string(kb) + "x" + std::to_string(n));
  }
  const Shape out{m, n};
  if (ctx.inputs.size() > 2 && ctx.inputs[2].present()) {
    const TensorType& c = ctx.inputs[2];
    ORRERY_RETURN_IF_ERROR(RequireDType(c, "input C", {DType::kFloat32}));
    if (!IsUnidirectionalBroadcastable(c.shape, out)) {
      return Status::InvalidArgument("C of shape " + ShapeToString(c.shape) +
                                     " does not broadcast to " + ShapeToString(out));
    }
  }
  outputs->assign(1, TensorType{DType::kFloat32, out});
  return Status::Ok();
}

Status ComputeGemm(const KernelContext& ctx, std::span<Tensor> outputs) {
  const Tensor& a = *ctx.inputs[0];
  const Tensor& b = *ctx.inputs[1];
  const Tensor* c = ctx.inputs.size() > 2 ? ctx.inputs[2] : nullptr;
  ORRERY_ASSIGN_OR_RETURN(GemmParams p, ReadParams(ctx.attrs));
  Tensor& y = outputs[0];
  const int64_t m = y.shape()[0];
  const int64_t n = y.shape()[1];
  const int64_t k = p.trans_a ? a.shape()[0] : a.shape()[1];
  float* out = y.data<float>();
  if (c != nullptr && p.beta != 0.0f && m * n > 0) {
    // C broadcasts unidirectionally to [m, n] (rank 0, 1 or 2, right-aligned);
    // strides computed inline so that no allocation happens per run.
    const Shape& cshape = c->shape();
    const int64_t crows = cshape.size() == 2 ? cshape[0] : 1;
    const int64_t ccols = cshape.empty() ? 1 : cshape.back();
    const int64_t row_stride = crows == 1 ? 0 : ccols;
    const int64_t col_stride = ccols == 1 ? 0 : 1;
    const float* cd = c->data<float>();
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) out[i * n + j] = p.beta * cd[i * row_stride + j * col_stride];
    }
  }
  SgemmAccumulate(p.trans_a, p.trans_b, m, n, k, p.alpha, a.data<float>(), a.shape()[1],
        b.data<float>(), b.shape()[1], out, n);
  return Status::Ok();
}

}  // namespace

Status RegisterGemmKernels(OpRegistry* registry) {
  return registry->Register(KernelDef{.op_type = "Gemm",
                                      .backend = Backend::kCpu,
                                      .min_inputs = 2,
                                      .max_inputs = 3,
                                      .infer = InferGemm,
                                      .compute = ComputeGemm});
}

}  // namespace orrery::ops::cpu
