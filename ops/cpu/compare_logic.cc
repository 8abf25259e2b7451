// Comparisons, boolean logic and selection, with numpy broadcasting:
//   Equal (numeric and bool), Greater, Less, GreaterOrEqual, LessOrEqual
//   (numeric) -> bool; And, Or, Xor (bool, bool) -> bool; Not (bool);
//   Where(condition bool, X, Y) over any fixed-size dtype.
// Bool tensors are read as bytes and tested `!= 0` (see dtype_dispatch.h);
// bool outputs are always 0 or 1.
#include <cstring>
#include <string>

#include "ops/broadcast.h"
#include "ops/cpu/cpu_kernels.h"
#include "ops/cpu/dtype_dispatch.h"
#include "ops/cpu/elementwise_loops.h"
#include "ops/kernel_util.h"

namespace orrery::ops::cpu {
namespace {

struct EqualOp {
  static constexpr const char* kName = "Equal";
  static constexpr bool kAllowsBool = true;
  template <typename T> uint8_t operator()(T a, T b) const { return a == b; }
};
struct GreaterOp {
  static constexpr const char* kName = "Greater";
  static constexpr bool kAllowsBool = false;
  template <typename T> uint8_t operator()(T a, T b) const { return a > b; }
};
struct LessOp {
  static constexpr const char* kName = "Less";
  static constexpr bool kAllowsBool = false;
  template <typename T> uint8_t operator()(T a, T b) const { return a < b; }
};
struct GreaterOrEqualOp {
  static constexpr const char* kName = "GreaterOrEqual";
  static constexpr bool kAllowsBool = false;
  template <typename T> uint8_t operator()(T a, T b) const { return a >= b; }
};
struct LessOrEqualOp {
  static constexpr const char* kName = "LessOrEqual";
  static constexpr bool kAllowsBool = false;
  template <typename T> uint8_t operator()(T a, T b) const { return a <= b; }
};

struct AndOp {
  static constexpr const char* kName = "And";
  uint8_t operator()(uint8_t a, uint8_t b) const { return (a != 0) & (b != 0); }
};
struct OrOp {
  static constexpr const char* kName = "Or";
  uint8_t operator()(uint8_t a, uint8_t b) const { return (a != 0) | (b != 0); }
};
struct XorOp {
  static constexpr const char* kName = "Xor";
  uint8_t operator()(uint8_t a, uint8_t b) const { return (a != 0) ^ (b != 0); }
};
struct BoolEqualOp {
  uint8_t operator()(uint8_t a, uint8_t b) const { return (a != 0) == (b != 0); }
};

Status RequireSameDType(const char* op, const TensorType& a, const TensorType& b) {
  if (a.dtype == b.dtype) return Status::Ok();
  return Status::InvalidArgument(std::string(op) + ": inputs have different dtypes: " +
                                 std::string(DTypeName(a.dtype)) + " and " +
                                 std::string(DTypeName(b.dtype)));
}

template <typename Op>
Status InferCompare(const InferContext& ctx, std::vector<TensorType>* outputs) {
  const TensorType& a = ctx.inputs[0];
  const TensorType& b = ctx.inputs[1];
  if (!(Op::kAllowsBool && a.dtype == DType::kBool)) {
    ORRERY_RETURN_IF_ERROR(RequireTypeIn(Op::kName, a, "input A", NumericTypes{}));
  }
  ORRERY_RETURN_IF_ERROR(RequireSameDType(Op::kName, a, b));
  ORRERY_ASSIGN_OR_RETURN(Shape out, BroadcastShapes(a.shape, b.shape));
  outputs->assign(1, TensorType{DType::kBool, std::move(out)});
  return Status::Ok();
}

template <typename Op>
Status ComputeCompare(const KernelContext& ctx, std::span<Tensor> outputs) {
  const Tensor& a = *ctx.inputs[0];
  const Tensor& b = *ctx.inputs[1];
  if constexpr (Op::kAllowsBool) {
    if (a.dtype() == DType::kBool) {
      BroadcastBinary<uint8_t, uint8_t, uint8_t>(a, b, outputs[0], BoolEqualOp{});
      return Status::Ok();
    }
  }
  return Dispatch(a.dtype(), NumericTypes{}, [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    BroadcastBinary<T, T, uint8_t>(a, b, outputs[0], Op{});
    return Status::Ok();
  });
}

Status RequireBool(const char* op, const TensorType& t, const char* what) {
  if (!t.present()) return Status::InvalidArgument(std::string(op) + ": " + what + " is missing");
  if (t.dtype == DType::kBool) return Status::Ok();
  return UnsupportedDType(op, what, t.dtype, "bool");
}

template <typename Op>
Status InferLogic(const InferContext& ctx, std::vector<TensorType>* outputs) {
  ORRERY_RETURN_IF_ERROR(RequireBool(Op::kName, ctx.inputs[0], "input A"));
  ORRERY_RETURN_IF_ERROR(RequireBool(Op::kName, ctx.inputs[1], "input B"));
  ORRERY_ASSIGN_OR_RETURN(Shape out, BroadcastShapes(ctx.inputs[0].shape, ctx.inputs[1].shape));
  outputs->assign(1, TensorType{DType::kBool, std::move(out)});
  return Status::Ok();
}

template <typename Op>
Status ComputeLogic(const KernelContext& ctx, std::span<Tensor> outputs) {
  BroadcastBinary<uint8_t, uint8_t, uint8_t>(*ctx.inputs[0], *ctx.inputs[1], outputs[0], Op{});
  return Status::Ok();
}

Status InferNot(const InferContext& ctx, std::vector<TensorType>* outputs) {
  ORRERY_RETURN_IF_ERROR(RequireBool("Not", ctx.inputs[0], "input X"));
  outputs->assign(1, ctx.inputs[0]);
  return Status::Ok();
}

Status ComputeNot(const KernelContext& ctx, std::span<Tensor> outputs) {
  UnaryMap<uint8_t, uint8_t>(*ctx.inputs[0], outputs[0],
                             [](uint8_t x) -> uint8_t { return x == 0; });
  return Status::Ok();
}

// ---------------- Where ----------------

Status InferWhere(const InferContext& ctx, std::vector<TensorType>* outputs) {
  ORRERY_RETURN_IF_ERROR(RequireBool("Where", ctx.inputs[0], "input condition"));
  const TensorType& x = ctx.inputs[1];
  const TensorType& y = ctx.inputs[2];
  if (!x.present() || !y.present()) return Status::InvalidArgument("Where: X and Y are required");
  if (DTypeSize(x.dtype) == 0) {
    return UnsupportedDType("Where", "input X", x.dtype, "any fixed-size dtype");
  }
  ORRERY_RETURN_IF_ERROR(RequireSameDType("Where", x, y));
  const Shape shapes[] = {ctx.inputs[0].shape, x.shape, y.shape};
  ORRERY_ASSIGN_OR_RETURN(Shape out, BroadcastShapes(shapes));
  outputs->assign(1, TensorType{x.dtype, std::move(out)});
  return Status::Ok();
}

template <typename T>
void RunWhere(const Tensor& c, const Tensor& x, const Tensor& y, Tensor& out) {
  BroadcastTernary<uint8_t, T, T, T>(c, x, y, out,
                                     [](uint8_t cv, T xv, T yv) { return cv != 0 ? xv : yv; });
}

// Where only moves elements, so it dispatches on element size alone.
Status ComputeWhere(const KernelContext& ctx, std::span<Tensor> outputs) {
  const Tensor& c = *ctx.inputs[0];
  const Tensor& x = *ctx.inputs[1];
  const Tensor& y = *ctx.inputs[2];
  switch (DTypeSize(x.dtype())) {
    case 1: RunWhere<uint8_t>(c, x, y, outputs[0]); break;
    case 2: RunWhere<uint16_t>(c, x, y, outputs[0]); break;
    case 4: RunWhere<uint32_t>(c, x, y, outputs[0]); break;
    case 8: RunWhere<uint64_t>(c, x, y, outputs[0]); break;
    default:
      return UnsupportedDType("Where", "input X", x.dtype(), "any fixed-size dtype");
  }
  return Status::Ok();
}

KernelDef Def(const char* op_type, int n_inputs, InferFn infer, ComputeFn compute) {
  return KernelDef{.op_type = op_type,
                   .backend = Backend::kCpu,
                   .min_inputs = n_inputs,
                   .max_inputs = n_inputs,
                   .infer = infer,
                   .compute = compute};
}

template <typename Op>
KernelDef Compare() {
  return Def(Op::kName, 2, InferCompare<Op>, ComputeCompare<Op>);
}

template <typename Op>
KernelDef Logic() {
  return Def(Op::kName, 2, InferLogic<Op>, ComputeLogic<Op>);
}

}  // namespace

Status RegisterCompareLogicKernels(OpRegistry* registry) {
  ORRERY_RETURN_IF_ERROR(registry->Register(Compare<EqualOp>()));
  ORRERY_RETURN_IF_ERROR(registry->Register(Compare<GreaterOp>()));
  ORRERY_RETURN_IF_ERROR(registry->Register(Compare<LessOp>()));
  ORRERY_RETURN_IF_ERROR(registry->Register(Compare<GreaterOrEqualOp>()));
  ORRERY_RETURN_IF_ERROR(registry->Register(Compare<LessOrEqualOp>()));
  ORRERY_RETURN_IF_ERROR(registry->Register(Logic<AndOp>()));
  ORRERY_RETURN_IF_ERROR(registry->Register(Logic<OrOp>()));
  ORRERY_RETURN_IF_ERROR(registry->Register(Logic<XorOp>()));
  ORRERY_RETURN_IF_ERROR(registry->Register(Def("Not", 1, InferNot, ComputeNot)));
  ORRERY_RETURN_IF_ERROR(registry->Register(Def("Where", 3, InferWhere, ComputeWhere)));
  return Status::Ok();
}

}  // namespace orrery::ops::cpu
