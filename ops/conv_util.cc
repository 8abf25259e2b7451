#include "ops/conv_util.h"

#include <string>

namespace orrery::ops {
namespace {

std::string Str(int64_t v) { return std::to_string(v); }

// An INTS attribute with one value per spatial axis (`per_axis` values per
// axis), each in [lo, hi]; `fill` when absent.
Result<std::vector<int64_t>> ReadAxisInts(std::string_view op, const Attributes& attrs,
                                          std::string_view name, size_t rank, size_t per_axis,
                                          int64_t lo, int64_t hi, int64_t fill) {
  ORRERY_ASSIGN_OR_RETURN(std::vector<int64_t> v, attrs.GetInts(name));
  if (!attrs.Has(name)) return std::vector<int64_t>(rank * per_axis, fill);
  const std::string prefix = std::string(op) + ": " + std::string(name);
  if (v.size() != rank * per_axis) {
    return Status::InvalidArgument(prefix + " has " + Str(static_cast<int64_t>(v.size())) +
                                   " values, expected " +
                                   Str(static_cast<int64_t>(rank * per_axis)) + " for " +
                                   Str(static_cast<int64_t>(rank)) + " spatial axes");
  }
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i] < lo || v[i] > hi) {
      return Status::InvalidArgument(prefix + "[" + Str(static_cast<int64_t>(i)) + "] = " +
                                     Str(v[i]) + " is out of range [" + Str(lo) + ", " + Str(hi) +
                                     "]");
    }
  }
  return v;
}

Result<AutoPad> ReadAutoPad(std::string_view op, const Attributes& attrs) {
  ORRERY_ASSIGN_OR_RETURN(std::string s, attrs.GetString("auto_pad", "NOTSET"));
  // Some exporters write an empty string for the default.
  if (s == "NOTSET" || s.empty()) return AutoPad::kNotSet;
  if (s == "SAME_UPPER") return AutoPad::kSameUpper;
  if (s == "SAME_LOWER") return AutoPad::kSameLower;
  if (s == "VALID") return AutoPad::kValid;
  return Status::InvalidArgument(std::string(op) + ": auto_pad '" + s +
                                 "' must be NOTSET, SAME_UPPER, SAME_LOWER or VALID");
}

int64_t Volume(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

}  // namespace

Result<WindowAttrs> ReadWindowAttrs(std::string_view op, const Attributes& attrs, size_t rank,
                                    const WindowAttrOptions& options) {
  const std::string name(op);
  if (rank == 0) return Status::InvalidArgument(name + ": input needs at least one spatial axis");
  WindowAttrs w;
  ORRERY_ASSIGN_OR_RETURN(w.auto_pad, ReadAutoPad(op, attrs));
  ORRERY_ASSIGN_OR_RETURN(w.kernel,
                          ReadAxisInts(op, attrs, "kernel_shape", rank, 1, 1, kMaxWindowExtent, 0));
  if (options.weight_kernel.empty()) {
    if (!attrs.Has("kernel_shape")) {
      return Status::InvalidArgument(name + ": attribute kernel_shape is required");
    }
  } else {
    if (options.weight_kernel.size() != rank) {
      return Status::InvalidArgument(name + ": weights have " +
                                     Str(static_cast<int64_t>(options.weight_kernel.size())) +
                                     " spatial axes, input has " + Str(static_cast<int64_t>(rank)));
    }
    for (size_t i = 0; i < rank; ++i) {
      const int64_t k = options.weight_kernel[i];
      if (k < 1) {
        return Status::InvalidArgument(name + ": weight spatial dim " +
                                       Str(static_cast<int64_t>(i)) + " is " + Str(k) +
                                       ", must be >= 1");
      }
      if (attrs.Has("kernel_shape") && w.kernel[i] != k) {
        return Status::InvalidArgument(name + ": kernel_shape[" + Str(static_cast<int64_t>(i)) +
                                       "] = " + Str(w.kernel[i]) +
                                       " does not match the weights' spatial dim " + Str(k));
      }
    }
    w.kernel.assign(options.weight_kernel.begin(), options.weight_kernel.end());
  }
  ORRERY_ASSIGN_OR_RETURN(w.strides,
                          ReadAxisInts(op, attrs, "strides", rank, 1, 1, kMaxWindowAttr, 1));
  ORRERY_ASSIGN_OR_RETURN(w.dilations,
                          ReadAxisInts(op, attrs, "dilations", rank, 1, 1, kMaxWindowAttr, 1));
  if (!options.allow_dilations) {
    for (int64_t d : w.dilations) {
      if (d != 1) return Status::InvalidArgument(name + ": unsupported attribute dilations != 1");
    }
  }
  ORRERY_ASSIGN_OR_RETURN(w.pads, ReadAxisInts(op, attrs, "pads", rank, 2, 0, kMaxWindowAttr, 0));
  ORRERY_ASSIGN_OR_RETURN(int64_t ceil_mode, attrs.GetInt("ceil_mode", 0));
  if (ceil_mode != 0 && ceil_mode != 1) {
    return Status::InvalidArgument(name + ": ceil_mode must be 0 or 1, got " + Str(ceil_mode));
  }
  if (ceil_mode == 1 && !options.allow_ceil_mode) {
    return Status::InvalidArgument(name + ": unsupported attribute ceil_mode = 1");
  }
  w.ceil_mode = ceil_mode == 1;
  return w;
}

