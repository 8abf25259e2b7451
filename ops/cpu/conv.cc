// Conv (opset 1 / 11 semantics; float32), 1-D, 2-D, 3-D and beyond:
//   X [N, C, D1..Dk], W [M, C / group, k1..kk], optional B [M] -> Y [N, M, O1..Ok].
// Three paths, chosen per node:
//   - pointwise (1x1, stride 1, no padding): one GEMM per (image, group)
//     straight over NCHW, no copies;
//   - depthwise (group == C == M, 1-D / 2-D): a direct loop whose kernel-tap
//     and output ranges are precomputed, so padding costs no branches;
//   - everything else: im2col over a tile of output positions (the scratch
//     buffer is bounded by kScratchBytes) followed by the shared Sgemm.
// Bias is written first and the convolution accumulates onto it; activations
// are not fused.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "ops/conv_util.h"
#include "ops/cpu/cpu_kernels.h"
#include "ops/cpu/gemm/sgemm.h"
#include "ops/kernel_util.h"

namespace orrery::ops::cpu {
namespace {

// Upper bound on the im2col buffer of one call (a tile of output positions).
constexpr int64_t kScratchBytes = int64_t{64} << 20;

struct ConvSetup {
  int64_t n = 0, c = 0, m = 0, group = 1;
  WindowGeometry geo;
};

Result<ConvSetup> Setup(const Shape& x, const Shape& w, const Shape* b, const Attributes& attrs) {
  if (x.size() < 3) {
    return Status::InvalidArgument("Conv: input X must have rank >= 3 (N, C, spatial...), got " +
                                   ShapeToString(x));
  }
  if (w.size() != x.size()) {
    return Status::InvalidArgument("Conv: weights W " + ShapeToString(w) +
                                   " must have the rank of X " + ShapeToString(x));
  }
  ConvSetup s;
  s.n = x[0];
  s.c = x[1];
  s.m = w[0];
  ORRERY_ASSIGN_OR_RETURN(s.group, attrs.GetInt("group", 1));
  if (s.group < 1) {
    return Status::InvalidArgument("Conv: group must be >= 1, got " + std::to_string(s.group));
  }
  // Divide rather than multiply: group is untrusted and could overflow.
  if (s.c % s.group != 0 || w[1] != s.c / s.group) {
    return Status::InvalidArgument("Conv: X has " + std::to_string(s.c) +
                                   " input channels, W " + ShapeToString(w) + " with group " +
                                   std::to_string(s.group) + " needs C = W[1] * group");
  }
  if (s.m % s.group != 0) {
    return Status::InvalidArgument("Conv: " + std::to_string(s.m) +
                                   " output channels are not divisible by group " +
                                   std::to_string(s.group));
  }
  if (b != nullptr && (b->size() != 1 || (*b)[0] != s.m)) {
    return Status::InvalidArgument("Conv: bias B must have shape [" + std::to_string(s.m) +
                                   "], got " + ShapeToString(*b));
  }
  const size_t rank = x.size() - 2;
  const std::span<const int64_t> kernel(w.data() + 2, rank);
  ORRERY_ASSIGN_OR_RETURN(WindowAttrs wa,
                          ReadWindowAttrs("Conv", attrs, rank, {.weight_kernel = kernel}));
  ORRERY_ASSIGN_OR_RETURN(s.geo,
                          ResolveWindow("Conv", wa, std::span<const int64_t>(x.data() + 2, rank)));
  return s;
}

Status InferConv(const InferContext& ctx, std::vector<TensorType>* outputs) {
  const TensorType& x = ctx.inputs[0];
  const TensorType& w = ctx.inputs[1];
  const bool has_b = ctx.inputs.size() > 2 && ctx.inputs[2].present();
  if (x.dtype != DType::kFloat32) {
    return Status::InvalidArgument("Conv: unsupported dtype " + std::string(DTypeName(x.dtype)) +
                                   " (float32 only)");
  }
  ORRERY_RETURN_IF_ERROR(RequireDType(w, "Conv: W", {DType::kFloat32}));
  if (has_b) ORRERY_RETURN_IF_ERROR(RequireDType(ctx.inputs[2], "Conv: B", {DType::kFloat32}));
  ORRERY_ASSIGN_OR_RETURN(ConvSetup s,
                          Setup(x.shape, w.shape, has_b ? &ctx.inputs[2].shape : nullptr, ctx.attrs));
  Shape out{s.n, s.m};
  out.insert(out.end(), s.geo.output.begin(), s.geo.output.end());
  outputs->assign(1, TensorType{DType::kFloat32, std::move(out)});
  return Status::Ok();
}

// im2col for one group: rows (channel, kernel tap), columns the output
// positions [p0, p0 + cols) of the flattened output grid. Runs along the
// innermost axis copy the valid range and zero the padding around it.
class Im2Col {
 public:
  Im2Col(const WindowGeometry& g, int64_t channels) : g_(g), channels_(channels) {
    const size_t r = g.rank();
    const size_t last = r - 1;
    in_strides_.assign(r, 1);
    for (size_t j = last; j > 0; --j) in_strides_[j - 1] = in_strides_[j] * g.input[j];
    for (int64_t t = 0; t < g.kernel[last]; ++t) {
      inner_.push_back(ValidPositions(t, g.input[last], g.output[last], g.strides[last],
                                      g.dilations[last], g.pad_begin[last]));
    }
  }

