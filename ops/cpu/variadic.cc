// Variadic elementwise ops with numpy broadcasting over all inputs:
// Max, Min (every numeric dtype; NaN propagates like numpy.maximum),
// Sum, Mean (float32, float64).
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

struct MaxOp {
  static constexpr vec::Binary kVecBinary = vec::Binary::kMax;
  static constexpr const char* kName = "Max";
  using Types = NumericTypes;
  template <typename T> T operator()(T a, T b) const {
    // `|`, not `||`: no branch, so the loop vectorises.
    if constexpr (std::is_floating_point_v<T>) return ((a > b) | (a != a)) ? a : b;
    else return a > b ? a : b;
  }
};
struct MinOp {
  static constexpr vec::Binary kVecBinary = vec::Binary::kMin;
  static constexpr const char* kName = "Min";
  using Types = NumericTypes;
  template <typename T> T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) return ((a < b) | (a != a)) ? a : b;
    else return a < b ? a : b;
  }
};
struct SumOp {
  static constexpr vec::Binary kVecBinary = vec::Binary::kAdd;
  static constexpr const char* kName = "Sum";
  using Types = FloatTypes;
  template <typename T> T operator()(T a, T b) const { return a + b; }
};
struct MeanOp : SumOp {
  static constexpr const char* kName = "Mean";
};

template <typename Op>
Status InferVariadic(const InferContext& ctx, std::vector<TensorType>* outputs) {
  if (ctx.inputs.empty()) {
    return Status::InvalidArgument(std::string(Op::kName) + ": needs at least one input");
  }
  std::vector<Shape> shapes;
  shapes.reserve(ctx.inputs.size());
  for (size_t i = 0; i < ctx.inputs.size(); ++i) {
    const std::string what = "input " + std::to_string(i);
    ORRERY_RETURN_IF_ERROR(RequireTypeIn(Op::kName, ctx.inputs[i], what, typename Op::Types{}));
    if (ctx.inputs[i].dtype != ctx.inputs[0].dtype) {
      return Status::InvalidArgument(std::string(Op::kName) + ": inputs have different dtypes: " +
                                     std::string(DTypeName(ctx.inputs[0].dtype)) + " and " +
                                     std::string(DTypeName(ctx.inputs[i].dtype)));
    }
    shapes.push_back(ctx.inputs[i].shape);
  }
  ORRERY_ASSIGN_OR_RETURN(Shape out, BroadcastShapes(shapes));
  outputs->assign(1, TensorType{ctx.inputs[0].dtype, std::move(out)});
  return Status::Ok();
}

template <typename Op>
Status ComputeVariadic(const KernelContext& ctx, std::span<Tensor> outputs) {
  Tensor& y = outputs[0];
  for (const Tensor* t : ctx.inputs) {
    if (t == nullptr) return Status::InvalidArgument(std::string(Op::kName) + ": missing input");
  }
  return Dispatch(y.dtype(), typename Op::Types{}, [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    if (ctx.inputs.size() == 2) {
      BroadcastBinary<T, T, T>(*ctx.inputs[0], *ctx.inputs[1], y, Op{}, ctx.threads);
    } else {
      BroadcastFold<T>(ctx.inputs, y, Op{});
    }
    if constexpr (std::is_same_v<Op, MeanOp>) {
      // Divide rather than scale by 1/k, to round like numpy's mean.
      const T count = static_cast<T>(ctx.inputs.size());
      T* yd = y.data<T>();
      const int64_t n = y.num_elements();
      for (int64_t i = 0; i < n; ++i) yd[i] = yd[i] / count;
    }
    return Status::Ok();
  });
}

template <typename Op>
KernelDef Variadic() {
  return KernelDef{.op_type = Op::kName,
                   .backend = Backend::kCpu,
                   .min_inputs = 1,
                   .max_inputs = std::numeric_limits<int>::max(),
                   .infer = InferVariadic<Op>,
                   .compute = ComputeVariadic<Op>};
}

}  // namespace

Status RegisterVariadicKernels(OpRegistry* registry) {
  ORRERY_RETURN_IF_ERROR(registry->Register(Variadic<MaxOp>()));
  ORRERY_RETURN_IF_ERROR(registry->Register(Variadic<MinOp>()));
  ORRERY_RETURN_IF_ERROR(registry->Register(Variadic<SumOp>()));
  ORRERY_RETURN_IF_ERROR(registry->Register(Variadic<MeanOp>()));
  return Status::Ok();
}

}  // namespace orrery::ops::cpu