int64_t WindowGeometry::input_volume() const { return Volume(input); }
int64_t WindowGeometry::output_volume() const { return Volume(output); }
int64_t WindowGeometry::kernel_volume() const { return Volume(kernel); }

WindowGeometry WindowGeometry::WithLeadingUnitAxis() const {
  WindowGeometry g = *this;
  g.input.insert(g.input.begin(), 1);
  g.kernel.insert(g.kernel.begin(), 1);
  g.strides.insert(g.strides.begin(), 1);
  g.dilations.insert(g.dilations.begin(), 1);
  g.pad_begin.insert(g.pad_begin.begin(), 0);
  g.pad_end.insert(g.pad_end.begin(), 0);
  g.output.insert(g.output.begin(), 1);
  return g;
}

// The rank check and the fields both resolvers share; pads and output are
// sized to the rank for the caller to fill.
static Result<WindowGeometry> StartGeometry(std::string_view op, const WindowAttrs& attrs,
                                            std::span<const int64_t> input) {
  const size_t rank = attrs.kernel.size();
  if (input.size() != rank) {
    return Status::InvalidArgument(std::string(op) + ": input has " +
                                   Str(static_cast<int64_t>(input.size())) +
                                   " spatial axes, kernel has " + Str(static_cast<int64_t>(rank)));
  }
  WindowGeometry g;
  g.input.assign(input.begin(), input.end());
  g.kernel = attrs.kernel;
  g.strides = attrs.strides;
  g.dilations = attrs.dilations;
  g.pad_begin.resize(rank);
  g.pad_end.resize(rank);
  g.output.resize(rank);
  return g;
}

Result<WindowGeometry> ResolveWindow(std::string_view op, const WindowAttrs& attrs,
                                     std::span<const int64_t> input) {
  const size_t rank = attrs.kernel.size();
  ORRERY_ASSIGN_OR_RETURN(WindowGeometry g, StartGeometry(op, attrs, input));
  for (size_t i = 0; i < rank; ++i) {
    const int64_t in = input[i];
    switch (attrs.auto_pad) {
      case AutoPad::kNotSet:
        g.pad_begin[i] = attrs.pads[i];
        g.pad_end[i] = attrs.pads[i + rank];
        break;
      case AutoPad::kValid:
        break;
      case AutoPad::kSameUpper:
      case AutoPad::kSameLower: {
        const AxisPads p = SamePads(in, g.kernel[i], g.strides[i], g.dilations[i],
                                    attrs.auto_pad == AutoPad::kSameUpper);
        g.pad_begin[i] = p.begin;
        g.pad_end[i] = p.end;
        break;
      }
    }
    // SAME_* ignores ceil_mode: its output is ceil(in / stride) by definition.
    const bool ceil_mode = attrs.ceil_mode && (attrs.auto_pad == AutoPad::kNotSet ||
                                               attrs.auto_pad == AutoPad::kValid);
    g.output[i] = WindowOutputSize(in, g.kernel[i], g.strides[i], g.dilations[i], g.pad_begin[i],
                                   g.pad_end[i], ceil_mode);
    if (g.output[i] < 1) {
      return Status::InvalidArgument(
          std::string(op) + ": kernel extent " +
          Str(EffectiveKernel(g.kernel[i], g.dilations[i])) + " on spatial axis " +
          Str(static_cast<int64_t>(i)) + " is larger than the padded input (" + Str(in) + " + " +
          Str(g.pad_begin[i]) + " + " + Str(g.pad_end[i]) + ")");
    }
  }
  return g;
}

