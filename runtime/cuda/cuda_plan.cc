#include "runtime/cuda/cuda_plan.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "ops/cpu/gemm/fusion.h"
#include "ops/cuda/kernel_params.h"
#include "ops/cuda/kernels.h"
#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/page_mapping.h"
#include "runtime/cuda/weight_layout.h"

namespace orrery::runtime {

using cuda_detail::Check;
namespace oc = ops::cuda;

namespace {

enum class Kind {
  kView,
  kUnary,
  kBinary,
  kBatchNorm,
  kMaxPool,
  kAveragePool,
  kGlobalAveragePool,
  kSoftmax,
  kConcat,
  kGemm,
  kMatMul,
  kConv,
};

struct ConvDesc {
  cudnnTensorDescriptor_t x = nullptr;
  cudnnTensorDescriptor_t y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  cudnnConvolutionFwdAlgo_t algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
  size_t workspace = 0;

  ~ConvDesc() {
    if (x != nullptr) cudnnDestroyTensorDescriptor(x);
    if (y != nullptr) cudnnDestroyTensorDescriptor(y);
    if (w != nullptr) cudnnDestroyFilterDescriptor(w);
    if (conv != nullptr) cudnnDestroyConvolutionDescriptor(conv);
  }
};

// Conv / Gemm / MatMul: optional bias (broadcast), residual, activation.
struct Epilogue {
  int bias = -1;  // input index
  oc::BroadcastIndex bias_index;
  int residual = -1;  // input index
  oc::UnaryParams act;
};

struct GpuStep {
  Kind kind = Kind::kView;
  std::string label;
  std::vector<int> in;  // slots, -1 absent
  std::vector<int> out;
  std::vector<ops::TensorType> in_types;
  ops::TensorType out_type;
  oc::UnaryParams unary;
  oc::BinaryOp binary = oc::BinaryOp::kAdd;
  std::vector<oc::BroadcastIndex> index;  // per input (binary, Gemm's C)
  oc::BroadcastIndex out_index;           // the output onto itself
  oc::Pool2d pool;
  oc::SoftmaxRows softmax;
  oc::ConcatLayout concat;
  float alpha = 1.0f, beta = 0.0f, epsilon = 1e-5f;
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0;
  std::unique_ptr<ConvDesc> conv;
  Epilogue epilogue;
};

bool IsView(const std::string& op) {
  return op == "Flatten" || op == "Reshape" || op == "Squeeze" || op == "Unsqueeze" ||
         op == "Identity";
}

bool FitsInt(int64_t v) { return v >= 0 && v <= INT_MAX; }

Status Refuse(const GpuStep& s, const std::string& why) {
  return Status::Unimplemented(s.label + ": on CUDA: " + why);
}

}  // namespace

struct CudaWeights::Impl {
  std::shared_ptr<const Plan> plan;
  std::vector<void*> slot_ptr;           // per slot: the constant's address, or null
  std::unique_ptr<MappedPages> mapped;   // the model's pages, or
  void* owned = nullptr;                 // a cudaMalloc'ed range (no pages given)
  std::vector<uint32_t> no_pages;
  int64_t device_bytes = 0;

