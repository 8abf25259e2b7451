// Pooling over the spatial axes of X [N, C, D1..Dk]:
//   MaxPool (float32/64, int8, uint8; optional int64 Indices output with
//   storage_order), AveragePool (count_include_pad), LpPool (integer p),
//   all with strides, pads, auto_pad, dilations and ceil_mode; and
//   GlobalMaxPool, GlobalAveragePool, GlobalLpPool.
// Each axis gets a table of the kernel taps that land inside the input for
// every output position, so the window loops never test for padding.
#include <cmath>
#include <algorithm>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "ops/conv_util.h"
#include "ops/cpu/cpu_kernels.h"
#include "ops/cpu/elementwise_loops.h"
#include "ops/cpu/prepared.h"
#include "ops/cpu/vec/vec.h"
#include "ops/kernel_util.h"
#include "ops/small_vec.h"

namespace orrery::ops::cpu {
namespace {

enum class PoolKind { kMax, kAverage, kLp };

const char* PoolName(PoolKind kind) {
  switch (kind) {
    case PoolKind::kMax: return "MaxPool";
    case PoolKind::kAverage: return "AveragePool";
    case PoolKind::kLp: return "LpPool";
  }
  return "Pool";
}

struct PoolSetup {
  int64_t n = 0, c = 0;
  WindowGeometry geo;
  bool count_include_pad = false;  // AveragePool
  bool column_major = false;       // MaxPool storage_order = 1
  int64_t p = 2;                   // LpPool
};

Result<PoolSetup> Setup(PoolKind kind, const Shape& x, const Attributes& attrs) {
  const std::string op = PoolName(kind);
  if (x.size() < 3) {
    return Status::InvalidArgument(op + ": input X must have rank >= 3 (N, C, spatial...), got " +
                                   ShapeToString(x));
  }
  PoolSetup s;
  s.n = x[0];
  s.c = x[1];
  const size_t rank = x.size() - 2;
  ORRERY_ASSIGN_OR_RETURN(WindowAttrs wa,
                          ReadWindowAttrs(op, attrs, rank, {.allow_ceil_mode = true}));
  ORRERY_ASSIGN_OR_RETURN(s.geo,
                          ResolveWindow(op, wa, std::span<const int64_t>(x.data() + 2, rank)));
  ORRERY_ASSIGN_OR_RETURN(int64_t include_pad, attrs.GetInt("count_include_pad", 0));
  ORRERY_ASSIGN_OR_RETURN(int64_t storage_order, attrs.GetInt("storage_order", 0));
  ORRERY_ASSIGN_OR_RETURN(s.p, attrs.GetInt("p", 2));
  if (include_pad != 0 && include_pad != 1) {
    return Status::InvalidArgument(op + ": count_include_pad must be 0 or 1, got " +
                                   std::to_string(include_pad));
  }
  if (storage_order != 0 && storage_order != 1) {
    return Status::InvalidArgument(op + ": storage_order must be 0 or 1, got " +
                                   std::to_string(storage_order));
  }
  if (kind == PoolKind::kLp && (s.p < 1 || s.p > 64)) {
    return Status::InvalidArgument(op + ": unsupported p = " + std::to_string(s.p) +
                                   " (integers 1..64)");
  }
  s.count_include_pad = include_pad == 1;
  s.column_major = storage_order == 1;
  return s;
}

Shape OutputShape(int64_t n, int64_t c, const std::vector<int64_t>& spatial) {
  Shape out{n, c};
  out.insert(out.end(), spatial.begin(), spatial.end());
  return out;
}

// Output count for the node: the executor passes the declared outputs; 0 means
// unknown (direct kernel calls), which gets the required ones only.
size_t DeclaredOutputs(const InferContext& ctx) {
  return ctx.num_outputs == 0 ? 1 : ctx.num_outputs;
}

template <PoolKind kKind>
Status InferPool(const InferContext& ctx, std::vector<TensorType>* outputs) {
  const std::string op = PoolName(kKind);
  const TensorType& x = ctx.inputs[0];
  const bool ok_dtype = x.dtype == DType::kFloat32 || x.dtype == DType::kFloat64 ||
                        (kKind == PoolKind::kMax &&
                         (x.dtype == DType::kInt8 || x.dtype == DType::kUint8));
  if (!ok_dtype) {
    return Status::InvalidArgument(op + ": unsupported dtype " + std::string(DTypeName(x.dtype)));
  }
  ORRERY_ASSIGN_OR_RETURN(PoolSetup s, Setup(kKind, x.shape, ctx.attrs));
  const size_t n_out = DeclaredOutputs(ctx);
  if (n_out > (kKind == PoolKind::kMax ? 2u : 1u)) {
    return Status::InvalidArgument(op + ": too many outputs (" + std::to_string(n_out) + ")");
  }
  Shape shape = OutputShape(s.n, s.c, s.geo.output);
  outputs->assign(1, TensorType{x.dtype, shape});
  if (n_out == 2) outputs->push_back(TensorType{DType::kInt64, std::move(shape)});
  return Status::Ok();
}

// Per-axis window tables: valid taps per output position and, for
// count_include_pad, the taps inside the padded input.
struct AxisTable {
  std::vector<IndexRange> taps;
  std::vector<int64_t> padded;
};

std::vector<AxisTable> BuildTables(const WindowGeometry& g) {
  std::vector<AxisTable> tables(g.rank());
  for (size_t j = 0; j < g.rank(); ++j) {
    const int64_t padded_in = g.input[j] + g.pad_begin[j] + g.pad_end[j];
    for (int64_t o = 0; o < g.output[j]; ++o) {
      tables[j].taps.push_back(
          ValidTaps(o, g.input[j], g.kernel[j], g.strides[j], g.dilations[j], g.pad_begin[j]));
      tables[j].padded.push_back(
          ValidTaps(o, padded_in, g.kernel[j], g.strides[j], g.dilations[j], 0).size());
    }
  }
  return tables;
}

// Reducers: Reset, Add(value, spatial offset), Finish(valid taps, padded taps).
template <typename T>
struct MaxReducer {
  T best;
  int64_t best_pos;
  void Reset() {
    best = std::numeric_limits<T>::lowest();
    best_pos = -1;
  }
  void Add(T v, int64_t pos) {
    if (v > best) {  // first maximum wins; NaN never replaces a value
      best = v;
      best_pos = pos;
    }
  }
  T Finish(int64_t, int64_t) const { return best; }
};

template <typename T>
struct AverageReducer {
  bool include_pad;
  T sum;
  void Reset() { sum = T(0); }
  void Add(T v, int64_t) { sum += v; }
  T Finish(int64_t valid, int64_t padded) const {
    const int64_t count = include_pad ? padded : valid;
    return count == 0 ? T(0) : sum / static_cast<T>(count);
  }
};

template <typename T>
struct LpReducer {
  int64_t p;
  T sum;
  void Reset() { sum = T(0); }
  void Add(T v, int64_t) {
    const T a = std::abs(v);
    sum += p == 1 ? a : p == 2 ? a * a : std::pow(a, static_cast<T>(p));
  }
  T Finish(int64_t, int64_t) const {
    return p == 1 ? sum : p == 2 ? std::sqrt(sum) : std::pow(sum, T(1) / static_cast<T>(p));
  }
};

// Pools one (n, c) plane; calls on_output(out_pos, reducer, valid, padded).
template <typename T, typename Reducer, typename OnOutput>
void PoolPlane(const T* x, const WindowGeometry& g, const std::vector<AxisTable>& tables,
               Reducer& red, OnOutput&& on_output) {
  const size_t r = g.rank();
  if (r == 2) {
    const AxisTable& th = tables[0];
    const AxisTable& tw = tables[1];
    const int64_t w_in = g.input[1], w_out = g.output[1];
    const int64_t sh = g.strides[0], sw = g.strides[1];
    const int64_t dh = g.dilations[0], dw = g.dilations[1];
    const int64_t ph = g.pad_begin[0], pw = g.pad_begin[1];
    for (int64_t oh = 0; oh < g.output[0]; ++oh) {
      const IndexRange rh = th.taps[static_cast<size_t>(oh)];
      for (int64_t ow = 0; ow < w_out; ++ow) {
        const IndexRange rw = tw.taps[static_cast<size_t>(ow)];
        red.Reset();
        for (int64_t kh = rh.begin; kh < rh.end; ++kh) {
          const int64_t row = (oh * sh - ph + kh * dh) * w_in;
          int64_t pos = row + ow * sw - pw + rw.begin * dw;
          for (int64_t kw = rw.begin; kw < rw.end; ++kw, pos += dw) red.Add(x[pos], pos);
        }
        on_output(oh * w_out + ow, red, rh.size() * rw.size(),
                  th.padded[static_cast<size_t>(oh)] * tw.padded[static_cast<size_t>(ow)]);
      }
    }
    return;
  }
  // Any rank: an odometer over output positions and one over the outer taps.
  const size_t last = r - 1;
  SmallVec<int64_t> in_strides(r, 1);
  for (size_t j = last; j > 0; --j) in_strides[j - 1] = in_strides[j] * g.input[j];
  SmallVec<int64_t> o(r, 0), tap(r, 0);
  const int64_t out_vol = g.output_volume();
  for (int64_t p = 0; p < out_vol; ++p) {
    red.Reset();
    int64_t valid = 1, padded = 1;
    for (size_t j = 0; j < r; ++j) {
      valid *= tables[j].taps[static_cast<size_t>(o[j])].size();
      padded *= tables[j].padded[static_cast<size_t>(o[j])];
      tap[j] = tables[j].taps[static_cast<size_t>(o[j])].begin;
    }
    if (valid > 0) {
      const IndexRange inner = tables[last].taps[static_cast<size_t>(o[last])];
      while (true) {
        int64_t pos = 0;
        for (size_t j = 0; j < last; ++j) {
          pos += (o[j] * g.strides[j] - g.pad_begin[j] + tap[j] * g.dilations[j]) * in_strides[j];
        }
        pos += o[last] * g.strides[last] - g.pad_begin[last] + inner.begin * g.dilations[last];
        for (int64_t t = inner.begin; t < inner.end; ++t, pos += g.dilations[last]) {
          red.Add(x[pos], pos);
        }
        size_t j = last;
        bool done = true;
        while (j > 0) {
          --j;
          const IndexRange rj = tables[j].taps[static_cast<size_t>(o[j])];
          if (++tap[j] < rj.end) {
            done = false;
            break;
          }
          tap[j] = rj.begin;
        }
        if (done) break;
      }
    }
    on_output(p, red, valid, padded);
    for (size_t j = r; j > 0; --j) {
      if (++o[j - 1] < g.output[j - 1]) break;
      o[j - 1] = 0;
    }
  }
}

// Flat index of spatial offset `pos` in column-major order over `dims`.
int64_t ColumnMajor(int64_t pos, const std::vector<int64_t>& dims) {
  const size_t r = dims.size();
  SmallVec<int64_t> coord(r, 0);
  for (size_t j = r; j > 0; --j) {
    coord[j - 1] = pos % dims[j - 1];
    pos /= dims[j - 1];
  }
  int64_t index = 0, stride = 1;
  for (size_t j = 0; j < r; ++j) {
    index += coord[j] * stride;
    stride *= dims[j];
  }
  return index;
}

// Everything a pooling call needs that depends only on the input shape.
struct PreparedPool : PreparedKernel {
  PoolSetup setup;
  WindowGeometry geo;  // rank >= 2 (1-D windows get a leading unit axis)
  std::vector<AxisTable> tables;
  // 2-D tables for vec::Pool2d (float32 MaxPool / AveragePool).
  std::vector<int64_t> taps_h, padded_h;
  std::vector<float> col_valid, col_padded;
  std::vector<int32_t> flat_masks;  // vec::Pool2dFlatTables, when it applies
  std::vector<float> flat_count;
  std::vector<uint64_t> flat_lane_masks;  // vec::Pool2dFlatLaneMasks
  vec::Pool2d pool2d;
};

template <PoolKind kKind>
Result<Prepared> PreparePool(const PrepareContext& ctx) {
  auto p = std::make_shared<PreparedPool>();
  ORRERY_ASSIGN_OR_RETURN(p->setup, Setup(kKind, ctx.inputs[0].shape, ctx.attrs));
  p->geo = p->setup.geo.rank() == 1 ? p->setup.geo.WithLeadingUnitAxis() : p->setup.geo;
  p->tables = BuildTables(p->geo);
  const WindowGeometry& g = p->geo;
  int64_t scratch = 0;
  if (g.rank() == 2 && ctx.inputs[0].dtype == DType::kFloat32 && kKind != PoolKind::kLp) {
    for (const IndexRange& r : p->tables[0].taps) {
      p->taps_h.push_back(r.begin);
      p->taps_h.push_back(r.end > r.begin ? r.end : r.begin);
    }
    p->padded_h = p->tables[0].padded;
    const int64_t columns = vec::Pool2dColumns(g.output[1]);
    p->col_valid.assign(static_cast<size_t>(columns), 1.0f);
    p->col_padded.assign(static_cast<size_t>(columns), 1.0f);
    for (int64_t o = 0; o < g.output[1]; ++o) {
      const size_t i = static_cast<size_t>(o);
      p->col_valid[i] = static_cast<float>(p->tables[1].taps[i].size());
      p->col_padded[i] = static_cast<float>(p->tables[1].padded[i]);
    }
    vec::Pool2d& v = p->pool2d;
    v.ih = g.input[0], v.iw = g.input[1], v.oh = g.output[0], v.ow = g.output[1];
    v.kh = g.kernel[0], v.kw = g.kernel[1], v.sh = g.strides[0], v.sw = g.strides[1];
    v.dh = g.dilations[0], v.dw = g.dilations[1], v.ph = g.pad_begin[0], v.pw = g.pad_begin[1];
    v.max = kKind == PoolKind::kMax;
    v.count_include_pad = p->setup.count_include_pad;
    v.taps_h = p->taps_h.data();
    v.padded_h = p->padded_h.data();
    v.col_valid = p->col_valid.data();
    v.col_padded = p->col_padded.data();
    if (vec::Pool2dFlat(v)) {
      const size_t period = static_cast<size_t>(vec::Pool2dFlatPeriod(v));
      p->flat_masks.resize(4 * period);
      p->flat_count.resize(period);
      vec::Pool2dFlatTables(v, p->flat_masks.data(), p->flat_count.data());
      v.flat_masks = p->flat_masks.data();
      v.flat_count = p->flat_count.data();
      p->flat_lane_masks.resize(static_cast<size_t>(g.input[0] * g.input[1]));
      vec::Pool2dFlatLaneMasks(v, p->flat_lane_masks.data());
      v.flat_lane_masks = p->flat_lane_masks.data();
    }
    scratch = vec::Pool2dScratchFloats(v) * static_cast<int64_t>(sizeof(float));
  }
  return Prepared{.kernel = std::move(p), .scratch_bytes = scratch};
}

template <typename T>
Status RunPool(const KernelContext& ctx, PoolKind kind, const PreparedPool& pp, const Tensor& x,
               std::span<Tensor> outputs) {
  const PoolSetup& s = pp.setup;
  const WindowGeometry& g = pp.geo;
  const std::vector<AxisTable>& tables = pp.tables;
  const int64_t in_vol = g.input_volume();
  const int64_t out_vol = g.output_volume();
  const T* xd = x.data<T>();
  T* yd = outputs[0].data<T>();
  int64_t* id = outputs.size() > 1 ? outputs[1].data<int64_t>() : nullptr;
  const int64_t planes = s.n * s.c;
  const int64_t tasks =
      NumThreads(ctx.threads) > 1 && planes * out_vol * g.kernel_volume() >= kParallelElements
          ? std::min<int64_t>(planes, 8 * NumThreads(ctx.threads))
          : 1;
  if constexpr (std::is_same_v<T, float>) {
    if (!pp.taps_h.empty() && id == nullptr) {
      const vec::Kernels& k = vec::Best();
      ParallelFor(ctx.threads, tasks, [&](int64_t task, int thread) {
        const int64_t p0 = task * planes / tasks, p1 = (task + 1) * planes / tasks;
        k.pool2d(pp.pool2d, xd + p0 * in_vol, yd + p0 * out_vol, p1 - p0,
                 ScratchAs<float>(ctx, thread));
      });
      return Status::Ok();
    }
  }
  ParallelFor(ctx.threads, tasks, [&](int64_t task, int) {
    for (int64_t plane = task * planes / tasks; plane < (task + 1) * planes / tasks; ++plane) {
      const T* xp = xd + plane * in_vol;
      T* yp = yd + plane * out_vol;
      if (kind == PoolKind::kMax) {
        MaxReducer<T> red{};
        if (id == nullptr) {
          PoolPlane(xp, g, tables, red,
                    [&](int64_t p, const MaxReducer<T>& rd, int64_t, int64_t) {
                      yp[p] = rd.Finish(0, 0);
                    });
        } else {
          int64_t* ip = id + plane * out_vol;
          PoolPlane(xp, g, tables, red,
                    [&](int64_t p, const MaxReducer<T>& rd, int64_t, int64_t) {
                      yp[p] = rd.Finish(0, 0);
                      // An all-padding window has no maximum: -1.
                      if (rd.best_pos < 0) {
                        ip[p] = -1;
                      } else {
                        ip[p] = plane * in_vol +
                                (s.column_major ? ColumnMajor(rd.best_pos, g.input)
                                                : rd.best_pos);
                      }
                    });
        }
      } else if constexpr (std::is_floating_point_v<T>) {
        auto store = [&](int64_t p, const auto& rd, int64_t valid, int64_t padded) {
          yp[p] = rd.Finish(valid, padded);
        };
        if (kind == PoolKind::kAverage) {
          AverageReducer<T> red{.include_pad = s.count_include_pad, .sum = T(0)};
          PoolPlane(xp, g, tables, red, store);
        } else {
          LpReducer<T> red{.p = s.p, .sum = T(0)};
          PoolPlane(xp, g, tables, red, store);
        }
      }
    }
  });
  return Status::Ok();
}

template <PoolKind kKind>
Status ComputePool(const KernelContext& ctx, std::span<Tensor> outputs) {
  if (ctx.prepared == nullptr) {
    return ComputeUnprepared(PreparePool<kKind>, ComputePool<kKind>, ctx, outputs);
  }
  const auto& pp = *static_cast<const PreparedPool*>(ctx.prepared);
  const Tensor& x = *ctx.inputs[0];
  if (outputs[0].num_elements() == 0) return Status::Ok();
  switch (x.dtype()) {
    case DType::kFloat32: return RunPool<float>(ctx, kKind, pp, x, outputs);
    case DType::kFloat64: return RunPool<double>(ctx, kKind, pp, x, outputs);
    case DType::kInt8: return RunPool<int8_t>(ctx, kKind, pp, x, outputs);
    case DType::kUint8: return RunPool<uint8_t>(ctx, kKind, pp, x, outputs);
    default:
      return Status::InvalidArgument(std::string(PoolName(kKind)) + ": unsupported dtype " +
                                     std::string(DTypeName(x.dtype())));
  }
}

// ---------------- Global pooling ----------------

template <PoolKind kKind>
const char* GlobalName() {
  return kKind == PoolKind::kMax       ? "GlobalMaxPool"
         : kKind == PoolKind::kAverage ? "GlobalAveragePool"
                                       : "GlobalLpPool";
}

template <PoolKind kKind>
Status InferGlobalPool(const InferContext& ctx, std::vector<TensorType>* outputs) {
  const std::string op = GlobalName<kKind>();
  const TensorType& x = ctx.inputs[0];
  if (x.dtype != DType::kFloat32 && x.dtype != DType::kFloat64) {
    return Status::InvalidArgument(op + ": unsupported dtype " + std::string(DTypeName(x.dtype)));
  }
  if (x.shape.size() < 3) {
    return Status::InvalidArgument(op + ": input X must have rank >= 3 (N, C, spatial...), got " +
                                   ShapeToString(x.shape));
  }
  if (kKind == PoolKind::kLp) {
    ORRERY_ASSIGN_OR_RETURN(int64_t p, ctx.attrs.GetInt("p", 2));
    if (p < 1 || p > 64) {
      return Status::InvalidArgument(op + ": unsupported p = " + std::to_string(p) +
                                     " (integers 1..64)");
    }
  }
  Shape out(x.shape.size(), 1);
  out[0] = x.shape[0];
  out[1] = x.shape[1];
  outputs->assign(1, TensorType{x.dtype, std::move(out)});
  return Status::Ok();
}

// Global pooling splits planes over the threads from this many input
// values (128 KiB of float32): half the split input of a previous step is
// in the other core's cache, read at about half the speed.
constexpr int64_t kGlobalPoolParallelElements = int64_t{1} << 15;

template <PoolKind kKind, typename T>
void RunGlobalPool(const Tensor& x, int64_t p, Tensor& y, ThreadGroup* threads) {
  const int64_t planes = x.shape()[0] * x.shape()[1];
  const int64_t vol = DimProduct(x.shape(), 2, x.shape().size());
  const T* xd = x.data<T>();
  T* yd = y.data<T>();
  if constexpr (std::is_same_v<T, float> && kKind != PoolKind::kLp) {
    const vec::Reduce op = kKind == PoolKind::kMax ? vec::Reduce::kMax : vec::Reduce::kSum;
    if (vol > 0) {
      // Split by planes: the input usually comes from a step split over
      // the same threads, so on one thread half of it is read from the
      // other core's cache (two threads, step means: MobileNetV2's 1280 x
      // 7 x 7 0.0107 ms on one thread, 0.0171 on one of two; SqueezeNet's
      // 1000 x 13 x 13 0.0195 and 0.0322).
      const int64_t tasks = NumThreads(threads) > 1 && planes * vol >= kGlobalPoolParallelElements
                                ? std::min<int64_t>(planes, 4 * NumThreads(threads))
                                : 1;
      ParallelFor(threads, tasks, [&](int64_t task, int) {
        const int64_t p0 = task * planes / tasks, p1 = (task + 1) * planes / tasks;
        vec::Best().reduce_rows(op, xd + p0 * vol, p1 - p0, vol, yd + p0);
        if (kKind == PoolKind::kAverage) {
          for (int64_t i = p0; i < p1; ++i) yd[i] = yd[i] / static_cast<float>(vol);
        }
      });
      return;
    }
  }
  for (int64_t i = 0; i < planes; ++i) {
    const T* xp = xd + i * vol;
    if constexpr (kKind == PoolKind::kMax) {
      T best = std::numeric_limits<T>::lowest();
      for (int64_t k = 0; k < vol; ++k) best = xp[k] > best ? xp[k] : best;
      yd[i] = best;
    } else if constexpr (kKind == PoolKind::kAverage) {
      double sum = 0.0;  // double: planes can be large
      for (int64_t k = 0; k < vol; ++k) sum += xp[k];
      yd[i] = vol == 0 ? T(0) : static_cast<T>(sum / static_cast<double>(vol));
    } else {
      LpReducer<double> red{.p = p, .sum = 0.0};
      for (int64_t k = 0; k < vol; ++k) red.Add(xp[k], k);
      yd[i] = static_cast<T>(red.Finish(0, 0));
    }
  }
}

template <PoolKind kKind>
Status ComputeGlobalPool(const KernelContext& ctx, std::span<Tensor> outputs) {
  const Tensor& x = *ctx.inputs[0];
  ORRERY_ASSIGN_OR_RETURN(int64_t p, ctx.attrs.GetInt("p", 2));
  if (x.dtype() == DType::kFloat64) {
    RunGlobalPool<kKind, double>(x, p, outputs[0], nullptr);
  } else {
    RunGlobalPool<kKind, float>(x, p, outputs[0], ctx.threads);
  }
  return Status::Ok();
}

KernelDef PoolDef(const char* op_type, InferFn infer, ComputeFn compute, int max_outputs = 1,
                  PrepareFn prepare = nullptr) {
  return KernelDef{.op_type = op_type,
                   .backend = Backend::kCpu,
                   .min_inputs = 1,
                   .max_inputs = 1,
                   .min_outputs = 1,
                   .max_outputs = max_outputs,
                   .infer = infer,
                   .compute = compute,
                   .prepare = prepare,
                   .overwrites_outputs = true};
}

}  // namespace

Status RegisterPoolKernels(OpRegistry* registry) {
  ORRERY_RETURN_IF_ERROR(registry->Register(PoolDef(
      "MaxPool", InferPool<PoolKind::kMax>, ComputePool<PoolKind::kMax>, /*max_outputs=*/2,
      PreparePool<PoolKind::kMax>)));
  ORRERY_RETURN_IF_ERROR(registry->Register(
      PoolDef("AveragePool", InferPool<PoolKind::kAverage>, ComputePool<PoolKind::kAverage>, 1,
              PreparePool<PoolKind::kAverage>)));
  ORRERY_RETURN_IF_ERROR(
      registry->Register(PoolDef("LpPool", InferPool<PoolKind::kLp>, ComputePool<PoolKind::kLp>, 1,
                                 PreparePool<PoolKind::kLp>)));
  ORRERY_RETURN_IF_ERROR(registry->Register(PoolDef("GlobalMaxPool",
                                                    InferGlobalPool<PoolKind::kMax>,
                                                    ComputeGlobalPool<PoolKind::kMax>)));
  ORRERY_RETURN_IF_ERROR(registry->Register(PoolDef("GlobalAveragePool",
                                                    InferGlobalPool<PoolKind::kAverage>,
                                                    ComputeGlobalPool<PoolKind::kAverage>)));
  ORRERY_RETURN_IF_ERROR(registry->Register(PoolDef(
      "GlobalLpPool", InferGlobalPool<PoolKind::kLp>, ComputeGlobalPool<PoolKind::kLp>)));
  return Status::Ok();
}

}  // namespace orrery::ops::cpu
