// Softmax, LogSoftmax and Hardmax (float32, float64); Softmax and
// LogSoftmax subtract the maximum first, so large inputs cannot overflow.
//   opset < 13: the input is coerced to 2-D [prod(dims < axis), prod(dims >= axis)]
//               and each row is normalised; default axis = 1.
//   opset >= 13: normalised along `axis` alone; default axis = -1.
// Hardmax marks the first maximum of each row with 1.
#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <type_traits>

#include "ops/cpu/cpu_kernels.h"
#include "ops/cpu/dtype_dispatch.h"
#include "ops/cpu/elementwise_loops.h"
#include "ops/cpu/prepared.h"
#include "ops/cpu/vec/vec.h"
#include "ops/kernel_util.h"

namespace orrery::ops::cpu {
namespace {

// outer x n x inner view of the input: the op runs over n for each (outer, inner).
struct SoftmaxDims {
  int64_t outer = 1, n = 1, inner = 1;
};

Result<SoftmaxDims> ComputeDims(const char* op, const Shape& shape, const Attributes& attrs,
                                int64_t opset) {
  const int64_t rank = static_cast<int64_t>(shape.size());
  const bool legacy = opset < 13;
  ORRERY_ASSIGN_OR_RETURN(int64_t axis_attr, attrs.GetInt("axis", legacy ? 1 : -1));
  if (rank == 0) return Status::InvalidArgument(std::string(op) + ": input must have rank >= 1");
  Result<int64_t> axis = NormalizeAxis(axis_attr, rank, legacy ? 1 : 0);
  if (!axis.ok()) return axis.status().WithPrefix(op);
  const size_t a = static_cast<size_t>(*axis);
  SoftmaxDims d;
  d.outer = DimProduct(shape, 0, a);
  if (legacy) {
    d.n = DimProduct(shape, a, shape.size());
  } else {
    d.n = shape[a];
    d.inner = DimProduct(shape, a + 1, shape.size());
  }
  return d;
}

enum class Kind { kSoftmax, kLogSoftmax, kHardmax };

// NaN-propagating max without branches, so loops over it vectorise.
template <typename T> T MaxNaN(T a, T x) { return ((x > a) | (x != x)) ? x : a; }

// Max of a contiguous row, in independent lanes so that it vectorises.
template <typename T>
T RowMax(const T* __restrict x, int64_t n) {
  constexpr int64_t kLanes = 16;
  T mx = -std::numeric_limits<T>::infinity();
  int64_t i = 0;
  if (n >= 2 * kLanes) {
    T part[kLanes];
    for (int64_t l = 0; l < kLanes; ++l) part[l] = mx;
    for (; i + kLanes <= n; i += kLanes) {
      // Not unrolled, so the loop vectoriser (not SLP) handles the select.
#pragma GCC unroll 1
      for (int64_t l = 0; l < kLanes; ++l) part[l] = MaxNaN(part[l], x[i + l]);
    }
    for (int64_t l = 0; l < kLanes; ++l) mx = MaxNaN(mx, part[l]);
  }
  for (; i < n; ++i) mx = MaxNaN(mx, x[i]);
  return mx;
}

// One contiguous row (the axis is innermost).
template <typename T, Kind kKind>
void RunRow(const T* __restrict x, T* __restrict y, int64_t n) {
  if constexpr (kKind == Kind::kHardmax) {
    int64_t best = 0;
    for (int64_t i = 1; i < n; ++i) {
      if (x[i] > x[best]) best = i;
    }
    y[best] = T{1};  // outputs are zero-filled
  } else {
    const T mx = RowMax(x, n);
    T sum = 0;
    for (int64_t i = 0; i < n; ++i) {
      const T e = std::exp(x[i] - mx);
      if constexpr (kKind == Kind::kSoftmax) y[i] = e;
      sum += e;
    }
    if constexpr (kKind == Kind::kSoftmax) {
      const T inv = T{1} / sum;
      for (int64_t i = 0; i < n; ++i) y[i] *= inv;
    } else {
      const T log_sum = std::log(sum);
      for (int64_t i = 0; i < n; ++i) y[i] = (x[i] - mx) - log_sum;
    }
  }
}

// An n x inner block, normalised down each of the inner columns at once so
// that every loop runs over contiguous memory. mx / sum / best hold inner
// elements of scratch.
template <typename T, Kind kKind>
void RunColumns(const T* __restrict x, T* __restrict y, int64_t n, int64_t inner,
                T* __restrict mx, T* __restrict sum, int64_t* __restrict best) {
  if constexpr (kKind == Kind::kHardmax) {
    for (int64_t j = 0; j < inner; ++j) {
      mx[j] = x[j];
      best[j] = 0;
    }
    for (int64_t i = 1; i < n; ++i) {
      const T* xr = x + i * inner;
      for (int64_t j = 0; j < inner; ++j) {
        if (xr[j] > mx[j]) {
          mx[j] = xr[j];
          best[j] = i;
        }
      }
    }
    for (int64_t j = 0; j < inner; ++j) y[best[j] * inner + j] = T{1};
  } else {
    for (int64_t j = 0; j < inner; ++j) {
      mx[j] = -std::numeric_limits<T>::infinity();
      sum[j] = 0;
    }
    for (int64_t i = 0; i < n; ++i) {
      const T* xr = x + i * inner;
      for (int64_t j = 0; j < inner; ++j) mx[j] = MaxNaN(mx[j], xr[j]);
    }
    for (int64_t i = 0; i < n; ++i) {
      const T* xr = x + i * inner;
      T* yr = y + i * inner;
      for (int64_t j = 0; j < inner; ++j) {
        const T e = std::exp(xr[j] - mx[j]);
        if constexpr (kKind == Kind::kSoftmax) yr[j] = e;
        sum[j] += e;
      }
    }
    if constexpr (kKind == Kind::kSoftmax) {
      for (int64_t j = 0; j < inner; ++j) sum[j] = T{1} / sum[j];
      for (int64_t i = 0; i < n; ++i) {
        T* yr = y + i * inner;
        for (int64_t j = 0; j < inner; ++j) yr[j] *= sum[j];
      }
    } else {
      for (int64_t j = 0; j < inner; ++j) sum[j] = std::log(sum[j]);
      for (int64_t i = 0; i < n; ++i) {
        const T* xr = x + i * inner;
        T* yr = y + i * inner;
        for (int64_t j = 0; j < inner; ++j) yr[j] = (xr[j] - mx[j]) - sum[j];
      }
    }
  }
}

template <Kind kKind>
struct Names;
template <> struct Names<Kind::kSoftmax> { static constexpr const char* kName = "Softmax"; };
template <> struct Names<Kind::kLogSoftmax> { static constexpr const char* kName = "LogSoftmax"; };
template <> struct Names<Kind::kHardmax> { static constexpr const char* kName = "Hardmax"; };

template <Kind kKind>
Status InferSoftmax(const InferContext& ctx, std::vector<TensorType>* outputs) {
  const char* op = Names<kKind>::kName;
  ORRERY_RETURN_IF_ERROR(RequireTypeIn(op, ctx.inputs[0], "input", FloatTypes{}));
  ORRERY_RETURN_IF_ERROR(ComputeDims(op, ctx.inputs[0].shape, ctx.attrs, ctx.opset).status());
  outputs->assign(1, ctx.inputs[0]);
  return Status::Ok();
}

struct PreparedSoftmax : PreparedKernel {
  SoftmaxDims dims;
};

template <Kind kKind>
Result<Prepared> PrepareSoftmax(const PrepareContext& ctx) {
  auto p = std::make_shared<PreparedSoftmax>();
  ORRERY_ASSIGN_OR_RETURN(p->dims, ComputeDims(Names<kKind>::kName, ctx.inputs[0].shape,
                                               ctx.attrs, ctx.opset));
  // Column softmax (inner > 1): running max and sum per column, and the
  // arg max for Hardmax.
  const int64_t inner = p->dims.inner;
  const int64_t scratch =
      inner == 1 ? 0
                 : inner * (2 * static_cast<int64_t>(DTypeSize(ctx.inputs[0].dtype)) +
                            static_cast<int64_t>(sizeof(int64_t)));
  return Prepared{.kernel = std::move(p), .scratch_bytes = scratch};
}

template <Kind kKind>
Status ComputeSoftmax(const KernelContext& ctx, std::span<Tensor> outputs) {
  if (ctx.prepared == nullptr) {
    return ComputeUnprepared(PrepareSoftmax<kKind>, ComputeSoftmax<kKind>, ctx, outputs);
  }
  const Tensor& x = *ctx.inputs[0];
  const SoftmaxDims& d = static_cast<const PreparedSoftmax*>(ctx.prepared)->dims;
  if (x.num_elements() == 0) return Status::Ok();
  return Dispatch(x.dtype(), FloatTypes{}, [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    const T* xd = x.data<T>();
    T* yd = outputs[0].data<T>();
    const int64_t block = d.n * d.inner;
    // Rows per task: about kParallelRowElements values each.
    const int64_t per_task =
        std::max<int64_t>(1, kParallelRowElements / std::max<int64_t>(block, 1));
    const int64_t tasks = NumThreads(ctx.threads) > 1 ? (d.outer + per_task - 1) / per_task : 1;
    const int64_t rows_per_task = (d.outer + tasks - 1) / tasks;
    ParallelFor(ctx.threads, tasks, [&](int64_t task, int thread) {
      const int64_t o0 = task * rows_per_task;
      const int64_t o1 = std::min(d.outer, o0 + rows_per_task);
      if (o0 >= o1) return;
      if (d.inner == 1) {
        if constexpr (std::is_same_v<T, float> && kKind != Kind::kHardmax) {
          vec::Best().softmax_rows(xd + o0 * block, yd + o0 * block, o1 - o0, d.n,
                                   kKind == Kind::kLogSoftmax);
        } else {
          for (int64_t o = o0; o < o1; ++o) {
            RunRow<T, kKind>(xd + o * block, yd + o * block, d.n);
          }
        }
        return;
      }
      T* mx = ScratchAs<T>(ctx, thread);
      auto* best = reinterpret_cast<int64_t*>(mx + 2 * d.inner);
      for (int64_t o = o0; o < o1; ++o) {
        RunColumns<T, kKind>(xd + o * block, yd + o * block, d.n, d.inner, mx, mx + d.inner, best);
      }
    });
    return Status::Ok();
  });
}

template <Kind kKind>
KernelDef SoftmaxKernel() {
  return KernelDef{.op_type = Names<kKind>::kName,
                   .backend = Backend::kCpu,
                   .min_inputs = 1,
                   .max_inputs = 1,
                   .infer = InferSoftmax<kKind>,
                   .compute = ComputeSoftmax<kKind>,
                   .prepare = PrepareSoftmax<kKind>,
                   // Hardmax writes only the 1s.
                   .overwrites_outputs = kKind != Kind::kHardmax};
}

}  // namespace

Status RegisterSoftmaxKernels(OpRegistry* registry) {
  ORRERY_RETURN_IF_ERROR(registry->Register(SoftmaxKernel<Kind::kSoftmax>()));
  ORRERY_RETURN_IF_ERROR(registry->Register(SoftmaxKernel<Kind::kLogSoftmax>()));
  ORRERY_RETURN_IF_ERROR(registry->Register(SoftmaxKernel<Kind::kHardmax>()));
  return Status::Ok();
}

}  // namespace orrery::ops::cpu
