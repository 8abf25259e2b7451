// Binary arithmetic with numpy multidirectional broadcasting:
// Add, Sub, Mul, Div for float32, float64, int32 and int64.
// Integer arithmetic wraps (two's complement) instead of overflowing, and
// integer division by zero is an INVALID_ARGUMENT rather than a crash.
#include <limits>
#include <string>
#include <type_traits>

#include "ops/broadcast.h"
#include "ops/cpu/cpu_kernels.h"
#include "ops/kernel_util.h"

namespace orrery::ops::cpu {
namespace {

template <typename T>
using Unsigned = std::make_unsigned_t<T>;

struct AddOp {
  template <typename T> static T Apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      return static_cast<T>(static_cast<Unsigned<T>>(a) + static_cast<Unsigned<T>>(b));
    } else {
      return a + b;
    }
  }
};
struct SubOp {
  template <typename T> static T Apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      return static_cast<T>(static_cast<Unsigned<T>>(a) - static_cast<Unsigned<T>>(b));
    } else {
      return a - b;
    }
  }
};
struct MulOp {
  template <typename T> static T Apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      return static_cast<T>(static_cast<Unsigned<T>>(a) * static_cast<Unsigned<T>>(b));
    } else {
      return a * b;
    }
  }
};
struct DivOp {
  // Integer divisors are checked for zero before the loop runs.
  template <typename T> static T Apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      if (b == -1) return static_cast<T>(Unsigned<T>{0} - static_cast<Unsigned<T>>(a));
      return a / b;
    } else {
      return a / b;
    }
  }
};

Status InferBinary(const InferContext& ctx, std::vector<TensorType>* outputs) {
  const TensorType& a = ctx.inputs[0];
  const TensorType& b = ctx.inputs[1];
  ORRERY_RETURN_IF_ERROR(RequireDType(
      a, "input A", {DType::kFloat32, DType::kFloat64, DType::kInt32, DType::kInt64}));
  if (a.dtype != b.dtype) {
    return Status::InvalidArgument("inputs have different dtypes: " +
                                   std::string(DTypeName(a.dtype)) + " and " +
                                   std::string(DTypeName(b.dtype)));
  }
  ORRERY_ASSIGN_OR_RETURN(Shape out, BroadcastShapes(a.shape, b.shape));
  outputs->assign(1, TensorType{a.dtype, std::move(out)});
  return Status::Ok();
}

template <typename Op, typename T>
Status RunBinary(const Tensor& a, const Tensor& b, Tensor& y) {
  const T* ad = a.data<T>();
  const T* bd = b.data<T>();
  T* yd = y.data<T>();
  if constexpr (std::is_same_v<Op, DivOp> && std::is_integral_v<T>) {
    const int64_t nb = b.num_elements();
    for (int64_t i = 0; i < nb; ++i) {
      if (bd[i] == 0) return Status::InvalidArgument("integer division by zero");
    }
  }
  if (a.shape() == b.shape()) {
    const int64_t n = y.num_elements();
    for (int64_t i = 0; i < n; ++i) yd[i] = Op::Apply(ad[i], bd[i]);
    return Status::Ok();
  }
  const BinaryLoop loop = MakeBinaryLoop(a.shape(), b.shape(), y.shape());
  ForEachRun(loop, [&](int64_t ao, int64_t bo, int64_t yo, int64_t n, int64_t sa, int64_t sb) {
    const T* __restrict pa = ad + ao;
    const T* __restrict pb = bd + bo;
    T* __restrict py = yd + yo;
    if (sa == 1 && sb == 1) {
      for (int64_t i = 0; i < n; ++i) py[i] = Op::Apply(pa[i], pb[i]);
    } else if (sa == 1 && sb == 0) {
      const T bv = pb[0];
      for (int64_t i = 0; i < n; ++i) py[i] = Op::Apply(pa[i], bv);
    } else if (sa == 0 && sb == 1) {
      const T av = pa[0];
      for (int64_t i = 0; i < n; ++i) py[i] = Op::Apply(av, pb[i]);
    } else {
      for (int64_t i = 0; i < n; ++i) py[i] = Op::Apply(pa[i * sa], pb[i * sb]);
    }
  });
  return Status::Ok();
}

template <typename Op>
Status ComputeBinary(const KernelContext& ctx, std::span<Tensor> outputs) {
  const Tensor& a = *ctx.inputs[0];
  const Tensor& b = *ctx.inputs[1];
  switch (a.dtype()) {
    case DType::kFloat32: return RunBinary<Op, float>(a, b, outputs[0]);
    case DType::kFloat64: return RunBinary<Op, double>(a, b, outputs[0]);
    case DType::kInt32: return RunBinary<Op, int32_t>(a, b, outputs[0]);
    case DType::kInt64: return RunBinary<Op, int64_t>(a, b, outputs[0]);
    default:
      return Status::InvalidArgument("unsupported dtype " + std::string(DTypeName(a.dtype())));
  }
}

KernelDef Binary(const char* op_type, ComputeFn compute) {
  return KernelDef{.op_type = op_type,
                   .backend = Backend::kCpu,
                   .min_inputs = 2,
                   .max_inputs = 2,
                   .infer = InferBinary,
                   .compute = compute};
}

}  // namespace

Status RegisterElementwiseKernels(OpRegistry* registry) {
  ORRERY_RETURN_IF_ERROR(registry->Register(Binary("Add", ComputeBinary<AddOp>)));
  ORRERY_RETURN_IF_ERROR(registry->Register(Binary("Sub", ComputeBinary<SubOp>)));
  ORRERY_RETURN_IF_ERROR(registry->Register(Binary("Mul", ComputeBinary<MulOp>)));
  ORRERY_RETURN_IF_ERROR(registry->Register(Binary("Div", ComputeBinary<DivOp>)));
  return Status::Ok();
}

}  // namespace orrery::ops::cpu
