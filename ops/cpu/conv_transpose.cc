// ConvTranspose (opset 1 / 11 semantics; float32), any spatial rank:
//   X [N, C, D1..Dk], W [C, M / group, k1..kk], optional B [M] -> Y [N, M, O1..Ok].
// Per (image, group): col = W_g^T * X_g with the shared SgemmAccumulate over a tile of
// input positions (scratch bounded by kScratchBytes), then col2im scatters
// each kernel tap's row into Y, adding. A 1x1 / stride-1 / unpadded node is a
// single GEMM straight into Y.
#include <algorithm>
#include <string>
#include <vector>

#include "ops/conv_util.h"
#include "ops/cpu/cpu_kernels.h"
#include "ops/cpu/gemm/sgemm.h"
#include "ops/kernel_util.h"

namespace orrery::ops::cpu {
namespace {

constexpr int64_t kScratchBytes = int64_t{64} << 20;

struct TransposeSetup {
  int64_t n = 0, c = 0, m = 0, group = 1;
  WindowGeometry geo;
};

Result<TransposeSetup> Setup(const Shape& x, const Shape& w, const Shape* b,
                             const Attributes& attrs) {
  const std::string op = "ConvTranspose";
  if (x.size() < 3) {
    return Status::InvalidArgument(op + ": input X must have rank >= 3 (N, C, spatial...), got " +
                                   ShapeToString(x));
  }
  if (w.size() != x.size()) {
    return Status::InvalidArgument(op + ": weights W " + ShapeToString(w) +
                                   " must have the rank of X " + ShapeToString(x));
  }
  TransposeSetup s;
  s.n = x[0];
  s.c = x[1];
  ORRERY_ASSIGN_OR_RETURN(s.group, attrs.GetInt("group", 1));
  if (s.group < 1) {
    return Status::InvalidArgument(op + ": group must be >= 1, got " + std::to_string(s.group));
  }
  if (w[0] != s.c || s.c % s.group != 0) {
    return Status::InvalidArgument(op + ": W " + ShapeToString(w) + " must have W[0] = C = " +
                                   std::to_string(s.c) + ", and C divisible by group " +
                                   std::to_string(s.group));
  }
  if (w[1] > kMaxWindowExtent / s.group) {
    return Status::InvalidArgument(op + ": output channels W[1] * group are too many");
  }
  s.m = w[1] * s.group;
  if (b != nullptr && (b->size() != 1 || (*b)[0] != s.m)) {
    return Status::InvalidArgument(op + ": bias B must have shape [" + std::to_string(s.m) +
                                   "], got " + ShapeToString(*b));
  }
  const size_t rank = x.size() - 2;
  ORRERY_ASSIGN_OR_RETURN(
      WindowAttrs wa,
      ReadWindowAttrs(op, attrs, rank,
                      {.weight_kernel = std::span<const int64_t>(w.data() + 2, rank)}));
  ORRERY_ASSIGN_OR_RETURN(std::vector<int64_t> output_padding, attrs.GetInts("output_padding"));
  ORRERY_ASSIGN_OR_RETURN(std::vector<int64_t> output_shape, attrs.GetInts("output_shape"));
  ORRERY_ASSIGN_OR_RETURN(s.geo,
                          ResolveTransposeWindow(op, wa, std::span<const int64_t>(x.data() + 2, rank),
                                                 output_padding, output_shape));
  return s;
}

Status InferConvTranspose(const InferContext& ctx, std::vector<TensorType>* outputs) {
  const TensorType& x = ctx.inputs[0];
  const bool has_b = ctx.inputs.size() > 2 && ctx.inputs[2].present();
  if (x.dtype != DType::kFloat32) {
    return Status::InvalidArgument("ConvTranspose: unsupported dtype " +
                                   std::string(DTypeName(x.dtype)) + " (float32 only)");
  }
  ORRERY_RETURN_IF_ERROR(RequireDType(ctx.inputs[1], "ConvTranspose: W", {DType::kFloat32}));
  if (has_b) {
    ORRERY_RETURN_IF_ERROR(RequireDType(ctx.inputs[2], "ConvTranspose: B", {DType::kFloat32}));
  }
  ORRERY_ASSIGN_OR_RETURN(TransposeSetup s, Setup(x.shape, ctx.inputs[1].shape,
                                                  has_b ? &ctx.inputs[2].shape : nullptr,
                                                  ctx.attrs));
  Shape out{s.n, s.m};
  out.insert(out.end(), s.geo.output.begin(), s.geo.output.end());
  outputs->assign(1, TensorType{DType::kFloat32, std::move(out)});
  return Status::Ok();
}

// Scatter-adds col[(m * K + tap) * cols + (p - p0)], computed for input
// positions [p0, p0 + cols), into y (channels x output grid) for one group.
class Col2Im {
 public:
  // Input positions whose tap lands inside the output: the forward-conv
  // walk with input and output swapped.
  Col2Im(const WindowGeometry& g, int64_t channels) : g_(g), walk_(g, g.input, g.output), channels_(channels) {}

