// Reductions over every numeric dtype:
//   ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceProd, ReduceL1,
//   ReduceL2, ReduceSumSquare, ReduceLogSum, ReduceLogSumExp.
// Axes come from the `axes` attribute before the opset where they became an
// optional int64 input (13 for ReduceSum, 18 for the others); absent or
// empty axes reduce everything unless noop_with_empty_axes = 1. Reducing an
// empty set yields the identity (0 for sums, 1 for Prod, -inf / the lowest
// value for Max, +inf / the highest for Min, -inf for LogSum(Exp), NaN for a
// float Mean, 0 for an integer Mean).
// Sums accumulate in double for float types and in 64-bit (wrapping) for
// integers; the output is converted back to the input dtype.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <type_traits>

#include "ops/cpu/cpu_kernels.h"
#include "ops/cpu/dtype_dispatch.h"
#include "ops/cpu/elementwise_loops.h"
#include "ops/cpu/prepared.h"
#include "ops/cpu/vec/vec.h"
#include "ops/small_vec.h"
#include "ops/kernel_util.h"

namespace orrery::ops::cpu {
namespace {

// ---------------- Axes and shapes ----------------

struct ReduceSpec {
  std::vector<bool> reduced;  // per input dim
  bool noop = false;          // empty axes with noop_with_empty_axes: Y = X
  Shape out;
  int64_t count = 1;          // input elements folded into each output element
};

Result<ReduceSpec> MakeSpec(const char* op, int64_t axes_input_opset, const Shape& in,
                            const Attributes& attrs, int64_t opset, const TensorType* axes_type,
                            const Tensor* axes_value) {
  const std::string prefix = std::string(op) + ": ";
  ORRERY_ASSIGN_OR_RETURN(int64_t keepdims, attrs.GetInt("keepdims", 1));
  ORRERY_ASSIGN_OR_RETURN(int64_t noop_empty, attrs.GetInt("noop_with_empty_axes", 0));
  std::vector<int64_t> axes;
  if (axes_type != nullptr && axes_type->present()) {
    if (opset < axes_input_opset) {
      return Status::InvalidArgument(prefix + "axes is an attribute before opset " +
                                     std::to_string(axes_input_opset) + ", not an input");
    }
    if (attrs.Has("axes")) {
      return Status::InvalidArgument(prefix + "axes given both as attribute and input");
    }
    if (axes_type->dtype != DType::kInt64 || axes_type->shape.size() > 1) {
      return Status::InvalidArgument(prefix + "axes input must be a 1-D int64 tensor, got " +
                                     std::string(DTypeName(axes_type->dtype)) + " " +
                                     ShapeToString(axes_type->shape));
    }
    if (axes_value == nullptr) {
      return Status::Unavailable(prefix + "needs the value of the axes input");
    }
    const int64_t* a = axes_value->data<int64_t>();
    axes.assign(a, a + axes_value->num_elements());
  } else {
    ORRERY_ASSIGN_OR_RETURN(axes, attrs.GetInts("axes"));
  }
  const int64_t rank = static_cast<int64_t>(in.size());
  ReduceSpec spec;
  spec.reduced.assign(in.size(), axes.empty());
  if (axes.empty() && noop_empty != 0) {
    spec.noop = true;
    spec.reduced.assign(in.size(), false);
  }
  if (axes.size() > in.size()) {
    return Status::InvalidArgument(prefix + std::to_string(axes.size()) +
                                   " axes for an input of rank " + std::to_string(rank));
  }
  for (int64_t axis : axes) {
    Result<int64_t> a = NormalizeAxis(axis, rank);
    if (!a.ok()) return a.status().WithPrefix(op);
    if (spec.reduced[static_cast<size_t>(*a)]) {
      return Status::InvalidArgument(prefix + "axis " + std::to_string(axis) + " is repeated");
    }
    spec.reduced[static_cast<size_t>(*a)] = true;
  }
  for (size_t i = 0; i < in.size(); ++i) {
    if (spec.reduced[i]) {
      spec.count *= in[i];
      if (keepdims != 0) spec.out.push_back(1);
    } else {
      spec.out.push_back(in[i]);
    }
  }
  return spec;
}

// The input as alternating runs of kept and reduced dims (size-1 dims
// dropped, neighbours of the same kind merged), with output strides.
struct ReducePlan {
  Shape dims;
  std::vector<bool> reduced;
  std::vector<int64_t> out_strides;  // 0 on reduced dims
};

ReducePlan MakePlan(const Shape& in, const std::vector<bool>& reduced) {
  ReducePlan p;
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] == 1) continue;
    if (!p.dims.empty() && p.reduced.back() == reduced[i]) {
      p.dims.back() *= in[i];
    } else {
      p.dims.push_back(in[i]);
      p.reduced.push_back(reduced[i]);
    }
  }
  p.out_strides.assign(p.dims.size(), 0);
  int64_t s = 1;
  for (size_t i = p.dims.size(); i-- > 0;) {
    if (p.reduced[i]) continue;
    p.out_strides[i] = s;
    s *= p.dims[i];
  }
  return p;
}

