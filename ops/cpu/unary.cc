// Elementwise math on one tensor:
//   Abs, Sign (every numeric dtype), Neg (signed numeric; wraps at INT_MIN),
//   Sqrt, Exp, Log, Reciprocal, Erf, Floor, Ceil, Round (half to even),
//   Sin, Cos, Tan, Asin, Acos, Atan, Sinh, Cosh, Asinh, Acosh, Atanh
//   (float32, float64), IsNaN, IsInf (float -> bool).
#include <cmath>
#include <limits>
#include <type_traits>

#include "ops/cpu/cpu_kernels.h"
#include "ops/cpu/unary_kernel.h"

namespace orrery::ops::cpu {
namespace {

struct AbsOp {
  static constexpr const char* kName = "Abs";
  using Types = NumericTypes;
  template <typename T> T operator()(T x) const {
    if constexpr (std::is_unsigned_v<T>) return x;
    else if constexpr (std::is_integral_v<T>) return x < 0 ? WrapNeg(x) : x;
    else return std::abs(x);
  }
};
struct NegOp {
  static constexpr const char* kName = "Neg";
  using Types = SignedNumericTypes;
  template <typename T> T operator()(T x) const {
    if constexpr (std::is_integral_v<T>) return WrapNeg(x);
    else return -x;
  }
};
struct SignOp {
  static constexpr const char* kName = "Sign";
  using Types = NumericTypes;
  template <typename T> T operator()(T x) const {
    if constexpr (std::is_floating_point_v<T>) {
      return x > 0 ? T{1} : (x < 0 ? T{-1} : x);  // 0 and NaN map to themselves
    } else if constexpr (std::is_unsigned_v<T>) {
      return x > 0 ? T{1} : T{0};
    } else {
      return static_cast<T>((x > 0) - (x < 0));
    }
  }
};

// Float-only ops: one functor per std:: function.
#define ORRERY_FLOAT_UNARY(Name, expr)                      \
  struct Name##Op {                                         \
    static constexpr const char* kName = #Name;             \
    using Types = FloatTypes;                               \
    template <typename T> T operator()(T x) const { return expr; } \
  };

// The same with a vectorised float32 form.
#define ORRERY_FLOAT_UNARY_VEC(Name, expr, kind)                   \
  struct Name##Op {                                                \
    static constexpr const char* kName = #Name;                    \
    using Types = FloatTypes;                                      \
    template <typename T> T operator()(T x) const { return expr; } \
    VecUnaryOp VecUnary() const { return {vec::Unary::kind}; }     \
  };

ORRERY_FLOAT_UNARY_VEC(Sqrt, std::sqrt(x), kSqrt)
ORRERY_FLOAT_UNARY_VEC(Exp, std::exp(x), kExp)
ORRERY_FLOAT_UNARY_VEC(Log, std::log(x), kLog)
ORRERY_FLOAT_UNARY_VEC(Reciprocal, T{1} / x, kReciprocal)
ORRERY_FLOAT_UNARY_VEC(Erf, std::erf(x), kErf)
ORRERY_FLOAT_UNARY(Floor, std::floor(x))
ORRERY_FLOAT_UNARY(Ceil, std::ceil(x))
// nearbyint rounds half to even in the default rounding mode, as ONNX and
// numpy.round do.
ORRERY_FLOAT_UNARY(Round, std::nearbyint(x))
ORRERY_FLOAT_UNARY(Sin, std::sin(x))
ORRERY_FLOAT_UNARY(Cos, std::cos(x))
ORRERY_FLOAT_UNARY(Tan, std::tan(x))
ORRERY_FLOAT_UNARY(Asin, std::asin(x))
ORRERY_FLOAT_UNARY(Acos, std::acos(x))
ORRERY_FLOAT_UNARY(Atan, std::atan(x))
ORRERY_FLOAT_UNARY(Sinh, std::sinh(x))
ORRERY_FLOAT_UNARY(Cosh, std::cosh(x))
ORRERY_FLOAT_UNARY(Asinh, std::asinh(x))
ORRERY_FLOAT_UNARY(Acosh, std::acosh(x))
ORRERY_FLOAT_UNARY(Atanh, std::atanh(x))
#undef ORRERY_FLOAT_UNARY
#undef ORRERY_FLOAT_UNARY_VEC

struct IsNaNOp {
  static constexpr const char* kName = "IsNaN";
  static constexpr bool kBoolOutput = true;
  using Types = FloatTypes;
  template <typename T> bool operator()(T x) const { return x != x; }
};

struct IsInfOp {
  static constexpr const char* kName = "IsInf";
  static constexpr bool kBoolOutput = true;
  using Types = FloatTypes;
  bool positive = true;
  bool negative = true;

  static Result<IsInfOp> FromAttrs(const Attributes& attrs) {
    ORRERY_ASSIGN_OR_RETURN(int64_t pos, attrs.GetInt("detect_positive", 1));
    ORRERY_ASSIGN_OR_RETURN(int64_t neg, attrs.GetInt("detect_negative", 1));
    return IsInfOp{.positive = pos != 0, .negative = neg != 0};
  }
  template <typename T> bool operator()(T x) const {
    return (positive && x == std::numeric_limits<T>::infinity()) ||
           (negative && x == -std::numeric_limits<T>::infinity());
  }
};

}  // namespace

Status RegisterUnaryKernels(OpRegistry* registry) {
  for (KernelDef def :
       {UnaryKernel<AbsOp>(), UnaryKernel<NegOp>(), UnaryKernel<SignOp>(),
        UnaryKernel<SqrtOp>(), UnaryKernel<ExpOp>(), UnaryKernel<LogOp>(),
        UnaryKernel<ReciprocalOp>(), UnaryKernel<ErfOp>(), UnaryKernel<FloorOp>(),
        UnaryKernel<CeilOp>(), UnaryKernel<RoundOp>(), UnaryKernel<SinOp>(),
        UnaryKernel<CosOp>(), UnaryKernel<TanOp>(), UnaryKernel<AsinOp>(),
        UnaryKernel<AcosOp>(), UnaryKernel<AtanOp>(), UnaryKernel<SinhOp>(),
        UnaryKernel<CoshOp>(), UnaryKernel<AsinhOp>(), UnaryKernel<AcoshOp>(),
        UnaryKernel<AtanhOp>(), UnaryKernel<IsNaNOp>(), UnaryKernel<IsInfOp>()}) {
    ORRERY_RETURN_IF_ERROR(registry->Register(std::move(def)));
  }
  return Status::Ok();
}

}  // namespace orrery::ops::cpu
