// Expand (numpy broadcast to a requested shape) and Tile (repeat along each
// axis). Both are one StridedCopy over a view with zero strides, for any dtype.
#include <string>

#include "ops/broadcast.h"
#include "ops/cpu/cpu_kernels.h"
#include "ops/cpu/data_movement.h"
#include "ops/kernel_util.h"

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
  const std::vector<int64_t> strides = BroadcastStrides(x.shape(), y.shape());
  StridedCopy(x.raw_data(), y.shape(), strides, DTypeSize(x.dtype()), y.raw_data());
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

Status ComputeTile(const KernelContext& ctx, std::span<Tensor> outputs) {
  const Tensor& x = *ctx.inputs[0];
  std::vector<int64_t> reps;
  ORRERY_ASSIGN_OR_RETURN(Shape out, TileShape(x.shape(), *ctx.inputs[1], &reps));
  ORRERY_RETURN_IF_ERROR(CheckOutputShape(outputs[0], out, "Tile"));
  // View the output as [r0, d0, r1, d1, ...] with stride 0 on every r.
  const std::vector<int64_t> in_strides = ContiguousStrides(x.shape());
  std::vector<int64_t> dims, strides;
  for (size_t i = 0; i < x.shape().size(); ++i) {
    dims.push_back(reps[i]);
    strides.push_back(0);
    dims.push_back(x.shape()[i]);
    strides.push_back(in_strides[i]);
  }
  StridedCopy(x.raw_data(), dims, strides, DTypeSize(x.dtype()), outputs[0].raw_data());
  return Status::Ok();
}

KernelDef Def(const char* op_type, InferFn infer, ComputeFn compute) {
  return KernelDef{.op_type = op_type,
                   .backend = Backend::kCpu,
                   .min_inputs = 2,
                   .max_inputs = 2,
                   .infer = infer,
                   .compute = compute};
}

}  // namespace

Status RegisterExpandTileKernels(OpRegistry* registry) {
  ORRERY_RETURN_IF_ERROR(registry->Register(Def("Expand", InferExpand, ComputeExpand)));
  ORRERY_RETURN_IF_ERROR(registry->Register(Def("Tile", InferTile, ComputeTile)));
  return Status::Ok();
}

}  // namespace orrery::ops::cpu
