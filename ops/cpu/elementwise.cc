// Binary arithmetic with numpy multidirectional broadcasting:
// Add, Sub, Mul, Div, Mod (fmod attribute) over every numeric dtype, Pow
// (float or integer base, any numeric exponent; the output has the base's
// dtype) and BitShift (unsigned integers).
// Integer arithmetic wraps (two's complement) instead of overflowing, and
// integer division or modulo by zero is an INVALID_ARGUMENT, not a crash.
#include <cmath>
#include <limits>
#include <string>
#include <type_traits>

#include "ops/broadcast.h"
#include "ops/cpu/cpu_kernels.h"
#include "ops/cpu/dtype_dispatch.h"
#include "ops/cpu/elementwise_loops.h"
#include "ops/kernel_util.h"

namespace orrery::ops::cpu {
namespace {

struct AddOp {
  static constexpr vec::Binary kVecBinary = vec::Binary::kAdd;
  static constexpr const char* kName = "Add";
  using Types = NumericTypes;
  template <typename T> T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) return WrapAdd(a, b);
    else return a + b;
  }
};
struct SubOp {
  static constexpr vec::Binary kVecBinary = vec::Binary::kSub;
  static constexpr const char* kName = "Sub";
  using Types = NumericTypes;
  template <typename T> T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) return WrapSub(a, b);
    else return a - b;
  }
};
struct MulOp {
  static constexpr vec::Binary kVecBinary = vec::Binary::kMul;
  static constexpr const char* kName = "Mul";
  using Types = NumericTypes;
  template <typename T> T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) return WrapMul(a, b);
    else return a * b;
  }
};
// Integer division truncates toward zero (C++ and onnxruntime semantics).
// Divisors are checked for zero before the loop runs.
struct DivOp {
  static constexpr vec::Binary kVecBinary = vec::Binary::kDiv;
  static constexpr const char* kName = "Div";
  using Types = NumericTypes;
  template <typename T> T operator()(T a, T b) const {
    if constexpr (std::is_signed_v<T> && std::is_integral_v<T>) {
      if (b == -1) return WrapNeg(a);  // INT_MIN / -1 overflows
    }
    return static_cast<T>(a / b);
  }
};
// fmod = 0: the result takes the divisor's sign (numpy.mod, Python %).
// fmod = 1: the result takes the dividend's sign (C fmod / %).
template <bool kFmod>
struct ModOp {
  template <typename T> T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) {
      T r = std::fmod(a, b);
      if constexpr (!kFmod) {
        if (r != 0 && ((r < 0) != (b < 0))) r += b;
      }
      return r;
    } else {
      if constexpr (std::is_signed_v<T>) {
        if (b == -1) return 0;  // INT_MIN % -1 overflows
      }
      T r = static_cast<T>(a % b);
      if constexpr (!kFmod && std::is_signed_v<T>) {
        if (r != 0 && ((r < 0) != (b < 0))) r = static_cast<T>(r + b);
      }
      return r;
    }
  }
};

template <typename T>
Status CheckNoZeroDivisor(const Tensor& b, const char* op) {
  if constexpr (std::is_integral_v<T>) {
    const T* bd = b.data<T>();
    const int64_t n = b.num_elements();
    for (int64_t i = 0; i < n; ++i) {
      if (bd[i] == 0) return Status::InvalidArgument(std::string(op) + ": integer division by zero");
    }
  }
  return Status::Ok();
}

// Same-dtype binary ops: Add, Sub, Mul, Div, Mod, BitShift.
Status InferSameTypeBinary(const InferContext& ctx, std::vector<TensorType>* outputs,
                           const char* op, auto types) {
  const TensorType& a = ctx.inputs[0];
  const TensorType& b = ctx.inputs[1];
  ORRERY_RETURN_IF_ERROR(RequireTypeIn(op, a, "input A", types));
  if (a.dtype != b.dtype) {
    return Status::InvalidArgument(std::string(op) + ": inputs have different dtypes: " +
                                   std::string(DTypeName(a.dtype)) + " and " +
                                   std::string(DTypeName(b.dtype)));
  }
  ORRERY_ASSIGN_OR_RETURN(Shape out, BroadcastShapes(a.shape, b.shape));
  outputs->assign(1, TensorType{a.dtype, std::move(out)});
  return Status::Ok();
}

template <typename Op>
Status InferBinary(const InferContext& ctx, std::vector<TensorType>* outputs) {
  return InferSameTypeBinary(ctx, outputs, Op::kName, typename Op::Types{});
}