  // Fills col[(c * K + tap) * cols + (p - p0)].
  void Run(const float* x, int64_t p0, int64_t cols, float* col) const {
    const std::vector<GridRun> runs = SplitIntoRuns(g_.output, p0, cols);
    const size_t r = g_.rank();
    const size_t last = r - 1;
    const int64_t k_vol = g_.kernel_volume();
    const int64_t in_vol = g_.input_volume();
    const int64_t s_last = g_.strides[last];
    std::vector<int64_t> tap(r, 0);
    for (int64_t c = 0; c < channels_; ++c) {
      const float* xc = x + c * in_vol;
      std::fill(tap.begin(), tap.end(), 0);
      for (int64_t t = 0; t < k_vol; ++t) {
        float* dst = col + (c * k_vol + t) * cols;
        const IndexRange inner = inner_[static_cast<size_t>(tap[last])];
        const int64_t off = tap[last] * g_.dilations[last] - g_.pad_begin[last];
        for (const GridRun& seg : runs) {
          float* d = dst + seg.offset;
          const int64_t n = seg.end - seg.begin;
          int64_t base = 0;
          bool inside = true;
          for (size_t j = 0; j < last; ++j) {
            const int64_t i = seg.outer[j] * g_.strides[j] - g_.pad_begin[j] +
                              tap[j] * g_.dilations[j];
            if (i < 0 || i >= g_.input[j]) {
              inside = false;
              break;
            }
            base += i * in_strides_[j];
          }
          const int64_t lo = std::clamp(inner.begin, seg.begin, seg.end);
          const int64_t hi = std::clamp(inner.end, lo, seg.end);
          if (!inside || hi == lo) {
            std::fill(d, d + n, 0.0f);
            continue;
          }
          std::fill(d, d + (lo - seg.begin), 0.0f);
          const float* src = xc + base + lo * s_last + off;
          float* out = d + (lo - seg.begin);
          const int64_t len = hi - lo;
          if (s_last == 1) {
            std::memcpy(out, src, static_cast<size_t>(len) * sizeof(float));
          } else {
            for (int64_t i = 0; i < len; ++i) out[i] = src[i * s_last];
          }
          std::fill(out + len, d + n, 0.0f);
        }
        // Advance the kernel-tap odometer (last axis fastest).
        for (size_t j = r; j > 0; --j) {
          if (++tap[j - 1] < g_.kernel[j - 1]) break;
          tap[j - 1] = 0;
        }
      }
    }
  }

