// Normalization layers, float32 and float64:
//   BatchNormalization (inference only: opset 7 with spatial, 9, 14, 15;
//     training_mode = 1 and the training-only outputs are unsupported),
//   InstanceNormalization (statistics per (n, c) over the spatial axes),
//   LayerNormalization (opset 17: axis, epsilon, stash_type = 1, optional
//     Mean / InvStdDev outputs; Scale and B broadcast to X.shape[axis:]).
// Statistics are accumulated in double.
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "ops/broadcast.h"
#include "ops/cpu/cpu_kernels.h"
#include "ops/cpu/elementwise_loops.h"
#include "ops/cpu/prepared.h"
#include "ops/cpu/vec/vec.h"
#include "ops/kernel_util.h"

namespace orrery::ops::cpu {
namespace {

Status RequireFloat(const TensorType& t, const std::string& op, const char* what) {
  if (t.dtype == DType::kFloat32 || t.dtype == DType::kFloat64) return Status::Ok();
  return Status::InvalidArgument(op + ": unsupported dtype " + std::string(DTypeName(t.dtype)) +
                                 " for " + what + " (float32 / float64)");
}

Status RequireSameDType(const TensorType& x, const TensorType& t, const std::string& op,
                        const char* what) {
  if (t.dtype == x.dtype) return Status::Ok();
  return Status::InvalidArgument(op + ": unsupported mixed dtypes: " + what + " is " +
                                 std::string(DTypeName(t.dtype)) + ", X is " +
                                 std::string(DTypeName(x.dtype)));
}

// Runs fn(plane) for planes [0, planes) of `inner` values each, split
// across the lent threads when there is enough work.
template <typename Fn>
void ParallelPlanes(ThreadGroup* threads, int64_t planes, int64_t inner, Fn&& fn,
                    int64_t min_elements = kParallelElements) {
  if (NumThreads(threads) <= 1 || planes * inner < min_elements || planes < 2) {
    for (int64_t p = 0; p < planes; ++p) fn(p);
    return;
  }
  const int64_t tasks = std::min<int64_t>(planes, 8 * NumThreads(threads));
  ParallelFor(threads, tasks, [&](int64_t task, int) {
    for (int64_t p = task * planes / tasks; p < (task + 1) * planes / tasks; ++p) fn(p);
  });
}

// ---------------- BatchNormalization ----------------

// Parameters are per channel ([C]), or with opset-7 spatial = 0 per
// activation (X.shape[1:]); returns the number of values per parameter.
Result<int64_t> BatchNormParamSize(const InferContext& ctx) {
  const std::string op = "BatchNormalization";
  const TensorType& x = ctx.inputs[0];
  ORRERY_RETURN_IF_ERROR(RequireFloat(x, op, "X"));
  if (x.shape.size() < 2) {
    return Status::InvalidArgument(op + ": X must have rank >= 2 (N, C, ...), got " +
                                   ShapeToString(x.shape));
  }
  ORRERY_ASSIGN_OR_RETURN(int64_t training, ctx.attrs.GetInt("training_mode", 0));
  if (training != 0) {
    return Status::InvalidArgument(op + ": unsupported training_mode = " +
                                   std::to_string(training) + " (inference only)");
  }
  if (ctx.num_outputs > 1) {
    return Status::InvalidArgument(op + ": unsupported training-mode outputs (" +
                                   std::to_string(ctx.num_outputs) + " outputs; inference only)");
  }
  ORRERY_ASSIGN_OR_RETURN(int64_t spatial, ctx.attrs.GetInt("spatial", 1));
  const Shape per_channel{x.shape[1]};
  const Shape per_activation(x.shape.begin() + 1, x.shape.end());
  const Shape& want = spatial == 0 ? per_activation : per_channel;
  const char* names[] = {"scale", "B", "input_mean", "input_var"};
  for (size_t i = 1; i < 5; ++i) {
    const TensorType& t = ctx.inputs[i];
    ORRERY_RETURN_IF_ERROR(RequireSameDType(x, t, op, names[i - 1]));
    if (t.shape != want) {
      return Status::InvalidArgument(op + ": " + names[i - 1] + " must have shape " +
                                     ShapeToString(want) + ", got " + ShapeToString(t.shape));
    }
  }
  return NumElements(want);
}

Status InferBatchNorm(const InferContext& ctx, std::vector<TensorType>* outputs) {
  ORRERY_RETURN_IF_ERROR(BatchNormParamSize(ctx).status());
  outputs->assign(1, ctx.inputs[0]);
  return Status::Ok();
}

struct PreparedBatchNorm : PreparedKernel {
  float epsilon = 1e-5f;
};

Result<Prepared> PrepareBatchNorm(const PrepareContext& ctx) {
  auto p = std::make_shared<PreparedBatchNorm>();
  ORRERY_ASSIGN_OR_RETURN(p->epsilon, ctx.attrs.GetFloat("epsilon", 1e-5f));
  // The folded scale and shift per parameter.
  const int64_t params = NumElements(ctx.inputs[1].shape);
  return Prepared{.kernel = std::move(p),
                  .scratch_bytes = 2 * params *
                                   static_cast<int64_t>(DTypeSize(ctx.inputs[0].dtype))};
}

template <typename T>
void RunBatchNorm(const KernelContext& ctx, float epsilon, Tensor& y) {
  const Tensor& x = *ctx.inputs[0];
  const T* scale = ctx.inputs[1]->data<T>();
  const T* bias = ctx.inputs[2]->data<T>();
  const T* mean = ctx.inputs[3]->data<T>();
  const T* var = ctx.inputs[4]->data<T>();
  const int64_t n = x.shape()[0];
  const int64_t c = x.shape()[1];
  const int64_t inner = DimProduct(x.shape(), 2, x.shape().size());
  const bool per_channel = ctx.inputs[1]->num_elements() == c;
  const int64_t params = ctx.inputs[1]->num_elements();
  // y = x * a + b with a = scale / sqrt(var + eps), b = B - mean * a.
  T* a = ScratchAs<T>(ctx);
  T* b = a + params;
  for (int64_t i = 0; i < params; ++i) {
    const double ai = static_cast<double>(scale[i]) /
                      std::sqrt(static_cast<double>(var[i]) + static_cast<double>(epsilon));
    a[i] = static_cast<T>(ai);
    b[i] = static_cast<T>(static_cast<double>(bias[i]) - static_cast<double>(mean[i]) * ai);
  }
  const T* xd = x.data<T>();
  T* yd = y.data<T>();
  const vec::Kernels& k = vec::Best();
  ParallelPlanes(ctx.threads, n * c, inner, [&](int64_t plane) {
    const int64_t ic = plane % c;
    const int64_t off = plane * inner;
    const T* __restrict xp = xd + off;
    T* __restrict yp = yd + off;
    if (per_channel) {
      if constexpr (std::is_same_v<T, float>) {
        k.scale_shift(xp, yp, inner, a[ic], b[ic]);
      } else {
        const T av = a[ic], bv = b[ic];
        for (int64_t i = 0; i < inner; ++i) yp[i] = xp[i] * av + bv;
      }
    } else {
      const T* ap = a + ic * inner;
      const T* bp = b + ic * inner;
      for (int64_t i = 0; i < inner; ++i) yp[i] = xp[i] * ap[i] + bp[i];
    }
  }, kParallelMemoryBoundElements);  // a multiply-add per element
}

Status ComputeBatchNorm(const KernelContext& ctx, std::span<Tensor> outputs) {
  if (ctx.prepared == nullptr) {
    return ComputeUnprepared(PrepareBatchNorm, ComputeBatchNorm, ctx, outputs);
  }
  const float epsilon = static_cast<const PreparedBatchNorm*>(ctx.prepared)->epsilon;
  if (ctx.inputs[0]->dtype() == DType::kFloat64) {
    RunBatchNorm<double>(ctx, epsilon, outputs[0]);
  } else {
    RunBatchNorm<float>(ctx, epsilon, outputs[0]);
  }
  return Status::Ok();
}

// ---------------- InstanceNormalization ----------------

Status InferInstanceNorm(const InferContext& ctx, std::vector<TensorType>* outputs) {
  const std::string op = "InstanceNormalization";
  const TensorType& x = ctx.inputs[0];
  ORRERY_RETURN_IF_ERROR(RequireFloat(x, op, "X"));
  if (x.shape.size() < 3) {
    return Status::InvalidArgument(op + ": X must have rank >= 3 (N, C, spatial...), got " +
                                   ShapeToString(x.shape));
  }
  const char* names[] = {"scale", "B"};
  for (size_t i = 1; i < 3; ++i) {
    ORRERY_RETURN_IF_ERROR(RequireSameDType(x, ctx.inputs[i], op, names[i - 1]));
    if (ctx.inputs[i].shape != Shape{x.shape[1]}) {
      return Status::InvalidArgument(op + ": " + names[i - 1] + " must have shape [" +
                                     std::to_string(x.shape[1]) + "], got " +
                                     ShapeToString(ctx.inputs[i].shape));
    }
  }
  outputs->assign(1, x);
  return Status::Ok();
}

// Mean and 1 / sqrt(variance + epsilon) of n values (two passes, double).
template <typename T>
void Moments(const T* x, int64_t n, double epsilon, double* mean, double* inv_std) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]);
  const double m = n > 0 ? sum / static_cast<double>(n) : 0.0;
  double sq = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const double d = static_cast<double>(x[i]) - m;
    sq += d * d;
  }
  const double var = n > 0 ? sq / static_cast<double>(n) : 0.0;
  *mean = m;
  *inv_std = 1.0 / std::sqrt(var + epsilon);
}

