// Slice: numpy basic slicing along any subset of axes, with negative and
// out-of-range starts/ends clamped and negative steps. Attributes before
// opset 10, int32/int64 inputs from 10. The output is one StridedCopy of a
// view (base offset + per-axis stride * step), for any dtype.
#include <algorithm>
#include <limits>
#include <string>

#include "ops/cpu/cpu_kernels.h"
#include "ops/cpu/data_movement.h"
#include "ops/cpu/prepared.h"
#include "ops/kernel_util.h"

namespace orrery::ops::cpu {
namespace {

struct AxisSlice {
  int64_t start = 0;
  int64_t step = 1;
  int64_t len = 0;
};

// Clamps one axis per the ONNX Slice rules (opset 13 text).
AxisSlice ClampAxis(int64_t start, int64_t end, int64_t step, int64_t dim) {
  AxisSlice s;
  // |step| > dim selects at most one element; clamping it keeps stride * step
  // from overflowing without changing the result.
  const int64_t max_step = std::max<int64_t>(dim, 1);
  s.step = std::clamp(step, -max_step, max_step);
  if (start < 0) start += dim;  // no overflow: dim >= 0 > start
  if (end < 0) end += dim;
  if (dim == 0) return s;
  if (s.step > 0) {
    start = std::clamp<int64_t>(start, 0, dim);
    end = std::clamp<int64_t>(end, 0, dim);
    s.len = end > start ? (end - start + s.step - 1) / s.step : 0;
  } else {
    start = std::clamp<int64_t>(start, 0, dim - 1);
    end = std::clamp<int64_t>(end, -1, dim - 1);
    s.len = start > end ? (start - end - s.step - 1) / -s.step : 0;
  }
  s.start = start;
  return s;
}

struct SliceArgs {
  std::vector<int64_t> starts, ends, axes, steps;
  bool axes_given = false;
  bool steps_given = false;
};

// Gathers the arguments; *unknown when an input exists without a known value.
Result<SliceArgs> ReadSliceArgs(const Attributes& attrs, int64_t opset,
                                std::span<const Tensor* const> values,
                                std::span<const bool> present, bool* unknown) {
  *unknown = false;
  SliceArgs a;
  if (opset < 10) {
    if (!attrs.Has("starts") || !attrs.Has("ends")) {
      return Status::InvalidArgument("Slice: starts and ends attributes are required");
    }
    ORRERY_ASSIGN_OR_RETURN(a.starts, attrs.GetInts("starts"));
    ORRERY_ASSIGN_OR_RETURN(a.ends, attrs.GetInts("ends"));
    a.axes_given = attrs.Has("axes");
    ORRERY_ASSIGN_OR_RETURN(a.axes, attrs.GetInts("axes"));
    return a;
  }
  static constexpr const char* kNames[] = {"", "starts", "ends", "axes", "steps"};
  std::vector<int64_t>* dst[] = {nullptr, &a.starts, &a.ends, &a.axes, &a.steps};
  for (size_t i = 1; i <= 4; ++i) {
    if (i >= present.size() || !present[i]) {
      if (i <= 2)
        return Status::InvalidArgument(std::string("Slice: ") + kNames[i] + " is missing");
      continue;
    }
    if (values[i] == nullptr) {
      *unknown = true;
      return a;
    }
    ORRERY_ASSIGN_OR_RETURN(*dst[i], ReadInts(*values[i], "Slice", kNames[i]));
    if (i == 3) a.axes_given = true;
    if (i == 4) a.steps_given = true;
  }
  return a;
}

struct SlicePlan {
  Shape out;
  int64_t offset = 0;            // first element, in input elements
  std::vector<int64_t> strides;  // per output dim, in input elements
};

Result<SlicePlan> MakeSlicePlan(const Shape& in, const SliceArgs& a) {
  const size_t rank = in.size();
  const size_t n = a.starts.size();
  if (a.ends.size() != n || (a.axes_given && a.axes.size() != n) ||
      (a.steps_given && a.steps.size() != n)) {
    return Status::InvalidArgument("Slice: starts, ends, axes and steps differ in length");
  }
  if (n > rank) {
    return Status::InvalidArgument("Slice: " + std::to_string(n) + " slices for rank " +
                                   std::to_string(rank));
  }
  const std::vector<int64_t> in_strides = ContiguousStrides(in);
  SlicePlan p;
  p.out = in;
  p.strides = in_strides;
  std::vector<bool> seen(rank, false);
  for (size_t i = 0; i < n; ++i) {
    int64_t axis = static_cast<int64_t>(i);
    if (a.axes_given) {
      Result<int64_t> ax = NormalizeAxis(a.axes[i], static_cast<int64_t>(rank));
      if (!ax.ok()) return ax.status().WithPrefix("Slice");
      axis = *ax;
    }
    const size_t d = static_cast<size_t>(axis);
    if (seen[d]) return Status::InvalidArgument("Slice: axis " + std::to_string(axis) + " repeats");
    seen[d] = true;
    const int64_t step = a.steps_given ? a.steps[i] : 1;
    if (step == 0) return Status::InvalidArgument("Slice: step cannot be 0");
    const AxisSlice s = ClampAxis(a.starts[i], a.ends[i], step, in[d]);
    p.out[d] = s.len;
    p.strides[d] = in_strides[d] * s.step;
    p.offset += s.start * in_strides[d];
  }
  return p;
}

Status InferSlice(const InferContext& ctx, std::vector<TensorType>* outputs) {
  const TensorType& x = ctx.inputs[0];
  ORRERY_RETURN_IF_ERROR(RequireMovable(x, "Slice", "input data"));
  bool present[5] = {true, false, false, false, false};
  for (size_t i = 1; i < 5; ++i) present[i] = OptionalInput(ctx, i) != nullptr;
  std::vector<const Tensor*> values(5, nullptr);
  for (size_t i = 1; i < 5; ++i) values[i] = ctx.value(i);
  bool unknown = false;
  ORRERY_ASSIGN_OR_RETURN(SliceArgs args,
                          ReadSliceArgs(ctx.attrs, ctx.opset, values, present, &unknown));
  if (unknown) return Status::Unavailable("Slice needs the values of its starts/ends/axes/steps");
  ORRERY_ASSIGN_OR_RETURN(SlicePlan p, MakeSlicePlan(x.shape, args));
  outputs->assign(1, TensorType{x.dtype, std::move(p.out)});
  return Status::Ok();
}

// The plan when starts / ends / axes / steps are constants; otherwise it
// is made per call from the values the run computed.
struct PreparedSlice : PreparedKernel {
  bool constant = false;
  SlicePlan plan;
};

Result<Prepared> PrepareSlice(const PrepareContext& ctx) {
  auto p = std::make_shared<PreparedSlice>();
  bool present[5] = {true, false, false, false, false};
  const Tensor* values[5] = {nullptr, nullptr, nullptr, nullptr, nullptr};
  for (size_t i = 1; i < 5; ++i) {
    present[i] = i < ctx.inputs.size() && ctx.inputs[i].present();
    values[i] = ctx.value(i);
  }
  bool unknown = false;
  ORRERY_ASSIGN_OR_RETURN(SliceArgs args,
                          ReadSliceArgs(ctx.attrs, ctx.opset, values, present, &unknown));
  if (!unknown) {
    ORRERY_ASSIGN_OR_RETURN(p->plan, MakeSlicePlan(ctx.inputs[0].shape, args));
    p->constant = true;
  }
  return Prepared{.kernel = std::move(p)};
}

Status ComputeSlice(const KernelContext& ctx, std::span<Tensor> outputs) {
  if (ctx.prepared == nullptr) return ComputeUnprepared(PrepareSlice, ComputeSlice, ctx, outputs);
  const auto& prepared = *static_cast<const PreparedSlice*>(ctx.prepared);
  const Tensor& x = *ctx.inputs[0];
  SlicePlan computed;
  const SlicePlan* p = &prepared.plan;
  if (!prepared.constant) {
    bool present[5] = {true, false, false, false, false};
    const Tensor* values[5] = {nullptr, nullptr, nullptr, nullptr, nullptr};
    for (size_t i = 1; i < 5; ++i) {
      values[i] = OptionalInput(ctx, i);
      present[i] = values[i] != nullptr;
    }
    bool unknown = false;
    ORRERY_ASSIGN_OR_RETURN(SliceArgs args,
                            ReadSliceArgs(ctx.attrs, ctx.opset, values, present, &unknown));
    ORRERY_ASSIGN_OR_RETURN(computed, MakeSlicePlan(x.shape(), args));
    p = &computed;
  }
  ORRERY_RETURN_IF_ERROR(CheckOutputShape(outputs[0], p->out, "Slice"));
  if (outputs[0].num_elements() == 0) return Status::Ok();
  const size_t elem = DTypeSize(x.dtype());
  const auto* src =
      static_cast<const uint8_t*>(x.raw_data()) + p->offset * static_cast<int64_t>(elem);
  StridedCopy(src, p->out, p->strides, elem, outputs[0].raw_data(), ctx.threads);
  return Status::Ok();
}

}  // namespace

Status RegisterSliceKernels(OpRegistry* registry) {
  return registry->Register(KernelDef{.op_type = "Slice",
                                      .backend = Backend::kCpu,
                                      .min_inputs = 1,
                                      .max_inputs = 5,
                                      .infer = InferSlice,
                                      .compute = ComputeSlice,
                                      .prepare = PrepareSlice});
}

}  // namespace orrery::ops::cpu
