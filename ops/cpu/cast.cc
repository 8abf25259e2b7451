// Cast (to = attribute) and CastLike (to = the second input's dtype) among
// float32, float64, int8..int64, uint8..uint64 and bool. Float -> integer
// conversions saturate and map NaN to 0 (out-of-range values are
// implementation-defined in ONNX and undefined in C++); integer -> integer
// wraps; anything -> bool is `!= 0`. string, float16 and bfloat16 are
// unsupported; the opset 19 `saturate` attribute only concerns float8 types
// and is ignored.
#include <cstring>
#include <string>
#include <type_traits>

#include "ops/cpu/cpu_kernels.h"
#include "ops/cpu/dtype_dispatch.h"
#include "ops/cpu/elementwise_loops.h"
#include "ops/kernel_util.h"

namespace orrery::ops::cpu {
namespace {

bool Castable(DType d) { return d == DType::kBool || InList(d, NumericTypes{}); }

std::string CastableNames() { return ListNames(NumericTypes{}) + ", bool"; }

// The ONNX TensorProto data type name for messages, including types Orrery's
// DType does not model (bfloat16 = 16, float8 = 17..20, ...).
std::string OnnxTypeName(int64_t to) {
  if (to >= 0 && to <= static_cast<int64_t>(DType::kUint64)) {
    return std::string(DTypeName(static_cast<DType>(to)));
  }
  switch (to) {
    case 14: return "complex64";
    case 15: return "complex128";
    case 16: return "bfloat16";
    case 17: case 18: case 19: case 20: return "float8";
    case 21: return "uint4";
    case 22: return "int4";
    default: return "data type " + std::to_string(to);
  }
}

Status CheckTarget(const char* op, int64_t to) {
  if (to > 0 && to <= static_cast<int64_t>(DType::kUint64) && Castable(static_cast<DType>(to))) {
    return Status::Ok();
  }
  if (to <= 0 || to > 22) {
    return Status::InvalidArgument(std::string(op) + ": 'to' is not a valid data type: " +
                                   std::to_string(to));
  }
  return Status::InvalidArgument(std::string(op) + ": unsupported target dtype " +
                                 OnnxTypeName(to) + " (supported: " + CastableNames() + ")");
}

Status CheckSource(const char* op, const TensorType& x) {
  if (!x.present()) return Status::InvalidArgument(std::string(op) + ": input is missing");
  if (Castable(x.dtype)) return Status::Ok();
  return UnsupportedDType(op, "input", x.dtype, CastableNames());
}

Result<DType> CastTarget(const Attributes& attrs) {
  ORRERY_ASSIGN_OR_RETURN(int64_t to, attrs.GetInt("to", -1));
  if (!attrs.Has("to")) return Status::InvalidArgument("Cast: attribute 'to' is required");
  ORRERY_RETURN_IF_ERROR(CheckTarget("Cast", to));
  return static_cast<DType>(to);
}

template <typename From>
Status CastFrom(const Tensor& x, Tensor& y) {
  if (y.dtype() == DType::kBool) {
    UnaryMap<From, uint8_t>(x, y, [](From v) -> uint8_t { return v != From{0}; });
    return Status::Ok();
  }
  return Dispatch(y.dtype(), NumericTypes{}, [&](auto tag) -> Status {
    using To = typename decltype(tag)::type;
    if constexpr (std::is_same_v<From, uint8_t>) {
      // Bool sources arrive as uint8 bytes; normalise them to 0 / 1.
      if (x.dtype() == DType::kBool) {
        UnaryMap<uint8_t, To>(x, y, [](uint8_t v) { return static_cast<To>(v != 0 ? 1 : 0); });
        return Status::Ok();
      }
    }
    UnaryMap<From, To>(x, y, [](From v) { return SaturatingCast<To>(v); });
    return Status::Ok();
  });
}

Status RunCast(const Tensor& x, Tensor& y) {
  if (x.dtype() == y.dtype() && x.dtype() != DType::kBool) {
    if (x.byte_size() > 0) std::memcpy(y.raw_data(), x.raw_data(), x.byte_size());
    return Status::Ok();
  }
  if (x.dtype() == DType::kBool) {
    // uint8_t storage; CastFrom<uint8_t> sees the bool dtype and normalises.
    if (y.dtype() == DType::kBool) {
      UnaryMap<uint8_t, uint8_t>(x, y, [](uint8_t v) -> uint8_t { return v != 0; });
      return Status::Ok();
    }
    return CastFrom<uint8_t>(x, y);
  }
  return Dispatch(x.dtype(), NumericTypes{}, [&](auto tag) -> Status {
    return CastFrom<typename decltype(tag)::type>(x, y);
  });
}

Status InferCast(const InferContext& ctx, std::vector<TensorType>* outputs) {
  ORRERY_RETURN_IF_ERROR(CheckSource("Cast", ctx.inputs[0]));
  ORRERY_ASSIGN_OR_RETURN(DType to, CastTarget(ctx.attrs));
  outputs->assign(1, TensorType{to, ctx.inputs[0].shape});
  return Status::Ok();
}

Status ComputeCast(const KernelContext& ctx, std::span<Tensor> outputs) {
  return RunCast(*ctx.inputs[0], outputs[0]);
}

Status InferCastLike(const InferContext& ctx, std::vector<TensorType>* outputs) {
  ORRERY_RETURN_IF_ERROR(CheckSource("CastLike", ctx.inputs[0]));
  const TensorType& like = ctx.inputs[1];
  if (!like.present()) return Status::InvalidArgument("CastLike: target_type is missing");
  ORRERY_RETURN_IF_ERROR(CheckTarget("CastLike", static_cast<int64_t>(like.dtype)));
  outputs->assign(1, TensorType{like.dtype, ctx.inputs[0].shape});
  return Status::Ok();
}

}  // namespace

Status RegisterCastKernels(OpRegistry* registry) {
  ORRERY_RETURN_IF_ERROR(registry->Register(KernelDef{.op_type = "Cast",
                                                      .backend = Backend::kCpu,
                                                      .min_inputs = 1,
                                                      .max_inputs = 1,
                                                      .infer = InferCast,
                                                      .compute = ComputeCast}));
  ORRERY_RETURN_IF_ERROR(registry->Register(KernelDef{.op_type = "CastLike",
                                                      .backend = Backend::kCpu,
                                                      .min_inputs = 2,
                                                      .max_inputs = 2,
                                                      .infer = InferCastLike,
                                                      .compute = ComputeCast}));
  return Status::Ok();
}

}  // namespace orrery::ops::cpu