  void Run(const float* col, int64_t p0, int64_t cols, float* y) const {
    const int64_t k_vol = g_.kernel_volume();
    const int64_t out_vol = g_.output_volume();
    const int64_t s_last = g_.strides[g_.rank() - 1];
    walk_.Run(p0, cols, channels_, [&](int64_t m, int64_t t, const GridRun& run, int64_t lo, int64_t hi, int64_t at) {
      const int64_t len = hi - lo;
      if (len == 0) return;  // `at` may lie outside the output
      const float* __restrict src = col + (m * k_vol + t) * cols + run.offset + (lo - run.begin);
      float* __restrict dst = y + m * out_vol + at;
      if (s_last == 1) {
        for (int64_t i = 0; i < len; ++i) dst[i] += src[i];
      } else {
        for (int64_t i = 0; i < len; ++i) dst[i * s_last] += src[i];
      }
    });
  }

 private:
  const WindowGeometry& g_;
  WindowWalk walk_;
  int64_t channels_;
};

bool IsPointwise(const WindowGeometry& g) {
  for (size_t j = 0; j < g.rank(); ++j) {
    if (g.kernel[j] != 1 || g.strides[j] != 1 || g.pad_begin[j] != 0 ||
        g.output[j] != g.input[j]) {
      return false;
    }
  }
  return true;
}

Status ComputeConvTranspose(const KernelContext& ctx, std::span<Tensor> outputs) {
  const Tensor& x = *ctx.inputs[0];
  const Tensor& w = *ctx.inputs[1];
  const Tensor* b = ctx.inputs.size() > 2 ? ctx.inputs[2] : nullptr;
  ORRERY_ASSIGN_OR_RETURN(TransposeSetup s,
                          Setup(x.shape(), w.shape(), b ? &b->shape() : nullptr, ctx.attrs));
  Tensor& y = outputs[0];
  if (y.num_elements() == 0) return Status::Ok();
  const WindowGeometry& g = s.geo;
  const int64_t in_vol = g.input_volume();
  const int64_t out_vol = g.output_volume();
  const int64_t k_vol = g.kernel_volume();
  const int64_t cg = s.c / s.group;
  const int64_t mg = s.m / s.group;
  const int64_t rows = mg * k_vol;  // col rows per group
  const float* xd = x.data<float>();
  const float* wd = w.data<float>();
  float* yd = y.data<float>();

  // The output buffer arrives zero-filled; only a bias needs writing.
  if (b != nullptr) {
    const float* bd = b->data<float>();
    for (int64_t n = 0; n < s.n; ++n) {
      for (int64_t m = 0; m < s.m; ++m) {
        float* p = yd + (n * s.m + m) * out_vol;
        std::fill(p, p + out_vol, bd[m]);
      }
    }
  }
  if (cg == 0 || rows == 0 || in_vol == 0) return Status::Ok();

  if (IsPointwise(g)) {
    for (int64_t n = 0; n < s.n; ++n) {
      for (int64_t gi = 0; gi < s.group; ++gi) {
        SgemmAccumulate(true, false, mg, in_vol, cg, 1.0f, wd + gi * cg * mg, mg,
              xd + (n * s.c + gi * cg) * in_vol, in_vol, yd + (n * s.m + gi * mg) * out_vol,
              out_vol);
      }
    }
    return Status::Ok();
  }

  const int64_t budget = kScratchBytes / static_cast<int64_t>(sizeof(float));
  const int64_t tile = std::clamp<int64_t>(budget / rows, 1, in_vol);
  std::vector<float> col(static_cast<size_t>(rows * tile));
  const Col2Im col2im(g, mg);
  for (int64_t n = 0; n < s.n; ++n) {
    for (int64_t gi = 0; gi < s.group; ++gi) {
      const float* xg = xd + (n * s.c + gi * cg) * in_vol;
      const float* wg = wd + gi * cg * rows;
      float* yg = yd + (n * s.m + gi * mg) * out_vol;
      for (int64_t p0 = 0; p0 < in_vol; p0 += tile) {
        const int64_t cols = std::min(tile, in_vol - p0);
        std::fill(col.begin(), col.begin() + rows * cols, 0.0f);
        SgemmAccumulate(true, false, rows, cols, cg, 1.0f, wg, rows, xg + p0, in_vol, col.data(),
                        cols);
        col2im.Run(col.data(), p0, cols, yg);
      }
    }
  }
  return Status::Ok();
}

}  // namespace

Status RegisterConvTransposeKernels(OpRegistry* registry) {
  return registry->Register(KernelDef{.op_type = "ConvTranspose",
                                      .backend = Backend::kCpu,
                                      .min_inputs = 2,
                                      .max_inputs = 3,
                                      .infer = InferConvTranspose,
                                      .compute = ComputeConvTranspose});
}

}  // namespace orrery::ops::cpu
