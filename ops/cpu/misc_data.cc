// Generators and masks: ConstantOfShape, Range, EyeLike, Trilu, NonZero and
// OneHot. Shapes that come from input values (ConstantOfShape's shape,
// Range's bounds, OneHot's depth, NonZero's count) are validated and capped
// like any other untrusted shape.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>

#include "ops/cpu/cpu_kernels.h"
#include "ops/cpu/data_movement.h"
#include "ops/kernel_util.h"

namespace orrery::ops::cpu {
namespace {

// ---- ConstantOfShape ----

Result<Tensor> FillValue(const Attributes& attrs) {
  if (!attrs.Has("value")) {
    return Tensor(DType::kFloat32, {1});
  }
  ORRERY_ASSIGN_OR_RETURN(Tensor v, attrs.GetTensor("value"));
  if (v.num_elements() != 1) {
    return Status::InvalidArgument("ConstantOfShape: value must have exactly one element");
  }
  if (DTypeSize(v.dtype()) == 0) {
    return Status::InvalidArgument("ConstantOfShape: unsupported dtype " +
                                   std::string(DTypeName(v.dtype())));
  }
  return v;
}

Result<Shape> ShapeFromValue(const Tensor& t, const char* op) {
  if (t.dtype() != DType::kInt64)
    return Status::InvalidArgument(std::string(op) + ": shape must be int64");
  ORRERY_ASSIGN_OR_RETURN(std::vector<int64_t> dims, ReadInts(t, op, "shape"));
  Shape s(dims.begin(), dims.end());
  Result<int64_t> n = CheckedNumElements(s);
  if (!n.ok()) return n.status().WithPrefix(op);
  return s;
}

Status InferConstantOfShape(const InferContext& ctx, std::vector<TensorType>* outputs) {
  ORRERY_ASSIGN_OR_RETURN(Tensor v, FillValue(ctx.attrs));
  const Tensor* shape = ctx.value(0);
  if (shape == nullptr) return Status::Unavailable("ConstantOfShape needs the value of its input");
  ORRERY_ASSIGN_OR_RETURN(Shape out, ShapeFromValue(*shape, "ConstantOfShape"));
  outputs->assign(1, TensorType{v.dtype(), std::move(out)});
  return Status::Ok();
}

Status ComputeConstantOfShape(const KernelContext& ctx, std::span<Tensor> outputs) {
  ORRERY_ASSIGN_OR_RETURN(Tensor v, FillValue(ctx.attrs));
  Tensor& y = outputs[0];
  FillElements(y.raw_data(), y.num_elements(), v.raw_data(), DTypeSize(v.dtype()));
  return Status::Ok();
}

// ---- Range ----

// Largest Range output Orrery builds; far below kMaxTensorBytes because a
// single scalar input could otherwise demand gigabytes.
constexpr int64_t kMaxRangeElements = int64_t{1} << 28;

bool RangeType(DType d) {
  return d == DType::kFloat32 || d == DType::kFloat64 || d == DType::kInt16 || d == DType::kInt32 ||
         d == DType::kInt64;
}

// Reads a scalar as long double (exact for every int64 and double).
long double ScalarAt(const Tensor& t) {
  switch (t.dtype()) {
    case DType::kFloat32:
      return t.data<float>()[0];
    case DType::kFloat64:
      return t.data<double>()[0];
    case DType::kInt16:
      return t.data<int16_t>()[0];
    case DType::kInt32:
      return t.data<int32_t>()[0];
    case DType::kInt64:
      return static_cast<long double>(t.data<int64_t>()[0]);
    default:
      return 0;
  }
}

Result<int64_t> RangeCount(const Tensor& start, const Tensor& limit, const Tensor& delta) {
  for (const Tensor* t : {&start, &limit, &delta}) {
    if (t->num_elements() != 1) return Status::InvalidArgument("Range: inputs must be scalars");
  }
  const long double s = ScalarAt(start), l = ScalarAt(limit), d = ScalarAt(delta);
  if (!std::isfinite(s) || !std::isfinite(l) || !std::isfinite(d)) {
    return Status::InvalidArgument("Range: inputs must be finite");
  }
  if (d == 0) return Status::InvalidArgument("Range: delta cannot be 0");
  const long double n = std::ceil((l - s) / d);
  if (!(n > 0)) return int64_t{0};
  if (n > static_cast<long double>(kMaxRangeElements)) {
    return Status::InvalidArgument("Range: " + std::to_string(static_cast<double>(n)) +
                                   " elements exceed the limit of " +
                                   std::to_string(kMaxRangeElements));
  }
  return static_cast<int64_t>(n);
}

Status InferRange(const InferContext& ctx, std::vector<TensorType>* outputs) {
  const DType dt = ctx.inputs[0].dtype;
  if (!RangeType(dt)) {
    return Status::InvalidArgument("Range: unsupported dtype " + std::string(DTypeName(dt)));
  }
  if (ctx.inputs[1].dtype != dt || ctx.inputs[2].dtype != dt) {
    return Status::InvalidArgument("Range: start, limit and delta must share a dtype");
  }
  if (ctx.value(0) == nullptr || ctx.value(1) == nullptr || ctx.value(2) == nullptr) {
    return Status::Unavailable("Range needs the values of its inputs");
  }
  ORRERY_ASSIGN_OR_RETURN(int64_t n, RangeCount(*ctx.value(0), *ctx.value(1), *ctx.value(2)));
  outputs->assign(1, TensorType{dt, {n}});
  return Status::Ok();
}

template <typename T>
void FillRange(const Tensor& start, const Tensor& delta, Tensor& y) {
  const T s = start.data<T>()[0];
  const T d = delta.data<T>()[0];
  T* out = y.data<T>();
  const int64_t n = y.num_elements();
  if constexpr (std::is_integral_v<T>) {
    // Every element lies between start and limit, so wrapping uint64
    // arithmetic yields it exactly even where i * delta alone would overflow.
    const uint64_t us = static_cast<uint64_t>(static_cast<int64_t>(s));
    const uint64_t ud = static_cast<uint64_t>(static_cast<int64_t>(d));
    for (int64_t i = 0; i < n; ++i) {
      out[i] = static_cast<T>(static_cast<int64_t>(us + static_cast<uint64_t>(i) * ud));
    }
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = s + static_cast<T>(i) * d;
  }
}

Status ComputeRange(const KernelContext& ctx, std::span<Tensor> outputs) {
  const Tensor& s = *ctx.inputs[0];
  const Tensor& d = *ctx.inputs[2];
  ORRERY_ASSIGN_OR_RETURN(int64_t n, RangeCount(s, *ctx.inputs[1], d));
  ORRERY_RETURN_IF_ERROR(CheckOutputShape(outputs[0], {n}, "Range"));
  switch (s.dtype()) {
    case DType::kFloat32:
      FillRange<float>(s, d, outputs[0]);
      break;
    case DType::kFloat64:
      FillRange<double>(s, d, outputs[0]);
      break;
    case DType::kInt16:
      FillRange<int16_t>(s, d, outputs[0]);
      break;
    case DType::kInt32:
      FillRange<int32_t>(s, d, outputs[0]);
      break;
    case DType::kInt64:
      FillRange<int64_t>(s, d, outputs[0]);
      break;
    default:
      return Status::InvalidArgument("Range: unsupported dtype");
  }
  return Status::Ok();
}

// ---- EyeLike ----

Result<DType> EyeLikeType(const InferContext& ctx) {
  if (!ctx.attrs.Has("dtype")) return ctx.inputs[0].dtype;
  ORRERY_ASSIGN_OR_RETURN(int64_t v, ctx.attrs.GetInt("dtype", 0));
  const DType d = static_cast<DType>(v);
  if (v <= 0 || v > static_cast<int64_t>(DType::kUint64) || DTypeSize(d) == 0) {
    return Status::InvalidArgument("EyeLike: unsupported dtype " + std::to_string(v));
  }
  return d;
}

Status InferEyeLike(const InferContext& ctx, std::vector<TensorType>* outputs) {
  ORRERY_RETURN_IF_ERROR(RequireMovable(ctx.inputs[0], "EyeLike", "input"));
  if (ctx.inputs[0].shape.size() != 2) {
    return Status::InvalidArgument("EyeLike: input must be 2-D, got " +
                                   ShapeToString(ctx.inputs[0].shape));
  }
  ORRERY_ASSIGN_OR_RETURN(DType dt, EyeLikeType(ctx));
  outputs->assign(1, TensorType{dt, ctx.inputs[0].shape});
  return Status::Ok();
}

Status ComputeEyeLike(const KernelContext& ctx, std::span<Tensor> outputs) {
  Tensor& y = outputs[0];
  ORRERY_ASSIGN_OR_RETURN(int64_t k, ctx.attrs.GetInt("k", 0));
  const int64_t rows = y.shape()[0], cols = y.shape()[1];
  uint64_t one = 0;
  ORRERY_RETURN_IF_ERROR(WriteOne(y.dtype(), &one));
  const size_t elem = DTypeSize(y.dtype());
  auto* out = static_cast<uint8_t*>(y.raw_data());
  // Row i has its one at column i + k; k is clamped so i + k cannot overflow.
  k = std::clamp<int64_t>(k, -rows - 1, cols + 1);
  for (int64_t i = 0; i < rows; ++i) {
    const int64_t j = i + k;
    if (j >= 0 && j < cols)
      std::memcpy(out + (i * cols + j) * static_cast<int64_t>(elem), &one, elem);
  }
  return Status::Ok();
}

// ---- Trilu ----

Status InferTrilu(const InferContext& ctx, std::vector<TensorType>* outputs) {
  ORRERY_RETURN_IF_ERROR(RequireMovable(ctx.inputs[0], "Trilu", "input"));
  if (ctx.inputs[0].shape.size() < 2) {
    return Status::InvalidArgument("Trilu: input must have rank >= 2");
  }
  const TensorType* k = OptionalInput(ctx, 1);
  if (k != nullptr && (k->dtype != DType::kInt64 || NumElements(k->shape) != 1)) {
    return Status::InvalidArgument("Trilu: k must be an int64 scalar");
  }
  outputs->assign(1, ctx.inputs[0]);
  return Status::Ok();
}

Status ComputeTrilu(const KernelContext& ctx, std::span<Tensor> outputs) {
  const Tensor& x = *ctx.inputs[0];
  Tensor& y = outputs[0];
  const Tensor* k_in = OptionalInput(ctx, 1);
  int64_t k = k_in == nullptr ? 0 : k_in->data<int64_t>()[0];
  ORRERY_ASSIGN_OR_RETURN(int64_t upper, ctx.attrs.GetInt("upper", 1));
  const size_t r = x.shape().size();
  const int64_t rows = x.shape()[r - 2], cols = x.shape()[r - 1];
  k = std::clamp<int64_t>(k, -rows - 1, cols + 1);
  const int64_t mats = DimProduct(x.shape(), 0, r - 2);
  const int64_t elem = static_cast<int64_t>(DTypeSize(x.dtype()));
  if (x.byte_size() > 0) std::memcpy(y.raw_data(), x.raw_data(), x.byte_size());
  auto* out = static_cast<uint8_t*>(y.raw_data());
  for (int64_t m = 0; m < mats; ++m) {
    for (int64_t i = 0; i < rows; ++i) {
      uint8_t* row = out + ((m * rows + i) * cols) * elem;
      // upper keeps j >= i + k; lower keeps j <= i + k. Zero the rest.
      const int64_t lo = upper != 0 ? 0 : std::clamp<int64_t>(i + k + 1, 0, cols);
      const int64_t hi = upper != 0 ? std::clamp<int64_t>(i + k, 0, cols) : cols;
      if (hi > lo) std::memset(row + lo * elem, 0, static_cast<size_t>((hi - lo) * elem));
    }
  }
  return Status::Ok();
}

// ---- NonZero ----

bool IsNonZero(const uint8_t* p, DType d) {
  switch (d) {
    case DType::kFloat32: {
      float v;
      std::memcpy(&v, p, 4);
      return v != 0.0f;
    }
    case DType::kFloat64: {
      double v;
      std::memcpy(&v, p, 8);
      return v != 0.0;
    }
    case DType::kFloat16: {
      uint16_t v;
      std::memcpy(&v, p, 2);
      return (v & 0x7FFF) != 0;
    }
    default: {
      // Integers and bool: any set bit.
      for (size_t i = 0; i < DTypeSize(d); ++i) {
        if (p[i] != 0) return true;
      }
      return false;
    }
  }
}

int64_t CountNonZero(const Tensor& x) {
  const auto* p = static_cast<const uint8_t*>(x.raw_data());
  const size_t elem = DTypeSize(x.dtype());
  int64_t n = 0;
  for (int64_t i = 0; i < x.num_elements(); ++i)
    n += IsNonZero(p + i * static_cast<int64_t>(elem), x.dtype());
  return n;
}

Status InferNonZero(const InferContext& ctx, std::vector<TensorType>* outputs) {
  ORRERY_RETURN_IF_ERROR(RequireMovable(ctx.inputs[0], "NonZero", "input"));
  const Tensor* x = ctx.value(0);
  if (x == nullptr)
    return Status::Unavailable("NonZero's output shape depends on its input values");
  // A scalar is treated as a 1-element vector, as numpy and onnxruntime do.
  const int64_t rank = std::max<int64_t>(1, static_cast<int64_t>(x->shape().size()));
  outputs->assign(1, TensorType{DType::kInt64, {rank, CountNonZero(*x)}});
  return Status::Ok();
}

Status ComputeNonZero(const KernelContext& ctx, std::span<Tensor> outputs) {
  const Tensor& x = *ctx.inputs[0];
  Tensor& y = outputs[0];
  const Shape shape = x.shape().empty() ? Shape{1} : x.shape();
  const size_t rank = shape.size();
  const int64_t count = y.shape()[1];
  const auto* p = static_cast<const uint8_t*>(x.raw_data());
  const int64_t elem = static_cast<int64_t>(DTypeSize(x.dtype()));
  int64_t* out = y.data<int64_t>();
  std::vector<int64_t> coord(rank, 0);
  int64_t k = 0;
  for (int64_t i = 0; i < x.num_elements() && k < count; ++i) {
    if (IsNonZero(p + i * elem, x.dtype())) {
      for (size_t d = 0; d < rank; ++d) out[static_cast<int64_t>(d) * count + k] = coord[d];
      ++k;
    }
    for (size_t d = rank; d-- > 0;) {
      if (++coord[d] < shape[d]) break;
      coord[d] = 0;
    }
  }
  return Status::Ok();
}

// ---- OneHot ----

// Reads element i of a numeric tensor as an integer (floats truncate, as
// numpy's astype does); nullopt-like failure for NaN or out-of-int64 values.
Result<int64_t> IntegerAt(const Tensor& t, int64_t i, const char* what) {
  double v = 0.0;
  switch (t.dtype()) {
    case DType::kFloat32:
      v = t.data<float>()[i];
      break;
    case DType::kFloat64:
      v = t.data<double>()[i];
      break;
    case DType::kInt8:
      return int64_t{t.data<int8_t>()[i]};
    case DType::kInt16:
      return int64_t{t.data<int16_t>()[i]};
    case DType::kInt32:
      return int64_t{t.data<int32_t>()[i]};
    case DType::kInt64:
      return t.data<int64_t>()[i];
    case DType::kUint8:
      return int64_t{t.data<uint8_t>()[i]};
    case DType::kUint16:
      return int64_t{t.data<uint16_t>()[i]};
    case DType::kUint32:
      return int64_t{t.data<uint32_t>()[i]};
    case DType::kUint64: {
      const uint64_t u = t.data<uint64_t>()[i];
      return u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())
                 ? std::numeric_limits<int64_t>::max()
                 : static_cast<int64_t>(u);
    }
    default:
      return Status::InvalidArgument(std::string("OneHot: unsupported dtype ") +
                                     std::string(DTypeName(t.dtype())) + " for " + what);
  }
  if (!std::isfinite(v) || std::fabs(v) >= 9.2e18) {
    return Status::InvalidArgument(std::string("OneHot: ") + what +
                                   " value is not a finite integer");
  }
  return static_cast<int64_t>(v);
}

Result<int64_t> OneHotDepth(const Tensor& depth) {
  if (depth.num_elements() != 1) return Status::InvalidArgument("OneHot: depth must be a scalar");
  ORRERY_ASSIGN_OR_RETURN(int64_t d, IntegerAt(depth, 0, "depth"));
  if (d < 1)
    return Status::InvalidArgument("OneHot: depth must be positive, got " + std::to_string(d));
  return d;
}

Result<Shape> OneHotShape(const Shape& in, int64_t depth, const Attributes& attrs, size_t* axis) {
  ORRERY_ASSIGN_OR_RETURN(int64_t a, attrs.GetInt("axis", -1));
  Result<int64_t> n = NormalizeAxis(a, static_cast<int64_t>(in.size()) + 1);
  if (!n.ok()) return n.status().WithPrefix("OneHot");
  *axis = static_cast<size_t>(*n);
  Shape out = in;
  out.insert(out.begin() + static_cast<std::ptrdiff_t>(*axis), depth);
  Result<int64_t> count = CheckedNumElements(out);
  if (!count.ok()) return count.status().WithPrefix("OneHot");
  return out;
}

Status InferOneHot(const InferContext& ctx, std::vector<TensorType>* outputs) {
  ORRERY_RETURN_IF_ERROR(RequireMovable(ctx.inputs[0], "OneHot", "indices"));
  ORRERY_RETURN_IF_ERROR(RequireMovable(ctx.inputs[2], "OneHot", "values"));
  if (NumElements(ctx.inputs[2].shape) != 2) {
    return Status::InvalidArgument("OneHot: values must have two elements [off, on]");
  }
  const Tensor* depth = ctx.value(1);
  if (depth == nullptr) return Status::Unavailable("OneHot needs the value of its depth input");
  ORRERY_ASSIGN_OR_RETURN(int64_t d, OneHotDepth(*depth));
  size_t axis = 0;
  ORRERY_ASSIGN_OR_RETURN(Shape out, OneHotShape(ctx.inputs[0].shape, d, ctx.attrs, &axis));
  outputs->assign(1, TensorType{ctx.inputs[2].dtype, std::move(out)});
  return Status::Ok();
}

Status ComputeOneHot(const KernelContext& ctx, std::span<Tensor> outputs) {
  const Tensor& indices = *ctx.inputs[0];
  const Tensor& values = *ctx.inputs[2];
  Tensor& y = outputs[0];
  ORRERY_ASSIGN_OR_RETURN(int64_t depth, OneHotDepth(*ctx.inputs[1]));
  size_t axis = 0;
  ORRERY_ASSIGN_OR_RETURN(Shape out, OneHotShape(indices.shape(), depth, ctx.attrs, &axis));
  ORRERY_RETURN_IF_ERROR(CheckOutputShape(y, out, "OneHot"));
  const int64_t elem = static_cast<int64_t>(DTypeSize(values.dtype()));
  const auto* vals = static_cast<const uint8_t*>(values.raw_data());
  auto* dst = static_cast<uint8_t*>(y.raw_data());
  FillElements(dst, y.num_elements(), vals, static_cast<size_t>(elem));
  const int64_t inner = DimProduct(indices.shape(), axis, indices.shape().size());
  const int64_t n = indices.num_elements();
  for (int64_t i = 0; i < n; ++i) {
    ORRERY_ASSIGN_OR_RETURN(int64_t v, IntegerAt(indices, i, "indices"));
    if (v < 0) v += depth;
    if (v < 0 || v >= depth) continue;  // out of range: the row stays "off"
    const int64_t o = i / inner, in = i % inner;
    std::memcpy(dst + ((o * depth + v) * inner + in) * elem, vals + elem,
                static_cast<size_t>(elem));
  }
  return Status::Ok();
}

KernelDef Def(const char* op_type, int min_in, int max_in, InferFn infer, ComputeFn compute) {
  return KernelDef{.op_type = op_type,
                   .backend = Backend::kCpu,
                   .min_inputs = min_in,
                   .max_inputs = max_in,
                   .infer = infer,
                   .compute = compute};
}

}  // namespace

Status RegisterMiscDataKernels(OpRegistry* registry) {
  ORRERY_RETURN_IF_ERROR(registry->Register(
      Def("ConstantOfShape", 1, 1, InferConstantOfShape, ComputeConstantOfShape)));
  ORRERY_RETURN_IF_ERROR(registry->Register(Def("Range", 3, 3, InferRange, ComputeRange)));
  ORRERY_RETURN_IF_ERROR(registry->Register(Def("EyeLike", 1, 1, InferEyeLike, ComputeEyeLike)));
  ORRERY_RETURN_IF_ERROR(registry->Register(Def("Trilu", 1, 2, InferTrilu, ComputeTrilu)));
  ORRERY_RETURN_IF_ERROR(registry->Register(Def("NonZero", 1, 1, InferNonZero, ComputeNonZero)));
  ORRERY_RETURN_IF_ERROR(registry->Register(Def("OneHot", 3, 3, InferOneHot, ComputeOneHot)));
  return Status::Ok();
}

}  // namespace orrery::ops::cpu