// acc[o] = step(acc[o], x, o) for every input element x folded into output o,
// walking the input once in order. Innermost runs are either a vertical
// update of consecutive outputs (vectorises across outputs) or a horizontal
// fold into one output, done in kLanes independent partial accumulators
// (combined with merge) so that it vectorises too; `init` is the identity.
template <typename T, typename Acc, typename Step, typename Merge>
void Accumulate(const ReducePlan& p, const T* x, Acc* acc, Acc init, Step step, Merge merge) {
  constexpr int64_t kLanes = 16;
  const size_t rank = p.dims.size();
  if (rank == 0) {
    acc[0] = step(acc[0], x[0], 0);
    return;
  }
  const int64_t len = p.dims[rank - 1];
  const bool inner_reduced = p.reduced[rank - 1];
  SmallVec<int64_t> idx(rank, 0);
  int64_t in_off = 0, out_off = 0;
  while (true) {
    const T* __restrict px = x + in_off;
    if (inner_reduced) {
      Acc s = acc[out_off];
      int64_t j = 0;
      if (len >= 2 * kLanes) {
        Acc part[kLanes];
        for (int64_t l = 0; l < kLanes; ++l) part[l] = init;
        for (; j + kLanes <= len; j += kLanes) {
          // Kept as a loop (not unrolled) so GCC's loop vectoriser takes it;
          // its straight-line (SLP) vectoriser gives up on selects.
#pragma GCC unroll 1
          for (int64_t l = 0; l < kLanes; ++l) part[l] = step(part[l], px[j + l], out_off);
        }
        for (int64_t l = 0; l < kLanes; ++l) s = merge(s, part[l]);
      }
      for (; j < len; ++j) s = step(s, px[j], out_off);
      acc[out_off] = s;
    } else {
      Acc* __restrict pa = acc + out_off;
      for (int64_t j = 0; j < len; ++j) pa[j] = step(pa[j], px[j], out_off + j);
    }
    in_off += len;
    size_t i = rank - 1;
    while (true) {
      if (i == 0) return;
      --i;
      ++idx[i];
      out_off += p.out_strides[i];
      if (idx[i] < p.dims[i]) break;
      out_off -= p.out_strides[i] * p.dims[i];
      idx[i] = 0;
    }
  }
}

// ---------------- Reducers ----------------

// Accumulator for sums and products: double for floats, 64-bit for integers.
template <typename T>
using WideAcc = std::conditional_t<std::is_floating_point_v<T>, double,
                                   std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>>;

template <typename A> A AccAdd(A a, A b) {
  if constexpr (std::is_integral_v<A>) return WrapAdd(a, b);
  else return a + b;
}
template <typename A> A AccMul(A a, A b) {
  if constexpr (std::is_integral_v<A>) return WrapMul(a, b);
  else return a * b;
}
template <typename T> WideAcc<T> Widen(T x) { return static_cast<WideAcc<T>>(x); }
template <typename T> WideAcc<T> AbsWide(T x) {
  if constexpr (std::is_unsigned_v<T>) return x;
  else if constexpr (std::is_integral_v<T>) return x < 0 ? WrapNeg(Widen(x)) : Widen(x);
  else return std::abs(Widen(x));
}
// Converts a double result back: saturating for integer outputs.
template <typename T> T FromDouble(double v) { return SaturatingCast<T>(v); }

