// Shape ops that never touch elements: Flatten, Reshape, Squeeze, Unsqueeze,
// Identity and Dropout (inference) share their input's buffer; Shape and Size
// read only the input's shape; Constant materialises its attribute.
#include <algorithm>
#include <cstring>
#include <string>

#include "ops/cpu/cpu_kernels.h"
#include "ops/cpu/data_movement.h"
#include "ops/kernel_util.h"

namespace orrery::ops::cpu {
namespace {

// ---- Identity ----

Status InferIdentity(const InferContext& ctx, std::vector<TensorType>* outputs) {
  ORRERY_RETURN_IF_ERROR(RequireMovable(ctx.inputs[0], "Identity", "input"));
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
  ORRERY_RETURN_IF_ERROR(RequireMovable(ctx.inputs[0], "Flatten", "input"));
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
                                   std::to_string(total) + " elements) to " + ShapeToString(out));
  }
  return out;
}

Status InferReshape(const InferContext& ctx, std::vector<TensorType>* outputs) {
  ORRERY_RETURN_IF_ERROR(RequireMovable(ctx.inputs[0], "Reshape", "input data"));
  ORRERY_RETURN_IF_ERROR(RequireDType(ctx.inputs[1], "input shape", {DType::kInt64}));
  const Tensor* shape = ctx.value(1);
  if (shape == nullptr) return Status::Unavailable("Reshape needs the value of its shape input");
  ORRERY_ASSIGN_OR_RETURN(int64_t allowzero, ctx.attrs.GetInt("allowzero", 0));
  ORRERY_ASSIGN_OR_RETURN(Shape out, ReshapeShape(ctx.inputs[0].shape, *shape, allowzero != 0));
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

// ---- Squeeze / Unsqueeze ----

// Axes come from the attribute before opset 13 and from input 1 from 13 on.
// Sets *unknown when the input exists but its value is not known yet.
Result<std::vector<int64_t>> AxesArg(const Attributes& attrs, int64_t opset,
                                     const Tensor* axes_input, bool axes_present, const char* op,
                                     bool* given, bool* unknown) {
  *unknown = false;
  *given = false;
  if (opset < 13) {
    *given = attrs.Has("axes");
    return attrs.GetInts("axes");
  }
  if (!axes_present) return std::vector<int64_t>{};
  *given = true;
  if (axes_input == nullptr) {
    *unknown = true;
    return std::vector<int64_t>{};
  }
  return ReadInts(*axes_input, op, "axes");
}

Result<Shape> SqueezeShape(const Shape& in, const std::vector<int64_t>& axes, bool given) {
  const int64_t rank = static_cast<int64_t>(in.size());
  std::vector<bool> drop(in.size(), false);
  if (!given) {
    for (size_t i = 0; i < in.size(); ++i) drop[i] = in[i] == 1;
  }
  for (int64_t a : axes) {
    Result<int64_t> axis = NormalizeAxis(a, rank);
    if (!axis.ok()) return axis.status().WithPrefix("Squeeze");
    const size_t i = static_cast<size_t>(*axis);
    if (drop[i]) return Status::InvalidArgument("Squeeze: axis " + std::to_string(a) + " repeats");
    if (in[i] != 1) {
      return Status::InvalidArgument("Squeeze: dim " + std::to_string(a) + " of " +
                                     ShapeToString(in) + " is not 1");
    }
    drop[i] = true;
  }
  Shape out;
  for (size_t i = 0; i < in.size(); ++i) {
    if (!drop[i]) out.push_back(in[i]);
  }
  return out;
}

Result<Shape> UnsqueezeShape(const Shape& in, const std::vector<int64_t>& axes) {
  const int64_t out_rank = static_cast<int64_t>(in.size() + axes.size());
  std::vector<bool> inserted(static_cast<size_t>(out_rank), false);
  for (int64_t a : axes) {
    Result<int64_t> axis = NormalizeAxis(a, out_rank);
    if (!axis.ok()) return axis.status().WithPrefix("Unsqueeze");
    if (inserted[static_cast<size_t>(*axis)]) {
      return Status::InvalidArgument("Unsqueeze: axis " + std::to_string(a) + " repeats");
    }
    inserted[static_cast<size_t>(*axis)] = true;
  }
  Shape out(static_cast<size_t>(out_rank));
  size_t next = 0;
  for (size_t i = 0; i < out.size(); ++i) out[i] = inserted[i] ? 1 : in[next++];
  return out;
}

template <bool kSqueeze>
Result<Shape> SqueezeLikeShape(const Shape& in, const Attributes& attrs, int64_t opset,
                               const Tensor* axes_value, bool axes_present, bool* unknown) {
  const char* op = kSqueeze ? "Squeeze" : "Unsqueeze";
  bool given = false;
  ORRERY_ASSIGN_OR_RETURN(std::vector<int64_t> axes,
                          AxesArg(attrs, opset, axes_value, axes_present, op, &given, unknown));
  if (*unknown) return Shape{};
  if constexpr (kSqueeze) {
    // An empty axes list squeezes every 1, like an absent one (onnxruntime).
    return SqueezeShape(in, axes, given && !axes.empty());
  } else {
    if (!given) return Status::InvalidArgument("Unsqueeze: axes are required");
    return UnsqueezeShape(in, axes);
  }
}

template <bool kSqueeze>
Status InferSqueezeLike(const InferContext& ctx, std::vector<TensorType>* outputs) {
  const char* op = kSqueeze ? "Squeeze" : "Unsqueeze";
  ORRERY_RETURN_IF_ERROR(RequireMovable(ctx.inputs[0], op, "input data"));
  const bool present = OptionalInput(ctx, 1) != nullptr;
  bool unknown = false;
  ORRERY_ASSIGN_OR_RETURN(
      Shape out, SqueezeLikeShape<kSqueeze>(ctx.inputs[0].shape, ctx.attrs, ctx.opset, ctx.value(1),
                                            present, &unknown));
  if (unknown) return Status::Unavailable(std::string(op) + " needs the value of its axes input");
  outputs->assign(1, TensorType{ctx.inputs[0].dtype, std::move(out)});
  return Status::Ok();
}

template <bool kSqueeze>
Status ComputeSqueezeLike(const KernelContext& ctx, std::span<Tensor> outputs) {
  const Tensor* axes = OptionalInput(ctx, 1);
  bool unknown = false;
  ORRERY_ASSIGN_OR_RETURN(
      Shape out, SqueezeLikeShape<kSqueeze>(ctx.inputs[0]->shape(), ctx.attrs, ctx.opset, axes,
                                            axes != nullptr, &unknown));
  ORRERY_ASSIGN_OR_RETURN(outputs[0], ctx.inputs[0]->Reshaped(std::move(out)));
  return Status::Ok();
}

// ---- Dropout (inference only) ----

DType DropoutMaskType(const InferContext& ctx) {
  return ctx.opset >= 10 ? DType::kBool : ctx.inputs[0].dtype;
}

// Training mode with a non-zero ratio draws random numbers; inference
// engines have no use for that, so it is rejected rather than faked.
Status CheckDropoutMode(const Tensor* ratio, const Tensor* training) {
  if (training == nullptr) return Status::Ok();
  if (training->dtype() != DType::kBool || training->num_elements() != 1) {
    return Status::InvalidArgument("Dropout: training_mode must be a bool scalar");
  }
  if (training->data<uint8_t>()[0] == 0) return Status::Ok();
  bool zero_ratio = false;
  if (ratio != nullptr && ratio->num_elements() == 1) {
    if (ratio->dtype() == DType::kFloat32) zero_ratio = ratio->data<float>()[0] == 0.0f;
    if (ratio->dtype() == DType::kFloat64) zero_ratio = ratio->data<double>()[0] == 0.0;
    if (ratio->dtype() == DType::kFloat16) zero_ratio = (ratio->data<uint16_t>()[0] & 0x7FFF) == 0;
  }
  if (!zero_ratio) {
    return Status::InvalidArgument(
        "Dropout: unsupported training_mode=true with a non-zero ratio (inference only)");
  }
  return Status::Ok();
}

Status InferDropout(const InferContext& ctx, std::vector<TensorType>* outputs) {
  ORRERY_RETURN_IF_ERROR(RequireMovable(ctx.inputs[0], "Dropout", "input data"));
  if (ctx.opset >= 12 && OptionalInput(ctx, 2) != nullptr && ctx.value(2) != nullptr &&
      (OptionalInput(ctx, 1) == nullptr || ctx.value(1) != nullptr)) {
    ORRERY_RETURN_IF_ERROR(CheckDropoutMode(ctx.value(1), ctx.value(2)));
  }
  outputs->assign(1, ctx.inputs[0]);
  if (ctx.num_outputs > 1)
    outputs->push_back(TensorType{DropoutMaskType(ctx), ctx.inputs[0].shape});
  return Status::Ok();
}

Status ComputeDropout(const KernelContext& ctx, std::span<Tensor> outputs) {
  if (ctx.opset >= 12) {
    ORRERY_RETURN_IF_ERROR(CheckDropoutMode(OptionalInput(ctx, 1), OptionalInput(ctx, 2)));
  }
  const Tensor& x = *ctx.inputs[0];
  outputs[0] = x;
  if (outputs.size() > 1) {
    const DType mask_type = ctx.opset >= 10 ? DType::kBool : x.dtype();
    ORRERY_ASSIGN_OR_RETURN(Tensor mask, Tensor::Allocate(mask_type, x.shape()));
    uint64_t one = 0;
    ORRERY_RETURN_IF_ERROR(WriteOne(mask_type, &one));
    FillElements(mask.raw_data(), mask.num_elements(), &one, DTypeSize(mask_type));
    outputs[1] = std::move(mask);
  }
  return Status::Ok();
}

// ---- Shape / Size ----

// [start, end) of the dims Shape reports (opset 15 attributes), clamped.
Result<std::pair<int64_t, int64_t>> ShapeRange(const Attributes& attrs, int64_t rank) {
  ORRERY_ASSIGN_OR_RETURN(int64_t start, attrs.GetInt("start", 0));
  ORRERY_ASSIGN_OR_RETURN(int64_t end, attrs.GetInt("end", rank));
  auto clamp = [rank](int64_t v) {
    if (v < 0) v = v < -rank ? 0 : v + rank;
    return std::min(v, rank);
  };
  start = clamp(start);
  end = clamp(end);
  return std::make_pair(start, std::max(start, end));
}

Status InferShape(const InferContext& ctx, std::vector<TensorType>* outputs) {
  if (!ctx.inputs[0].present()) return Status::InvalidArgument("Shape: input is missing");
  ORRERY_ASSIGN_OR_RETURN(auto range,
                          ShapeRange(ctx.attrs, static_cast<int64_t>(ctx.inputs[0].shape.size())));
  outputs->assign(1, TensorType{DType::kInt64, {range.second - range.first}});
  return Status::Ok();
}

Status ComputeShape(const KernelContext& ctx, std::span<Tensor> outputs) {
  const Shape& in = ctx.inputs[0]->shape();
  ORRERY_ASSIGN_OR_RETURN(auto range, ShapeRange(ctx.attrs, static_cast<int64_t>(in.size())));
  int64_t* out = outputs[0].data<int64_t>();
  for (int64_t i = range.first; i < range.second; ++i) {
    out[i - range.first] = in[static_cast<size_t>(i)];
  }
  return Status::Ok();
}

Status InferSize(const InferContext& ctx, std::vector<TensorType>* outputs) {
  if (!ctx.inputs[0].present()) return Status::InvalidArgument("Size: input is missing");
  outputs->assign(1, TensorType{DType::kInt64, {}});
  return Status::Ok();
}

Status ComputeSize(const KernelContext& ctx, std::span<Tensor> outputs) {
  *outputs[0].data<int64_t>() = ctx.inputs[0]->num_elements();
  return Status::Ok();
}

// ---- Constant ----

Result<Tensor> ConstantValue(const Attributes& attrs) {
  static constexpr const char* kSupported[] = {"value", "value_float", "value_floats", "value_int",
                                               "value_ints"};
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

KernelDef Def(const char* op_type, int min_inputs, int max_inputs, InferFn infer, ComputeFn compute,
              OutputAlloc alloc = OutputAlloc::kByKernel) {
  return KernelDef{.op_type = op_type,
                   .backend = Backend::kCpu,
                   .min_inputs = min_inputs,
                   .max_inputs = max_inputs,
                   .infer = infer,
                   .compute = compute,
                   .alloc = alloc};
}

}  // namespace

Status RegisterShapeKernels(OpRegistry* registry) {
  ORRERY_RETURN_IF_ERROR(registry->Register(Def("Identity", 1, 1, InferIdentity, ComputeIdentity)));
  ORRERY_RETURN_IF_ERROR(registry->Register(Def("Flatten", 1, 1, InferFlatten, ComputeFlatten)));
  ORRERY_RETURN_IF_ERROR(registry->Register(Def("Reshape", 2, 2, InferReshape, ComputeReshape)));
  ORRERY_RETURN_IF_ERROR(
      registry->Register(Def("Squeeze", 1, 2, InferSqueezeLike<true>, ComputeSqueezeLike<true>)));
  ORRERY_RETURN_IF_ERROR(registry->Register(
      Def("Unsqueeze", 1, 2, InferSqueezeLike<false>, ComputeSqueezeLike<false>)));
  KernelDef dropout = Def("Dropout", 1, 3, InferDropout, ComputeDropout);
  dropout.max_outputs = 2;
  ORRERY_RETURN_IF_ERROR(registry->Register(std::move(dropout)));
  ORRERY_RETURN_IF_ERROR(
      registry->Register(Def("Shape", 1, 1, InferShape, ComputeShape, OutputAlloc::kPreallocated)));
  ORRERY_RETURN_IF_ERROR(
      registry->Register(Def("Size", 1, 1, InferSize, ComputeSize, OutputAlloc::kPreallocated)));
  ORRERY_RETURN_IF_ERROR(registry->Register(Def("Constant", 0, 0, InferConstant, ComputeConstant)));
  return Status::Ok();
}

}  // namespace orrery::ops::cpu
