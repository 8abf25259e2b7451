// Index-driven data movement: Gather, GatherElements and ScatterND. Every
// index comes from untrusted data and is range-checked (negative indices
// count from the end) before any memory is touched; an out-of-range index is
// an INVALID_ARGUMENT, never a wild read or write.
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <type_traits>

#include "ops/cpu/cpu_kernels.h"
#include "ops/cpu/data_movement.h"
#include "ops/cpu/prepared.h"
#include "ops/kernel_util.h"

namespace orrery::ops::cpu {
namespace {

Status RequireIndexType(const TensorType& t, const char* op) {
  if (t.dtype != DType::kInt32 && t.dtype != DType::kInt64) {
    return Status::InvalidArgument(std::string(op) + ": indices must be int32 or int64, got " +
                                   std::string(DTypeName(t.dtype)));
  }
  return Status::Ok();
}

// Reads index i of an int32/int64 tensor and maps it into [0, dim).
Result<int64_t> IndexAt(const Tensor& indices, int64_t i, int64_t dim, const char* op) {
  int64_t v = indices.dtype() == DType::kInt64 ? indices.data<int64_t>()[i]
                                               : int64_t{indices.data<int32_t>()[i]};
  const int64_t orig = v;
  if (v < 0) v += dim;
  if (v < 0 || v >= dim) {
    return Status::InvalidArgument(std::string(op) + ": index " + std::to_string(orig) +
                                   " is out of range for a dim of " + std::to_string(dim));
  }
  return v;
}

// ---- Gather ----

Status InferGather(const InferContext& ctx, std::vector<TensorType>* outputs) {
  const TensorType& data = ctx.inputs[0];
  const TensorType& idx = ctx.inputs[1];
  ORRERY_RETURN_IF_ERROR(RequireMovable(data, "Gather", "data"));
  ORRERY_RETURN_IF_ERROR(RequireIndexType(idx, "Gather"));
  ORRERY_ASSIGN_OR_RETURN(int64_t axis_attr, ctx.attrs.GetInt("axis", 0));
  Result<int64_t> axis = NormalizeAxis(axis_attr, static_cast<int64_t>(data.shape.size()));
  if (!axis.ok()) return axis.status().WithPrefix("Gather");
  const size_t a = static_cast<size_t>(*axis);
  Shape out(data.shape.begin(), data.shape.begin() + static_cast<std::ptrdiff_t>(a));
  out.insert(out.end(), idx.shape.begin(), idx.shape.end());
  out.insert(out.end(), data.shape.begin() + static_cast<std::ptrdiff_t>(a) + 1, data.shape.end());
  outputs->assign(1, TensorType{data.dtype, std::move(out)});
  return Status::Ok();
}

template <typename U>
void GatherRows(const U* src, std::span<const int64_t> rows, int64_t outer, int64_t k,
                int64_t inner, U* dst) {
  for (int64_t o = 0; o < outer; ++o) {
    const U* base = src + o * k * inner;
    for (int64_t r : rows) {
      if (inner == 1) {
        *dst++ = base[r];
      } else {
        std::memcpy(dst, base + r * inner, static_cast<size_t>(inner) * sizeof(U));
        dst += inner;
      }
    }
  }
}

// Scratch for the validated row index of every index element.
Result<Prepared> PrepareGather(const PrepareContext& ctx) {
  return Prepared{.kernel = std::make_shared<PreparedKernel>(),
                  .scratch_bytes = NumElements(ctx.inputs[1].shape) *
                                   static_cast<int64_t>(sizeof(int64_t))};
}

Status ComputeGather(const KernelContext& ctx, std::span<Tensor> outputs) {
  if (ctx.prepared == nullptr) {
    return ComputeUnprepared(PrepareGather, ComputeGather, ctx, outputs);
  }
  const Tensor& data = *ctx.inputs[0];
  const Tensor& indices = *ctx.inputs[1];
  ORRERY_ASSIGN_OR_RETURN(int64_t axis_attr, ctx.attrs.GetInt("axis", 0));
  const int64_t rank = static_cast<int64_t>(data.shape().size());
  const size_t a = static_cast<size_t>(axis_attr < 0 ? axis_attr + rank : axis_attr);
  const int64_t k = data.shape()[a];
  const int64_t n = indices.num_elements();
  if (ThreadScratch(ctx, 0).size() < static_cast<size_t>(n) * sizeof(int64_t)) {
    return Status::Internal("Gather: scratch smaller than the indices");
  }
  const std::span<int64_t> rows(ScratchAs<int64_t>(ctx), static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    ORRERY_ASSIGN_OR_RETURN(rows[static_cast<size_t>(i)], IndexAt(indices, i, k, "Gather"));
  }
  const int64_t outer = DimProduct(data.shape(), 0, a);
  const int64_t inner = DimProduct(data.shape(), a + 1, data.shape().size());
  if (outputs[0].num_elements() == 0) return Status::Ok();
  switch (DTypeSize(data.dtype())) {
    case 1:
      GatherRows(data.data<uint8_t>(), rows, outer, k, inner, outputs[0].data<uint8_t>());
      break;
    case 2:
      GatherRows(data.data<uint16_t>(), rows, outer, k, inner, outputs[0].data<uint16_t>());
      break;
    case 4:
      GatherRows(data.data<uint32_t>(), rows, outer, k, inner, outputs[0].data<uint32_t>());
      break;
    case 8:
      GatherRows(data.data<uint64_t>(), rows, outer, k, inner, outputs[0].data<uint64_t>());
      break;
    default:
      return Status::Internal("Gather: unexpected element size");
  }
  return Status::Ok();
}

// ---- GatherElements ----

Status InferGatherElements(const InferContext& ctx, std::vector<TensorType>* outputs) {
  const TensorType& data = ctx.inputs[0];
  const TensorType& idx = ctx.inputs[1];
  ORRERY_RETURN_IF_ERROR(RequireMovable(data, "GatherElements", "data"));
  ORRERY_RETURN_IF_ERROR(RequireIndexType(idx, "GatherElements"));
  ORRERY_ASSIGN_OR_RETURN(int64_t axis_attr, ctx.attrs.GetInt("axis", 0));
  Result<int64_t> axis = NormalizeAxis(axis_attr, static_cast<int64_t>(data.shape.size()));
  if (!axis.ok()) return axis.status().WithPrefix("GatherElements");
  if (idx.shape.size() != data.shape.size()) {
    return Status::InvalidArgument("GatherElements: indices rank differs from data rank");
  }
  for (size_t d = 0; d < data.shape.size(); ++d) {
    // Off-axis coordinates index data directly, so they must be in range.
    if (static_cast<int64_t>(d) != *axis && idx.shape[d] > data.shape[d]) {
      return Status::InvalidArgument("GatherElements: indices shape " + ShapeToString(idx.shape) +
                                     " exceeds data shape " + ShapeToString(data.shape));
    }
  }
  outputs->assign(1, TensorType{data.dtype, idx.shape});
  return Status::Ok();
}

template <typename U>
Status GatherElementsTyped(const Tensor& data, const Tensor& indices, size_t axis, U* dst) {
  const Shape& ishape = indices.shape();
  const std::vector<int64_t> dstrides = ContiguousStrides(data.shape());
  const U* src = data.data<U>();
  const int64_t dim = data.shape()[axis];
  const int64_t n = indices.num_elements();
  std::vector<int64_t> coord(ishape.size(), 0);
  int64_t base = 0;  // data offset of coord with the axis coordinate zeroed
  for (int64_t i = 0; i < n; ++i) {
    ORRERY_ASSIGN_OR_RETURN(int64_t v, IndexAt(indices, i, dim, "GatherElements"));
    dst[i] = src[base + v * dstrides[axis]];
    for (size_t d = ishape.size(); d-- > 0;) {
      if (++coord[d] < ishape[d]) {
        if (d != axis) base += dstrides[d];
        break;
      }
      if (d != axis) base -= dstrides[d] * (ishape[d] - 1);
      coord[d] = 0;
    }
  }
  return Status::Ok();
}

Status ComputeGatherElements(const KernelContext& ctx, std::span<Tensor> outputs) {
  const Tensor& data = *ctx.inputs[0];
  const Tensor& indices = *ctx.inputs[1];
  ORRERY_ASSIGN_OR_RETURN(int64_t axis_attr, ctx.attrs.GetInt("axis", 0));
  const int64_t rank = static_cast<int64_t>(data.shape().size());
  const size_t axis = static_cast<size_t>(axis_attr < 0 ? axis_attr + rank : axis_attr);
  switch (DTypeSize(data.dtype())) {
    case 1:
      return GatherElementsTyped(data, indices, axis, outputs[0].data<uint8_t>());
    case 2:
      return GatherElementsTyped(data, indices, axis, outputs[0].data<uint16_t>());
    case 4:
      return GatherElementsTyped(data, indices, axis, outputs[0].data<uint32_t>());
    case 8:
      return GatherElementsTyped(data, indices, axis, outputs[0].data<uint64_t>());
    default:
      return Status::Internal("GatherElements: unexpected element size");
  }
}

// ---- ScatterND ----

enum class Reduction { kNone, kAdd, kMul, kMax, kMin };

Result<Reduction> ScatterReduction(const Attributes& attrs) {
  ORRERY_ASSIGN_OR_RETURN(std::string r, attrs.GetString("reduction", "none"));
  if (r == "none") return Reduction::kNone;
  if (r == "add") return Reduction::kAdd;
  if (r == "mul") return Reduction::kMul;
  if (r == "max") return Reduction::kMax;
  if (r == "min") return Reduction::kMin;
  return Status::InvalidArgument("ScatterND: unsupported reduction '" + r + "'");
}

bool ReducibleType(DType d) {
  switch (d) {
    case DType::kFloat32:
    case DType::kFloat64:
    case DType::kInt8:
    case DType::kInt16:
    case DType::kInt32:
    case DType::kInt64:
    case DType::kUint8:
    case DType::kUint16:
    case DType::kUint32:
    case DType::kUint64:
      return true;
    default:
      return false;
  }
}

Status InferScatterND(const InferContext& ctx, std::vector<TensorType>* outputs) {
  const TensorType& data = ctx.inputs[0];
  const TensorType& idx = ctx.inputs[1];
  const TensorType& upd = ctx.inputs[2];
  ORRERY_RETURN_IF_ERROR(RequireMovable(data, "ScatterND", "data"));
  ORRERY_ASSIGN_OR_RETURN(Reduction red, ScatterReduction(ctx.attrs));
  if (red != Reduction::kNone && !ReducibleType(data.dtype)) {
    return Status::InvalidArgument("ScatterND: unsupported dtype " +
                                   std::string(DTypeName(data.dtype)) + " with a reduction");
  }
  if (idx.dtype != DType::kInt64) {
    return Status::InvalidArgument("ScatterND: indices must be int64");
  }
  if (upd.dtype != data.dtype) {
    return Status::InvalidArgument("ScatterND: updates dtype differs from data dtype");
  }
  if (idx.shape.empty()) return Status::InvalidArgument("ScatterND: indices must have rank >= 1");
  const int64_t k = idx.shape.back();
  if (k < 1 || k > static_cast<int64_t>(data.shape.size())) {
    return Status::InvalidArgument("ScatterND: indices.shape[-1] = " + std::to_string(k) +
                                   " is out of range for data rank " +
                                   std::to_string(data.shape.size()));
  }
  Shape want(idx.shape.begin(), idx.shape.end() - 1);
  want.insert(want.end(), data.shape.begin() + k, data.shape.end());
  if (upd.shape != want) {
    return Status::InvalidArgument("ScatterND: updates shape " + ShapeToString(upd.shape) +
                                   " should be " + ShapeToString(want));
  }
  outputs->assign(1, data);
  return Status::Ok();
}

// Integer sums and products wrap (unsigned arithmetic, at least int wide)
// instead of overflowing; floats compute as themselves.
template <typename T, bool = std::is_integral_v<T>>
struct WrapOf {
  using type = T;
};
template <typename T>
struct WrapOf<T, true> {
  using type =
      std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;
};

template <typename T>
T Combine(Reduction r, T a, T b) {
  using W = typename WrapOf<T>::type;
  switch (r) {
    case Reduction::kAdd:
      return static_cast<T>(static_cast<W>(a) + static_cast<W>(b));
    case Reduction::kMul:
      return static_cast<T>(static_cast<W>(a) * static_cast<W>(b));
    case Reduction::kMax:
      return a < b ? b : a;
    case Reduction::kMin:
      return b < a ? b : a;
    case Reduction::kNone:
      return b;
  }
  return b;
}

template <typename T>
void ReduceSlice(Reduction r, T* dst, const T* src, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = Combine(r, dst[i], src[i]);
}

void ReduceSliceBytes(Reduction r, DType d, void* dst, const void* src, int64_t n) {
  switch (d) {
    case DType::kFloat32:
      ReduceSlice(r, static_cast<float*>(dst), static_cast<const float*>(src), n);
      break;
    case DType::kFloat64:
      ReduceSlice(r, static_cast<double*>(dst), static_cast<const double*>(src), n);
      break;
    case DType::kInt8:
      ReduceSlice(r, static_cast<int8_t*>(dst), static_cast<const int8_t*>(src), n);
      break;
    case DType::kInt16:
      ReduceSlice(r, static_cast<int16_t*>(dst), static_cast<const int16_t*>(src), n);
      break;
    case DType::kInt32:
      ReduceSlice(r, static_cast<int32_t*>(dst), static_cast<const int32_t*>(src), n);
      break;
    case DType::kInt64:
      ReduceSlice(r, static_cast<int64_t*>(dst), static_cast<const int64_t*>(src), n);
      break;
    case DType::kUint8:
      ReduceSlice(r, static_cast<uint8_t*>(dst), static_cast<const uint8_t*>(src), n);
      break;
    case DType::kUint16:
      ReduceSlice(r, static_cast<uint16_t*>(dst), static_cast<const uint16_t*>(src), n);
      break;
    case DType::kUint32:
      ReduceSlice(r, static_cast<uint32_t*>(dst), static_cast<const uint32_t*>(src), n);
      break;
    case DType::kUint64:
      ReduceSlice(r, static_cast<uint64_t*>(dst), static_cast<const uint64_t*>(src), n);
      break;
    default:
      break;  // rejected by inference
  }
}

Status ComputeScatterND(const KernelContext& ctx, std::span<Tensor> outputs) {
  const Tensor& data = *ctx.inputs[0];
  const Tensor& indices = *ctx.inputs[1];
  const Tensor& updates = *ctx.inputs[2];
  ORRERY_ASSIGN_OR_RETURN(Reduction red, ScatterReduction(ctx.attrs));
  Tensor& y = outputs[0];
  if (data.byte_size() > 0) std::memcpy(y.raw_data(), data.raw_data(), data.byte_size());
  const Shape& ds = data.shape();
  const size_t k = static_cast<size_t>(indices.shape().back());
  const std::vector<int64_t> strides = ContiguousStrides(ds);
  const int64_t slice = DimProduct(ds, k, ds.size());
  const int64_t count = k == 0 ? 0 : indices.num_elements() / static_cast<int64_t>(k);
  const int64_t elem = static_cast<int64_t>(DTypeSize(data.dtype()));
  auto* dst = static_cast<uint8_t*>(y.raw_data());
  const auto* src = static_cast<const uint8_t*>(updates.raw_data());
  for (int64_t i = 0; i < count; ++i) {
    int64_t offset = 0;
    for (size_t j = 0; j < k; ++j) {
      ORRERY_ASSIGN_OR_RETURN(
          int64_t v, IndexAt(indices, i * static_cast<int64_t>(k) + static_cast<int64_t>(j), ds[j],
                             "ScatterND"));
      offset += v * strides[j];
    }
    uint8_t* to = dst + offset * elem;
    const uint8_t* from = src + i * slice * elem;
    if (red == Reduction::kNone) {
      std::memcpy(to, from, static_cast<size_t>(slice * elem));
    } else {
      ReduceSliceBytes(red, data.dtype(), to, from, slice);
    }
  }
  return Status::Ok();
}

KernelDef Def(const char* op_type, int n_in, InferFn infer, ComputeFn compute) {
  return KernelDef{.op_type = op_type,
                   .backend = Backend::kCpu,
                   .min_inputs = n_in,
                   .max_inputs = n_in,
                   .infer = infer,
                   .compute = compute};
}

}  // namespace

Status RegisterGatherKernels(OpRegistry* registry) {
  KernelDef gather = Def("Gather", 2, InferGather, ComputeGather);
  gather.prepare = PrepareGather;
  ORRERY_RETURN_IF_ERROR(registry->Register(std::move(gather)));
  ORRERY_RETURN_IF_ERROR(
      registry->Register(Def("GatherElements", 2, InferGatherElements, ComputeGatherElements)));
  ORRERY_RETURN_IF_ERROR(registry->Register(Def("ScatterND", 3, InferScatterND, ComputeScatterND)));
  return Status::Ok();
}

}  // namespace orrery::ops::cpu