template <typename T>
void RunInstanceNorm(const KernelContext& ctx, float epsilon, Tensor& y) {
  const Tensor& x = *ctx.inputs[0];
  const T* scale = ctx.inputs[1]->data<T>();
  const T* bias = ctx.inputs[2]->data<T>();
  const int64_t c = x.shape()[1];
  const int64_t planes = x.shape()[0] * c;
  const int64_t inner = DimProduct(x.shape(), 2, x.shape().size());
  const T* xd = x.data<T>();
  T* yd = y.data<T>();
  const vec::Kernels& k = vec::Best();
  ParallelPlanes(ctx.threads, planes, inner, [&](int64_t p) {
    const T* xp = xd + p * inner;
    T* yp = yd + p * inner;
    double mean = 0.0, inv_std = 0.0;
    if constexpr (std::is_same_v<T, float>) {
      float m = 0, var = 0;
      k.moments(xp, inner, &m, &var);
      mean = m;
      inv_std = 1.0 / std::sqrt(static_cast<double>(var) + epsilon);
    } else {
      Moments(xp, inner, epsilon, &mean, &inv_std);
    }
    const double a = static_cast<double>(scale[p % c]) * inv_std;
    const T av = static_cast<T>(a);
    const T bv = static_cast<T>(static_cast<double>(bias[p % c]) - mean * a);
    if constexpr (std::is_same_v<T, float>) {
      k.scale_shift(xp, yp, inner, av, bv);
    } else {
      for (int64_t i = 0; i < inner; ++i) yp[i] = xp[i] * av + bv;
    }
  });
}