struct ReduceSumR {
  static constexpr const char* kName = "ReduceSum";
  static constexpr int64_t kAxesInputOpset = 13;
  template <typename T> using Acc = WideAcc<T>;
  template <typename T> static Acc<T> Init() { return 0; }
  template <typename T> static Acc<T> Step(Acc<T> a, T x) { return AccAdd(a, Widen(x)); }
  template <typename A> static A Merge(A a, A b) { return AccAdd(a, b); }
  template <typename T> static T Finish(Acc<T> a, int64_t) { return static_cast<T>(a); }
};
struct ReduceMeanR {
  static constexpr const char* kName = "ReduceMean";
  static constexpr int64_t kAxesInputOpset = 18;
  template <typename T> using Acc = WideAcc<T>;
  template <typename T> static Acc<T> Init() { return 0; }
  template <typename T> static Acc<T> Step(Acc<T> a, T x) { return AccAdd(a, Widen(x)); }
  template <typename A> static A Merge(A a, A b) { return AccAdd(a, b); }
  template <typename T> static T Finish(Acc<T> a, int64_t count) {
    if constexpr (std::is_floating_point_v<T>) {
      return static_cast<T>(a / static_cast<double>(count));  // 0 / 0 = NaN
    } else {
      // Integer mean truncates toward zero, like numpy's mean cast back.
      return count == 0 ? T{0} : static_cast<T>(a / static_cast<Acc<T>>(count));
    }
  }
};
struct ReduceMaxR {
  static constexpr const char* kName = "ReduceMax";
  static constexpr int64_t kAxesInputOpset = 18;
  template <typename T> using Acc = T;
  template <typename T> static T Init() {
    if constexpr (std::is_floating_point_v<T>) return -std::numeric_limits<T>::infinity();
    else return std::numeric_limits<T>::lowest();
  }
  // NaN propagates, like numpy.maximum.reduce; `|` keeps the loop branch-free.
  template <typename T> static T Step(T a, T x) { return ((x > a) | (x != x)) ? x : a; }
  template <typename A> static A Merge(A a, A b) { return Step(a, b); }
  template <typename T> static T Finish(T a, int64_t) { return a; }
};
struct ReduceMinR {
  static constexpr const char* kName = "ReduceMin";
  static constexpr int64_t kAxesInputOpset = 18;
  template <typename T> using Acc = T;
  template <typename T> static T Init() {
    if constexpr (std::is_floating_point_v<T>) return std::numeric_limits<T>::infinity();
    else return std::numeric_limits<T>::max();
  }
  template <typename T> static T Step(T a, T x) { return ((x < a) | (x != x)) ? x : a; }
  template <typename A> static A Merge(A a, A b) { return Step(a, b); }
  template <typename T> static T Finish(T a, int64_t) { return a; }
};
struct ReduceProdR {
  static constexpr const char* kName = "ReduceProd";
  static constexpr int64_t kAxesInputOpset = 18;
  template <typename T> using Acc = WideAcc<T>;
  template <typename T> static Acc<T> Init() { return 1; }
  template <typename T> static Acc<T> Step(Acc<T> a, T x) { return AccMul(a, Widen(x)); }
  template <typename A> static A Merge(A a, A b) { return AccMul(a, b); }
  template <typename T> static T Finish(Acc<T> a, int64_t) { return static_cast<T>(a); }
};
struct ReduceL1R {
  static constexpr const char* kName = "ReduceL1";
  static constexpr int64_t kAxesInputOpset = 18;
  template <typename T> using Acc = WideAcc<T>;
  template <typename T> static Acc<T> Init() { return 0; }
  template <typename T> static Acc<T> Step(Acc<T> a, T x) { return AccAdd(a, AbsWide(x)); }
  template <typename A> static A Merge(A a, A b) { return AccAdd(a, b); }
  template <typename T> static T Finish(Acc<T> a, int64_t) { return static_cast<T>(a); }
};
struct ReduceSumSquareR {
  static constexpr const char* kName = "ReduceSumSquare";
  static constexpr int64_t kAxesInputOpset = 18;
  template <typename T> using Acc = WideAcc<T>;
  template <typename T> static Acc<T> Init() { return 0; }
  template <typename T> static Acc<T> Step(Acc<T> a, T x) {
    return AccAdd(a, AccMul(Widen(x), Widen(x)));
  }
  template <typename A> static A Merge(A a, A b) { return AccAdd(a, b); }
  template <typename T> static T Finish(Acc<T> a, int64_t) { return static_cast<T>(a); }
};
struct ReduceL2R : ReduceSumSquareR {
  static constexpr const char* kName = "ReduceL2";
  template <typename T> static T Finish(Acc<T> a, int64_t) {
    return FromDouble<T>(std::sqrt(static_cast<double>(a)));
  }
};
struct ReduceLogSumR : ReduceSumR {
  static constexpr const char* kName = "ReduceLogSum";
  static constexpr int64_t kAxesInputOpset = 18;
  template <typename T> static T Finish(Acc<T> a, int64_t) {
    return FromDouble<T>(std::log(static_cast<double>(a)));
  }
};
// Handled by its own two-pass compute (max, then sum of exp(x - max)).
struct ReduceLogSumExpR {
  static constexpr const char* kName = "ReduceLogSumExp";
  static constexpr int64_t kAxesInputOpset = 18;
};

