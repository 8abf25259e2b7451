// Expand (numpy broadcast to a requested shape) and Tile (repeat along each
// axis). Both are one StridedCopy over a view with zero strides, for any dtype.
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ops/broadcast.h"
#include "ops/cpu/cpu_kernels.h"
#include "ops/cpu/data_movement.h"
#include "ops/cpu/prepared.h"
#include "ops/kernel_util.h"
#include "ops/small_vec.h"

namespace orrery::ops::cpu {
namespace {

// ---- Expand ----

Result<Shape> ExpandShape(const Shape& in, const Tensor& shape) {
  if (shape.dtype() != DType::kInt64) {
    return Status::InvalidArgument("Expand: shape must be int64");
  }
  ORRERY_ASSIGN_OR_RETURN(std::vector<int64_t> req, ReadInts(shape, "Expand", "shape"));
  for (int64_t d : req) {
    if (d < 0)
      return Status::InvalidArgument("Expand: shape has negative dim " + std::to_string(d));
  }
  Result<Shape> out = BroadcastShapes(in, Shape(req.begin(), req.end()));
  if (!out.ok()) return out.status().WithPrefix("Expand");
  ORRERY_RETURN_IF_ERROR(CheckedNumElements(*out).status());
  return out;
}

Status InferExpand(const InferContext& ctx, std::vector<TensorType>* outputs) {
  const TensorType& x = ctx.inputs[0];
  ORRERY_RETURN_IF_ERROR(RequireMovable(x, "Expand", "input"));
  const Tensor* shape = ctx.value(1);
  if (shape == nullptr) return Status::Unavailable("Expand needs the value of its shape input");
  ORRERY_ASSIGN_OR_RETURN(Shape out, ExpandShape(x.shape, *shape));
  outputs->assign(1, TensorType{x.dtype, std::move(out)});
  return Status::Ok();
}

Status ComputeExpand(const KernelContext& ctx, std::span<Tensor> outputs) {
  const Tensor& x = *ctx.inputs[0];
  Tensor& y = outputs[0];
  // BroadcastStrides without allocating: 0 where x broadcasts.
  const Shape& in = x.shape();
  const Shape& out = y.shape();
  SmallVec<int64_t> strides(out.size(), 0);
  const size_t off = out.size() - in.size();
  int64_t s = 1;
  for (size_t i = in.size(); i-- > 0;) {
    strides[i + off] = in[i] == 1 ? 0 : s;
    s *= in[i];
  }
  StridedCopy(x.raw_data(), out, std::span<const int64_t>(strides.data(), strides.size()),
              DTypeSize(x.dtype()), y.raw_data(), ctx.threads);
  return Status::Ok();
}

// ---- Tile ----

Result<Shape> TileShape(const Shape& in, const Tensor& repeats, std::vector<int64_t>* reps) {
  if (repeats.dtype() != DType::kInt64) {
    return Status::InvalidArgument("Tile: repeats must be int64");
  }
  ORRERY_ASSIGN_OR_RETURN(*reps, ReadInts(repeats, "Tile", "repeats"));
  if (reps->size() != in.size()) {
    return Status::InvalidArgument("Tile: repeats has " + std::to_string(reps->size()) +
                                   " values for rank " + std::to_string(in.size()));
  }
  Shape out(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    if ((*reps)[i] < 0) {
      return Status::InvalidArgument("Tile: negative repeat " + std::to_string((*reps)[i]));
    }
    ORRERY_ASSIGN_OR_RETURN(out[i], CheckedDimMul(in[i], (*reps)[i], "Tile"));
  }
  ORRERY_RETURN_IF_ERROR(CheckedNumElements(out).status());
  return out;
}

Status InferTile(const InferContext& ctx, std::vector<TensorType>* outputs) {
  const TensorType& x = ctx.inputs[0];
  ORRERY_RETURN_IF_ERROR(RequireMovable(x, "Tile", "input"));
  const Tensor* repeats = ctx.value(1);
  if (repeats == nullptr) return Status::Unavailable("Tile needs the value of its repeats input");
  std::vector<int64_t> reps;
  ORRERY_ASSIGN_OR_RETURN(Shape out, TileShape(x.shape, *repeats, &reps));
  outputs->assign(1, TensorType{x.dtype, std::move(out)});
  return Status::Ok();
}

// The output viewed as [r0, d0, r1, d1, ...] with stride 0 on every r.
struct TileCopy {
  Shape out;
  std::vector<int64_t> dims, strides;
};

Result<TileCopy> MakeTileCopy(const Shape& in, const Tensor& repeats) {
  TileCopy c;
  std::vector<int64_t> reps;
  ORRERY_ASSIGN_OR_RETURN(c.out, TileShape(in, repeats, &reps));
  const std::vector<int64_t> in_strides = ContiguousStrides(in);
  for (size_t i = 0; i < in.size(); ++i) {
    c.dims.push_back(reps[i]);
    c.strides.push_back(0);
    c.dims.push_back(in[i]);
    c.strides.push_back(in_strides[i]);
  }
  return c;
}

// The copy when repeats is a constant; otherwise made per call.
struct PreparedTile : PreparedKernel {
  bool constant = false;
  TileCopy copy;
};

Result<Prepared> PrepareTile(const PrepareContext& ctx) {
  auto p = std::make_shared<PreparedTile>();
  if (const Tensor* repeats = ctx.value(1)) {
    ORRERY_ASSIGN_OR_RETURN(p->copy, MakeTileCopy(ctx.inputs[0].shape, *repeats));
    p->constant = true;
  }
  return Prepared{.kernel = std::move(p)};
}

Status ComputeTile(const KernelContext& ctx, std::span<Tensor> outputs) {
  if (ctx.prepared == nullptr) return ComputeUnprepared(PrepareTile, ComputeTile, ctx, outputs);
  const auto& prepared = *static_cast<const PreparedTile*>(ctx.prepared);
  const Tensor& x = *ctx.inputs[0];
  TileCopy computed;
  const TileCopy* c = &prepared.copy;
  if (!prepared.constant) {
    ORRERY_ASSIGN_OR_RETURN(computed, MakeTileCopy(x.shape(), *ctx.inputs[1]));
    c = &computed;
  }
  ORRERY_RETURN_IF_ERROR(CheckOutputShape(outputs[0], c->out, "Tile"));
  StridedCopy(x.raw_data(), c->dims, c->strides, DTypeSize(x.dtype()), outputs[0].raw_data(),
              ctx.threads);
  return Status::Ok();
}

KernelDef Def(const char* op_type, InferFn infer, ComputeFn compute,
              PrepareFn prepare = nullptr) {
  return KernelDef{.op_type = op_type,
                   .backend = Backend::kCpu,
                   .min_inputs = 2,
                   .max_inputs = 2,
                   .infer = infer,
                   .compute = compute,
                   .prepare = prepare};
}

}  // namespace

Status RegisterExpandTileKernels(OpRegistry* registry) {
  ORRERY_RETURN_IF_ERROR(registry->Register(Def("Expand", InferExpand, ComputeExpand)));
  ORRERY_RETURN_IF_ERROR(registry->Register(Def("Tile", InferTile, ComputeTile, PrepareTile)));
  return Status::Ok();
}

}  // namespace orrery::ops::cpu