Status ComputeInstanceNorm(const KernelContext& ctx, std::span<Tensor> outputs) {
  ORRERY_ASSIGN_OR_RETURN(float epsilon, ctx.attrs.GetFloat("epsilon", 1e-5f));
  if (ctx.inputs[0]->dtype() == DType::kFloat64) {
    RunInstanceNorm<double>(ctx, epsilon, outputs[0]);
  } else {
    RunInstanceNorm<float>(ctx, epsilon, outputs[0]);
  }
  return Status::Ok();
}

// ---------------- LayerNormalization ----------------

struct LayerNormSetup {
  size_t axis = 0;
  Shape normalized;  // X.shape[axis:]
  Shape stats;       // X.shape[:axis] + ones: the Mean / InvStdDev shape
};

Result<LayerNormSetup> LayerNormDims(const Shape& x, const Attributes& attrs) {
  const std::string op = "LayerNormalization";
  if (x.empty()) return Status::InvalidArgument(op + ": X must have rank >= 1");
  ORRERY_ASSIGN_OR_RETURN(int64_t axis_attr, attrs.GetInt("axis", -1));
  ORRERY_ASSIGN_OR_RETURN(int64_t axis,
                          NormalizeAxis(axis_attr, static_cast<int64_t>(x.size())));
  ORRERY_ASSIGN_OR_RETURN(int64_t stash_type, attrs.GetInt("stash_type", 1));
  if (stash_type != 1) {
    return Status::InvalidArgument(op + ": unsupported stash_type = " +
                                   std::to_string(stash_type) + " (float32 statistics only)");
  }
  LayerNormSetup s;
  s.axis = static_cast<size_t>(axis);
  s.normalized.assign(x.begin() + axis, x.end());
  s.stats.assign(x.begin(), x.begin() + axis);
  s.stats.resize(x.size(), 1);
  return s;
}