// ---------------- Kernels ----------------

template <typename R>
Status InferReduce(const InferContext& ctx, std::vector<TensorType>* outputs) {
  const TensorType& x = ctx.inputs[0];
  ORRERY_RETURN_IF_ERROR(RequireTypeIn(R::kName, x, "input data", NumericTypes{}));
  const TensorType* axes_type = ctx.inputs.size() > 1 ? &ctx.inputs[1] : nullptr;
  ORRERY_ASSIGN_OR_RETURN(ReduceSpec spec, MakeSpec(R::kName, R::kAxesInputOpset, x.shape,
                                                    ctx.attrs, ctx.opset, axes_type, ctx.value(1)));
  outputs->assign(1, TensorType{x.dtype, spec.noop ? x.shape : spec.out});
  return Status::Ok();
}

struct PreparedReduce : PreparedKernel {
  ReduceSpec spec;
  ReducePlan plan;
};

template <typename R>
Result<Prepared> PrepareReduce(const PrepareContext& ctx) {
  auto p = std::make_shared<PreparedReduce>();
  const TensorType* axes_type = ctx.inputs.size() > 1 ? &ctx.inputs[1] : nullptr;
  ORRERY_ASSIGN_OR_RETURN(p->spec, MakeSpec(R::kName, R::kAxesInputOpset, ctx.inputs[0].shape,
                                            ctx.attrs, ctx.opset, axes_type, ctx.value(1)));
  p->plan = MakePlan(ctx.inputs[0].shape, p->spec.reduced);
  // Accumulators: one (LogSumExp: two) double-or-narrower per output.
  const int64_t scratch = 2 * NumElements(ctx.outputs[0].shape) * int64_t{8};
  return Prepared{.kernel = std::move(p), .scratch_bytes = scratch};
}

template <typename Acc>
Acc* FilledAcc(const KernelContext& ctx, int64_t n, Acc init, size_t which = 0) {
  Acc* a = ScratchAs<Acc>(ctx) + static_cast<size_t>(n) * which;
  std::fill(a, a + n, init);
  return a;
}