Result<WindowGeometry> ResolveTransposeWindow(std::string_view op, const WindowAttrs& attrs,
                                              std::span<const int64_t> input,
                                              std::span<const int64_t> output_padding,
                                              std::span<const int64_t> output_shape) {
  const std::string name(op);
  const size_t rank = attrs.kernel.size();
  ORRERY_ASSIGN_OR_RETURN(WindowGeometry g, StartGeometry(op, attrs, input));
  if (!output_padding.empty() && output_padding.size() != rank) {
    return Status::InvalidArgument(name + ": output_padding has " +
                                   Str(static_cast<int64_t>(output_padding.size())) +
                                   " values, expected " + Str(static_cast<int64_t>(rank)));
  }
  for (int64_t p : output_padding) {
    if (p < 0 || p > kMaxWindowAttr) {
      return Status::InvalidArgument(name + ": output_padding value " + Str(p) +
                                     " is out of range [0, " + Str(kMaxWindowAttr) + "]");
    }
  }
  // output_shape may list only the spatial dims or the full output shape.
  std::span<const int64_t> out_spatial = output_shape;
  if (output_shape.size() == rank + 2) out_spatial = output_shape.subspan(2);
  if (!output_shape.empty() && out_spatial.size() != rank) {
    return Status::InvalidArgument(name + ": output_shape has " +
                                   Str(static_cast<int64_t>(output_shape.size())) +
                                   " values, expected " + Str(static_cast<int64_t>(rank)) +
                                   " spatial dims");
  }
  for (size_t i = 0; i < rank; ++i) {
    const int64_t in = input[i];
    if (in < 1) {
      return Status::InvalidArgument(name + ": input spatial dim " +
                                     Str(static_cast<int64_t>(i)) + " is " + Str(in) +
                                     ", must be >= 1");
    }
    const int64_t op_pad = output_padding.empty() ? 0 : output_padding[i];
    const int64_t k = g.kernel[i], s = g.strides[i], d = g.dilations[i];
    const bool same = attrs.auto_pad == AutoPad::kSameUpper || attrs.auto_pad == AutoPad::kSameLower;
    if (!out_spatial.empty() || same) {
      const int64_t out = out_spatial.empty() ? in * s : out_spatial[i];
      if (out < 1 || out > kMaxWindowExtent) {
        return Status::InvalidArgument(name + ": output_shape value " + Str(out) +
                                       " is out of range [1, " + Str(kMaxWindowExtent) + "]");
      }
      const AxisPads p =
          TransposePadsForOutput(in, k, s, d, op_pad, out, attrs.auto_pad == AutoPad::kSameUpper);
      g.pad_begin[i] = p.begin;
      g.pad_end[i] = p.end;
      g.output[i] = out;
    } else {
      if (attrs.auto_pad == AutoPad::kNotSet) {
        g.pad_begin[i] = attrs.pads[i];
        g.pad_end[i] = attrs.pads[i + rank];
      }
      g.output[i] = TransposeOutputSize(in, k, s, d, op_pad, g.pad_begin[i], g.pad_end[i]);
      if (g.output[i] < 1) {
        return Status::InvalidArgument(name + ": pads " + Str(g.pad_begin[i]) + " + " +
                                       Str(g.pad_end[i]) + " on spatial axis " +
                                       Str(static_cast<int64_t>(i)) +
                                       " leave no output (full extent " +
                                       Str(TransposeOutputSize(in, k, s, d, op_pad, 0, 0)) + ")");
      }
    }
  }
  return g;
}

std::vector<GridRun> SplitIntoRuns(std::span<const int64_t> dims, int64_t first, int64_t count) {
  std::vector<GridRun> runs;
  if (dims.empty()) return runs;
  const size_t last = dims.size() - 1;
  const int64_t width = dims[last];
  if (width <= 0) return runs;
  for (int64_t p = first; p < first + count;) {
    GridRun run;
    int64_t row = p / width;
    run.begin = p % width;
    run.end = std::min(width, run.begin + (first + count - p));
    run.offset = p - first;
    run.outer.assign(last, 0);
    for (size_t j = last; j > 0; --j) {
      run.outer[j - 1] = row % dims[j - 1];
      row /= dims[j - 1];
    }
    p += run.end - run.begin;
    runs.push_back(std::move(run));
  }
  return runs;
}

WindowWalk::WindowWalk(const WindowGeometry& g, std::span<const int64_t> from, std::span<const int64_t> to)
    : g_(g), from_(from), to_(to) {
  const size_t r = g.rank();
  const size_t last = r - 1;
  to_strides_.assign(r, 1);
  for (size_t j = last; j > 0; --j) to_strides_[j - 1] = to_strides_[j] * to[j];
  for (int64_t t = 0; t < g.kernel[last]; ++t) {
    inner_.push_back(ValidPositions(t, to[last], from[last], g.strides[last], g.dilations[last], g.pad_begin[last]));
  }
}

}  // namespace orrery::ops
