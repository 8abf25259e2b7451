// Permutation ops: Transpose, and DepthToSpace / SpaceToDepth (a reshape to
// 6-D, a fixed permutation, a reshape back). All are one StridedCopy, which
// collapses contiguous dims and tiles the transposed ones, for any dtype.
#include <memory>
#include <string>

#include "ops/cpu/cpu_kernels.h"
#include "ops/cpu/data_movement.h"
#include "ops/cpu/prepared.h"
#include "ops/kernel_util.h"

namespace orrery::ops::cpu {
namespace {

// out = transpose(reshape(in, view), perm) as one strided copy: the copy's
// dims and source strides, computed once per plan.
struct PreparedPermute : PreparedKernel {
  std::vector<int64_t> dims, src_strides;
};

std::shared_ptr<PreparedPermute> MakePermute(const Shape& view, std::span<const int64_t> perm) {
  auto p = std::make_shared<PreparedPermute>();
  const std::vector<int64_t> strides = ContiguousStrides(view);
  p->dims.resize(perm.size());
  p->src_strides.resize(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) {
    p->dims[i] = view[static_cast<size_t>(perm[i])];
    p->src_strides[i] = strides[static_cast<size_t>(perm[i])];
  }
  return p;
}

void PermuteInto(const Tensor& in, const PreparedPermute& p, Tensor& out, ThreadGroup* threads) {
  StridedCopy(in.raw_data(), p.dims, p.src_strides, DTypeSize(in.dtype()), out.raw_data(),
              threads);
}

// ---- Transpose ----

Result<std::vector<int64_t>> TransposePerm(const Attributes& attrs, size_t rank) {
  ORRERY_ASSIGN_OR_RETURN(std::vector<int64_t> perm, attrs.GetInts("perm"));
  if (!attrs.Has("perm")) {
    perm.resize(rank);
    for (size_t i = 0; i < rank; ++i) perm[i] = static_cast<int64_t>(rank - 1 - i);
    return perm;
  }
  if (perm.size() != rank) {
    return Status::InvalidArgument("Transpose: perm has " + std::to_string(perm.size()) +
                                   " entries for rank " + std::to_string(rank));
  }
  std::vector<bool> seen(rank, false);
  for (int64_t& p : perm) {
    // Negative entries are not in the spec; accept them like axes elsewhere.
    ORRERY_ASSIGN_OR_RETURN(p, NormalizeAxis(p, static_cast<int64_t>(rank)));
    if (seen[static_cast<size_t>(p)]) {
      return Status::InvalidArgument("Transpose: perm is not a permutation");
    }
    seen[static_cast<size_t>(p)] = true;
  }
  return perm;
}

Status InferTranspose(const InferContext& ctx, std::vector<TensorType>* outputs) {
  const TensorType& x = ctx.inputs[0];
  ORRERY_RETURN_IF_ERROR(RequireMovable(x, "Transpose", "input data"));
  ORRERY_ASSIGN_OR_RETURN(std::vector<int64_t> perm, TransposePerm(ctx.attrs, x.shape.size()));
  Shape out(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) out[i] = x.shape[static_cast<size_t>(perm[i])];
  outputs->assign(1, TensorType{x.dtype, std::move(out)});
  return Status::Ok();
}

Result<Prepared> PrepareTranspose(const PrepareContext& ctx) {
  const Shape& x = ctx.inputs[0].shape;
  ORRERY_ASSIGN_OR_RETURN(std::vector<int64_t> perm, TransposePerm(ctx.attrs, x.size()));
  return Prepared{.kernel = MakePermute(x, perm)};
}

Status ComputeTranspose(const KernelContext& ctx, std::span<Tensor> outputs) {
  if (ctx.prepared == nullptr) {
    return ComputeUnprepared(PrepareTranspose, ComputeTranspose, ctx, outputs);
  }
  PermuteInto(*ctx.inputs[0], *static_cast<const PreparedPermute*>(ctx.prepared), outputs[0],
              ctx.threads);
  return Status::Ok();
}

// ---- DepthToSpace / SpaceToDepth ----

struct BlockPlan {
  Shape view;                 // the 6-D reshape of the input
  std::vector<int64_t> perm;  // applied to `view`
  Shape out;
};

Result<BlockPlan> MakeBlockPlan(const Shape& in, const Attributes& attrs, bool to_space) {
  const char* op = to_space ? "DepthToSpace" : "SpaceToDepth";
  if (in.size() != 4) {
    return Status::InvalidArgument(std::string(op) + ": input must be 4-D, got " +
                                   ShapeToString(in));
  }
  if (!attrs.Has("blocksize")) {
    return Status::InvalidArgument(std::string(op) + ": blocksize is required");
  }
  ORRERY_ASSIGN_OR_RETURN(int64_t b, attrs.GetInt("blocksize", 0));
  if (b <= 0 || b > (int64_t{1} << 20)) {
    return Status::InvalidArgument(std::string(op) + ": invalid blocksize " + std::to_string(b));
  }
  const int64_t n = in[0], c = in[1], h = in[2], w = in[3];
  BlockPlan p;
  if (to_space) {
    ORRERY_ASSIGN_OR_RETURN(std::string mode, attrs.GetString("mode", "DCR"));
    const int64_t bb = b * b;
    if (c % bb != 0) {
      return Status::InvalidArgument("DepthToSpace: channels " + std::to_string(c) +
                                     " are not divisible by blocksize^2 " + std::to_string(bb));
    }
    const int64_t oc = c / bb;
    if (mode == "DCR") {
      p.view = {n, b, b, oc, h, w};
      p.perm = {0, 3, 4, 1, 5, 2};
    } else if (mode == "CRD") {
      p.view = {n, oc, b, b, h, w};
      p.perm = {0, 1, 4, 2, 5, 3};
    } else {
      return Status::InvalidArgument("DepthToSpace: unsupported mode '" + mode + "'");
    }
    ORRERY_ASSIGN_OR_RETURN(int64_t oh, CheckedDimMul(h, b, op));
    ORRERY_ASSIGN_OR_RETURN(int64_t ow, CheckedDimMul(w, b, op));
    p.out = {n, oc, oh, ow};
  } else {
    if (h % b != 0 || w % b != 0) {
      return Status::InvalidArgument("SpaceToDepth: spatial dims " + ShapeToString(in) +
                                     " are not divisible by blocksize " + std::to_string(b));
    }
    p.view = {n, c, h / b, b, w / b, b};
    p.perm = {0, 3, 5, 1, 2, 4};
    ORRERY_ASSIGN_OR_RETURN(int64_t oc, CheckedDimMul(c, b * b, op));
    p.out = {n, oc, h / b, w / b};
  }
  return p;
}

template <bool kToSpace>
Status InferBlock(const InferContext& ctx, std::vector<TensorType>* outputs) {
  const TensorType& x = ctx.inputs[0];
  ORRERY_RETURN_IF_ERROR(
      RequireMovable(x, kToSpace ? "DepthToSpace" : "SpaceToDepth", "input data"));
  ORRERY_ASSIGN_OR_RETURN(BlockPlan p, MakeBlockPlan(x.shape, ctx.attrs, kToSpace));
  outputs->assign(1, TensorType{x.dtype, std::move(p.out)});
  return Status::Ok();
}

template <bool kToSpace>
Result<Prepared> PrepareBlock(const PrepareContext& ctx) {
  ORRERY_ASSIGN_OR_RETURN(BlockPlan p, MakeBlockPlan(ctx.inputs[0].shape, ctx.attrs, kToSpace));
  return Prepared{.kernel = MakePermute(p.view, p.perm)};
}

template <bool kToSpace>
Status ComputeBlock(const KernelContext& ctx, std::span<Tensor> outputs) {
  if (ctx.prepared == nullptr) {
    return ComputeUnprepared(PrepareBlock<kToSpace>, ComputeBlock<kToSpace>, ctx, outputs);
  }
  PermuteInto(*ctx.inputs[0], *static_cast<const PreparedPermute*>(ctx.prepared), outputs[0],
              ctx.threads);
  return Status::Ok();
}

KernelDef Unary(const char* op_type, InferFn infer, ComputeFn compute, PrepareFn prepare) {
  return KernelDef{.op_type = op_type,
                   .backend = Backend::kCpu,
                   .min_inputs = 1,
                   .max_inputs = 1,
                   .infer = infer,
                   .compute = compute,
                   .prepare = prepare};
}

}  // namespace

Status RegisterTransposeKernels(OpRegistry* registry) {
  ORRERY_RETURN_IF_ERROR(registry->Register(Unary("Transpose", InferTranspose, ComputeTranspose, PrepareTranspose)));
  ORRERY_RETURN_IF_ERROR(
      registry->Register(Unary("DepthToSpace", InferBlock<true>, ComputeBlock<true>, PrepareBlock<true>)));
  ORRERY_RETURN_IF_ERROR(
      registry->Register(Unary("SpaceToDepth", InferBlock<false>, ComputeBlock<false>, PrepareBlock<false>)));
  return Status::Ok();
}

}  // namespace orrery::ops::cpu
