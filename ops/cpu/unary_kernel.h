// A generic one-input, one-output elementwise kernel built from an op
// functor (unary.cc math functions, activations.cc). An op struct provides:
//   static constexpr const char* kName;   // the ONNX op type
//   using Types = TypeList<...>;          // supported input dtypes
//   template <typename T> T operator()(T x) const;
// and optionally:
//   static constexpr bool kBoolOutput = true;       // output is bool (IsNaN)
//   static Result<Op> FromAttrs(const Attributes&); // validated attributes
//   VecUnaryOp VecUnary() const;  // its vectorised float32 form (elementwise_loops.h)
#pragma once

#include <type_traits>
#include <vector>

#include "ops/cpu/dtype_dispatch.h"
#include "ops/cpu/elementwise_loops.h"
#include "ops/registry.h"

namespace orrery::ops::cpu {

template <typename Op>
Result<Op> MakeUnaryOp(const Attributes& attrs) {
  if constexpr (requires { Op::FromAttrs(attrs); }) {
    return Op::FromAttrs(attrs);
  } else {
    (void)attrs;
    return Op{};
  }
}

template <typename Op>
constexpr bool UnaryBoolOutput() {
  if constexpr (requires { Op::kBoolOutput; }) return Op::kBoolOutput;
  else return false;
}

template <typename Op>
Status InferUnary(const InferContext& ctx, std::vector<TensorType>* outputs) {
  ORRERY_RETURN_IF_ERROR(RequireTypeIn(Op::kName, ctx.inputs[0], "input X", typename Op::Types{}));
  ORRERY_RETURN_IF_ERROR(MakeUnaryOp<Op>(ctx.attrs).status());
  const DType out = UnaryBoolOutput<Op>() ? DType::kBool : ctx.inputs[0].dtype;
  outputs->assign(1, TensorType{out, ctx.inputs[0].shape});
  return Status::Ok();
}

template <typename Op>
Status ComputeUnary(const KernelContext& ctx, std::span<Tensor> outputs) {
  ORRERY_ASSIGN_OR_RETURN(const Op op, MakeUnaryOp<Op>(ctx.attrs));
  const Tensor& x = *ctx.inputs[0];
  return Dispatch(x.dtype(), typename Op::Types{}, [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    using Out = std::conditional_t<UnaryBoolOutput<Op>(), uint8_t, T>;
    if constexpr (std::is_same_v<T, Out>) {
      UnaryMap<T, Out>(x, outputs[0], op, ctx.threads);
    } else {
      UnaryMap<T, Out>(x, outputs[0], [op](T v) { return static_cast<Out>(op(v)); }, ctx.threads);
    }
    return Status::Ok();
  });
}

template <typename Op>
KernelDef UnaryKernel(InferFn infer = InferUnary<Op>) {
  return KernelDef{.op_type = Op::kName,
                   .backend = Backend::kCpu,
                   .min_inputs = 1,
                   .max_inputs = 1,
                   .infer = infer,
                   .compute = ComputeUnary<Op>,
                   .overwrites_outputs = true};
}

}  // namespace orrery::ops::cpu