// ReduceSum / Mean / Max / Min of float32 over trailing axes: rows.
template <typename R>
bool ReduceFloatRows(const KernelContext& ctx, const PreparedReduce& p, const Tensor& x,
                     Tensor& y) {
  constexpr bool kSum = std::is_same_v<R, ReduceSumR> || std::is_same_v<R, ReduceMeanR>;
  constexpr bool kMax = std::is_same_v<R, ReduceMaxR>;
  constexpr bool kMin = std::is_same_v<R, ReduceMinR>;
  if constexpr (!kSum && !kMax && !kMin) {
    return false;
  } else {
    const ReducePlan& plan = p.plan;
    const size_t rank = plan.dims.size();
    if (x.dtype() != DType::kFloat32 || rank == 0 || rank > 2 || !plan.reduced[rank - 1] ||
        (rank == 2 && plan.reduced[0])) {
      return false;
    }
    const int64_t n = plan.dims[rank - 1];
    const int64_t rows = rank == 2 ? plan.dims[0] : 1;
    const float* xd = x.data<float>();
    float* yd = y.data<float>();
    const vec::Reduce op = kSum ? vec::Reduce::kSum : kMax ? vec::Reduce::kMax : vec::Reduce::kMin;
    const vec::Kernels& k = vec::Best();
    const int64_t per_task = std::max<int64_t>(1, kParallelElements / std::max<int64_t>(n, 1));
    const int64_t tasks = NumThreads(ctx.threads) > 1 ? (rows + per_task - 1) / per_task : 1;
    ParallelFor(ctx.threads, tasks, [&](int64_t task, int) {
      const int64_t r0 = task * rows / tasks, r1 = (task + 1) * rows / tasks;
      k.reduce_rows(op, xd + r0 * n, r1 - r0, n, yd + r0);
      if constexpr (std::is_same_v<R, ReduceMeanR>) {
        for (int64_t r = r0; r < r1; ++r) yd[r] = yd[r] / static_cast<float>(n);
      }
    });
    return true;
  }
}

template <typename R, typename T>
Status RunReduce(const KernelContext& ctx, const PreparedReduce& p, const Tensor& x, Tensor& y) {
  using Acc = typename R::template Acc<T>;
  const ReduceSpec& spec = p.spec;
  if (x.num_elements() > 0 && ReduceFloatRows<R>(ctx, p, x, y)) return Status::Ok();
  const int64_t n = y.num_elements();
  Acc* acc = FilledAcc<Acc>(ctx, n, R::template Init<T>());
  if (x.num_elements() > 0) {
    Accumulate<T, Acc>(
        p.plan, x.data<T>(), acc, R::template Init<T>(),
        [](Acc a, T v, int64_t) { return R::template Step<T>(a, v); },
        [](Acc a, Acc b) { return R::template Merge<Acc>(a, b); });
  }
  T* yd = y.data<T>();
  for (int64_t i = 0; i < n; ++i) yd[i] = R::template Finish<T>(acc[i], spec.count);
  return Status::Ok();
}

template <typename T>
Status RunLogSumExp(const KernelContext& ctx, const PreparedReduce& p, const Tensor& x,
                    Tensor& y) {
  const int64_t n = y.num_elements();
  double* mx = FilledAcc<double>(ctx, n, 0.0, 0);
  double* sum = FilledAcc<double>(ctx, n, 0.0, 1);
  if (x.num_elements() > 0) {
    std::fill(mx, mx + n, -std::numeric_limits<double>::infinity());
    const ReducePlan& plan = p.plan;
    const auto max_step = [](double a, double d) { return ((d > a) | (d != d)) ? d : a; };
    Accumulate<T, double>(
        plan, x.data<T>(), mx, -std::numeric_limits<double>::infinity(),
        [max_step](double a, T v, int64_t) { return max_step(a, static_cast<double>(v)); },
        max_step);
    // An infinite or NaN maximum cannot be subtracted; use 0 as the shift.
    for (int64_t i = 0; i < n; ++i) {
      if (!std::isfinite(mx[i])) mx[i] = 0.0;
    }
    Accumulate<T, double>(
        plan, x.data<T>(), sum, 0.0,
        [mx](double a, T v, int64_t o) { return a + std::exp(static_cast<double>(v) - mx[o]); },
        [](double a, double b) { return a + b; });
  }
  T* yd = y.data<T>();
  for (int64_t i = 0; i < n; ++i) {
    const double r = std::log(sum[i]) + mx[i];
    if constexpr (std::is_integral_v<T>) yd[i] = FromDouble<T>(r);
    else yd[i] = static_cast<T>(r);
  }
  return Status::Ok();
}

