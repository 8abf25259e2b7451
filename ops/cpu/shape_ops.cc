// Shape and data-movement ops that never touch elements: Flatten, Reshape and
// Identity share their input's buffer; Constant materialises its attribute.
#include <cstring>
#include <string>

#include "ops/cpu/cpu_kernels.h"
#include "ops/kernel_util.h"

namespace orrery::ops::cpu {
namespace {

Status RequireNumeric(const TensorType& t, const char* what) {
  if (!t.present() || DTypeSize(t.dtype) == 0) {
    return Status::InvalidArgument(std::string(what) + " has unsupported dtype " +
                                   std::string(DTypeName(t.dtype)));
  }
  return Status::Ok();
}

// ---- Identity ----

Status InferIdentity(const InferContext& ctx, std::vector<TensorType>* outputs) {
  ORRERY_RETURN_IF_ERROR(RequireNumeric(ctx.inputs[0], "input"));
  outputs->assign(1, ctx.inputs[0]);
  return Status::Ok();
}

Status ComputeIdentity(const KernelContext& ctx, std::span<Tensor> outputs) {
  outputs[0] = *ctx.inputs[0];
  return Status::Ok();
}

// ---- Flatten ----

Result<Shape> FlattenShape(const Shape& in, const Attributes& attrs) {
  ORRERY_ASSIGN_OR_RETURN(int64_t axis_attr, attrs.GetInt("axis", 1));
  const int64_t rank = static_cast<int64_t>(in.size());
  ORRERY_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(axis_attr, rank, 1));
  return Shape{DimProduct(in, 0, static_cast<size_t>(axis)),
               DimProduct(in, static_cast<size_t>(axis), in.size())};
}

Status InferFlatten(const InferContext& ctx, std::vector<TensorType>* outputs) {
  ORRERY_RETURN_IF_ERROR(RequireNumeric(ctx.inputs[0], "input"));
  ORRERY_ASSIGN_OR_RETURN(Shape out, FlattenShape(ctx.inputs[0].shape, ctx.attrs));
  outputs->assign(1, TensorType{ctx.inputs[0].dtype, std::move(out)});
  return Status::Ok();
}

Status ComputeFlatten(const KernelContext& ctx, std::span<Tensor> outputs) {
  ORRERY_ASSIGN_OR_RETURN(Shape out, FlattenShape(ctx.inputs[0]->shape(), ctx.attrs));
  ORRERY_ASSIGN_OR_RETURN(outputs[0], ctx.inputs[0]->Reshaped(std::move(out)));
  return Status::Ok();
}

// ---- Reshape ----

// Resolves the requested shape against the input shape: 0 copies the input
// dim (unless allowzero), -1 is inferred from the remaining element count.
Result<Shape> ReshapeShape(const Shape& in, const Tensor& shape_tensor, bool allowzero) {
  if (shape_tensor.dtype() != DType::kInt64 || shape_tensor.shape().size() != 1) {
    return Status::InvalidArgument("shape input must be a 1-D int64 tensor, got " +
                                   std::string(DTypeName(shape_tensor.dtype())) + " " +
                                   ShapeToString(shape_tensor.shape()));
  }
  const int64_t rank = shape_tensor.shape()[0];
  const int64_t* req = shape_tensor.data<int64_t>();
  Shape out(static_cast<size_t>(rank));
  int64_t infer_at = -1;
  bool has_zero = false;
  for (int64_t i = 0; i < rank; ++i) {
    int64_t d = req[i];
    if (d == -1) {
      if (infer_at >= 0) return Status::InvalidArgument("shape has more than one -1");
      infer_at = i;
      d = 1;
    } else if (d == 0) {
      has_zero = true;
      if (!allowzero) {
        if (i >= static_cast<int64_t>(in.size())) {
          return Status::InvalidArgument("shape[" + std::to_string(i) +
                                         "] = 0 copies a dim the input " + ShapeToString(in) +
                                         " does not have");
        }
        d = in[static_cast<size_t>(i)];
      }
    } else if (d < -1) {
      return Status::InvalidArgument("shape has invalid dim " + std::to_string(d));
    }
    out[static_cast<size_t>(i)] = d;
  }
  if (allowzero && has_zero && infer_at >= 0) {
    return Status::InvalidArgument("shape cannot contain both 0 and -1 when allowzero=1");
  }
  const int64_t total = NumElements(in);  // input shapes are already validated
  ORRERY_ASSIGN_OR_RETURN(int64_t known, CheckedNumElements(out));
  if (infer_at >= 0) {
    if (known == 0 || total % known != 0) {
      return Status::InvalidArgument("cannot infer -1 reshaping " + ShapeToString(in) + " to " +
                                     ShapeToString(out));
    }
    out[static_cast<size_t>(infer_at)] = total / known;
  } else if (known != total) {
    return Status::InvalidArgument("cannot reshape " + ShapeToString(in) + " (" +
                                   std::to_string(total) + " elements) to " +
                                   ShapeToString(out));
  }
  return out;
}

Result<bool> AllowZero(const InferContext& ctx) {
  ORRERY_ASSIGN_OR_RETURN(int64_t v, ctx.attrs.GetInt("allowzero", 0));
  return v != 0;
}

Status InferReshape(const InferContext& ctx, std::vector<TensorType>* outputs) {
  ORRERY_RETURN_IF_ERROR(RequireNumeric(ctx.inputs[0], "input data"));
  ORRERY_RETURN_IF_ERROR(RequireDType(ctx.inputs[1], "input shape", {DType::kInt64}));
  const Tensor* shape = ctx.value(1);
  if (shape == nullptr) return Status::Unavailable("Reshape needs the value of its shape input");
  ORRERY_ASSIGN_OR_RETURN(bool allowzero, AllowZero(ctx));
  ORRERY_ASSIGN_OR_RETURN(Shape out, ReshapeShape(ctx.inputs[0].shape, *shape, allowzero));
  outputs->assign(1, TensorType{ctx.inputs[0].dtype, std::move(out)});
  return Status::Ok();
}

Status ComputeReshape(const KernelContext& ctx, std::span<Tensor> outputs) {
  ORRERY_ASSIGN_OR_RETURN(int64_t allowzero, ctx.attrs.GetInt("allowzero", 0));
  ORRERY_ASSIGN_OR_RETURN(Shape out,
                          ReshapeShape(ctx.inputs[0]->shape(), *ctx.inputs[1], allowzero != 0));
  ORRERY_ASSIGN_OR_RETURN(outputs[0], ctx.inputs[0]->Reshaped(std::move(out)));
  return Status::Ok();
}

// ---- Constant ----

Result<Tensor> ConstantValue(const Attributes& attrs) {
  static constexpr const char* kSupported[] = {"value", "value_float", "value_floats",
                                               "value_int", "value_ints"};
  for (const auto& [name, v] : attrs.values()) {
    bool known = false;
    for (const char* s : kSupported) known = known || name == s;
    if (!known) {
      return Status::InvalidArgument("unsupported Constant attribute '" + name + "'");
    }
  }
  if (attrs.size() != 1) {
    return Status::InvalidArgument("Constant needs exactly one value attribute, got " +
                                   std::to_string(attrs.size()));
  }
  if (attrs.Has("value")) return attrs.GetTensor("value");
  if (attrs.Has("value_float")) {
    ORRERY_ASSIGN_OR_RETURN(float v, attrs.GetFloat("value_float", 0.0f));
    Tensor t(DType::kFloat32, {});
    *t.data<float>() = v;
    return t;
  }
  if (attrs.Has("value_int")) {
    ORRERY_ASSIGN_OR_RETURN(int64_t v, attrs.GetInt("value_int", 0));
    Tensor t(DType::kInt64, {});
    *t.data<int64_t>() = v;
    return t;
  }
  if (attrs.Has("value_floats")) {
    ORRERY_ASSIGN_OR_RETURN(std::vector<float> v, attrs.GetFloats("value_floats"));
    Tensor t(DType::kFloat32, {static_cast<int64_t>(v.size())});
    if (!v.empty()) std::memcpy(t.raw_data(), v.data(), v.size() * sizeof(float));
    return t;
  }
  ORRERY_ASSIGN_OR_RETURN(std::vector<int64_t> v, attrs.GetInts("value_ints"));
  Tensor t(DType::kInt64, {static_cast<int64_t>(v.size())});
  if (!v.empty()) std::memcpy(t.raw_data(), v.data(), v.size() * sizeof(int64_t));
  return t;
}

Status InferConstant(const InferContext& ctx, std::vector<TensorType>* outputs) {
  ORRERY_ASSIGN_OR_RETURN(Tensor t, ConstantValue(ctx.attrs));
  if (DTypeSize(t.dtype()) == 0) {
    return Status::InvalidArgument("Constant value has unsupported dtype " +
                                   std::string(DTypeName(t.dtype())));
  }
  outputs->assign(1, TensorType{t.dtype(), t.shape()});
  return Status::Ok();
}

Status ComputeConstant(const KernelContext& ctx, std::span<Tensor> outputs) {
  ORRERY_ASSIGN_OR_RETURN(outputs[0], ConstantValue(ctx.attrs));
  return Status::Ok();
}

KernelDef View(const char* op_type, int min_inputs, int max_inputs, InferFn infer,
               ComputeFn compute) {
  return KernelDef{.op_type = op_type,
                   .backend = Backend::kCpu,
                   .min_inputs = min_inputs,
                   .max_inputs = max_inputs,
                   .infer = infer,
                   .compute = compute,
                   .alloc = OutputAlloc::kByKernel};
}

}  // namespace

Status RegisterShapeKernels(OpRegistry* registry) {
  ORRERY_RETURN_IF_ERROR(
      registry->Register(View("Identity", 1, 1, InferIdentity, ComputeIdentity)));
  ORRERY_RETURN_IF_ERROR(registry->Register(View("Flatten", 1, 1, InferFlatten, ComputeFlatten)));
  ORRERY_RETURN_IF_ERROR(registry->Register(View("Reshape", 2, 2, InferReshape, ComputeReshape)));
  ORRERY_RETURN_IF_ERROR(
      registry->Register(View("Constant", 0, 0, InferConstant, ComputeConstant)));
  return Status::Ok();
}

}  // namespace orrery::ops::cpu
