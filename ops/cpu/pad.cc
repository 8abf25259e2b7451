// Pad: constant / reflect / edge / wrap padding, negative pads crop. Pads
// come from the attribute before opset 11 and from input 1 from 11 (with the
// constant in input 2 and opset 18's axes in input 3). Every output dim maps
// each coordinate to a source coordinate (or "padding"); rows are then
// assembled with memcpy for the copied middle, for any dtype.
#include <algorithm>
#include <cstring>
#include <memory>
#include <string>

#include "ops/cpu/cpu_kernels.h"
#include "ops/cpu/data_movement.h"
#include "ops/cpu/prepared.h"
#include "ops/kernel_util.h"
#include "ops/small_vec.h"

namespace orrery::ops::cpu {
namespace {

enum class PadMode { kConstant, kReflect, kEdge, kWrap };

Result<PadMode> ReadPadMode(const Attributes& attrs) {
  ORRERY_ASSIGN_OR_RETURN(std::string mode, attrs.GetString("mode", "constant"));
  if (mode == "constant") return PadMode::kConstant;
  if (mode == "reflect") return PadMode::kReflect;
  if (mode == "edge") return PadMode::kEdge;
  if (mode == "wrap") return PadMode::kWrap;
  return Status::InvalidArgument("Pad: unsupported mode '" + mode + "'");
}

struct PadPlan {
  PadMode mode = PadMode::kConstant;
  std::vector<int64_t> begin, end;  // per dim, may be negative (crop)
  Shape out;
};

// pads: [b_0 .. b_{k-1}, e_0 .. e_{k-1}] over `axes` (all dims when empty).
Result<PadPlan> MakePadPlan(const Shape& in, PadMode mode, const std::vector<int64_t>& pads,
                            const std::vector<int64_t>& axes_in) {
  const size_t rank = in.size();
  std::vector<int64_t> axes = axes_in;
  if (axes.empty()) {
    for (size_t i = 0; i < rank; ++i) axes.push_back(static_cast<int64_t>(i));
  }
  if (pads.size() != 2 * axes.size()) {
    return Status::InvalidArgument("Pad: pads has " + std::to_string(pads.size()) +
                                   " values, expected " + std::to_string(2 * axes.size()));
  }
  PadPlan p;
  p.mode = mode;
  p.begin.assign(rank, 0);
  p.end.assign(rank, 0);
  std::vector<bool> seen(rank, false);
  for (size_t i = 0; i < axes.size(); ++i) {
    Result<int64_t> a = NormalizeAxis(axes[i], static_cast<int64_t>(rank));
    if (!a.ok()) return a.status().WithPrefix("Pad");
    const size_t d = static_cast<size_t>(*a);
    if (seen[d]) return Status::InvalidArgument("Pad: axes repeat");
    seen[d] = true;
    p.begin[d] = pads[i];
    p.end[d] = pads[axes.size() + i];
  }
  p.out.resize(rank);
  for (size_t d = 0; d < rank; ++d) {
    // Cropping more than the whole dim is invalid; rejecting it first also
    // keeps -pad from overflowing below.
    if (p.begin[d] < -in[d] || p.end[d] < -in[d]) {
      return Status::InvalidArgument("Pad: pads " + std::to_string(p.begin[d]) + ", " +
                                     std::to_string(p.end[d]) + " crop more than dim " +
                                     std::to_string(in[d]));
    }
    int64_t o = 0;
    if (__builtin_add_overflow(in[d], p.begin[d], &o) || __builtin_add_overflow(o, p.end[d], &o) ||
        o < 0) {
      return Status::InvalidArgument("Pad: pads " + std::to_string(p.begin[d]) + ", " +
                                     std::to_string(p.end[d]) + " are invalid for dim " +
                                     std::to_string(in[d]));
    }
    p.out[d] = o;
    // Non-constant modes sample the (cropped) input, which must be non-empty.
    const int64_t kept =
        in[d] - std::max<int64_t>(0, -p.begin[d]) - std::max<int64_t>(0, -p.end[d]);
    if (mode != PadMode::kConstant && o > 0 && kept <= 0) {
      return Status::InvalidArgument("Pad: cannot pad an empty dim in this mode");
    }
  }
  ORRERY_RETURN_IF_ERROR(CheckedNumElements(p.out).status());
  return p;
}

struct PadArgs {
  std::vector<int64_t> pads, axes;
  const Tensor* value = nullptr;
  bool unknown = false;
};

// Reads pads/axes from attributes or inputs (`values[i]`, nullptr when not
// known; `present[i]` says the input exists).
Result<PadArgs> ReadPadArgs(const Attributes& attrs, int64_t opset,
                            std::span<const Tensor* const> values, std::span<const bool> present) {
  PadArgs a;
  if (opset < 11) {
    if (!attrs.Has("pads")) return Status::InvalidArgument("Pad: pads attribute is required");
    ORRERY_ASSIGN_OR_RETURN(a.pads, attrs.GetInts("pads"));
    return a;
  }
  if (present.size() < 2 || !present[1]) return Status::InvalidArgument("Pad: pads is missing");
  if (values[1] == nullptr) {
    a.unknown = true;
    return a;
  }
  if (values[1]->dtype() != DType::kInt64)
    return Status::InvalidArgument("Pad: pads must be int64");
  ORRERY_ASSIGN_OR_RETURN(a.pads, ReadInts(*values[1], "Pad", "pads"));
  if (present.size() > 2 && present[2]) a.value = values[2];
  if (present.size() > 3 && present[3]) {
    if (values[3] == nullptr) {
      a.unknown = true;
      return a;
    }
    ORRERY_ASSIGN_OR_RETURN(a.axes, ReadInts(*values[3], "Pad", "axes"));
  }
  return a;
}

// The constant as bytes of the data dtype.
Result<uint64_t> ConstantBits(const Attributes& attrs, int64_t opset, DType dtype,
                              const Tensor* value) {
  uint64_t bits = 0;
  if (opset >= 11) {
    if (value == nullptr) return bits;
    if (value->dtype() != dtype || value->num_elements() > 1) {
      return Status::InvalidArgument("Pad: constant_value must be a scalar of the data dtype");
    }
    if (value->num_elements() == 1) std::memcpy(&bits, value->raw_data(), DTypeSize(dtype));
    return bits;
  }
  ORRERY_ASSIGN_OR_RETURN(float v, attrs.GetFloat("value", 0.0f));
  if (v == 0.0f) return bits;
  if (dtype == DType::kFloat32) {
    std::memcpy(&bits, &v, sizeof(float));
  } else if (dtype == DType::kFloat64) {
    const double d = v;
    std::memcpy(&bits, &d, sizeof(double));
  } else {
    return Status::InvalidArgument("Pad: unsupported non-zero value attribute for dtype " +
                                   std::string(DTypeName(dtype)));
  }
  return bits;
}

// Source coordinate of output coordinate o along one dim, or -1 for padding.
int64_t SourceIndex(PadMode mode, int64_t o, int64_t begin, int64_t end, int64_t n) {
  const int64_t lo = std::max<int64_t>(0, -begin);
  const int64_t m = n - lo - std::max<int64_t>(0, -end);  // kept length
  int64_t i = o - std::max<int64_t>(0, begin);            // relative to the kept range
  if (i >= 0 && i < m) return lo + i;
  switch (mode) {
    case PadMode::kConstant:
      return -1;
    case PadMode::kEdge:
      i = i < 0 ? 0 : m - 1;
      break;
    case PadMode::kReflect: {
      if (m == 1) {
        i = 0;
        break;
      }
      const int64_t period = 2 * (m - 1);
      i %= period;
      if (i < 0) i += period;
      if (i >= m) i = period - i;
      break;
    }
    case PadMode::kWrap:
      i %= m;
      if (i < 0) i += m;
      break;
  }
  return lo + i;
}

template <typename U>
void PadTyped(const U* src, const Shape& in, const PadPlan& p, U value, U* dst) {
  const size_t rank = in.size();
  if (rank == 0) {
    dst[0] = src[0];
    return;
  }
  // Source coordinates are computed on the fly rather than tabulated per
  // output position: a degenerate shape (one huge dim) would otherwise need
  // a table several times larger than the output.
  const size_t last_d = rank - 1;
  auto source = [&](size_t d, int64_t o) {
    return SourceIndex(p.mode, o, p.begin[d], p.end[d], in[d]);
  };
  SmallVec<int64_t> strides(rank, 1);
  for (size_t d = rank; d-- > 1;) strides[d - 1] = strides[d] * in[d];
  const int64_t row = p.out[last_d];
  // The copied middle of every row: output [mid0, mid1) reads input from `first`.
  const int64_t kept =
      in[last_d] - std::max<int64_t>(0, -p.begin[last_d]) - std::max<int64_t>(0, -p.end[last_d]);
  const int64_t mid0 = std::min(std::max<int64_t>(p.begin[last_d], 0), row);
  const int64_t mid1 = std::min(mid0 + std::max<int64_t>(kept, 0), row);
  const int64_t first = std::max<int64_t>(0, -p.begin[last_d]);
  const int64_t rows = DimProduct(p.out, 0, last_d);
  SmallVec<int64_t> coord(last_d, 0);
  for (int64_t r = 0; r < rows; ++r) {
    U* out = dst + r * row;
    int64_t offset = 0;
    bool pad_row = false;
    for (size_t d = 0; d < last_d; ++d) {
      const int64_t s = source(d, coord[d]);
      pad_row = pad_row || s < 0;
      offset += s * strides[d];
    }
    if (pad_row) {
      for (int64_t i = 0; i < row; ++i) out[i] = value;
    } else {
      const U* in_row = src + offset;
      for (int64_t i = 0; i < mid0; ++i) {
        const int64_t s = source(last_d, i);
        out[i] = s < 0 ? value : in_row[s];
      }
      if (mid1 > mid0) {
        std::memcpy(out + mid0, in_row + first, static_cast<size_t>(mid1 - mid0) * sizeof(U));
      }
      for (int64_t i = mid1; i < row; ++i) {
        const int64_t s = source(last_d, i);
        out[i] = s < 0 ? value : in_row[s];
      }
    }
    for (size_t d = last_d; d-- > 0;) {
      if (++coord[d] < p.out[d]) break;
      coord[d] = 0;
    }
  }
}

Status InferPad(const InferContext& ctx, std::vector<TensorType>* outputs) {
  const TensorType& x = ctx.inputs[0];
  ORRERY_RETURN_IF_ERROR(RequireMovable(x, "Pad", "input data"));
  ORRERY_ASSIGN_OR_RETURN(PadMode mode, ReadPadMode(ctx.attrs));
  bool present[4] = {true, false, false, false};
  const Tensor* values[4] = {nullptr, nullptr, nullptr, nullptr};
  for (size_t i = 1; i < 4; ++i) {
    present[i] = OptionalInput(ctx, i) != nullptr;
    values[i] = ctx.value(i);
  }
  if (present[2] && ctx.inputs[2].dtype != x.dtype) {
    return Status::InvalidArgument("Pad: constant_value dtype differs from the data dtype");
  }
  ORRERY_ASSIGN_OR_RETURN(PadArgs a, ReadPadArgs(ctx.attrs, ctx.opset, values, present));
  if (a.unknown) return Status::Unavailable("Pad needs the values of its pads/axes inputs");
  ORRERY_ASSIGN_OR_RETURN(PadPlan p, MakePadPlan(x.shape, mode, a.pads, a.axes));
  outputs->assign(1, TensorType{x.dtype, std::move(p.out)});
  return Status::Ok();
}

// The plan when pads and axes are constants; otherwise made per call.
struct PreparedPad : PreparedKernel {
  bool constant = false;
  PadPlan plan;
};

Result<Prepared> PreparePad(const PrepareContext& ctx) {
  auto p = std::make_shared<PreparedPad>();
  ORRERY_ASSIGN_OR_RETURN(PadMode mode, ReadPadMode(ctx.attrs));
  bool present[4] = {true, false, false, false};
  const Tensor* values[4] = {nullptr, nullptr, nullptr, nullptr};
  for (size_t i = 1; i < 4; ++i) {
    present[i] = i < ctx.inputs.size() && ctx.inputs[i].present();
    values[i] = ctx.value(i);
  }
  ORRERY_ASSIGN_OR_RETURN(PadArgs a, ReadPadArgs(ctx.attrs, ctx.opset, values, present));
  if (!a.unknown) {
    ORRERY_ASSIGN_OR_RETURN(p->plan, MakePadPlan(ctx.inputs[0].shape, mode, a.pads, a.axes));
    p->constant = true;
  }
  return Prepared{.kernel = std::move(p)};
}

Status ComputePad(const KernelContext& ctx, std::span<Tensor> outputs) {
  if (ctx.prepared == nullptr) return ComputeUnprepared(PreparePad, ComputePad, ctx, outputs);
  const auto& prepared = *static_cast<const PreparedPad*>(ctx.prepared);
  const Tensor& x = *ctx.inputs[0];
  const Tensor* value = ctx.opset >= 11 ? OptionalInput(ctx, 2) : nullptr;
  PadPlan computed;
  const PadPlan* p = &prepared.plan;
  if (!prepared.constant) {
    ORRERY_ASSIGN_OR_RETURN(PadMode mode, ReadPadMode(ctx.attrs));
    bool present[4] = {true, false, false, false};
    const Tensor* values[4] = {nullptr, nullptr, nullptr, nullptr};
    for (size_t i = 1; i < 4; ++i) {
      values[i] = OptionalInput(ctx, i);
      present[i] = values[i] != nullptr;
    }
    ORRERY_ASSIGN_OR_RETURN(PadArgs a, ReadPadArgs(ctx.attrs, ctx.opset, values, present));
    ORRERY_ASSIGN_OR_RETURN(computed, MakePadPlan(x.shape(), mode, a.pads, a.axes));
    p = &computed;
  }
  ORRERY_ASSIGN_OR_RETURN(uint64_t bits, ConstantBits(ctx.attrs, ctx.opset, x.dtype(), value));
  Tensor& y = outputs[0];
  ORRERY_RETURN_IF_ERROR(CheckOutputShape(y, p->out, "Pad"));
  if (y.num_elements() == 0) return Status::Ok();
  switch (DTypeSize(x.dtype())) {
    case 1:
      PadTyped(x.data<uint8_t>(), x.shape(), *p, static_cast<uint8_t>(bits), y.data<uint8_t>());
      break;
    case 2:
      PadTyped(x.data<uint16_t>(), x.shape(), *p, static_cast<uint16_t>(bits),
               y.data<uint16_t>());
      break;
    case 4:
      PadTyped(x.data<uint32_t>(), x.shape(), *p, static_cast<uint32_t>(bits),
               y.data<uint32_t>());
      break;
    case 8:
      PadTyped(x.data<uint64_t>(), x.shape(), *p, bits, y.data<uint64_t>());
      break;
    default:
      return Status::Internal("Pad: unexpected element size");
  }
  return Status::Ok();
}

}  // namespace

Status RegisterPadKernels(OpRegistry* registry) {
  return registry->Register(KernelDef{.op_type = "Pad",
                                      .backend = Backend::kCpu,
                                      .min_inputs = 1,
                                      .max_inputs = 4,
                                      .infer = InferPad,
                                      .compute = ComputePad,
                                      .prepare = PreparePad});
}

}  // namespace orrery::ops::cpu
