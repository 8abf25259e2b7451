// Resize (opset 10, 11, 13, 18, 19) and Upsample (7, 9): nearest for any
// dtype (an index gather), linear and cubic for float32/float64 as separable
// passes, one per resized axis. The coordinate math lives in
// ops/resize_util.h. Upsample and Resize-10 use the pre-11 behaviour of the
// reference runtimes: asymmetric coordinates, nearest = floor when upsampling
// and ceil when downsampling.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>

#include "ops/cpu/cpu_kernels.h"
#include "ops/cpu/data_movement.h"
#include "ops/cpu/prepared.h"
#include "ops/kernel_util.h"
#include "ops/resize_util.h"
#include "ops/small_vec.h"

namespace orrery::ops::cpu {
namespace {

using resize::AxisSpec;
using resize::AxisTaps;
using resize::CoordMode;
using resize::Mode;
using resize::NearestMode;

struct Inputs {
  int roi = -1, scales = -1, sizes = -1;  // input indices per op/opset; -1 = none
};

Inputs InputLayout(bool upsample, int64_t opset) {
  if (upsample) return opset >= 9 ? Inputs{-1, 1, -1} : Inputs{};
  if (opset < 11) return Inputs{-1, 1, -1};
  return Inputs{1, 2, 3};
}

struct ResizePlan {
  resize::Options opt;
  float extrapolation = 0.0f;
  Shape out;
  std::vector<AxisSpec> axes;  // one per dim
};

Result<resize::Options> ReadOptions(const char* op, bool upsample, const Attributes& attrs,
                                    int64_t opset, float* extrapolation) {
  resize::Options o;
  ORRERY_ASSIGN_OR_RETURN(std::string mode, attrs.GetString("mode", "nearest"));
  Result<Mode> m = resize::ParseMode(mode);
  if (!m.ok()) return m.status().WithPrefix(op);
  o.mode = *m;
  if (upsample || opset < 11) {
    if (o.mode == Mode::kCubic) {
      return Status::InvalidArgument(std::string(op) + ": mode 'cubic' needs opset >= 11");
    }
    o.coord = CoordMode::kAsymmetric;
    o.nearest = NearestMode::kSimple;
    return o;
  }
  ORRERY_ASSIGN_OR_RETURN(std::string coord,
                          attrs.GetString("coordinate_transformation_mode", "half_pixel"));
  Result<CoordMode> c = resize::ParseCoordMode(coord);
  if (!c.ok()) return c.status().WithPrefix(op);
  o.coord = *c;
  ORRERY_ASSIGN_OR_RETURN(std::string nearest,
                          attrs.GetString("nearest_mode", "round_prefer_floor"));
  Result<NearestMode> n = resize::ParseNearestMode(nearest);
  if (!n.ok()) return n.status().WithPrefix(op);
  o.nearest = *n;
  ORRERY_ASSIGN_OR_RETURN(float a, attrs.GetFloat("cubic_coeff_a", -0.75f));
  o.cubic_a = a;
  ORRERY_ASSIGN_OR_RETURN(int64_t exclude, attrs.GetInt("exclude_outside", 0));
  o.exclude_outside = exclude != 0;
  ORRERY_ASSIGN_OR_RETURN(*extrapolation, attrs.GetFloat("extrapolation_value", 0.0f));
  ORRERY_ASSIGN_OR_RETURN(int64_t antialias, attrs.GetInt("antialias", 0));
  if (antialias != 0) return Status::InvalidArgument("Resize: unsupported antialias=1");
  return o;
}

Result<std::vector<double>> ReadFloats(const Tensor& t, const char* op, const char* what) {
  if (t.shape().size() != 1) {
    return Status::InvalidArgument(std::string(op) + ": " + what + " must be 1-D");
  }
  std::vector<double> v(static_cast<size_t>(t.num_elements()));
  for (size_t i = 0; i < v.size(); ++i) {
    if (t.dtype() == DType::kFloat32) {
      v[i] = t.data<float>()[i];
    } else if (t.dtype() == DType::kFloat64) {
      v[i] = t.data<double>()[i];
    } else {
      return Status::InvalidArgument(std::string(op) + ": unsupported dtype " +
                                     std::string(DTypeName(t.dtype())) + " for " + what);
    }
  }
  return v;
}

// Maps per-`axes` values onto every dim (opset 18 `axes`); dims outside
// `axes` keep their value in `base`.
template <typename V>
Result<std::vector<V>> ExpandToRank(const std::vector<V>& v, const std::vector<int64_t>& axes,
                                    std::vector<V> base, const char* what) {
  const size_t want = axes.empty() ? base.size() : axes.size();
  if (v.size() != want) {
    return Status::InvalidArgument("Resize: " + std::string(what) + " has " +
                                   std::to_string(v.size()) + " values, expected " +
                                   std::to_string(want));
  }
  if (axes.empty()) return v;
  for (size_t i = 0; i < axes.size(); ++i) base[static_cast<size_t>(axes[i])] = v[i];
  return base;
}

// Output dims from untrusted scales/sizes must stay far from int64 limits
// before they are converted and CheckedNumElements sees them.
constexpr double kMaxDim = static_cast<double>(int64_t{1} << 40);
// A resized axis gets sampling tables of up to 68 bytes per output position,
// which must stay bounded even when every other dim is 1.
constexpr int64_t kMaxResizedDim = int64_t{1} << 24;

// Opset 18 `axes`, normalized; empty = every dim.
Result<std::vector<int64_t>> ReadResizeAxes(const char* op, bool upsample, const Attributes& attrs,
                                            int64_t opset, size_t rank) {
  std::vector<int64_t> axes;
  if (upsample || opset < 18 || !attrs.Has("axes")) return axes;
  ORRERY_ASSIGN_OR_RETURN(axes, attrs.GetInts("axes"));
  std::vector<bool> seen(rank, false);
  for (int64_t& a : axes) {
    Result<int64_t> n = NormalizeAxis(a, static_cast<int64_t>(rank));
    if (!n.ok()) return n.status().WithPrefix(op);
    if (seen[static_cast<size_t>(*n)]) return Status::InvalidArgument("Resize: axes repeat");
    seen[static_cast<size_t>(*n)] = true;
    a = *n;
  }
  return axes;
}

// [start_0 .. start_{r-1}, end_0 .. end_{r-1}] over every dim; [0, 1] unless
// tf_crop_and_resize reads it from the roi input.
Result<std::vector<double>> ReadRoi(const char* op, const Tensor* roi, bool crop,
                                    const std::vector<int64_t>& axes, size_t rank) {
  std::vector<double> v(2 * rank, 0.0);
  for (size_t d = 0; d < rank; ++d) v[rank + d] = 1.0;
  if (!crop) return v;
  if (roi == nullptr) return Status::InvalidArgument("Resize: tf_crop_and_resize needs roi");
  ORRERY_ASSIGN_OR_RETURN(std::vector<double> r, ReadFloats(*roi, op, "roi"));
  const size_t k = axes.empty() ? rank : axes.size();
  if (r.size() != 2 * k) {
    return Status::InvalidArgument("Resize: roi has " + std::to_string(r.size()) +
                                   " values, expected " + std::to_string(2 * k));
  }
  for (size_t i = 0; i < k; ++i) {
    const size_t d = axes.empty() ? i : static_cast<size_t>(axes[i]);
    v[d] = r[i];
    v[rank + d] = r[k + i];
  }
  return v;
}

bool IsResized(const std::vector<int64_t>& axes, size_t d) {
  return axes.empty() || std::find(axes.begin(), axes.end(), static_cast<int64_t>(d)) != axes.end();
}

// Output dims and scales from the sizes input (opset 18 aspect-ratio policy).
Status PlanFromSizes(const char* op, const Tensor& sizes, const Shape& in,
                     const std::vector<int64_t>& axes, const Attributes& attrs, int64_t opset,
                     ResizePlan* p) {
  if (sizes.dtype() != DType::kInt64) return Status::InvalidArgument("Resize: sizes must be int64");
  ORRERY_ASSIGN_OR_RETURN(std::vector<int64_t> s0, ReadInts(sizes, op, "sizes"));
  ORRERY_ASSIGN_OR_RETURN(std::vector<int64_t> s, ExpandToRank<int64_t>(s0, axes, in, "sizes"));
  const size_t rank = in.size();
  for (size_t d = 0; d < rank; ++d) {
    if (s[d] < 0 || static_cast<double>(s[d]) > kMaxDim) {
      return Status::InvalidArgument("Resize: invalid size " + std::to_string(s[d]));
    }
  }
  ORRERY_ASSIGN_OR_RETURN(std::string policy,
                          attrs.GetString("keep_aspect_ratio_policy", "stretch"));
  if (opset < 18) policy = "stretch";
  if (policy == "stretch") {
    for (size_t d = 0; d < rank; ++d) {
      p->out[d] = s[d];
      p->axes[d].scale = in[d] == 0 ? 1.0 : static_cast<double>(s[d]) / static_cast<double>(in[d]);
    }
    return Status::Ok();
  }
  if (policy != "not_larger" && policy != "not_smaller") {
    return Status::InvalidArgument("Resize: unsupported keep_aspect_ratio_policy '" + policy + "'");
  }
  // One scale for every resized axis; the sizes bound it from above or below.
  const bool not_larger = policy == "not_larger";
  double scale = not_larger ? std::numeric_limits<double>::infinity() : 0.0;
  for (size_t d = 0; d < rank; ++d) {
    if (!IsResized(axes, d) || in[d] == 0) continue;
    const double r = static_cast<double>(s[d]) / static_cast<double>(in[d]);
    scale = not_larger ? std::min(scale, r) : std::max(scale, r);
  }
  if (!std::isfinite(scale)) scale = 1.0;
  for (size_t d = 0; d < rank; ++d) {
    if (!IsResized(axes, d)) continue;
    const double v = std::floor(scale * static_cast<double>(in[d]) + 0.5);
    if (v > kMaxDim) return Status::InvalidArgument("Resize: output dim too large");
    p->out[d] = static_cast<int64_t>(v);
    p->axes[d].scale = scale;
  }
  return Status::Ok();
}

// Output dims from scales: floor(in * scale), times the roi extent when cropping.
Status PlanFromScales(const char* op, const Tensor& scales, const Shape& in,
                      const std::vector<int64_t>& axes, const std::vector<double>& roi, bool crop,
                      ResizePlan* p) {
  const size_t rank = in.size();
  ORRERY_ASSIGN_OR_RETURN(std::vector<double> s0, ReadFloats(scales, op, "scales"));
  ORRERY_ASSIGN_OR_RETURN(std::vector<double> s,
                          ExpandToRank<double>(s0, axes, std::vector<double>(rank, 1.0), "scales"));
  for (size_t d = 0; d < rank; ++d) {
    if (!(s[d] > 0) || !std::isfinite(s[d])) {
      return Status::InvalidArgument(std::string(op) + ": scales must be positive, got " +
                                     std::to_string(s[d]));
    }
    const double extent = crop ? roi[rank + d] - roi[d] : 1.0;
    const double v = std::floor(static_cast<double>(in[d]) * extent * s[d]);
    if (!(v >= 0) || v > kMaxDim) {
      return Status::InvalidArgument(std::string(op) + ": output dim " + std::to_string(v) +
                                     " is out of range");
    }
    p->out[d] = static_cast<int64_t>(v);
    p->axes[d].scale = s[d];
  }
  return Status::Ok();
}

Result<ResizePlan> MakeResizePlan(bool upsample, const Shape& in, DType dtype,
                                  const Attributes& attrs, int64_t opset, const Tensor* roi,
                                  const Tensor* scales, const Tensor* sizes) {
  const char* op = upsample ? "Upsample" : "Resize";
  ResizePlan p;
  ORRERY_ASSIGN_OR_RETURN(p.opt, ReadOptions(op, upsample, attrs, opset, &p.extrapolation));
  const bool floating = dtype == DType::kFloat32 || dtype == DType::kFloat64;
  if (p.opt.mode != Mode::kNearest && !floating) {
    return Status::InvalidArgument(std::string(op) + ": unsupported dtype " +
                                   std::string(DTypeName(dtype)) + " for mode linear/cubic");
  }
  const bool crop = p.opt.coord == CoordMode::kTfCropAndResize;
  if (crop && !floating) {
    return Status::InvalidArgument(std::string(op) + ": unsupported dtype " +
                                   std::string(DTypeName(dtype)) + " for tf_crop_and_resize");
  }
  const size_t rank = in.size();
  ORRERY_ASSIGN_OR_RETURN(std::vector<int64_t> axes,
                          ReadResizeAxes(op, upsample, attrs, opset, rank));
  ORRERY_ASSIGN_OR_RETURN(std::vector<double> roi_v, ReadRoi(op, roi, crop, axes, rank));
  p.out = in;
  p.axes.resize(rank);
  if (sizes != nullptr) {
    ORRERY_RETURN_IF_ERROR(PlanFromSizes(op, *sizes, in, axes, attrs, opset, &p));
  } else if (scales != nullptr) {
    ORRERY_RETURN_IF_ERROR(PlanFromScales(op, *scales, in, axes, roi_v, crop, &p));
  } else {
    return Status::InvalidArgument(std::string(op) + ": needs scales or sizes");
  }
  for (size_t d = 0; d < rank; ++d) {
    if (in[d] == 0 && p.out[d] != 0) {
      return Status::InvalidArgument(std::string(op) + ": cannot resize an empty dim to " +
                                     std::to_string(p.out[d]));
    }
    p.axes[d].in_len = in[d];
    p.axes[d].out_len = p.out[d];
    p.axes[d].roi_start = roi_v[d];
    p.axes[d].roi_end = roi_v[rank + d];
    if (p.out[d] > kMaxResizedDim && !resize::IsTrivialIdentity(p.opt, p.axes[d])) {
      return Status::InvalidArgument(std::string(op) + ": resized dim " + std::to_string(p.out[d]) +
                                     " exceeds the limit of " + std::to_string(kMaxResizedDim));
    }
  }
  return p;
}

// The tensors MakeResizePlan needs, from whichever side knows them.
struct PlanArgs {
  const Tensor* roi = nullptr;
  const Tensor* scales = nullptr;
  const Tensor* sizes = nullptr;
  bool unknown = false;
};

// numel_of(i): element count of input i, -1 when absent; value_of(i): its
// value or nullptr.
template <typename NumelOf, typename ValueOf>
Result<PlanArgs> SelectArgs(bool upsample, const Attributes& attrs, int64_t opset, NumelOf numel_of,
                            ValueOf value_of) {
  const Inputs in = InputLayout(upsample, opset);
  PlanArgs a;
  auto nonempty = [&](int i) { return i >= 0 && numel_of(static_cast<size_t>(i)) > 0; };
  auto need = [&](int i, const Tensor** dst) {
    *dst = value_of(static_cast<size_t>(i));
    if (*dst == nullptr) a.unknown = true;
  };
  if (upsample && opset < 9) {
    if (!attrs.Has("scales"))
      return Status::InvalidArgument("Upsample: scales attribute is required");
    return a;  // scales come from the attribute
  }
  const bool use_scales = nonempty(in.scales);
  const bool use_sizes = nonempty(in.sizes);
  if (use_scales == use_sizes) {
    return Status::InvalidArgument(std::string(upsample ? "Upsample" : "Resize") +
                                   ": exactly one of scales and sizes must be non-empty");
  }
  if (use_scales) need(in.scales, &a.scales);
  if (use_sizes) need(in.sizes, &a.sizes);
  ORRERY_ASSIGN_OR_RETURN(std::string coord,
                          attrs.GetString("coordinate_transformation_mode", "half_pixel"));
  if (in.roi >= 0 && coord == "tf_crop_and_resize" && nonempty(in.roi)) need(in.roi, &a.roi);
  return a;
}

// Upsample-7 keeps its scales in an attribute; wrap them as a tensor.
Result<Tensor> AttrScales(const Attributes& attrs) {
  ORRERY_ASSIGN_OR_RETURN(std::vector<float> s, attrs.GetFloats("scales"));
  Tensor t(DType::kFloat32, {static_cast<int64_t>(s.size())});
  if (!s.empty()) std::memcpy(t.raw_data(), s.data(), s.size() * sizeof(float));
  return t;
}

template <bool kUpsample>
Status InferResize(const InferContext& ctx, std::vector<TensorType>* outputs) {
  const char* op = kUpsample ? "Upsample" : "Resize";
  const TensorType& x = ctx.inputs[0];
  ORRERY_RETURN_IF_ERROR(RequireMovable(x, op, "input X"));
  ORRERY_ASSIGN_OR_RETURN(PlanArgs a, SelectArgs(
                                          kUpsample, ctx.attrs, ctx.opset,
                                          [&](size_t i) {
                                            const TensorType* t = OptionalInput(ctx, i);
                                            return t == nullptr ? int64_t{-1}
                                                                : NumElements(t->shape);
                                          },
                                          [&](size_t i) { return ctx.value(i); }));
  if (a.unknown) return Status::Unavailable(std::string(op) + " needs the values of scales/sizes");
  Tensor attr_scales;
  if (kUpsample && ctx.opset < 9) {
    ORRERY_ASSIGN_OR_RETURN(attr_scales, AttrScales(ctx.attrs));
    a.scales = &attr_scales;
  }
  ORRERY_ASSIGN_OR_RETURN(ResizePlan p, MakeResizePlan(kUpsample, x.shape, x.dtype, ctx.attrs,
                                                       ctx.opset, a.roi, a.scales, a.sizes));
  outputs->assign(1, TensorType{x.dtype, std::move(p.out)});
  return Status::Ok();
}

// ---- nearest: a gather of whole elements ----

template <typename U>
void NearestGather(const U* src, const Shape& in, const std::vector<AxisTaps>& taps, U extrap,
                   const Shape& out, U* dst) {
  const size_t rank = out.size();
  SmallVec<int64_t> strides(rank, 1);
  for (size_t d = rank; d-- > 1;) strides[d - 1] = strides[d] * in[d];
  const int64_t row = out[rank - 1];
  const AxisTaps& last = taps[rank - 1];
  bool last_has_outside = false;
  for (uint8_t o : last.outside) last_has_outside = last_has_outside || o != 0;
  // Integer upscaling (index[i] == i / k) repeats each element k times, a
  // loop the compiler vectorizes, unlike the general gather.
  int64_t repeat = 0;
  const int64_t in_row_len = in[rank - 1];
  if (!last.index.empty() && !last_has_outside && in_row_len > 0 && row % in_row_len == 0) {
    repeat = row / in_row_len;
    for (int64_t i = 0; i < row && repeat > 0; ++i) {
      if (last.index[static_cast<size_t>(i)] != i / repeat) repeat = 0;
    }
  }
  SmallVec<int64_t> coord(rank - 1, 0);
  const int64_t rows = DimProduct(out, 0, rank - 1);
  int64_t prev_offset = -1;
  for (int64_t r = 0; r < rows; ++r) {
    int64_t offset = 0;
    bool outside = false;
    for (size_t d = 0; d + 1 < rank; ++d) {
      const size_t c = static_cast<size_t>(coord[d]);
      outside = outside || taps[d].Outside(c);
      offset += taps[d].Index(c) * strides[d];
    }
    U* out_row = dst + r * row;
    if (outside) {
      for (int64_t i = 0; i < row; ++i) out_row[i] = extrap;
      offset = -1;
    } else if (offset == prev_offset) {
      // Upsampling repeats source rows; copy the row just written.
      std::memcpy(out_row, out_row - row, static_cast<size_t>(row) * sizeof(U));
    } else if (last.index.empty()) {  // untouched last axis
      std::memcpy(out_row, src + offset, static_cast<size_t>(row) * sizeof(U));
    } else if (last_has_outside) {
      const U* in_row = src + offset;
      for (int64_t i = 0; i < row; ++i) {
        out_row[i] = last.outside[static_cast<size_t>(i)]
                         ? extrap
                         : in_row[last.index[static_cast<size_t>(i)]];
      }
    } else if (repeat == 2) {
      const U* in_row = src + offset;
      for (int64_t j = 0; j < in_row_len; ++j) out_row[2 * j] = out_row[2 * j + 1] = in_row[j];
    } else if (repeat > 0) {
      const U* in_row = src + offset;
      for (int64_t j = 0; j < in_row_len; ++j) {
        for (int64_t k = 0; k < repeat; ++k) out_row[j * repeat + k] = in_row[j];
      }
    } else {
      const U* in_row = src + offset;
      const int64_t* idx = last.index.data();
      for (int64_t i = 0; i < row; ++i) out_row[i] = in_row[idx[i]];
    }
    prev_offset = offset;
    for (size_t d = rank - 1; d-- > 0;) {
      if (++coord[d] < out[d]) break;
      coord[d] = 0;
    }
  }
}

template <typename U>
U ExtrapolationBits(DType dtype, float value) {
  U bits{};
  if (dtype == DType::kFloat32 && sizeof(U) == sizeof(float))
    std::memcpy(&bits, &value, sizeof(float));
  if (dtype == DType::kFloat64 && sizeof(U) == sizeof(double)) {
    const double d = value;
    std::memcpy(&bits, &d, sizeof(double));
  }
  return bits;
}

// ---- linear / cubic: one separable pass per resized axis ----

template <typename T>
void InterpolateAxis(const T* src, const Shape& cur, size_t axis, const AxisTaps& t,
                     int64_t out_len, T extrap, T* dst) {
  const int64_t outer = DimProduct(cur, 0, axis);
  const int64_t in_len = cur[axis];
  const int64_t inner = DimProduct(cur, axis + 1, cur.size());
  const size_t taps = static_cast<size_t>(t.taps);
  std::vector<T> w(t.weight.size());
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<T>(t.weight[i]);
  for (int64_t o = 0; o < outer; ++o) {
    const T* s = src + o * in_len * inner;
    T* d = dst + o * out_len * inner;
    for (int64_t y = 0; y < out_len; ++y) {
      const size_t yy = static_cast<size_t>(y);
      T* drow = d + y * inner;
      if (t.outside[yy]) {
        for (int64_t i = 0; i < inner; ++i) drow[i] = extrap;
        continue;
      }
      const int64_t* idx = &t.index[yy * taps];
      const T* wy = &w[yy * taps];
      if (inner == 1) {
        T acc = 0;
        for (size_t j = 0; j < taps; ++j) acc += wy[j] * s[idx[j]];
        drow[0] = acc;
        continue;
      }
      const T* s0 = s + idx[0] * inner;
      for (int64_t i = 0; i < inner; ++i) drow[i] = wy[0] * s0[i];
      for (size_t j = 1; j < taps; ++j) {
        const T* sj = s + idx[j] * inner;
        const T wj = wy[j];
        for (int64_t i = 0; i < inner; ++i) drow[i] += wj * sj[i];
      }
    }
  }
}

// The common image case: only the last two axes resize. Each output row is
// a weighted sum of a few horizontally resized source rows, which are kept in
// a small cache (consecutive output rows share them), so there is no
// full-size intermediate and everything stays in L1/L2.
// Weights of the last two axes in T and the row cache's scratch.
template <typename T>
struct Last2Tables {
  std::vector<T> wh, ww;
};

template <typename T>
Last2Tables<T> MakeLast2Tables(const std::vector<AxisTaps>& taps) {
  Last2Tables<T> t;
  const size_t rank = taps.size();
  if (rank >= 2) t.wh.assign(taps[rank - 2].weight.begin(), taps[rank - 2].weight.end());
  else t.wh = {T(1)};
  t.ww.assign(taps[rank - 1].weight.begin(), taps[rank - 1].weight.end());
  return t;
}

// Bytes of scratch InterpolateLast2 needs: kh cached rows of out_w values,
// their tags, pins and row pointers.
int64_t Last2ScratchBytes(const std::vector<AxisTaps>& taps, const Shape& out, size_t elem) {
  const size_t rank = out.size();
  const int64_t kh = rank >= 2 ? taps[rank - 2].taps : 1;
  return kh * (out[rank - 1] * static_cast<int64_t>(elem) + 8 + 8 + 8);
}

template <typename T>
void InterpolateLast2(const T* src, const Shape& in, const std::vector<AxisTaps>& taps,
                      const Shape& out, T extrap, T* dst, const Last2Tables<T>& tables,
                      std::byte* scratch) {
  const size_t rank = out.size();
  static const AxisTaps unit = [] {  // rank 1: a single identity row
    AxisTaps u;
    u.index = {0};
    u.weight = {1.0};
    u.outside = {0};
    u.identity = true;
    return u;
  }();
  const AxisTaps& th = rank >= 2 ? taps[rank - 2] : unit;
  const AxisTaps& tw = taps[rank - 1];
  const int64_t in_h = rank >= 2 ? in[rank - 2] : 1, in_w = in[rank - 1];
  const int64_t out_h = rank >= 2 ? out[rank - 2] : 1, out_w = out[rank - 1];
  const int64_t planes = rank >= 2 ? DimProduct(out, 0, rank - 2) : 1;
  const size_t kh = static_cast<size_t>(th.taps), kw = static_cast<size_t>(tw.taps);
  const std::vector<T>& wh = tables.wh;
  const std::vector<T>& ww = tables.ww;
  auto horizontal = [&](const T* row, T* o) {
    if (tw.identity) {
      std::memcpy(o, row, static_cast<size_t>(out_w) * sizeof(T));
      return;
    }
    for (int64_t x = 0; x < out_w; ++x) {
      const size_t xx = static_cast<size_t>(x);
      if (tw.Outside(xx)) {
        o[x] = extrap;
        continue;
      }
      const int64_t* idx = &tw.index[xx * kw];
      const T* w = &ww[xx * kw];
      if (kw == 2) {  // linear: the common case, without the tap loop
        o[x] = w[0] * row[idx[0]] + w[1] * row[idx[1]];
        continue;
      }
      T acc = w[0] * row[idx[0]];
      for (size_t j = 1; j < kw; ++j) acc += w[j] * row[idx[j]];
      o[x] = acc;
    }
  };
  // Scratch layout: tags, row pointers, pins (8 bytes each), then the rows.
  auto* tag = reinterpret_cast<int64_t*>(scratch);
  auto* rows = reinterpret_cast<const T**>(scratch + 8 * kh);
  auto* pinned = reinterpret_cast<uint8_t*>(scratch + 16 * kh);
  auto* cache = reinterpret_cast<T*>(scratch + 24 * kh);
  for (int64_t p = 0; p < planes; ++p) {
    const T* plane = src + p * in_h * in_w;
    T* oplane = dst + p * out_h * out_w;
    std::fill(tag, tag + kh, int64_t{-1});
    for (int64_t y = 0; y < out_h; ++y) {
      const size_t yy = static_cast<size_t>(y);
      T* orow = oplane + y * out_w;
      if (th.Outside(yy)) {
        for (int64_t x = 0; x < out_w; ++x) orow[x] = extrap;
        continue;
      }
      if (th.identity) {
        horizontal(plane + y * in_w, orow);
        continue;
      }
      std::fill(pinned, pinned + kh, uint8_t{0});
      for (size_t j = 0; j < kh; ++j) {
        const int64_t r = th.index[yy * kh + j];
        if (tw.identity) {
          rows[j] = plane + r * in_w;
          continue;
        }
        size_t slot = kh;
        for (size_t c = 0; c < kh; ++c) {
          if (tag[c] == r) slot = c;
        }
        if (slot == kh) {  // miss: fill a slot no tap of this row uses
          for (size_t c = 0; c < kh && slot == kh; ++c) {
            if (!pinned[c]) slot = c;
          }
          horizontal(plane + r * in_w, &cache[slot * static_cast<size_t>(out_w)]);
          tag[slot] = r;
        }
        pinned[slot] = 1;
        rows[j] = &cache[slot * static_cast<size_t>(out_w)];
      }
      const T* w = &wh[yy * kh];
      for (int64_t x = 0; x < out_w; ++x) orow[x] = w[0] * rows[0][x];
      for (size_t j = 1; j < kh; ++j) {
        const T wj = w[j];
        const T* rj = rows[j];
        for (int64_t x = 0; x < out_w; ++x) orow[x] += wj * rj[x];
      }
    }
  }
}

bool OnlyLast2Resized(const std::vector<AxisTaps>& taps) {
  bool last2 = true;
  for (size_t d = 0; d + 2 < taps.size(); ++d) last2 = last2 && taps[d].identity;
  return last2;
}

// `tables` and `scratch` (Last2ScratchBytes) serve the last-two-axes case;
// other cases allocate their intermediates.
template <typename T>
Status Interpolate(const Tensor& x, const ResizePlan& p, const std::vector<AxisTaps>& taps,
                   Tensor& y, const Last2Tables<T>& tables, std::byte* scratch) {
  const size_t rank = p.out.size();
  if (OnlyLast2Resized(taps)) {
    InterpolateLast2(x.data<T>(), x.shape(), taps, p.out, static_cast<T>(p.extrapolation),
                     y.data<T>(), tables, scratch);
    return Status::Ok();
  }
  // Downsampling axes first so no intermediate exceeds max(input, output).
  std::vector<size_t> order;
  for (size_t d = rank; d-- > 0;) {
    if (!taps[d].identity && p.out[d] < x.shape()[d]) order.push_back(d);
  }
  for (size_t d = rank; d-- > 0;) {
    if (!taps[d].identity && p.out[d] >= x.shape()[d]) order.push_back(d);
  }
  if (order.empty()) {
    std::memcpy(y.raw_data(), x.raw_data(), x.byte_size());
    return Status::Ok();
  }
  const T extrap = static_cast<T>(p.extrapolation);
  Shape cur = x.shape();
  Tensor buf;
  const T* src = x.data<T>();
  for (size_t k = 0; k < order.size(); ++k) {
    const size_t d = order[k];
    Shape next = cur;
    next[d] = p.out[d];
    Tensor out_buf;
    T* dst = nullptr;
    if (k + 1 == order.size()) {
      dst = y.data<T>();
    } else {
      ORRERY_ASSIGN_OR_RETURN(out_buf, Tensor::Allocate(x.dtype(), next));
      dst = out_buf.data<T>();
    }
    InterpolateAxis(src, cur, d, taps[d], p.out[d], extrap, dst);
    buf = std::move(out_buf);
    src = buf.empty() ? nullptr : buf.data<T>();
    cur = std::move(next);
  }
  return Status::Ok();
}

// Plan and tap tables, made once when roi / scales / sizes are constants.
struct PreparedResize : PreparedKernel {
  bool constant = false;
  ResizePlan plan;
  std::vector<AxisTaps> taps;
  Last2Tables<float> f32;
  Last2Tables<double> f64;
};

template <bool kUpsample>
Result<ResizePlan> PlanFor(const Attributes& attrs, int64_t opset, const Shape& x, DType dtype,
                           PlanArgs a) {
  Tensor attr_scales;
  if (kUpsample && opset < 9) {
    ORRERY_ASSIGN_OR_RETURN(attr_scales, AttrScales(attrs));
    a.scales = &attr_scales;
  }
  return MakeResizePlan(kUpsample, x, dtype, attrs, opset, a.roi, a.scales, a.sizes);
}

std::vector<AxisTaps> TapsFor(const ResizePlan& p) {
  std::vector<AxisTaps> taps;
  taps.reserve(p.axes.size());
  for (const AxisSpec& axis : p.axes) taps.push_back(resize::BuildAxisTaps(p.opt, axis));
  return taps;
}

template <bool kUpsample>
Result<Prepared> PrepareResize(const PrepareContext& ctx) {
  auto p = std::make_shared<PreparedResize>();
  const TensorType& x = ctx.inputs[0];
  ORRERY_ASSIGN_OR_RETURN(PlanArgs a, SelectArgs(
                                          kUpsample, ctx.attrs, ctx.opset,
                                          [&](size_t i) {
                                            return i < ctx.inputs.size() && ctx.inputs[i].present()
                                                       ? NumElements(ctx.inputs[i].shape)
                                                       : int64_t{-1};
                                          },
                                          [&](size_t i) { return ctx.value(i); }));
  int64_t scratch = 0;
  if (!a.unknown) {
    ORRERY_ASSIGN_OR_RETURN(p->plan,
                            PlanFor<kUpsample>(ctx.attrs, ctx.opset, x.shape, x.dtype, a));
    p->constant = true;
    if (!p->plan.out.empty()) {
      p->taps = TapsFor(p->plan);
      if (p->plan.opt.mode != Mode::kNearest && OnlyLast2Resized(p->taps)) {
        if (x.dtype == DType::kFloat32) p->f32 = MakeLast2Tables<float>(p->taps);
        if (x.dtype == DType::kFloat64) p->f64 = MakeLast2Tables<double>(p->taps);
        scratch = Last2ScratchBytes(p->taps, p->plan.out, DTypeSize(x.dtype));
      }
    }
  }
  return Prepared{.kernel = std::move(p), .scratch_bytes = scratch};
}

template <bool kUpsample>
Status ComputeResize(const KernelContext& ctx, std::span<Tensor> outputs) {
  if (ctx.prepared == nullptr) {
    return ComputeUnprepared(PrepareResize<kUpsample>, ComputeResize<kUpsample>, ctx, outputs);
  }
  const auto& prepared = *static_cast<const PreparedResize*>(ctx.prepared);
  const Tensor& x = *ctx.inputs[0];
  // Values computed at run time: plan, tables and scratch for this call.
  ResizePlan computed_plan;
  std::vector<AxisTaps> computed_taps;
  const ResizePlan* pp = &prepared.plan;
  const std::vector<AxisTaps>* tp = &prepared.taps;
  if (!prepared.constant) {
    ORRERY_ASSIGN_OR_RETURN(PlanArgs a, SelectArgs(
                                            kUpsample, ctx.attrs, ctx.opset,
                                            [&](size_t i) {
                                              const Tensor* t = OptionalInput(ctx, i);
                                              return t == nullptr ? int64_t{-1} : t->num_elements();
                                            },
                                            [&](size_t i) { return OptionalInput(ctx, i); }));
    ORRERY_ASSIGN_OR_RETURN(computed_plan,
                            PlanFor<kUpsample>(ctx.attrs, ctx.opset, x.shape(), x.dtype(), a));
    pp = &computed_plan;
    if (!computed_plan.out.empty()) computed_taps = TapsFor(computed_plan);
    tp = &computed_taps;
  }
  const ResizePlan& p = *pp;
  const std::vector<AxisTaps>& taps = *tp;
  Tensor& y = outputs[0];
  ORRERY_RETURN_IF_ERROR(CheckOutputShape(y, p.out, kUpsample ? "Upsample" : "Resize"));
  if (y.num_elements() == 0) return Status::Ok();
  if (p.out.empty()) {  // rank 0: nothing to resize
    std::memcpy(y.raw_data(), x.raw_data(), x.byte_size());
    return Status::Ok();
  }
  if (p.opt.mode == Mode::kNearest) {
    const DType dt = x.dtype();
    switch (DTypeSize(dt)) {
      case 1:
        NearestGather(x.data<uint8_t>(), x.shape(), taps, uint8_t{0}, p.out, y.data<uint8_t>());
        break;
      case 2:
        NearestGather(x.data<uint16_t>(), x.shape(), taps, uint16_t{0}, p.out, y.data<uint16_t>());
        break;
      case 4:
        NearestGather(x.data<uint32_t>(), x.shape(), taps,
                      ExtrapolationBits<uint32_t>(dt, p.extrapolation), p.out, y.data<uint32_t>());
        break;
      case 8:
        NearestGather(x.data<uint64_t>(), x.shape(), taps,
                      ExtrapolationBits<uint64_t>(dt, p.extrapolation), p.out, y.data<uint64_t>());
        break;
      default:
        return Status::Internal("Resize: unexpected element size");
    }
    return Status::Ok();
  }
  std::byte* scratch = ThreadScratch(ctx, 0).data();
  std::vector<std::byte> heap;
  const bool have_tables = prepared.constant && OnlyLast2Resized(taps);
  if (!have_tables && OnlyLast2Resized(taps)) {
    heap.resize(static_cast<size_t>(Last2ScratchBytes(taps, p.out, DTypeSize(x.dtype()))) + 8);
    scratch = heap.data();
  }
  if (x.dtype() == DType::kFloat32) {
    Last2Tables<float> local;
    if (!have_tables) local = MakeLast2Tables<float>(taps);
    return Interpolate<float>(x, p, taps, y, have_tables ? prepared.f32 : local, scratch);
  }
  Last2Tables<double> local;
  if (!have_tables) local = MakeLast2Tables<double>(taps);
  return Interpolate<double>(x, p, taps, y, have_tables ? prepared.f64 : local, scratch);
}

template <bool kUpsample>
KernelDef ResizeDef() {
  return KernelDef{.op_type = kUpsample ? "Upsample" : "Resize",
                   .backend = Backend::kCpu,
                   .min_inputs = 1,
                   .max_inputs = kUpsample ? 2 : 4,
                   .infer = InferResize<kUpsample>,
                   .compute = ComputeResize<kUpsample>,
                   .prepare = PrepareResize<kUpsample>};
}

}  // namespace

Status RegisterResizeKernels(OpRegistry* registry) {
  ORRERY_RETURN_IF_ERROR(registry->Register(ResizeDef<false>()));
  ORRERY_RETURN_IF_ERROR(registry->Register(ResizeDef<true>()));
  return Status::Ok();
}

}  // namespace orrery::ops::cpu
