// Softmax, numerically stable (max subtracted).
//   opset < 13: the input is coerced to 2-D [prod(dims < axis), prod(dims >= axis)]
//               and each row is normalised; default axis = 1.
//   opset >= 13: normalised along `axis` alone; default axis = -1.
#include <algorithm>
#include <cmath>
#include <limits>

#include "ops/cpu/cpu_kernels.h"
#include "ops/kernel_util.h"

namespace orrery::ops::cpu {
namespace {

// outer x n x inner view of the input: softmax over n for each (outer, inner).
struct SoftmaxDims {
  int64_t outer = 1, n = 1, inner = 1;
};

Result<SoftmaxDims> ComputeDims(const Shape& shape, const Attributes& attrs, int64_t opset) {
  const int64_t rank = static_cast<int64_t>(shape.size());
  const bool legacy = opset < 13;
  ORRERY_ASSIGN_OR_RETURN(int64_t axis_attr, attrs.GetInt("axis", legacy ? 1 : -1));
  if (rank == 0) return Status::InvalidArgument("input must have rank >= 1");
  ORRERY_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(axis_attr, rank, legacy ? 1 : 0));
  SoftmaxDims d;
  d.outer = DimProduct(shape, 0, static_cast<size_t>(axis));
  if (legacy) {
    d.n = DimProduct(shape, static_cast<size_t>(axis), shape.size());
  } else {
    d.n = shape[static_cast<size_t>(axis)];
    d.inner = DimProduct(shape, static_cast<size_t>(axis) + 1, shape.size());
  }
  return d;
}

Status InferSoftmax(const InferContext& ctx, std::vector<TensorType>* outputs) {
  ORRERY_RETURN_IF_ERROR(RequireDType(ctx.inputs[0], "input", {DType::kFloat32}));
  ORRERY_RETURN_IF_ERROR(ComputeDims(ctx.inputs[0].shape, ctx.attrs, ctx.opset).status());
  outputs->assign(1, ctx.inputs[0]);
  return Status::Ok();
}

Status ComputeSoftmax(const KernelContext& ctx, std::span<Tensor> outputs) {
  const Tensor& x = *ctx.inputs[0];
  ORRERY_ASSIGN_OR_RETURN(SoftmaxDims d, ComputeDims(x.shape(), ctx.attrs, ctx.opset));
  if (x.num_elements() == 0) return Status::Ok();
  const float* xd = x.data<float>();
  float* yd = outputs[0].data<float>();
  for (int64_t o = 0; o < d.outer; ++o) {
    for (int64_t in = 0; in < d.inner; ++in) {
      const int64_t base = o * d.n * d.inner + in;
      float mx = -std::numeric_limits<float>::infinity();
      for (int64_t i = 0; i < d.n; ++i) mx = std::max(mx, xd[base + i * d.inner]);
      float sum = 0.0f;
      for (int64_t i = 0; i < d.n; ++i) {
        const float e = std::exp(xd[base + i * d.inner] - mx);
        yd[base + i * d.inner] = e;
        sum += e;
      }
      const float inv = 1.0f / sum;
      for (int64_t i = 0; i < d.n; ++i) yd[base + i * d.inner] *= inv;
    }
  }
  return Status::Ok();
}

}  // namespace

Status RegisterSoftmaxKernels(OpRegistry* registry) {
  return registry->Register(KernelDef{.op_type = "Softmax",
                                      .backend = Backend::kCpu,
                                      .min_inputs = 1,
                                      .max_inputs = 1,
                                      .infer = InferSoftmax,
                                      .compute = ComputeSoftmax});
}

}  // namespace orrery::ops::cpu