  ~Impl() {
    if (owned != nullptr) cudaFree(owned);
  }
};

Result<std::shared_ptr<const CudaWeights>> CudaWeights::Upload(std::shared_ptr<const Plan> plan,
                                                               CudaContext* context,
                                                               std::span<const uint32_t> pages) {
  if (context == nullptr) return Status::Unavailable("no CUDA device");
  // A model loaded from an image that kept some weights packed only (for
  // the CPU kernels; runtime/model_image.h) has no values to upload.
  for (const auto& [slot, value] : plan->constants) {
    if (value.unbound()) {
      return Status::FailedPrecondition("CUDA weights: constant '" + plan->slot_names[static_cast<size_t>(slot)] +
                                        "' is held packed for the CPU only (model image); not placeable");
    }
  }
  ORRERY_RETURN_IF_ERROR(Check(cudaSetDevice(context->info().ordinal), "cudaSetDevice"));
  ORRERY_ASSIGN_OR_RETURN(WeightLayout layout, LayOutWeights(PlanWeightSizes(*plan), context->page_bytes()));
  auto impl = std::make_unique<Impl>();
  impl->slot_ptr.assign(plan->slot_names.size(), nullptr);
  char* base = nullptr;
  if (pages.empty()) {
    const size_t bytes = static_cast<size_t>(std::max<int64_t>(layout.used_bytes, kWeightAlignment));
    ORRERY_RETURN_IF_ERROR(Check(cudaMalloc(&impl->owned, bytes), "cudaMalloc (weights)"));
    impl->device_bytes = static_cast<int64_t>(bytes);
    base = static_cast<char*>(impl->owned);
  } else {
    ORRERY_ASSIGN_OR_RETURN(impl->mapped, MapWeightPages(context->page_mapper(), layout, pages));
    impl->device_bytes = impl->mapped->bytes();
    base = reinterpret_cast<char*>(static_cast<uintptr_t>(impl->mapped->address()));
  }
  // layout.constants is in plan->constants' order.
  for (size_t i = 0; i < layout.constants.size(); ++i) {
    const WeightPlacement& w = layout.constants[i];
    if (w.slot < 0 || static_cast<size_t>(w.slot) >= impl->slot_ptr.size()) {
      return Status::Internal("CUDA weights: constant slot " + std::to_string(w.slot) + " is out of range");
    }
    char* p = base + w.offset;
    // Through the staging buffers on the copy stream; blocks.
    ORRERY_RETURN_IF_ERROR(context->CopyToDevice(plan->constants[i].second.raw_data(), p, w.bytes));
    impl->slot_ptr[static_cast<size_t>(w.slot)] = p;
  }
  impl->plan = std::move(plan);
  return std::shared_ptr<const CudaWeights>(new CudaWeights(std::move(impl)));
}

CudaWeights::CudaWeights(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CudaWeights::~CudaWeights() = default;
const Plan& CudaWeights::plan() const { return *impl_->plan; }
int64_t CudaWeights::device_bytes() const { return impl_->device_bytes; }
const std::vector<uint32_t>& CudaWeights::pages() const {
  return impl_->mapped != nullptr ? impl_->mapped->pages() : impl_->no_pages;
}
void* CudaWeights::at(int slot) const {
  return slot >= 0 && static_cast<size_t>(slot) < impl_->slot_ptr.size() ? impl_->slot_ptr[static_cast<size_t>(slot)]
                                                                          : nullptr;
}

struct CudaPlan::Impl {
  std::shared_ptr<const Plan> plan;
  std::shared_ptr<const CudaWeights> weights;  // the constants; outlives the buffers below
  CudaContext* ctx = nullptr;
  std::vector<ops::TensorType> input_types;
  std::vector<ops::TensorType> slot_types;
  std::vector<void*> slot_ptr;
  std::vector<void*> owned;  // cudaMalloc'ed, freed at destruction
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  int64_t device_bytes = 0;
  std::vector<GpuStep> steps;
  cudaEvent_t done = nullptr;
  std::mutex run_mu;

  ~Impl() {
    if (done != nullptr) cudaEventSynchronize(done);
    if (done != nullptr) cudaEventDestroy(done);
    for (void* p : owned) cudaFree(p);
  }

  Result<void*> Allocate(size_t bytes) {
    void* p = nullptr;
    ORRERY_RETURN_IF_ERROR(Check(cudaMalloc(&p, bytes == 0 ? 4 : bytes), "cudaMalloc"));
    owned.push_back(p);
    device_bytes += static_cast<int64_t>(bytes);
    return p;
  }

  float* F(int slot) const { return slot < 0 ? nullptr : static_cast<float*>(slot_ptr[static_cast<size_t>(slot)]); }

  Status Prepare(const Step& step, GpuStep* g);
  Status PrepareEpilogue(const Step& step, GpuStep* g, int own_inputs);
  Status PrepareConv(GpuStep* g, const ops::Attributes& attrs);
  Status Enqueue(const GpuStep& g, cudaStream_t stream);
  Status EnqueueEpilogue(const GpuStep& g, cudaStream_t stream);
};

Status CudaPlan::Impl::PrepareEpilogue(const Step& step, GpuStep* g, int own_inputs) {
  ORRERY_ASSIGN_OR_RETURN(ops::cpu::Fusion f, ops::cpu::ReadFusion(step.attrs, step.op_type));
  ORRERY_ASSIGN_OR_RETURN(g->epilogue.act, oc::MakeFusedActivation(step.op_type, step.attrs));
  const int n_in = static_cast<int>(g->in.size());
  if (f.residual) g->epilogue.residual = n_in - 1;
  const int last_own = f.residual ? n_in - 1 : n_in;  // inputs before Z
  // Conv's B, MatMul's fused bias: input #2 when present.
  if (own_inputs == 3 && last_own > 2 && g->in[2] >= 0 && step.op_type != "Gemm") {
    g->epilogue.bias = 2;
    const int64_t len = g->in_types[2].shape.empty() ? 1 : g->in_types[2].shape[0];
    const Shape bias_shape =
        step.op_type == "Conv" ? Shape{len, 1, 1} : Shape{len};
    ORRERY_ASSIGN_OR_RETURN(g->epilogue.bias_index, oc::MakeBroadcast(g->out_type.shape, bias_shape));
  }
  return Status::Ok();
}

Status CudaPlan::Impl::PrepareConv(GpuStep* g, const ops::Attributes& attrs) {
  const Shape& x = g->in_types[0].shape;
  const Shape& w = g->in_types[1].shape;
  const Shape& y = g->out_type.shape;
  ORRERY_ASSIGN_OR_RETURN(oc::Conv2dParams p, oc::MakeConv2d(attrs, x, w));
  for (int64_t v : {x[0], x[1], x[2], x[3], w[0], w[1], w[2], w[3], y[2], y[3]}) {
    if (!FitsInt(v)) return Refuse(*g, "a dimension exceeds cuDNN's int");
  }
  auto d = std::make_unique<ConvDesc>();
  cudnnHandle_t h = static_cast<cudnnHandle_t>(ctx->cudnn());
  const auto I = [](int64_t v) { return static_cast<int>(v); };
  ORRERY_RETURN_IF_ERROR(Check(cudnnCreateTensorDescriptor(&d->x), "cudnnCreateTensorDescriptor"));
  ORRERY_RETURN_IF_ERROR(Check(cudnnCreateTensorDescriptor(&d->y), "cudnnCreateTensorDescriptor"));
  ORRERY_RETURN_IF_ERROR(Check(cudnnCreateFilterDescriptor(&d->w), "cudnnCreateFilterDescriptor"));
  ORRERY_RETURN_IF_ERROR(
      Check(cudnnCreateConvolutionDescriptor(&d->conv), "cudnnCreateConvolutionDescriptor"));
  ORRERY_RETURN_IF_ERROR(Check(cudnnSetTensor4dDescriptor(d->x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT,
                                                          I(x[0]), I(x[1]), I(x[2]), I(x[3])),
                               "cudnnSetTensor4dDescriptor"));
  ORRERY_RETURN_IF_ERROR(Check(cudnnSetTensor4dDescriptor(d->y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT,
                                                          I(y[0]), I(y[1]), I(y[2]), I(y[3])),
                               "cudnnSetTensor4dDescriptor"));
  ORRERY_RETURN_IF_ERROR(Check(cudnnSetFilter4dDescriptor(d->w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW,
                                                          I(w[0]), I(w[1]), I(w[2]), I(w[3])),
                               "cudnnSetFilter4dDescriptor"));
  ORRERY_RETURN_IF_ERROR(Check(
      cudnnSetConvolution2dDescriptor(d->conv, I(p.pad_h), I(p.pad_w), I(p.stride_h), I(p.stride_w),
                                      I(p.dil_h), I(p.dil_w), CUDNN_CROSS_CORRELATION,
                                      CUDNN_DATA_FLOAT),
      "cudnnSetConvolution2dDescriptor"));
  ORRERY_RETURN_IF_ERROR(
      Check(cudnnSetConvolutionGroupCount(d->conv, I(p.group)), "cudnnSetConvolutionGroupCount"));
  // Plain fp32 FMA: the default lets Ampere and later use TF32 tensor
  // cores, whose 10-bit mantissa would not match the CPU kernels.
  ORRERY_RETURN_IF_ERROR(Check(cudnnSetConvolutionMathType(d->conv, CUDNN_FMA_MATH),
                               "cudnnSetConvolutionMathType"));
  // cuDNN's heuristics rank the algorithms; take the best that works.
  cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
  int returned = 0;
  ORRERY_RETURN_IF_ERROR(Check(
      cudnnGetConvolutionForwardAlgorithm_v7(h, d->x, d->w, d->conv, d->y,
                                             CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &returned, perf),
      "cudnnGetConvolutionForwardAlgorithm_v7"));
  bool found = false;
  for (int i = 0; i < returned && !found; ++i) {
    if (perf[i].status == CUDNN_STATUS_SUCCESS) {
      d->algo = perf[i].algo;
      found = true;
    }
  }
  if (!found) return Refuse(*g, "cuDNN has no algorithm for this convolution");
  ORRERY_RETURN_IF_ERROR(Check(
      cudnnGetConvolutionForwardWorkspaceSize(h, d->x, d->w, d->conv, d->y, d->algo, &d->workspace),
      "cudnnGetConvolutionForwardWorkspaceSize"));
  workspace_bytes = std::max(workspace_bytes, d->workspace);
  g->conv = std::move(d);
  return Status::Ok();
}

Status CudaPlan::Impl::Prepare(const Step& step, GpuStep* g) {
  const std::string& op = step.op_type;
  ORRERY_ASSIGN_OR_RETURN(g->out_index, oc::MakeBroadcast(g->out_type.shape, g->out_type.shape));
  if (IsView(op)) {
    g->kind = Kind::kView;
    return Status::Ok();
  }
  if (oc::MakeBinary(op).ok()) {
    g->kind = Kind::kBinary;
    ORRERY_ASSIGN_OR_RETURN(g->binary, oc::MakeBinary(op));
    for (const ops::TensorType& t : g->in_types) {
      ORRERY_ASSIGN_OR_RETURN(oc::BroadcastIndex b, oc::MakeBroadcast(g->out_type.shape, t.shape));
      g->index.push_back(b);
    }
    return Status::Ok();
  }
  if (op == "BatchNormalization") {
    g->kind = Kind::kBatchNorm;
    ORRERY_ASSIGN_OR_RETURN(g->epsilon, step.attrs.GetFloat("epsilon", 1e-5f));
    return Status::Ok();
  }
  if (op == "MaxPool" || op == "AveragePool") {
    g->kind = op == "MaxPool" ? Kind::kMaxPool : Kind::kAveragePool;
    ORRERY_ASSIGN_OR_RETURN(g->pool, oc::MakePool2d(op, step.attrs, g->in_types[0].shape));
    return Status::Ok();
  }
  if (op == "GlobalAveragePool") {
    g->kind = Kind::kGlobalAveragePool;
    return Status::Ok();
  }
  if (op == "Softmax") {
    g->kind = Kind::kSoftmax;
    ORRERY_ASSIGN_OR_RETURN(g->softmax, oc::MakeSoftmaxRows(g->in_types[0].shape, step.attrs,
                                                            plan->opset));
    return Status::Ok();
  }
  if (op == "Concat") {
    g->kind = Kind::kConcat;
    std::vector<Shape> shapes;
    for (const ops::TensorType& t : g->in_types) shapes.push_back(t.shape);
    ORRERY_ASSIGN_OR_RETURN(g->concat, oc::MakeConcat(shapes, step.attrs));
    return Status::Ok();
  }
  if (op == "Gemm" || op == "MatMul") {
    g->kind = op == "Gemm" ? Kind::kGemm : Kind::kMatMul;
    const Shape& a = g->in_types[0].shape;
    const Shape& b = g->in_types[1].shape;
    if (op == "Gemm") {
      ORRERY_ASSIGN_OR_RETURN(g->alpha, step.attrs.GetFloat("alpha", 1.0f));
      ORRERY_ASSIGN_OR_RETURN(g->beta, step.attrs.GetFloat("beta", 1.0f));
      ORRERY_ASSIGN_OR_RETURN(int64_t ta, step.attrs.GetInt("transA", 0));
      ORRERY_ASSIGN_OR_RETURN(int64_t tb, step.attrs.GetInt("transB", 0));
      g->trans_a = ta != 0;
      g->trans_b = tb != 0;
      g->m = g->out_type.shape[0];
      g->n = g->out_type.shape[1];
      g->k = g->trans_a ? a[0] : a[1];
      ORRERY_ASSIGN_OR_RETURN(ops::cpu::Fusion f, ops::cpu::ReadFusion(step.attrs, op));
      const size_t c_index = 2;
      const bool has_c = g->in.size() > (f.residual ? 3u : 2u) && g->in[c_index] >= 0;
      if (has_c) {
        ORRERY_ASSIGN_OR_RETURN(oc::BroadcastIndex c,
                                oc::MakeBroadcast(g->out_type.shape, g->in_types[c_index].shape));
        g->index.push_back(c);
      }
    } else {
      g->k = a.back();
      g->n = b[1];
      g->m = g->k == 0 ? 0 : NumElements(a) / g->k;
    }
    if (!FitsInt(g->m) || !FitsInt(g->n) || !FitsInt(g->k)) {
      return Refuse(*g, "a GEMM dimension exceeds cuBLAS's int");
    }
    return PrepareEpilogue(step, g, op == "MatMul" ? 3 : 2);
  }
  if (op == "Conv") {
    g->kind = Kind::kConv;
    ORRERY_RETURN_IF_ERROR(PrepareConv(g, step.attrs));
    return PrepareEpilogue(step, g, 3);
  }
  // Everything else CheckCudaSupport accepts is unary.
  g->kind = Kind::kUnary;
  std::vector<const Tensor*> values(g->in.size(), nullptr);
  for (const auto& [slot, value] : plan->constants) {
    for (size_t i = 0; i < g->in.size(); ++i) {
      if (g->in[i] == slot) values[i] = &value;
    }
  }
  ORRERY_ASSIGN_OR_RETURN(g->unary, oc::MakeUnary(op, step.attrs, plan->opset, values));
  return Status::Ok();
}

Status CudaPlan::Impl::EnqueueEpilogue(const GpuStep& g, cudaStream_t s) {
  const Epilogue& e = g.epilogue;
  float* y = F(g.out[0]);
  const int64_t n = NumElements(g.out_type.shape);
  const oc::UnaryParams none;
  if (e.bias >= 0) {
    const oc::UnaryParams& post = e.residual >= 0 ? none : e.act;
    ORRERY_RETURN_IF_ERROR(oc::LaunchBinary(y, g.out_index, F(g.in[static_cast<size_t>(e.bias)]),
                                            e.bias_index, y, n, oc::BinaryOp::kAdd, post.op,
                                            post.alpha, post.beta, s));
  }
  if (e.residual >= 0) {
    return oc::LaunchBinary(y, g.out_index, F(g.in[static_cast<size_t>(e.residual)]), g.out_index,
                            y, n, oc::BinaryOp::kAdd, e.act.op, e.act.alpha, e.act.beta, s);
  }
  if (e.bias < 0 && e.act.op != oc::UnaryOp::kIdentity) {
    return oc::LaunchUnary(y, y, n, e.act.op, e.act.alpha, e.act.beta, s);
  }
  return Status::Ok();
}

Status CudaPlan::Impl::Enqueue(const GpuStep& g, cudaStream_t s) {
  const Shape& out_shape = g.out_type.shape;
  const int64_t n = NumElements(out_shape);
  float* y = F(g.out.empty() ? -1 : g.out[0]);
  switch (g.kind) {
    case Kind::kView:
      return Status::Ok();
    case Kind::kUnary:
      return oc::LaunchUnary(F(g.in[0]), y, n, g.unary.op, g.unary.alpha, g.unary.beta, s);
    case Kind::kBinary:
      return oc::LaunchBinary(F(g.in[0]), g.index[0], F(g.in[1]), g.index[1], y, n, g.binary,
                              oc::UnaryOp::kIdentity, 0, 0, s);
    case Kind::kBatchNorm: {
      const Shape& x = g.in_types[0].shape;
      const int64_t planes = x[0] * x[1];
      const int64_t spatial = planes == 0 ? 1 : n / planes;
      return oc::LaunchBatchNorm(F(g.in[0]), F(g.in[1]), F(g.in[2]), F(g.in[3]), F(g.in[4]),
                                 g.epsilon, y, n, x[1], spatial == 0 ? 1 : spatial, s);
    }
    case Kind::kMaxPool:
      return oc::LaunchMaxPool2d(F(g.in[0]), y, out_shape[0] * out_shape[1], g.pool, s);
    case Kind::kAveragePool:
      return oc::LaunchAveragePool2d(F(g.in[0]), y, out_shape[0] * out_shape[1], g.pool, s);
    case Kind::kGlobalAveragePool: {
      const Shape& x = g.in_types[0].shape;
      const int64_t planes = x[0] * x[1];
      return oc::LaunchGlobalAveragePool(F(g.in[0]), y, planes,
                                         planes == 0 ? 0 : NumElements(x) / planes, s);
    }
    case Kind::kSoftmax:
      return oc::LaunchSoftmax(F(g.in[0]), y, g.softmax, s);
    case Kind::kConcat:
      for (size_t i = 0; i < g.in.size(); ++i) {
        ORRERY_RETURN_IF_ERROR(oc::LaunchConcatCopy(F(g.in[i]), y,
                                                    NumElements(g.in_types[i].shape),
                                                    g.concat.blocks[i], g.concat.out_block,
                                                    g.concat.offsets[i], s));
      }
      return Status::Ok();
    case Kind::kGemm:
    case Kind::kMatMul: {
      if (n == 0) return Status::Ok();
      float beta = 0.0f;
      if (g.kind == Kind::kGemm && !g.index.empty() && g.beta != 0.0f) {
        ORRERY_RETURN_IF_ERROR(oc::LaunchScaledBroadcast(F(g.in[2]), g.index[0], g.beta, y, n, s));
        beta = 1.0f;
      }
      const oc::ColumnMajorGemm c = oc::RowMajorGemmAsColumnMajor(g.trans_a, g.trans_b, g.m, g.n, g.k);
      const float alpha = g.kind == Kind::kGemm ? g.alpha : 1.0f;
      ORRERY_RETURN_IF_ERROR(Check(
          cublasSgemm(static_cast<cublasHandle_t>(ctx->cublas()),
                      c.trans_first ? CUBLAS_OP_T : CUBLAS_OP_N,
                      c.trans_second ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(c.m),
                      static_cast<int>(c.n), static_cast<int>(c.k), &alpha, F(g.in[1]),
                      static_cast<int>(c.ld_first), F(g.in[0]), static_cast<int>(c.ld_second),
                      &beta, y, static_cast<int>(c.ld_c)),
          "cublasSgemm"));
      return EnqueueEpilogue(g, s);
    }
    case Kind::kConv: {
      if (n == 0) return Status::Ok();
      const float one = 1.0f, zero = 0.0f;
      const ConvDesc& d = *g.conv;
      ORRERY_RETURN_IF_ERROR(Check(
          cudnnConvolutionForward(static_cast<cudnnHandle_t>(ctx->cudnn()), &one, d.x, F(g.in[0]),
                                  d.w, F(g.in[1]), d.conv, d.algo, workspace, d.workspace, &zero,
                                  d.y, y),
          "cudnnConvolutionForward"));
      return EnqueueEpilogue(g, s);
    }
  }
  return Status::Internal("unknown CUDA step kind");
}

Result<std::unique_ptr<CudaPlan>> CudaPlan::Compile(std::shared_ptr<const Plan> plan,
                                                    const std::vector<ops::TensorType>& input_types,
                                                    CudaContext* context,
                                                    std::shared_ptr<const CudaWeights> weights) {
  ORRERY_RETURN_IF_ERROR(CheckCudaPlan(*plan, input_types));
  if (context == nullptr) return Status::Unavailable("no CUDA device");
  if (weights != nullptr && &weights->plan() != plan.get()) {
    return Status::InvalidArgument("CUDA plan: the weights were uploaded for another plan");
  }
  ORRERY_RETURN_IF_ERROR(Check(cudaSetDevice(context->info().ordinal), "cudaSetDevice"));
  ORRERY_ASSIGN_OR_RETURN(std::vector<std::optional<ops::TensorType>> types,
                          InferPlanTypes(*plan, input_types));
  auto impl = std::make_unique<Impl>();
  impl->plan = plan;
  impl->ctx = context;
  impl->input_types = input_types;
  impl->slot_types.resize(types.size());
  for (size_t i = 0; i < types.size(); ++i) impl->slot_types[i] = types[i].value_or(ops::TensorType{});
  impl->slot_ptr.assign(types.size(), nullptr);
  ORRERY_RETURN_IF_ERROR(Check(cudaEventCreateWithFlags(&impl->done, cudaEventDisableTiming),
                               "cudaEventCreate"));
  // Constants: the model's uploaded weights, or uploaded now for this plan alone.
  if (weights == nullptr) {
    ORRERY_ASSIGN_OR_RETURN(weights, CudaWeights::Upload(plan, context));
  }
  impl->weights = std::move(weights);
  for (const auto& [slot, value] : plan->constants) impl->slot_ptr[static_cast<size_t>(slot)] = impl->weights->at(slot);
  for (int slot : plan->input_slots) {
    const ops::TensorType& t = impl->slot_types[static_cast<size_t>(slot)];
    ORRERY_ASSIGN_OR_RETURN(impl->slot_ptr[static_cast<size_t>(slot)],
                            impl->Allocate(static_cast<size_t>(NumElements(t.shape)) *
                                           DTypeSize(t.dtype)));
  }
  for (const Step& step : plan->steps) {
    GpuStep g;
    g.label = step.label;
    g.in = step.inputs;
    for (int s : step.inputs) {
      g.in_types.push_back(s < 0 ? ops::TensorType{} : impl->slot_types[static_cast<size_t>(s)]);
    }
    for (int s : step.outputs) {
      if (s >= 0) g.out.push_back(s);
    }
    if (g.out.size() != 1) return Refuse(g, "only single-output steps are supported");
    g.out_type = impl->slot_types[static_cast<size_t>(g.out[0])];
    ORRERY_RETURN_IF_ERROR(impl->Prepare(step, &g));
    const size_t out = static_cast<size_t>(g.out[0]);
    if (g.kind == Kind::kView) {
      impl->slot_ptr[out] = impl->slot_ptr[static_cast<size_t>(g.in[0])];  // same bytes, new shape
    } else {
      ORRERY_ASSIGN_OR_RETURN(impl->slot_ptr[out],
                              impl->Allocate(static_cast<size_t>(NumElements(g.out_type.shape)) *
                                             DTypeSize(g.out_type.dtype)));
    }
    impl->steps.push_back(std::move(g));
  }
  if (impl->workspace_bytes > 0) {
    ORRERY_ASSIGN_OR_RETURN(impl->workspace, impl->Allocate(impl->workspace_bytes));
  }
  return std::unique_ptr<CudaPlan>(new CudaPlan(std::move(impl)));
}

CudaPlan::CudaPlan(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CudaPlan::~CudaPlan() = default;

int64_t CudaPlan::device_bytes() const { return impl_->device_bytes; }

Result<std::vector<Tensor>> CudaPlan::Run(const std::vector<Tensor>& inputs) {
  Impl& m = *impl_;
  std::lock_guard<std::mutex> run_lock(m.run_mu);
  if (inputs.size() != m.plan->input_slots.size()) {
    return Status::InvalidArgument("CUDA plan: expected " +
                                   std::to_string(m.plan->input_slots.size()) + " inputs, got " +
                                   std::to_string(inputs.size()));
  }
  ORRERY_RETURN_IF_ERROR(Check(cudaSetDevice(m.ctx->info().ordinal), "cudaSetDevice"));
  for (size_t i = 0; i < inputs.size(); ++i) {
    const int slot = m.plan->input_slots[i];
    const ops::TensorType& t = m.input_types[i];
    if (inputs[i].dtype() != t.dtype || inputs[i].shape() != t.shape) {
      return Status::InvalidArgument("CUDA plan: input '" +
                                     m.plan->slot_names[static_cast<size_t>(slot)] + "' is " +
                                     ShapeToString(inputs[i].shape()) +
                                     ", the plan was compiled for " + ShapeToString(t.shape));
    }
    // On the copy stream, outside the compute lock: another plan's kernels
    // keep running meanwhile.
    ORRERY_RETURN_IF_ERROR(m.ctx->CopyToDevice(inputs[i].raw_data(),
                                               m.slot_ptr[static_cast<size_t>(slot)],
                                               static_cast<int64_t>(inputs[i].byte_size())));
  }
  {
    std::lock_guard<std::mutex> compute_lock(m.ctx->compute_mutex());
    cudaStream_t stream = static_cast<cudaStream_t>(m.ctx->compute_stream());
    for (const GpuStep& g : m.steps) {
      Status st = m.Enqueue(g, stream);
      if (!st.ok()) return Status(st.code(), g.label + ": " + st.message());
    }
    ORRERY_RETURN_IF_ERROR(Check(cudaEventRecord(m.done, stream), "cudaEventRecord"));
  }
  ORRERY_RETURN_IF_ERROR(Check(cudaEventSynchronize(m.done), "CUDA plan run"));
  std::vector<Tensor> outputs;
  for (int slot : m.plan->output_slots) {
    const ops::TensorType& t = m.slot_types[static_cast<size_t>(slot)];
    ORRERY_ASSIGN_OR_RETURN(Tensor out, Tensor::Allocate(t.dtype, t.shape));
    ORRERY_RETURN_IF_ERROR(m.ctx->CopyToHost(m.slot_ptr[static_cast<size_t>(slot)], out.raw_data(),
                                             static_cast<int64_t>(out.byte_size())));
    outputs.push_back(std::move(out));
  }
  return outputs;
}

}  // namespace orrery::runtime
