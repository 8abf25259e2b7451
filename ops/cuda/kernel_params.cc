#include "ops/cuda/kernel_params.h"

#include <algorithm>
#include <limits>

#include "ops/conv_util.h"
#include "ops/cpu/gemm/fusion.h"
#include "ops/kernel_util.h"

namespace orrery::ops::cuda {
namespace {

constexpr std::string_view kUnary[] = {"Relu",        "LeakyRelu", "Clip", "Sigmoid",
                                       "Tanh",        "HardSigmoid", "HardSwish", "Exp",
                                       "Neg",         "Abs",       "Sqrt"};
constexpr std::string_view kBinary[] = {"Add", "Sub", "Mul", "Div", "Max", "Min"};
constexpr std::string_view kViews[] = {"Flatten", "Reshape", "Squeeze", "Unsqueeze", "Identity"};
constexpr std::string_view kOthers[] = {"Conv",      "Gemm",        "MatMul",
                                        "BatchNormalization",       "MaxPool",
                                        "AveragePool", "GlobalAveragePool", "Softmax", "Concat"};

bool In(std::string_view op, std::span<const std::string_view> list) {
  return std::find(list.begin(), list.end(), op) != list.end();
}

Status Refuse(std::string_view op, const std::string& why) {
  return Status::Unimplemented(std::string(op) + " on CUDA: " + why);
}

// Every present input and output float32.
Status RequireFloat(std::string_view op, std::span<const TensorType> inputs,
                    std::span<const TensorType> outputs, size_t float_inputs) {
  for (size_t i = 0; i < inputs.size() && i < float_inputs; ++i) {
    if (inputs[i].present() && inputs[i].dtype != DType::kFloat32) {
      return Refuse(op, "input " + std::to_string(i) + " is " +
                            std::string(DTypeName(inputs[i].dtype)) + ", only float32 is supported");
    }
  }
  for (const TensorType& t : outputs) {
    if (t.present() && t.dtype != DType::kFloat32) {
      return Refuse(op, "output is " + std::string(DTypeName(t.dtype)) +
                            ", only float32 is supported");
    }
  }
  return Status::Ok();
}

Result<float> ScalarValue(const Tensor* t, float fallback) {
  if (t == nullptr) return fallback;
  if (t->dtype() != DType::kFloat32 || t->num_elements() != 1) {
    return Status::Unimplemented("Clip on CUDA: min / max must be float32 scalars");
  }
  return *t->data<float>();
}

Result<UnaryParams> FromActivation(cpu::Activation act, float alpha, float beta,
                                   std::string_view op) {
  switch (act) {
    case cpu::Activation::kNone: return UnaryParams{UnaryOp::kIdentity, 0, 0};
    case cpu::Activation::kRelu: return UnaryParams{UnaryOp::kRelu, alpha, beta};
    case cpu::Activation::kClip: return UnaryParams{UnaryOp::kClip, alpha, beta};
    case cpu::Activation::kLeakyRelu: return UnaryParams{UnaryOp::kLeakyRelu, alpha, beta};
    case cpu::Activation::kHardSigmoid: return UnaryParams{UnaryOp::kHardSigmoid, alpha, beta};
    case cpu::Activation::kHardSwish: return UnaryParams{UnaryOp::kHardSwish, alpha, beta};
    case cpu::Activation::kSigmoid: return UnaryParams{UnaryOp::kSigmoid, alpha, beta};
    case cpu::Activation::kTanh: return UnaryParams{UnaryOp::kTanh, alpha, beta};
    case cpu::Activation::kGelu: break;
  }
  return Refuse(op, "fused activation Gelu is not supported");
}

}  // namespace

std::vector<std::string> CudaOpTypes() {
  std::vector<std::string> ops;
  for (auto list : {std::span<const std::string_view>(kUnary), std::span<const std::string_view>(kBinary),
                    std::span<const std::string_view>(kViews), std::span<const std::string_view>(kOthers)}) {
    for (std::string_view op : list) ops.emplace_back(op);
  }
  std::sort(ops.begin(), ops.end());
  return ops;
}

Result<UnaryParams> MakeUnary(std::string_view op, const Attributes& attrs, int64_t opset,
                              std::span<const Tensor* const> values) {
  UnaryParams p;
  if (op == "Relu") {
    p.op = UnaryOp::kRelu;
  } else if (op == "LeakyRelu") {
    p.op = UnaryOp::kLeakyRelu;
    ORRERY_ASSIGN_OR_RETURN(p.alpha, attrs.GetFloat("alpha", 0.01f));
  } else if (op == "Clip") {
    p.op = UnaryOp::kClip;
    const float lo = std::numeric_limits<float>::lowest();
    const float hi = std::numeric_limits<float>::max();
    if (opset < 11) {
      ORRERY_ASSIGN_OR_RETURN(p.alpha, attrs.GetFloat("min", lo));
      ORRERY_ASSIGN_OR_RETURN(p.beta, attrs.GetFloat("max", hi));
    } else {
      ORRERY_ASSIGN_OR_RETURN(p.alpha, ScalarValue(values.size() > 1 ? values[1] : nullptr, lo));
      ORRERY_ASSIGN_OR_RETURN(p.beta, ScalarValue(values.size() > 2 ? values[2] : nullptr, hi));
    }
  } else if (op == "Sigmoid") {
    p.op = UnaryOp::kSigmoid;
  } else if (op == "Tanh") {
    p.op = UnaryOp::kTanh;
  } else if (op == "HardSigmoid") {
    p.op = UnaryOp::kHardSigmoid;
    ORRERY_ASSIGN_OR_RETURN(p.alpha, attrs.GetFloat("alpha", 0.2f));
    ORRERY_ASSIGN_OR_RETURN(p.beta, attrs.GetFloat("beta", 0.5f));
  } else if (op == "HardSwish") {
    p.op = UnaryOp::kHardSwish;
  } else if (op == "Exp") {
    p.op = UnaryOp::kExp;
  } else if (op == "Neg") {
    p.op = UnaryOp::kNeg;
  } else if (op == "Abs") {
    p.op = UnaryOp::kAbs;
  } else if (op == "Sqrt") {
    p.op = UnaryOp::kSqrt;
  } else {
    return Refuse(op, "not an elementwise unary op");
  }
  return p;
}

Result<UnaryParams> MakeFusedActivation(std::string_view op, const Attributes& attrs) {
  ORRERY_ASSIGN_OR_RETURN(cpu::Fusion f, cpu::ReadFusion(attrs, op));
  return FromActivation(f.act, f.alpha, f.beta, op);
}

Result<BinaryOp> MakeBinary(std::string_view op) {
  if (op == "Add") return BinaryOp::kAdd;
  if (op == "Sub") return BinaryOp::kSub;
  if (op == "Mul") return BinaryOp::kMul;
  if (op == "Div") return BinaryOp::kDiv;
  if (op == "Max") return BinaryOp::kMax;
  if (op == "Min") return BinaryOp::kMin;
  return Refuse(op, "not a binary elementwise op");
}

Result<BroadcastIndex> MakeBroadcast(const Shape& out, const Shape& in) {
  BroadcastIndex b;
  if (!MakeBroadcastIndex(out.data(), static_cast<int>(out.size()), in.data(),
                          static_cast<int>(in.size()), &b)) {
    return Status::Unimplemented("broadcast of " + ShapeToString(in) + " to " +
                                 ShapeToString(out) + " on CUDA: rank over " +
                                 std::to_string(kMaxRank) + " or shapes that do not broadcast");
  }
  return b;
}

Result<Pool2d> MakePool2d(std::string_view op, const Attributes& attrs, const Shape& x) {
  if (x.size() != 4) return Refuse(op, "only 2-D (NCHW) pooling is supported, input is " + ShapeToString(x));
  ORRERY_ASSIGN_OR_RETURN(WindowAttrs w,
                          ReadWindowAttrs(op, attrs, 2, {.allow_ceil_mode = true}));
  ORRERY_ASSIGN_OR_RETURN(WindowGeometry g,
                          ResolveWindow(op, w, std::span<const int64_t>(x).subspan(2)));
  Pool2d p;
  p.in_h = x[2];
  p.in_w = x[3];
  p.out_h = g.output[0];
  p.out_w = g.output[1];
  p.k_h = g.kernel[0];
  p.k_w = g.kernel[1];
  p.stride_h = g.strides[0];
  p.stride_w = g.strides[1];
  p.dil_h = g.dilations[0];
  p.dil_w = g.dilations[1];
  p.pad_top = g.pad_begin[0];
  p.pad_left = g.pad_begin[1];
  p.pad_bottom = g.pad_end[0];
  p.pad_right = g.pad_end[1];
  if (op == "AveragePool") {
    ORRERY_ASSIGN_OR_RETURN(int64_t include, attrs.GetInt("count_include_pad", 0));
    p.count_include_pad = include == 1;
  }
  return p;
}

Result<Conv2dParams> MakeConv2d(const Attributes& attrs, const Shape& x, const Shape& w) {
  if (x.size() != 4 || w.size() != 4) {
    return Refuse("Conv", "only 2-D (NCHW) convolution is supported, input is " + ShapeToString(x));
  }
  ORRERY_ASSIGN_OR_RETURN(WindowAttrs wa,
                          ReadWindowAttrs("Conv", attrs, 2,
                                          {.weight_kernel = std::span<const int64_t>(w).subspan(2)}));
  ORRERY_ASSIGN_OR_RETURN(WindowGeometry g,
                          ResolveWindow("Conv", wa, std::span<const int64_t>(x).subspan(2)));
  if (g.pad_begin[0] != g.pad_end[0] || g.pad_begin[1] != g.pad_end[1]) {
    return Refuse("Conv", "asymmetric pads (cuDNN pads both sides alike)");
  }
  Conv2dParams p;
  ORRERY_ASSIGN_OR_RETURN(p.group, attrs.GetInt("group", 1));
  if (p.group < 1 || x[1] % p.group != 0 || w[0] % p.group != 0 || x[1] / p.group != w[1]) {
    return Status::InvalidArgument("Conv: group " + std::to_string(p.group) +
                                   " does not match input " + ShapeToString(x) + " and weights " +
                                   ShapeToString(w));
  }
  p.pad_h = g.pad_begin[0];
  p.pad_w = g.pad_begin[1];
  p.stride_h = g.strides[0];
  p.stride_w = g.strides[1];
  p.dil_h = g.dilations[0];
  p.dil_w = g.dilations[1];
  p.out_h = g.output[0];
  p.out_w = g.output[1];
  return p;
}

Result<SoftmaxRows> MakeSoftmaxRows(const Shape& x, const Attributes& attrs, int64_t opset) {
  const int64_t rank = static_cast<int64_t>(x.size());
  if (rank == 0) return Status::InvalidArgument("Softmax: input must have rank >= 1");
  const bool legacy = opset < 13;
  ORRERY_ASSIGN_OR_RETURN(int64_t axis_attr, attrs.GetInt("axis", legacy ? 1 : -1));
  Result<int64_t> axis = NormalizeAxis(axis_attr, rank, legacy ? 1 : 0);
  if (!axis.ok()) return axis.status().WithPrefix("Softmax");
  const size_t a = static_cast<size_t>(*axis);
  SoftmaxRows s;
  s.outer = DimProduct(x, 0, a);
  if (legacy) {
    s.axis_dim = DimProduct(x, a, x.size());
  } else {
    s.axis_dim = x[a];
    s.inner = DimProduct(x, a + 1, x.size());
  }
  return s;
}

Result<ConcatLayout> MakeConcat(std::span<const Shape> inputs, const Attributes& attrs) {
  if (inputs.empty()) return Status::InvalidArgument("Concat: no inputs");
  ORRERY_ASSIGN_OR_RETURN(int64_t axis_attr, attrs.GetInt("axis", 0));
  const int64_t rank = static_cast<int64_t>(inputs[0].size());
  Result<int64_t> axis = NormalizeAxis(axis_attr, rank);
  if (!axis.ok()) return axis.status().WithPrefix("Concat");
  const size_t a = static_cast<size_t>(*axis);
  ConcatLayout c;
  c.outer = DimProduct(inputs[0], 0, a);
  for (const Shape& s : inputs) {
    if (s.size() != inputs[0].size()) return Status::InvalidArgument("Concat: ranks differ");
    c.offsets.push_back(c.out_block);
    c.blocks.push_back(DimProduct(s, a, s.size()));
    c.out_block += c.blocks.back();
  }
  return c;
}

Status CheckCudaSupport(std::string_view op, const Attributes& attrs, int64_t opset,
                        std::span<const TensorType> inputs,
                        std::span<const Tensor* const> values,
                        std::span<const TensorType> outputs) {
  const auto value = [&](size_t i) { return i < values.size() ? values[i] : nullptr; };
  if (In(op, kViews)) return Status::Ok();  // any dtype: a view or a device copy
  if (In(op, kUnary)) {
    // Clip's min / max inputs must be known when the plan is compiled.
    if (op == "Clip" && opset >= 11) {
      for (size_t i = 1; i < inputs.size(); ++i) {
        if (inputs[i].present() && value(i) == nullptr) {
          return Refuse(op, "min / max must be constants");
        }
      }
    }
    ORRERY_RETURN_IF_ERROR(RequireFloat(op, inputs, outputs, 1));
    return MakeUnary(op, attrs, opset, values).status();
  }
  if (In(op, kBinary)) {
    if (inputs.size() != 2) return Refuse(op, "only two inputs are supported");
    ORRERY_RETURN_IF_ERROR(RequireFloat(op, inputs, outputs, 2));
    for (const TensorType& in : inputs) {
      Result<BroadcastIndex> b = MakeBroadcast(outputs[0].shape, in.shape);
      if (!b.ok()) return Refuse(op, b.status().message());
    }
    return Status::Ok();
  }
  if ((op == "MaxPool" || op == "AveragePool") && outputs.size() != 1) {
    return Refuse(op, "the Indices output is not supported");
  }
  if (op == "BatchNormalization" && outputs.size() != 1) {
    return Refuse(op, "training-mode outputs are not supported");
  }
  if (In(op, kOthers)) ORRERY_RETURN_IF_ERROR(RequireFloat(op, inputs, outputs, inputs.size()));
  if (op == "Conv" || op == "Gemm" || op == "MatMul") {
    ORRERY_ASSIGN_OR_RETURN(cpu::Fusion f, cpu::ReadFusion(attrs, op));
    ORRERY_RETURN_IF_ERROR(FromActivation(f.act, f.alpha, f.beta, op).status());
  }
  if (op == "Conv") {
    if (inputs.size() < 2) return Refuse(op, "missing weights");
    return MakeConv2d(attrs, inputs[0].shape, inputs[1].shape).status();
  }
  if (op == "Gemm") {
    if (inputs[0].shape.size() != 2 || inputs[1].shape.size() != 2) {
      return Refuse(op, "inputs must be 2-D");
    }
    if (inputs.size() > 2 && inputs[2].present()) {
      Result<BroadcastIndex> b = MakeBroadcast(outputs[0].shape, inputs[2].shape);
      if (!b.ok()) return Refuse(op, b.status().message());
    }
    return Status::Ok();
  }
  if (op == "MatMul") {
    if (inputs[0].shape.size() < 2 || inputs[1].shape.size() != 2) {
      return Refuse(op, "only A of rank >= 2 times a 2-D B is supported, got " +
                            ShapeToString(inputs[0].shape) + " x " + ShapeToString(inputs[1].shape));
    }
    return Status::Ok();
  }
  if (op == "BatchNormalization") {
    if (inputs[0].shape.size() < 2) return Refuse(op, "input must have rank >= 2");
    return Status::Ok();
  }
  if (op == "MaxPool" || op == "AveragePool") {
    return MakePool2d(op, attrs, inputs[0].shape).status();
  }
  if (op == "GlobalAveragePool") {
    if (inputs[0].shape.size() < 3) return Refuse(op, "input must have rank >= 3");
    return Status::Ok();
  }
  if (op == "Softmax") return MakeSoftmaxRows(inputs[0].shape, attrs, opset).status();
  if (op == "Concat") {
    std::vector<Shape> shapes;
    for (const TensorType& t : inputs) shapes.push_back(t.shape);
    return MakeConcat(shapes, attrs).status();
  }
  return Status::Unimplemented(std::string(op) + " has no CUDA kernel");
}

}  // namespace orrery::ops::cuda