Status InferLayerNorm(const InferContext& ctx, std::vector<TensorType>* outputs) {
  const std::string op = "LayerNormalization";
  const TensorType& x = ctx.inputs[0];
  ORRERY_RETURN_IF_ERROR(RequireFloat(x, op, "X"));
  ORRERY_ASSIGN_OR_RETURN(LayerNormSetup s, LayerNormDims(x.shape, ctx.attrs));
  const char* names[] = {"Scale", "B"};
  for (size_t i = 1; i < ctx.inputs.size(); ++i) {
    const TensorType& t = ctx.inputs[i];
    if (!t.present()) continue;
    ORRERY_RETURN_IF_ERROR(RequireSameDType(x, t, op, names[i - 1]));
    if (!IsUnidirectionalBroadcastable(t.shape, s.normalized)) {
      return Status::InvalidArgument(op + ": " + names[i - 1] + " " + ShapeToString(t.shape) +
                                     " does not broadcast to the normalized shape " +
                                     ShapeToString(s.normalized));
    }
  }
  if (!ctx.inputs[1].present()) return Status::InvalidArgument(op + ": Scale is required");
  const size_t n_out = ctx.num_outputs == 0 ? 1 : ctx.num_outputs;
  if (n_out > 3) {
    return Status::InvalidArgument(op + ": too many outputs (" + std::to_string(n_out) + ")");
  }
  outputs->assign(1, x);
  for (size_t i = 1; i < n_out; ++i) outputs->push_back(TensorType{DType::kFloat32, s.stats});
  return Status::Ok();
}

struct PreparedLayerNorm : PreparedKernel {
  LayerNormSetup setup;
  float epsilon = 1e-5f;
  int64_t inner = 0, outer = 0;
  bool expand_scale = false, expand_bias = false;  // broadcast into scratch per call
};

Result<Prepared> PrepareLayerNorm(const PrepareContext& ctx) {
  auto p = std::make_shared<PreparedLayerNorm>();
  const Shape& x = ctx.inputs[0].shape;
  ORRERY_ASSIGN_OR_RETURN(p->setup, LayerNormDims(x, ctx.attrs));
  ORRERY_ASSIGN_OR_RETURN(p->epsilon, ctx.attrs.GetFloat("epsilon", 1e-5f));
  p->inner = NumElements(p->setup.normalized);
  p->outer = DimProduct(x, 0, p->setup.axis);
  const bool has_bias = ctx.inputs.size() > 2 && ctx.inputs[2].present();
  p->expand_scale = NumElements(ctx.inputs[1].shape) != p->inner;
  p->expand_bias = has_bias && NumElements(ctx.inputs[2].shape) != p->inner;
  const int64_t elem = static_cast<int64_t>(DTypeSize(ctx.inputs[0].dtype));
  const int64_t scratch =
      ((p->expand_scale ? 1 : 0) + (p->expand_bias ? 1 : 0)) * p->inner * elem;
  return Prepared{.kernel = std::move(p), .scratch_bytes = scratch};
}

// Scale / B broadcast to the normalized shape into `out`.
template <typename T>
void Expand(const Tensor& t, const Shape& normalized, int64_t inner, T* out) {
  const T* d = t.data<T>();
  const Shape& ts = t.shape();
  const size_t off = normalized.size() - ts.size();
  for (int64_t i = 0; i < inner; ++i) {
    int64_t rem = i, src = 0, stride = 1;
    for (size_t j = normalized.size(); j > off; --j) {
      const int64_t dim = normalized[j - 1];
      const int64_t coord = rem % dim;
      rem /= dim;
      if (ts[j - 1 - off] != 1) src += coord * stride;
      stride *= ts[j - 1 - off];
    }
    out[i] = d[src];
  }
}

