// Activations (float32 and float64 unless noted):
//   Relu (also int8..int64 from opset 14), LeakyRelu, PRelu (slope
//   broadcast unidirectionally to X; also int32/int64/uint32/uint64),
//   Sigmoid, HardSigmoid, HardSwish, Tanh, Elu, Selu, Celu, Softplus,
//   Softsign, ThresholdedRelu, Gelu (opset 20; approximate none/tanh), Mish,
//   Shrink, and Clip (opset < 11: min/max attributes, float only; opset >= 11:
//   optional single-element min/max inputs, every numeric dtype).
#include <cmath>
#include <limits>
#include <numbers>
#include <string>
#include <type_traits>

#include "ops/broadcast.h"
#include "ops/cpu/cpu_kernels.h"
#include "ops/cpu/unary_kernel.h"
#include "ops/kernel_util.h"

namespace orrery::ops::cpu {
namespace {

// NaN stays NaN, as with numpy.maximum(x, 0).
struct ReluOp {
  static constexpr const char* kName = "Relu";
  VecUnaryOp VecUnary() const { return {vec::Unary::kRelu}; }
  using Types = SignedNumericTypes;
  template <typename T> T operator()(T x) const {
    if constexpr (std::is_floating_point_v<T>) return x > T{0} ? x : (x == x ? T{0} : x);
    else return x > T{0} ? x : T{0};
  }
};

Status InferRelu(const InferContext& ctx, std::vector<TensorType>* outputs) {
  if (ctx.opset < 14 && ctx.inputs[0].present() && !InList(ctx.inputs[0].dtype, FloatTypes{})) {
    return UnsupportedDType("Relu", "input X before opset 14", ctx.inputs[0].dtype,
                            ListNames(FloatTypes{}));
  }
  return InferUnary<ReluOp>(ctx, outputs);
}

struct SigmoidOp {
  static constexpr const char* kName = "Sigmoid";
  VecUnaryOp VecUnary() const { return {vec::Unary::kSigmoid}; }
  using Types = FloatTypes;
  // Never exponentiates a positive number, so large |x| cannot overflow.
  template <typename T> T operator()(T x) const {
    if (x >= T{0}) return T{1} / (T{1} + std::exp(-x));
    const T e = std::exp(x);
    return e / (T{1} + e);
  }
};

struct TanhOp {
  static constexpr const char* kName = "Tanh";
  VecUnaryOp VecUnary() const { return {vec::Unary::kTanh}; }
  using Types = FloatTypes;
  template <typename T> T operator()(T x) const { return std::tanh(x); }
};

struct SoftsignOp {
  static constexpr const char* kName = "Softsign";
  using Types = FloatTypes;
  template <typename T> T operator()(T x) const { return x / (T{1} + std::abs(x)); }
};

// log(1 + exp(x)) without overflow for large x.
template <typename T>
T Softplus(T x) {
  return x > T{0} ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
}

struct SoftplusOp {
  static constexpr const char* kName = "Softplus";
  VecUnaryOp VecUnary() const { return {vec::Unary::kSoftplus}; }
  using Types = FloatTypes;
  template <typename T> T operator()(T x) const { return Softplus(x); }
};

struct MishOp {
  static constexpr const char* kName = "Mish";
  using Types = FloatTypes;
  template <typename T> T operator()(T x) const { return x * std::tanh(Softplus(x)); }
};

struct HardSwishOp {
  static constexpr const char* kName = "HardSwish";
  VecUnaryOp VecUnary() const { return {vec::Unary::kHardSwish}; }
  using Types = FloatTypes;
  template <typename T> T operator()(T x) const {
    const T v = static_cast<T>(1.0 / 6.0) * x + static_cast<T>(0.5);
    return x * (v < T{0} ? T{0} : (v > T{1} ? T{1} : v));
  }
};

// Ops with float attributes read them once per call, validated.
struct LeakyReluOp {
  static constexpr const char* kName = "LeakyRelu";
  using Types = FloatTypes;
  float alpha = 0.01f;
  VecUnaryOp VecUnary() const { return {vec::Unary::kLeakyRelu, alpha}; }
  static Result<LeakyReluOp> FromAttrs(const Attributes& attrs) {
    ORRERY_ASSIGN_OR_RETURN(float alpha, attrs.GetFloat("alpha", 0.01f));
    return LeakyReluOp{.alpha = alpha};
  }
  template <typename T> T operator()(T x) const { return x < T{0} ? static_cast<T>(alpha) * x : x; }
};

struct HardSigmoidOp {
  static constexpr const char* kName = "HardSigmoid";
  using Types = FloatTypes;
  float alpha = 0.2f, beta = 0.5f;
  VecUnaryOp VecUnary() const { return {vec::Unary::kHardSigmoid, alpha, beta}; }
  static Result<HardSigmoidOp> FromAttrs(const Attributes& attrs) {
    ORRERY_ASSIGN_OR_RETURN(float alpha, attrs.GetFloat("alpha", 0.2f));
    ORRERY_ASSIGN_OR_RETURN(float beta, attrs.GetFloat("beta", 0.5f));
    return HardSigmoidOp{.alpha = alpha, .beta = beta};
  }
  template <typename T> T operator()(T x) const {
    const T v = static_cast<T>(alpha) * x + static_cast<T>(beta);
    return v < T{0} ? T{0} : (v > T{1} ? T{1} : v);
  }
};

struct EluOp {
  static constexpr const char* kName = "Elu";
  using Types = FloatTypes;
  float alpha = 1.0f;
  VecUnaryOp VecUnary() const { return {vec::Unary::kElu, alpha}; }
  static Result<EluOp> FromAttrs(const Attributes& attrs) {
    ORRERY_ASSIGN_OR_RETURN(float alpha, attrs.GetFloat("alpha", 1.0f));
    return EluOp{.alpha = alpha};
  }
  template <typename T> T operator()(T x) const {
    return x < T{0} ? static_cast<T>(alpha) * std::expm1(x) : x;
  }
};

struct SeluOp {
  static constexpr const char* kName = "Selu";
  using Types = FloatTypes;
  float alpha = 1.67326319217681884765625f, gamma = 1.05070102214813232421875f;
  VecUnaryOp VecUnary() const { return {vec::Unary::kSelu, alpha, gamma}; }
  static Result<SeluOp> FromAttrs(const Attributes& attrs) {
    ORRERY_ASSIGN_OR_RETURN(float alpha, attrs.GetFloat("alpha", 1.67326319217681884765625f));
    ORRERY_ASSIGN_OR_RETURN(float gamma, attrs.GetFloat("gamma", 1.05070102214813232421875f));
    return SeluOp{.alpha = alpha, .gamma = gamma};
  }
  template <typename T> T operator()(T x) const {
    const T g = static_cast<T>(gamma);
    return x > T{0} ? g * x : g * static_cast<T>(alpha) * std::expm1(x);
  }
};

struct CeluOp {
  static constexpr const char* kName = "Celu";
  using Types = FloatTypes;
  float alpha = 1.0f;
  static Result<CeluOp> FromAttrs(const Attributes& attrs) {
    ORRERY_ASSIGN_OR_RETURN(float alpha, attrs.GetFloat("alpha", 1.0f));
    if (alpha == 0.0f || !std::isfinite(alpha)) {
      return Status::InvalidArgument("Celu: alpha must be finite and non-zero, got " +
                                     std::to_string(alpha));
    }
    return CeluOp{.alpha = alpha};
  }
  template <typename T> T operator()(T x) const {
    const T a = static_cast<T>(alpha);
    return x > T{0} ? x : a * std::expm1(x / a);
  }
};

struct ThresholdedReluOp {
  static constexpr const char* kName = "ThresholdedRelu";
  using Types = FloatTypes;
  float alpha = 1.0f;
  static Result<ThresholdedReluOp> FromAttrs(const Attributes& attrs) {
    ORRERY_ASSIGN_OR_RETURN(float alpha, attrs.GetFloat("alpha", 1.0f));
    return ThresholdedReluOp{.alpha = alpha};
  }
  template <typename T> T operator()(T x) const { return x > static_cast<T>(alpha) ? x : T{0}; }
};

struct ShrinkOp {
  static constexpr const char* kName = "Shrink";
  using Types = FloatTypes;
  float bias = 0.0f, lambd = 0.5f;
  static Result<ShrinkOp> FromAttrs(const Attributes& attrs) {
    ORRERY_ASSIGN_OR_RETURN(float bias, attrs.GetFloat("bias", 0.0f));
    ORRERY_ASSIGN_OR_RETURN(float lambd, attrs.GetFloat("lambd", 0.5f));
    return ShrinkOp{.bias = bias, .lambd = lambd};
  }
  template <typename T> T operator()(T x) const {
    const T l = static_cast<T>(lambd), b = static_cast<T>(bias);
    return x < -l ? x + b : (x > l ? x - b : T{0});
  }
};

struct GeluOp {
  static constexpr const char* kName = "Gelu";
  using Types = FloatTypes;
  bool tanh_approx = false;
  VecUnaryOp VecUnary() const {
    return {tanh_approx ? vec::Unary::kGeluTanh : vec::Unary::kGelu};
  }
  static Result<GeluOp> FromAttrs(const Attributes& attrs) {
    const Result<std::string> approx = attrs.GetString("approximate", "none");
    if (!approx.ok()) return approx.status();
    if (*approx != "none" && *approx != "tanh") {
      return Status::InvalidArgument("Gelu: approximate must be 'none' or 'tanh', got '" +
                                     *approx + "'");
    }
    return GeluOp{.tanh_approx = *approx == "tanh"};
  }
  template <typename T> T operator()(T x) const {
    if (tanh_approx) {
      const T k = static_cast<T>(std::sqrt(2.0 / std::numbers::pi));
      return T{0.5} * x * (T{1} + std::tanh(k * (x + static_cast<T>(0.044715) * x * x * x)));
    }
    return T{0.5} * x * (T{1} + std::erf(x * static_cast<T>(std::numbers::sqrt2 / 2)));
  }
};

// ---------------- PRelu ----------------

using PReluTypes = FloatAndWideIntTypes;

struct PReluOp {
  template <typename T> T operator()(T x, T slope) const {
    if constexpr (std::is_integral_v<T>) return x < T{0} ? WrapMul(x, slope) : x;
    else return x < T{0} ? x * slope : x;
  }
};

Status InferPRelu(const InferContext& ctx, std::vector<TensorType>* outputs) {
  const TensorType& x = ctx.inputs[0];
  const TensorType& slope = ctx.inputs[1];
  ORRERY_RETURN_IF_ERROR(RequireTypeIn("PRelu", x, "input X", PReluTypes{}));
  if (slope.dtype != x.dtype) {
    return Status::InvalidArgument("PRelu: slope dtype " + std::string(DTypeName(slope.dtype)) +
                                   " differs from X dtype " + std::string(DTypeName(x.dtype)));
  }
  if (!IsUnidirectionalBroadcastable(slope.shape, x.shape)) {
    return Status::InvalidArgument("PRelu: slope shape " + ShapeToString(slope.shape) +
                                   " does not broadcast to X shape " + ShapeToString(x.shape));
  }
  outputs->assign(1, x);
  return Status::Ok();
}

Status ComputePRelu(const KernelContext& ctx, std::span<Tensor> outputs) {
  const Tensor& x = *ctx.inputs[0];
  const Tensor& slope = *ctx.inputs[1];
  return Dispatch(x.dtype(), PReluTypes{}, [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    BroadcastBinary<T, T, T>(x, slope, outputs[0], PReluOp{});
    return Status::Ok();
  });
}

// ---------------- Clip ----------------

// min > max is allowed: every element becomes max (numpy.clip). NaN stays NaN.
template <typename T>
struct ClipOp {
  T lo, hi;
  T operator()(T x) const {
    const T v = x < lo ? lo : x;
    return v > hi ? hi : v;
  }
  VecUnaryOp VecUnary() const
    requires std::is_same_v<T, float>
  {
    return {vec::Unary::kClip, lo, hi};
  }
};

Status InferClip(const InferContext& ctx, std::vector<TensorType>* outputs) {
  const TensorType& x = ctx.inputs[0];
  if (ctx.opset < 11) {
    ORRERY_RETURN_IF_ERROR(RequireTypeIn("Clip", x, "input X", FloatTypes{}));
    if (ctx.inputs.size() > 1) {
      return Status::InvalidArgument("Clip: min/max are attributes before opset 11, not inputs");
    }
    ORRERY_RETURN_IF_ERROR(ctx.attrs.GetFloat("min", 0.0f).status());
    ORRERY_RETURN_IF_ERROR(ctx.attrs.GetFloat("max", 0.0f).status());
  } else {
    ORRERY_RETURN_IF_ERROR(RequireTypeIn("Clip", x, "input X", NumericTypes{}));
    for (size_t i = 1; i < ctx.inputs.size(); ++i) {
      const TensorType& bound = ctx.inputs[i];
      if (!bound.present()) continue;
      const char* what = i == 1 ? "min" : "max";
      if (bound.dtype != x.dtype) {
        return Status::InvalidArgument(std::string("Clip: ") + what + " dtype " +
                                       std::string(DTypeName(bound.dtype)) +
                                       " differs from input dtype " +
                                       std::string(DTypeName(x.dtype)));
      }
      if (NumElements(bound.shape) != 1) {
        return Status::InvalidArgument(std::string("Clip: ") + what +
                                       " must be a scalar, got shape " +
                                       ShapeToString(bound.shape));
      }
    }
  }
  outputs->assign(1, x);
  return Status::Ok();
}

template <typename T>
Result<ClipOp<T>> ClipBounds(const KernelContext& ctx) {
  ClipOp<T> op{std::numeric_limits<T>::lowest(), std::numeric_limits<T>::max()};
  if (ctx.opset < 11) {
    if (ctx.attrs.Has("min")) {
      ORRERY_ASSIGN_OR_RETURN(float lo, ctx.attrs.GetFloat("min", 0.0f));
      op.lo = static_cast<T>(lo);
    }
    if (ctx.attrs.Has("max")) {
      ORRERY_ASSIGN_OR_RETURN(float hi, ctx.attrs.GetFloat("max", 0.0f));
      op.hi = static_cast<T>(hi);
    }
    return op;
  }
  // An absent bound is unbounded (numpy.clip with -inf / inf).
  if constexpr (std::is_floating_point_v<T>) {
    op.lo = -std::numeric_limits<T>::infinity();
    op.hi = std::numeric_limits<T>::infinity();
  }
  const Tensor* lo = ctx.inputs.size() > 1 ? ctx.inputs[1] : nullptr;
  const Tensor* hi = ctx.inputs.size() > 2 ? ctx.inputs[2] : nullptr;
  if (lo != nullptr) op.lo = lo->data<T>()[0];
  if (hi != nullptr) op.hi = hi->data<T>()[0];
  return op;
}

Status ComputeClip(const KernelContext& ctx, std::span<Tensor> outputs) {
  const Tensor& x = *ctx.inputs[0];
  return Dispatch(x.dtype(), NumericTypes{}, [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    ORRERY_ASSIGN_OR_RETURN(const ClipOp<T> op, ClipBounds<T>(ctx));
    UnaryMap<T, T>(x, outputs[0], op, ctx.threads);
    return Status::Ok();
  });
}

}  // namespace

Status RegisterActivationKernels(OpRegistry* registry) {
  for (KernelDef def :
       {UnaryKernel<ReluOp>(InferRelu), UnaryKernel<SigmoidOp>(), UnaryKernel<TanhOp>(),
        UnaryKernel<SoftsignOp>(), UnaryKernel<SoftplusOp>(), UnaryKernel<MishOp>(),
        UnaryKernel<HardSwishOp>(), UnaryKernel<LeakyReluOp>(), UnaryKernel<HardSigmoidOp>(),
        UnaryKernel<EluOp>(), UnaryKernel<SeluOp>(), UnaryKernel<CeluOp>(),
        UnaryKernel<ThresholdedReluOp>(), UnaryKernel<ShrinkOp>(), UnaryKernel<GeluOp>()}) {
    ORRERY_RETURN_IF_ERROR(registry->Register(std::move(def)));
  }
  ORRERY_RETURN_IF_ERROR(registry->Register(KernelDef{.op_type = "PRelu",
                                                      .backend = Backend::kCpu,
                                                      .min_inputs = 2,
                                                      .max_inputs = 2,
                                                      .infer = InferPRelu,
                                                      .compute = ComputePRelu,
                                                      .overwrites_outputs = true}));
  ORRERY_RETURN_IF_ERROR(registry->Register(KernelDef{.op_type = "Clip",
                                                      .backend = Backend::kCpu,
                                                      .min_inputs = 1,
                                                      .max_inputs = 3,
                                                      .infer = InferClip,
                                                      .compute = ComputeClip,
                                                      .overwrites_outputs = true}));
  return Status::Ok();
}

}  // namespace orrery::ops::cpu