template <typename R>
Status ComputeReduce(const KernelContext& ctx, std::span<Tensor> outputs) {
  if (ctx.prepared == nullptr) {
    return ComputeUnprepared(PrepareReduce<R>, ComputeReduce<R>, ctx, outputs);
  }
  const auto& p = *static_cast<const PreparedReduce*>(ctx.prepared);
  const Tensor& x = *ctx.inputs[0];
  Tensor& y = outputs[0];
  if (p.spec.noop) {
    if (x.byte_size() > 0) std::memcpy(y.raw_data(), x.raw_data(), x.byte_size());
    return Status::Ok();
  }
  return Dispatch(x.dtype(), NumericTypes{}, [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<R, ReduceLogSumExpR>) {
      return RunLogSumExp<T>(ctx, p, x, y);
    } else {
      return RunReduce<R, T>(ctx, p, x, y);
    }
  });
}

template <typename R>
KernelDef ReduceKernel() {
  return KernelDef{.op_type = R::kName,
                   .backend = Backend::kCpu,
                   .min_inputs = 1,
                   .max_inputs = 2,
                   .infer = InferReduce<R>,
                   .compute = ComputeReduce<R>,
                   .prepare = PrepareReduce<R>};
}

// ---------------- ArgMax / ArgMin ----------------

struct ArgDims {
  int64_t outer = 1, n = 1, inner = 1;
  Shape out;
};

Result<ArgDims> MakeArgDims(const char* op, const Shape& in, const Attributes& attrs) {
  ORRERY_ASSIGN_OR_RETURN(int64_t axis_attr, attrs.GetInt("axis", 0));
  ORRERY_ASSIGN_OR_RETURN(int64_t keepdims, attrs.GetInt("keepdims", 1));
  ORRERY_ASSIGN_OR_RETURN(int64_t last, attrs.GetInt("select_last_index", 0));
  if (last != 0 && last != 1) {
    return Status::InvalidArgument(std::string(op) + ": select_last_index must be 0 or 1");
  }
  Result<int64_t> axis = NormalizeAxis(axis_attr, static_cast<int64_t>(in.size()));
  if (!axis.ok()) return axis.status().WithPrefix(op);
  const size_t a = static_cast<size_t>(*axis);
  if (in[a] == 0) {
    return Status::InvalidArgument(std::string(op) + ": axis " + std::to_string(axis_attr) +
                                   " has size 0");
  }
  ArgDims d;
  d.outer = DimProduct(in, 0, a);
  d.n = in[a];
  d.inner = DimProduct(in, a + 1, in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    if (i != a) d.out.push_back(in[i]);
    else if (keepdims != 0) d.out.push_back(1);
  }
  return d;
}

// Whether v replaces the current best. NaN wins over numbers (numpy).
template <bool kMax, bool kLast, typename T>
bool Better(T v, T best) {
  if constexpr (std::is_floating_point_v<T>) {
    if (v != v) return kLast || best == best;
    if (best != best) return false;
  }
  if constexpr (kMax) return kLast ? v >= best : v > best;
  else return kLast ? v <= best : v < best;
}

// `best` holds d.inner values (scratch).
template <bool kMax, bool kLast, typename T>
void RunArg(const T* x, const ArgDims& d, int64_t* y, T* best_values) {
  if (d.inner == 1) {  // the axis is innermost: scan each row
    for (int64_t o = 0; o < d.outer; ++o) {
      const T* xo = x + o * d.n;
      T bv = xo[0];
      int64_t bi = 0;
      for (int64_t r = 1; r < d.n; ++r) {
        if (Better<kMax, kLast>(xo[r], bv)) {
          bv = xo[r];
          bi = r;
        }
      }
      y[o] = bi;
    }
    return;
  }
  std::span<T> best(best_values, static_cast<size_t>(d.inner));
  for (int64_t o = 0; o < d.outer; ++o) {
    const T* xo = x + o * d.n * d.inner;
    int64_t* yo = y + o * d.inner;
    for (int64_t j = 0; j < d.inner; ++j) {
      best[static_cast<size_t>(j)] = xo[j];
      yo[j] = 0;
    }
    for (int64_t r = 1; r < d.n; ++r) {
      const T* xr = xo + r * d.inner;
      for (int64_t j = 0; j < d.inner; ++j) {
        if (Better<kMax, kLast>(xr[j], best[static_cast<size_t>(j)])) {
          best[static_cast<size_t>(j)] = xr[j];
          yo[j] = r;
        }
      }
    }
  }
}