template <typename T>
void RunLayerNorm(const KernelContext& ctx, const PreparedLayerNorm& p,
                  std::span<Tensor> outputs) {
  const Tensor& x = *ctx.inputs[0];
  const int64_t inner = p.inner;
  const Tensor* b = ctx.inputs.size() > 2 ? ctx.inputs[2] : nullptr;
  T* scratch = ScratchAs<T>(ctx);
  const T* scale = ctx.inputs[1]->data<T>();
  if (p.expand_scale) {
    Expand<T>(*ctx.inputs[1], p.setup.normalized, inner, scratch);
    scale = scratch;
    scratch += inner;
  }
  const T* bias = b != nullptr ? b->data<T>() : nullptr;
  if (b != nullptr && p.expand_bias) {
    Expand<T>(*b, p.setup.normalized, inner, scratch);
    bias = scratch;
  }
  const T* xd = x.data<T>();
  T* yd = outputs[0].data<T>();
  float* mean_out = outputs.size() > 1 ? outputs[1].data<float>() : nullptr;
  float* inv_out = outputs.size() > 2 ? outputs[2].data<float>() : nullptr;
  const vec::Kernels& k = vec::Best();
  const int64_t per_task =
      std::max<int64_t>(1, kParallelRowElements / std::max<int64_t>(inner, 1));
  const int64_t tasks = NumThreads(ctx.threads) > 1 ? (p.outer + per_task - 1) / per_task : 1;
  ParallelFor(ctx.threads, tasks, [&](int64_t task, int) {
    const int64_t r0 = task * p.outer / tasks, r1 = (task + 1) * p.outer / tasks;
    if constexpr (std::is_same_v<T, float>) {
      k.layer_norm_rows(xd + r0 * inner, yd + r0 * inner, r1 - r0, inner, scale, bias, p.epsilon,
                        mean_out == nullptr ? nullptr : mean_out + r0,
                        inv_out == nullptr ? nullptr : inv_out + r0);
      return;
    }
    for (int64_t r = r0; r < r1; ++r) {
      const T* xp = xd + r * inner;
      T* yp = yd + r * inner;
      double mean = 0.0, inv_std = 0.0;
      Moments(xp, inner, p.epsilon, &mean, &inv_std);
      const T m = static_cast<T>(mean), is = static_cast<T>(inv_std);
      for (int64_t i = 0; i < inner; ++i) {
        yp[i] = (xp[i] - m) * is * scale[i] + (bias == nullptr ? T(0) : bias[i]);
      }
      if (mean_out != nullptr) mean_out[r] = static_cast<float>(mean);
      if (inv_out != nullptr) inv_out[r] = static_cast<float>(inv_std);
    }
  });
}

Status ComputeLayerNorm(const KernelContext& ctx, std::span<Tensor> outputs) {
  if (ctx.prepared == nullptr) {
    return ComputeUnprepared(PrepareLayerNorm, ComputeLayerNorm, ctx, outputs);
  }
  const auto& p = *static_cast<const PreparedLayerNorm*>(ctx.prepared);
  if (ctx.inputs[0]->dtype() == DType::kFloat64) {
    RunLayerNorm<double>(ctx, p, outputs);
  } else {
    RunLayerNorm<float>(ctx, p, outputs);
  }
  return Status::Ok();
}

}  // namespace

Status RegisterNormalizationKernels(OpRegistry* registry) {
  ORRERY_RETURN_IF_ERROR(registry->Register(KernelDef{.op_type = "BatchNormalization",
                                                      .backend = Backend::kCpu,
                                                      .min_inputs = 5,
                                                      .max_inputs = 5,
                                                      .min_outputs = 1,
                                                      .max_outputs = 5,
                                                      .infer = InferBatchNorm,
                                                      .compute = ComputeBatchNorm,
                                                      .prepare = PrepareBatchNorm}));
  ORRERY_RETURN_IF_ERROR(registry->Register(KernelDef{.op_type = "InstanceNormalization",
                                                      .backend = Backend::kCpu,
                                                      .min_inputs = 3,
                                                      .max_inputs = 3,
                                                      .infer = InferInstanceNorm,
                                                      .compute = ComputeInstanceNorm,
                                                      .overwrites_outputs = true}));
  return registry->Register(KernelDef{.op_type = "LayerNormalization",
                                      .backend = Backend::kCpu,
                                      .min_inputs = 2,
                                      .max_inputs = 3,
                                      .min_outputs = 1,
                                      .max_outputs = 3,
                                      .infer = InferLayerNorm,
                                      .compute = ComputeLayerNorm,
                                      .prepare = PrepareLayerNorm,
                                      .overwrites_outputs = true});
}

}  // namespace orrery::ops::cpu