 private:
  const WindowGeometry& g_;
  int64_t channels_;
  std::vector<int64_t> in_strides_;
  std::vector<IndexRange> inner_;  // valid output range per innermost tap
};

// Depthwise 2-D (1-D arrives with a leading unit axis): one channel in, one out.
void DepthwisePlane(const WindowGeometry& g, const float* x, const float* w, float* y,
                    const std::vector<IndexRange>& inner) {
  const int64_t h_in = g.input[0], w_in = g.input[1];
  const int64_t h_out = g.output[0], w_out = g.output[1];
  const int64_t kh_n = g.kernel[0], kw_n = g.kernel[1];
  const int64_t sh = g.strides[0], sw = g.strides[1];
  const int64_t dh = g.dilations[0], dw = g.dilations[1];
  const int64_t ph = g.pad_begin[0], pw = g.pad_begin[1];
  for (int64_t oh = 0; oh < h_out; ++oh) {
    float* __restrict yr = y + oh * w_out;
    const IndexRange th = ValidTaps(oh, h_in, kh_n, sh, dh, ph);
    for (int64_t kh = th.begin; kh < th.end; ++kh) {
      const float* xr = x + (oh * sh - ph + kh * dh) * w_in;
      for (int64_t kw = 0; kw < kw_n; ++kw) {
        const IndexRange r = inner[static_cast<size_t>(kw)];
        if (r.size() == 0) continue;
        const float wv = w[kh * kw_n + kw];
        // xs[i] is the input under output r.begin + i.
        const float* __restrict xs = xr + r.begin * sw + kw * dw - pw;
        float* __restrict ys = yr + r.begin;
        const int64_t len = r.size();
        if (sw == 1) {
          for (int64_t i = 0; i < len; ++i) ys[i] += wv * xs[i];
        } else {
          for (int64_t i = 0; i < len; ++i) ys[i] += wv * xs[i * sw];
        }
      }
    }
  }
}

bool IsPointwise(const WindowGeometry& g) {
  for (size_t j = 0; j < g.rank(); ++j) {
    if (g.kernel[j] != 1 || g.strides[j] != 1 || g.pad_begin[j] != 0 || g.pad_end[j] != 0) {
      return false;
    }
  }
  return true;
}

Status ComputeConv(const KernelContext& ctx, std::span<Tensor> outputs) {
  const Tensor& x = *ctx.inputs[0];
  const Tensor& w = *ctx.inputs[1];
  const Tensor* b = ctx.inputs.size() > 2 ? ctx.inputs[2] : nullptr;
  ORRERY_ASSIGN_OR_RETURN(ConvSetup s,
                          Setup(x.shape(), w.shape(), b ? &b->shape() : nullptr, ctx.attrs));
  Tensor& y = outputs[0];
  const WindowGeometry& g = s.geo;
  const int64_t in_vol = g.input_volume();
  const int64_t out_vol = g.output_volume();
  const int64_t k_vol = g.kernel_volume();
  const int64_t cg = s.c / s.group;
  const int64_t mg = s.m / s.group;
  const int64_t kdim = cg * k_vol;  // GEMM depth
  const float* xd = x.data<float>();
  const float* wd = w.data<float>();
  float* yd = y.data<float>();
  if (y.num_elements() == 0) return Status::Ok();

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
  if (kdim == 0) return Status::Ok();

  if (IsPointwise(g)) {
    for (int64_t n = 0; n < s.n; ++n) {
      for (int64_t gi = 0; gi < s.group; ++gi) {
        SgemmAccumulate(false, false, mg, out_vol, cg, 1.0f, wd + gi * mg * cg, cg,
              xd + (n * s.c + gi * cg) * in_vol, in_vol, yd + (n * s.m + gi * mg) * out_vol,
              out_vol);
      }
    }
    return Status::Ok();
  }

  if (cg == 1 && mg == 1 && g.rank() <= 2) {
    const WindowGeometry g2 = g.rank() == 1 ? g.WithLeadingUnitAxis() : g;
    std::vector<IndexRange> inner;
    for (int64_t t = 0; t < g2.kernel[1]; ++t) {
      inner.push_back(ValidPositions(t, g2.input[1], g2.output[1], g2.strides[1],
                                     g2.dilations[1], g2.pad_begin[1]));
    }
    for (int64_t n = 0; n < s.n; ++n) {
      for (int64_t c = 0; c < s.c; ++c) {
        DepthwisePlane(g2, xd + (n * s.c + c) * in_vol, wd + c * k_vol,
                       yd + (n * s.m + c) * out_vol, inner);
      }
    }
    return Status::Ok();
  }

  const int64_t budget = kScratchBytes / static_cast<int64_t>(sizeof(float));
  const int64_t tile = std::clamp<int64_t>(budget / kdim, 1, out_vol);
  std::vector<float> col(static_cast<size_t>(kdim * tile));
  const Im2Col im2col(g, cg);
  for (int64_t n = 0; n < s.n; ++n) {
    for (int64_t gi = 0; gi < s.group; ++gi) {
      const float* xg = xd + (n * s.c + gi * cg) * in_vol;
      const float* wg = wd + gi * mg * kdim;
      float* yg = yd + (n * s.m + gi * mg) * out_vol;
      for (int64_t p0 = 0; p0 < out_vol; p0 += tile) {
        const int64_t cols = std::min(tile, out_vol - p0);
        im2col.Run(xg, p0, cols, col.data());
        SgemmAccumulate(false, false, mg, cols, kdim, 1.0f, wg, kdim, col.data(), cols, yg + p0, out_vol);
      }
    }
  }
  return Status::Ok();
}

}  // namespace

Status RegisterConvKernels(OpRegistry* registry) {
  return registry->Register(KernelDef{.op_type = "Conv",
                                      .backend = Backend::kCpu,
                                      .min_inputs = 2,
                                      .max_inputs = 3,
                                      .infer = InferConv,
                                      .compute = ComputeConv});
}

}  // namespace orrery::ops::cpu