template <typename Op>
Status ComputeBinary(const KernelContext& ctx, std::span<Tensor> outputs) {
  const Tensor& a = *ctx.inputs[0];
  const Tensor& b = *ctx.inputs[1];
  return Dispatch(a.dtype(), typename Op::Types{}, [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<Op, DivOp>) {
      ORRERY_RETURN_IF_ERROR(CheckNoZeroDivisor<T>(b, Op::kName));
    }
    BroadcastBinary<T, T, T>(a, b, outputs[0], Op{}, ctx.threads);
    return Status::Ok();
  });
}

// ---------------- Mod ----------------

Status InferMod(const InferContext& ctx, std::vector<TensorType>* outputs) {
  ORRERY_ASSIGN_OR_RETURN(int64_t fmod, ctx.attrs.GetInt("fmod", 0));
  if (fmod != 0 && fmod != 1) {
    return Status::InvalidArgument("Mod: fmod must be 0 or 1, got " + std::to_string(fmod));
  }
  return InferSameTypeBinary(ctx, outputs, "Mod", NumericTypes{});
}

Status ComputeMod(const KernelContext& ctx, std::span<Tensor> outputs) {
  const Tensor& a = *ctx.inputs[0];
  const Tensor& b = *ctx.inputs[1];
  ORRERY_ASSIGN_OR_RETURN(int64_t fmod, ctx.attrs.GetInt("fmod", 0));
  return Dispatch(a.dtype(), NumericTypes{}, [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    ORRERY_RETURN_IF_ERROR(CheckNoZeroDivisor<T>(b, "Mod"));
    if (fmod == 1) {
      BroadcastBinary<T, T, T>(a, b, outputs[0], ModOp<true>{});
    } else {
      BroadcastBinary<T, T, T>(a, b, outputs[0], ModOp<false>{});
    }
    return Status::Ok();
  });
}

// ---------------- BitShift ----------------

template <bool kLeft>
struct ShiftOp {
  // Shifting by the bit width or more is undefined in C++; the bits are gone.
  template <typename T> T operator()(T a, T b) const {
    if (b >= static_cast<T>(sizeof(T) * 8)) return T{0};
    if constexpr (kLeft) return static_cast<T>(static_cast<WrapType<T>>(a) << b);
    else return static_cast<T>(a >> b);
  }
};

Result<bool> ShiftIsLeft(const Attributes& attrs) {
  ORRERY_ASSIGN_OR_RETURN(std::string dir, attrs.GetString("direction", ""));
  if (dir == "LEFT") return true;
  if (dir == "RIGHT") return false;
  return Status::InvalidArgument("BitShift: direction must be LEFT or RIGHT, got '" + dir + "'");
}

Status InferBitShift(const InferContext& ctx, std::vector<TensorType>* outputs) {
  ORRERY_RETURN_IF_ERROR(ShiftIsLeft(ctx.attrs).status());
  return InferSameTypeBinary(ctx, outputs, "BitShift", UnsignedIntTypes{});
}

Status ComputeBitShift(const KernelContext& ctx, std::span<Tensor> outputs) {
  const Tensor& a = *ctx.inputs[0];
  const Tensor& b = *ctx.inputs[1];
  ORRERY_ASSIGN_OR_RETURN(bool left, ShiftIsLeft(ctx.attrs));
  return Dispatch(a.dtype(), UnsignedIntTypes{}, [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    if (left) {
      BroadcastBinary<T, T, T>(a, b, outputs[0], ShiftOp<true>{});
    } else {
      BroadcastBinary<T, T, T>(a, b, outputs[0], ShiftOp<false>{});
    }
    return Status::Ok();
  });
}

// ---------------- Pow ----------------

// Base dtypes per opset 15 (float16/bfloat16 aside); opset < 12 also
// requires the exponent to have the base's dtype.
using PowBaseTypes = TypeList<float, double, int32_t, int64_t>;

// Integer power by squaring, wrapping on overflow. A negative exponent gives
// the truncated reciprocal: 1 for base 1, +-1 for base -1, 0 otherwise
// (including base 0, where the true value is infinite).
template <typename T, typename E>
T IntPow(T base, E exp) {
  if constexpr (std::is_signed_v<E>) {
    if (exp < 0) {
      if (base == 1) return 1;
      if (base == -1) return (exp % 2 == 0) ? 1 : static_cast<T>(-1);
      return 0;
    }
  }
  T result = 1;
  T b = base;
  auto e = static_cast<std::make_unsigned_t<E>>(exp);
  while (e != 0) {
    if (e & 1u) result = WrapMul(result, b);
    e >>= 1;
    if (e != 0) b = WrapMul(b, b);
  }
  return result;
}