template <bool kMax>
constexpr const char* ArgName() {
  return kMax ? "ArgMax" : "ArgMin";
}

template <bool kMax>
Status InferArg(const InferContext& ctx, std::vector<TensorType>* outputs) {
  const TensorType& x = ctx.inputs[0];
  ORRERY_RETURN_IF_ERROR(RequireTypeIn(ArgName<kMax>(), x, "input data", NumericTypes{}));
  ORRERY_ASSIGN_OR_RETURN(ArgDims d, MakeArgDims(ArgName<kMax>(), x.shape, ctx.attrs));
  outputs->assign(1, TensorType{DType::kInt64, d.out});
  return Status::Ok();
}

struct PreparedArg : PreparedKernel {
  ArgDims dims;
  bool last = false;
};

template <bool kMax>
Result<Prepared> PrepareArg(const PrepareContext& ctx) {
  auto p = std::make_shared<PreparedArg>();
  ORRERY_ASSIGN_OR_RETURN(p->dims, MakeArgDims(ArgName<kMax>(), ctx.inputs[0].shape, ctx.attrs));
  ORRERY_ASSIGN_OR_RETURN(int64_t last, ctx.attrs.GetInt("select_last_index", 0));
  p->last = last != 0;
  // The running best per column when the axis is not innermost.
  const int64_t scratch = p->dims.inner == 1 ? 0 : p->dims.inner * int64_t{8};
  return Prepared{.kernel = std::move(p), .scratch_bytes = scratch};
}

template <bool kMax>
Status ComputeArg(const KernelContext& ctx, std::span<Tensor> outputs) {
  if (ctx.prepared == nullptr) {
    return ComputeUnprepared(PrepareArg<kMax>, ComputeArg<kMax>, ctx, outputs);
  }
  const auto& p = *static_cast<const PreparedArg*>(ctx.prepared);
  const Tensor& x = *ctx.inputs[0];
  if (outputs[0].num_elements() == 0) return Status::Ok();
  return Dispatch(x.dtype(), NumericTypes{}, [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    T* best = ScratchAs<T>(ctx);
    if (p.last) {
      RunArg<kMax, true>(x.data<T>(), p.dims, outputs[0].data<int64_t>(), best);
    } else {
      RunArg<kMax, false>(x.data<T>(), p.dims, outputs[0].data<int64_t>(), best);
    }
    return Status::Ok();
  });
}

template <bool kMax>
KernelDef ArgKernel() {
  return KernelDef{.op_type = ArgName<kMax>(),
                   .backend = Backend::kCpu,
                   .min_inputs = 1,
                   .max_inputs = 1,
                   .infer = InferArg<kMax>,
                   .compute = ComputeArg<kMax>,
                   .prepare = PrepareArg<kMax>};
}

}  // namespace

Status RegisterReduceKernels(OpRegistry* registry) {
  for (KernelDef def : {ReduceKernel<ReduceSumR>(), ReduceKernel<ReduceMeanR>(),
                        ReduceKernel<ReduceMaxR>(), ReduceKernel<ReduceMinR>(),
                        ReduceKernel<ReduceProdR>(), ReduceKernel<ReduceL1R>(),
                        ReduceKernel<ReduceL2R>(), ReduceKernel<ReduceSumSquareR>(),
                        ReduceKernel<ReduceLogSumR>(), ReduceKernel<ReduceLogSumExpR>(),
                        ArgKernel<true>(), ArgKernel<false>()}) {
    ORRERY_RETURN_IF_ERROR(registry->Register(std::move(def)));
  }
  return Status::Ok();
}

}  // namespace orrery::ops::cpu
