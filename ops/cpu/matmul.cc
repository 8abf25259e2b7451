// MatMul with numpy semantics: N-d batches broadcast, 1-D operands promoted
// (A: [K] -> [1, K], B: [K] -> [K, 1]) and the promoted dim removed after.
#include <string>

#include "ops/broadcast.h"
#include "ops/cpu/cpu_kernels.h"
#include "ops/cpu/gemm/sgemm.h"
#include "ops/kernel_util.h"

namespace orrery::ops::cpu {
namespace {

struct MatMulDims {
  Shape batch_a, batch_b, batch_out;
  int64_t m = 0, k = 0, n = 0;
  Shape out;
};

Result<MatMulDims> ComputeDims(const Shape& a, const Shape& b) {
  if (a.empty() || b.empty()) {
    return Status::InvalidArgument("inputs must have rank >= 1, got " + ShapeToString(a) +
                                   " and " + ShapeToString(b));
  }
  MatMulDims d;
  const bool a_vec = a.size() == 1;
  const bool b_vec = b.size() == 1;
  d.m = a_vec ? 1 : a[a.size() - 2];
  d.k = a.back();
  const int64_t kb = b_vec ? b[0] : b[b.size() - 2];
  d.n = b_vec ? 1 : b.back();
  if (d.k != kb) {
    return Status::InvalidArgument("inner dimensions differ: " + ShapeToString(a) + " x " +
                                   ShapeToString(b));
  }
  if (!a_vec) d.batch_a.assign(a.begin(), a.end() - 2);
  if (!b_vec) d.batch_b.assign(b.begin(), b.end() - 2);
  ORRERY_ASSIGN_OR_RETURN(d.batch_out, BroadcastShapes(d.batch_a, d.batch_b));
  d.out = d.batch_out;
  if (!a_vec) d.out.push_back(d.m);
  if (!b_vec) d.out.push_back(d.n);
  return d;
}

Status InferMatMul(const InferContext& ctx, std::vector<TensorType>* outputs) {
  ORRERY_RETURN_IF_ERROR(RequireDType(ctx.inputs[0], "input A", {DType::kFloat32}));
  ORRERY_RETURN_IF_ERROR(RequireDType(ctx.inputs[1], "input B", {DType::kFloat32}));
  ORRERY_ASSIGN_OR_RETURN(MatMulDims d, ComputeDims(ctx.inputs[0].shape, ctx.inputs[1].shape));
  outputs->assign(1, TensorType{DType::kFloat32, d.out});
  return Status::Ok();
}

Status ComputeMatMul(const KernelContext& ctx, std::span<Tensor> outputs) {
  const Tensor& a = *ctx.inputs[0];
  const Tensor& b = *ctx.inputs[1];
  ORRERY_ASSIGN_OR_RETURN(MatMulDims d, ComputeDims(a.shape(), b.shape()));
  Tensor& y = outputs[0];
  const int64_t batches = NumElements(d.batch_out);
  if (batches == 0 || d.m == 0 || d.n == 0) return Status::Ok();
  // Strides in units of whole matrices.
  const std::vector<int64_t> sa = BroadcastStrides(d.batch_a, d.batch_out);
  const std::vector<int64_t> sb = BroadcastStrides(d.batch_b, d.batch_out);
  const int64_t a_mat = d.m * d.k, b_mat = d.k * d.n, y_mat = d.m * d.n;
  const float* ad = a.data<float>();
  const float* bd = b.data<float>();
  float* yd = y.data<float>();
  const size_t rank = d.batch_out.size();
  for (int64_t bi = 0; bi < batches; ++bi) {
    int64_t rem = bi, a_off = 0, b_off = 0;
    for (size_t i = rank; i-- > 0;) {
      const int64_t coord = rem % d.batch_out[i];
      rem /= d.batch_out[i];
      a_off += coord * sa[i];
      b_off += coord * sb[i];
    }
    SgemmAccumulate(false, false, d.m, d.n, d.k, 1.0f, ad + a_off * a_mat, d.k, bd + b_off * b_mat, d.n,
          yd + bi * y_mat, d.n);
  }
  return Status::Ok();
}

}  // namespace

Status RegisterMatMulKernels(OpRegistry* registry) {
  return registry->Register(KernelDef{.op_type = "MatMul",
                                      .backend = Backend::kCpu,
                                      .min_inputs = 2,
                                      .max_inputs = 2,
                                      .infer = InferMatMul,
                                      .compute = ComputeMatMul});
}

}  // namespace orrery::ops::cpu