template <typename T, typename E>
struct PowOp {
  T operator()(T x, E y) const {
    if constexpr (std::is_same_v<T, float> && std::is_same_v<E, float>) {
      return std::pow(x, y);
    } else if constexpr (std::is_floating_point_v<T>) {
      // Integer or double exponents: compute in double (exact for integral
      // exponents that fit, as numpy's promotion to float64 does).
      return static_cast<T>(std::pow(static_cast<double>(x), static_cast<double>(y)));
    } else if constexpr (std::is_integral_v<E>) {
      return IntPow(x, y);
    } else {
      return SaturatingCast<T>(std::pow(static_cast<double>(x), static_cast<double>(y)));
    }
  }
};

Status InferPow(const InferContext& ctx, std::vector<TensorType>* outputs) {
  const TensorType& x = ctx.inputs[0];
  const TensorType& y = ctx.inputs[1];
  ORRERY_RETURN_IF_ERROR(RequireTypeIn("Pow", x, "input X", PowBaseTypes{}));
  ORRERY_RETURN_IF_ERROR(RequireTypeIn("Pow", y, "input Y", NumericTypes{}));
  if (ctx.opset < 12 && x.dtype != y.dtype) {
    return Status::InvalidArgument("Pow: before opset 12 X and Y must have the same dtype, got " +
                                   std::string(DTypeName(x.dtype)) + " and " +
                                   std::string(DTypeName(y.dtype)));
  }
  ORRERY_ASSIGN_OR_RETURN(Shape out, BroadcastShapes(x.shape, y.shape));
  outputs->assign(1, TensorType{x.dtype, std::move(out)});
  return Status::Ok();
}

Status ComputePow(const KernelContext& ctx, std::span<Tensor> outputs) {
  const Tensor& x = *ctx.inputs[0];
  const Tensor& y = *ctx.inputs[1];
  return Dispatch(x.dtype(), PowBaseTypes{}, [&](auto xt) -> Status {
    using T = typename decltype(xt)::type;
    return Dispatch(y.dtype(), NumericTypes{}, [&](auto yt) -> Status {
      using E = typename decltype(yt)::type;
      if constexpr (std::is_same_v<T, float> && std::is_same_v<E, float>) {
        // x^2 (the decomposed LayerNorm's variance) is a multiply.
        if (y.num_elements() == 1 && y.data<float>()[0] == 2.0f) {
          BroadcastBinary<float, float, float>(x, x, outputs[0], MulOp{}, ctx.threads);
          return Status::Ok();
        }
      }
      BroadcastBinary<T, E, T>(x, y, outputs[0], PowOp<T, E>{}, ctx.threads);
      return Status::Ok();
    });
  });
}

KernelDef Binary(const char* op_type, InferFn infer, ComputeFn compute) {
  return KernelDef{.op_type = op_type,
                   .backend = Backend::kCpu,
                   .min_inputs = 2,
                   .max_inputs = 2,
                   .infer = infer,
                   .compute = compute,
                   .overwrites_outputs = true};
}

template <typename Op>
KernelDef Binary() {
  return Binary(Op::kName, InferBinary<Op>, ComputeBinary<Op>);
}

}  // namespace

Status RegisterElementwiseKernels(OpRegistry* registry) {
  ORRERY_RETURN_IF_ERROR(registry->Register(Binary<AddOp>()));
  ORRERY_RETURN_IF_ERROR(registry->Register(Binary<SubOp>()));
  ORRERY_RETURN_IF_ERROR(registry->Register(Binary<MulOp>()));
  ORRERY_RETURN_IF_ERROR(registry->Register(Binary<DivOp>()));
  ORRERY_RETURN_IF_ERROR(registry->Register(Binary("Mod", InferMod, ComputeMod)));
  ORRERY_RETURN_IF_ERROR(registry->Register(Binary("BitShift", InferBitShift, ComputeBitShift)));
  ORRERY_RETURN_IF_ERROR(registry->Register(Binary("Pow", InferPow, ComputePow)));
  return Status::Ok();
}

}  // namespace orrery::ops::cpu
