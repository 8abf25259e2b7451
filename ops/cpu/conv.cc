// Conv (opset 1 / 11 semantics; float32), 1-D, 2-D, 3-D and beyond:
//   X [N, C, D1..Dk], W [M, C / group, k1..kk], optional B [M] -> Y [N, M, O1..Ok],
// plus the runtime's fused forms (ops/cpu/gemm/fusion.h): an activation and a
// residual Z [N, M, O1..Ok] (the last input), Y = act(conv(X, W) + B + Z).
// Prepare resolves the geometry and packs W once per node (NodeCache); Compute
// then allocates nothing. Paths, chosen in Prepare:
//   - pointwise (1x1, stride 1, no padding): one packed GEMM per (image,
//     group) straight over NCHW, no copies; on AVX-512 and one thread, <= 16
//     output channels and <= 512 input channels per group, or <= 64 input
//     channels at >= 256 positions: the im2col-free tile below with one tap
//     (nothing packed);
//   - depthwise (group == C == M, 1-D / 2-D): a direct per-plane kernel whose
//     tap and output ranges are precomputed, so padding costs no branches,
//     then the epilogue on the plane while it is in cache; on AVX-512, planes
//     up to 4096 outputs as one flattened row of vectors (gemm/depthwise_flat.h);
//   - few input channels (<= 4) and 3-wide stride-2 left-pad-1 windows
//     along rows (an image stem), AVX-512: a direct kernel splitting each
//     input row into its taps once (gemm/conv_stem.h);
//   - stride 2, windows of 3x3 or more, more than 4 input channels, output
//     rows 14-128 wide, AVX-512: a direct kernel with the output channels
//     across the lanes, broadcasting the input (gemm/conv_channels.h);
//   - 3x3 stride 1, pads 0 or 1, one group, >= 32 input and output
//     channels, output planes >= 13 wide, AVX-512 or AVX2: Winograd's F(2x2, 3x3),
//     16 GEMMs over transformed weights and input (gemm/conv_winograd.h);
//     on planes >= 27 wide (from 16 input channels) F(4x4, 3x3), 36 GEMMs
//     for 4x4 outputs;
//   - stride 1 with the output plane the input's size, <= 32 channels per
//     group, >= 256 positions, AVX-512: the im2col-free tile reading the
//     input at per-tap offsets (gemm/conv_direct.h);
//   - other 1-D / 2-D convolutions: GEMM of the packed W with im2col panels
//     made block by block inside the GEMM's packing (no col buffer); on
//     AVX-512 and AVX2 the panels are masked loads at per-tap offsets for
//     stride 1 with the output plane the input's size, masked gathers
//     otherwise (AVX2: row loads where 8 positions share an output row;
//     gemm/conv_direct.h), also in the transposed GEMM for few positions;
//     1x1 stride 2 on a plane twice the output's size reads a subsample
//     (the even-even parity plane) split into scratch, by masked loads;
//   - 3-D and beyond: im2col tiles into a heap buffer, then the GEMM.
// Bias, residual and activation are the GEMM's epilogue.
#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ops/conv_util.h"
#include "ops/cpu/cpu_kernels.h"
#include "ops/cpu/gemm/conv_channels.h"
#include "ops/cpu/gemm/conv_direct.h"
#include "ops/cpu/gemm/conv_stem.h"
#include "ops/cpu/gemm/conv_winograd.h"
#include "ops/cpu/gemm/depthwise_flat.h"
#include "ops/cpu/gemm/fusion.h"
#include "ops/cpu/gemm/kernels.h"
#include "ops/cpu/gemm/sgemm.h"
#include "ops/cpu/gemm/transpose.h"
#include "ops/cpu/packed_state.h"
#include "ops/kernel_util.h"

namespace orrery::ops::cpu {
namespace {

// Upper bound on the im2col buffer of one call on the 3-D+ path.
constexpr int64_t kHeapColBytes = int64_t{8} << 20;

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

// Where the optional inputs are: B at #2 unless #2 is the residual.
struct ConvInputs {
  int b = -1;  // bias index or -1
  int z = -1;  // residual index or -1
};

ConvInputs LocateInputs(size_t count, const Fusion& f) {
  ConvInputs in;
  if (f.residual) {
    in.z = static_cast<int>(count) - 1;
    if (count == 4) in.b = 2;
  } else if (count >= 3) {
    in.b = 2;
  }
  return in;
}

Status InferConv(const InferContext& ctx, std::vector<TensorType>* outputs) {
  const TensorType& x = ctx.inputs[0];
  const TensorType& w = ctx.inputs[1];
  ORRERY_ASSIGN_OR_RETURN(Fusion f, ReadFusion(ctx.attrs, "Conv"));
  const ConvInputs loc = LocateInputs(ctx.inputs.size(), f);
  const bool has_b = loc.b >= 0 && ctx.inputs[static_cast<size_t>(loc.b)].present();
  if (x.dtype != DType::kFloat32) {
    return Status::InvalidArgument("Conv: unsupported dtype " + std::string(DTypeName(x.dtype)) +
                                   " (float32 only)");
  }
  ORRERY_RETURN_IF_ERROR(RequireDType(w, "Conv: W", {DType::kFloat32}));
  const TensorType* b = has_b ? &ctx.inputs[static_cast<size_t>(loc.b)] : nullptr;
  if (b != nullptr) ORRERY_RETURN_IF_ERROR(RequireDType(*b, "Conv: B", {DType::kFloat32}));
  ORRERY_ASSIGN_OR_RETURN(ConvSetup s,
                          Setup(x.shape, w.shape, b ? &b->shape : nullptr, ctx.attrs));
  Shape out{s.n, s.m};
  out.insert(out.end(), s.geo.output.begin(), s.geo.output.end());
  ORRERY_RETURN_IF_ERROR(CheckFusedInputs(ctx.inputs, f, 3, out, "Conv"));
  outputs->assign(1, TensorType{DType::kFloat32, std::move(out)});
  return Status::Ok();
}

// im2col for one group: rows (channel, kernel tap), columns the output
// positions [p0, p0 + cols) of the flattened output grid. Runs along the
// innermost axis copy the valid range and zero the padding around it.
class Im2Col {
 public:
  Im2Col(const WindowGeometry& g, int64_t channels) : g_(g), walk_(g, g.output, g.input), channels_(channels) {}

  // Fills col[(c * K + tap) * cols + (p - p0)].
  void Run(const float* x, int64_t p0, int64_t cols, float* col) const {
    const int64_t k_vol = g_.kernel_volume();
    const int64_t in_vol = g_.input_volume();
    const int64_t s_last = g_.strides[g_.rank() - 1];
    walk_.Run(p0, cols, channels_, [&](int64_t c, int64_t t, const GridRun& seg, int64_t lo, int64_t hi, int64_t at) {
      float* d = col + (c * k_vol + t) * cols + seg.offset;
      float* out = d + (lo - seg.begin);
      std::fill(d, out, 0.0f);
      const int64_t len = hi - lo;
      if (len > 0) {  // else `at` may lie outside the input
        const float* src = x + c * in_vol + at;
        if (s_last == 1) {
          std::memcpy(out, src, static_cast<size_t>(len) * sizeof(float));
        } else {
          for (int64_t i = 0; i < len; ++i) out[i] = src[i * s_last];
        }
      }
      std::fill(out + len, d + (seg.end - seg.begin), 0.0f);
    });
  }

 private:
  const WindowGeometry& g_;
  WindowWalk walk_;
  int64_t channels_;
};

bool IsPointwise(const WindowGeometry& g) {
  for (size_t j = 0; j < g.rank(); ++j) {
    if (g.kernel[j] != 1 || g.strides[j] != 1 || g.pad_begin[j] != 0 || g.pad_end[j] != 0) {
      return false;
    }
  }
  return true;
}

enum class ConvPath { kPointwise, kDepthwise, kIm2Col2D, kIm2ColND };

// W packed per group (left operands), shared across the node's shapes.

struct ConvPrepared final : PreparedKernel {
  ConvSetup s;
  Fusion fusion;
  ConvInputs loc;
  ConvPath path = ConvPath::kIm2ColND;
  Shape x_shape, y_shape;
  int64_t in_vol = 0, out_vol = 0, k_vol = 0, cg = 0, mg = 0, kdim = 0;
  std::shared_ptr<const PackedGroups> packed;  // null: W is not constant
  // 1-D / 2-D paths: the geometry as 2-D, and per kernel column the output
  // columns whose taps fall inside the input.
  WindowGeometry g2;
  std::vector<int64_t> inner_begin, inner_end;
  gemm_internal::Im2ColGeometry im2col;  // points into inner_begin / inner_end
  // Depthwise: the plane geometry (points into inner_* and flat).
  gemm_internal::DepthwiseGeometry depthwise;
  gemm_internal::DepthwiseFlatTable flat;
  // 2-D convolutions: the tables of the im2col-free tile (direct_tile:
  // linear plan, W constant and the tile preferred for this shape; also
  // narrow shallow pointwise layers, kPointwiseTileMax*) or else
  // of the masked-load / gather panels, right or (transposed) left
  // (gemm/conv_direct.h), used when the ISA has them.
  bool direct = false, direct_tile = false;
  gemm_internal::ConvDirectPlan direct_plan;
  // The tile's plane ends in a panel of a few positions that conv_tail
  // runs instead (gemm/conv_direct.h): its columns, its B in the scratch.
  int64_t tail_cols = 0;
  // Layers by Sgemm with packed weights (pointwise, B read in place, or
  // over panels) whose last column panel holds 1..4 positions: those
  // columns by conv_tail, their im2col at the end of the GEMM's scratch
  // (GemmTailCols).
  int64_t gemm_tail = 0;
  // Stride-2 planes of twice the output's size: direct_plan reads the
  // input's parity planes (gemm/conv_direct.h), split into the tail of the
  // scratch per image and group, when the ISA has a direct kernel.
  bool phase = false;
  gemm_internal::PhaseSplit phase_split;
  // Few output positions (e.g. 7x7) and many channels: Y^T = im2col^T W^T,
  // so that the positions, not the channels, pad the 8-row panels; Y^T goes
  // to scratch after the GEMM's own part and is transposed into Y.
  bool transposed = false;
  int64_t gemm_scratch = 0;  // bytes of the GEMM's part of each thread's slice
  // Few input channels, 3-wide stride-2 windows along rows (an image stem):
  // the direct AVX-512 kernel of gemm/conv_stem.h when that ISA is active.
  bool stem = false;
  gemm_internal::ConvStemGeometry stem_geo;
  std::vector<float> stem_w;
  // Strided layers with the output channels across the lanes
  // (gemm/conv_channels.h); each thread's row buffer is its scratch.
  // Either kernel's layer has no packed GEMM W (packed stays null).
  bool channels = false;
  gemm_internal::ConvChannelsGeometry channels_geo;
  std::vector<float> channels_w;
  std::vector<int32_t> channels_off;
  // 3x3 stride-1 layers by Winograd (gemm/conv_winograd.h): the transformed
  // W, packed per chunk and term, in the node cache under key
  // kWinogradCacheKey or, for F(4x4, 3x3), kWinograd4CacheKey (so a model
  // image can leave W out); null when the layer takes another path. No
  // packed GEMM W then (packed stays null).
  gemm_internal::WinogradGeometry winograd_geo;
  std::shared_ptr<const PackedGroups> winograd_u;
};

// Output positions at most this, with at least kTransposedMinChannels
// channels per group, take the transposed GEMM.
constexpr int64_t kTransposedMaxPositions = 64;
constexpr int64_t kTransposedMinChannels = 64;
// Non-pointwise layers without a residual take it up to 14x14 planes too
// when the positions pad less as 8-row panels than as 16-column vectors
// (196: 200 rows where 208 columns). Zen 5, one thread, minimum ms:
// GoogLeNet's 14x14 3x3 144 -> 288 0.774 -> 0.646, 160 -> 320 0.930 ->
// 0.798, ResNet-18's layer3 3x3 without the residual 1.08 -> 1.03; but
// SqueezeNet's 13x13 (169: 176 either way) lost 6% in the model, and with
// a residual (then added after the scalar transposition, in a separate
// pass) ResNet-50's 14x14 1x1 256 -> 1024 got 60% slower. (Since the
// tile's tail kernel, 14x14 3x3 layers up to 512 channels take the tile:
// gemm/conv_direct.cc, kSmallPlaneMaxChannelsWithTail.) And with the tail
// kernel for 196's last 4 positions (GemmTailCols) Sgemm pads nothing
// there and beat the transposed GEMM at 14x14 (Zen 5, minima of 2 runs,
// ms, one / two threads: 1x1 / 2 512 -> 1024 0.866-0.881 -> 0.836-0.841 /
// 0.461 -> 0.441-0.446, 3x3 / 2 128 -> 256 0.516-0.531 -> 0.475-0.477 /
// 0.285-0.310 -> 0.268-0.271, 256 -> 256 1.032-1.035 -> 0.981-0.990,
// 1x1 1024 -> 256 0.422-0.424 -> 0.411-0.419 / 0.231-0.233 -> 0.224-0.225,
// 480 -> 192 0.151-0.153 -> 0.145-0.149 / 0.0815 -> 0.0772-0.0778, 832 ->
// 384 even / 0.275 -> 0.265-0.269), so for non-pointwise layers the rule
// holds only without it. Pointwise ones keep it from 129 channels: in
// ResNet-50 its layer3 1024 -> 256 measured 0.410-0.416 transposed against
// 0.418-0.420 (the other way round from alone), GoogLeNet's 14x14 ones
// with 144..256 channels -0.001..+0.0045 ms each; with <= 128 channels
// Sgemm won, 480..528 -> 64 0.057-0.061 -> 0.052-0.055, 528 -> 112 0.099
// -> 0.094, 512 -> 112 0.098 -> 0.094 (step minima of 3 alternated runs).
constexpr int64_t kTransposedMaxPositionsNoResidual = 196;
constexpr int64_t kGemmTailMaxPointwiseChannels = 128;
// Pointwise layers without a residual take it there too from this depth,
// once the transposition became cheap (gemm/transpose.h). Zen 5, one
// thread, per-step minima of 3 alternated rounds: ResNet-50's layer3
// 1024 -> 256 0.48-0.50 -> 0.44 ms, GoogLeNet's inception4 1x1 (480-832
// deep) 5-10% faster; MobileNet-v2's 64 / 96 -> 384 / 576 expansions got
// 7-13% slower (the transposed left panels cost more than shallow K
// saves), and with a residual (256 -> 1024) it measured even. Only layers
// at least as deep as they are wide: ResNet-50's layer3.0 256 -> 1024
// without a residual got 7% slower (0.465 -> 0.499 ms; the transposed
// output is 4x the input).
constexpr int64_t kTransposedMinPointwiseDepth = 256;
bool TransposedPadsLess(int64_t positions) {
  return (positions + 7) / 8 * 8 < (positions + 15) / 16 * 16;
}

// Pointwise layers this narrow and shallow, on one thread, take the
// im2col-free tile reading X in place (no right panels packed: a left
// panel's tiles would use each packed panel only once or twice). Measured
// one thread, minimum ms: MobileNet-v2 32 -> 16 at 112x112 0.162 -> 0.134;
// SqueezeNet fire3 64 -> 16 at 55x55 0.068 -> 0.054 alone, but the model
// around it got slower (stem and next layers, +3% whole), hence 32 deep;
// deeper (128 -> 16, 256 -> 32) or wider (24, 32 channels with 144 / 192
// deep) lost or tied, and with two threads the GEMM's split won or tied.
// Later (Zen 5, after the tile's prefetch became opt-in) up to 512 deep
// won at one thread: SqueezeNet fire3 / fire4 squeeze 64 / 128 -> 16 at
// 55x55 0.049 / 0.092 -> 0.033 / 0.070 ms, GoogLeNet inception3a 192 -> 16
// at 28x28 0.037 -> 0.026 (step minima), SqueezeNet's whole-model minimum
// 3.40 -> 3.34 ms (8 alternated rounds; one profiled A/B of 8 rounds had
// the rest of the model ~1% slower, another ~1% faster: noise).
constexpr int64_t kPointwiseTileMaxChannels = 16;
// The largest subsample of a 1x1 stride-2 input taken as parity planes
// (see BuildConvPhasePlan in PrepareConv).
constexpr int64_t kPhaseMaxBytes = int64_t{512} << 10;
constexpr int64_t kPointwiseTileMaxDepth = 512;
// Stride-2 windows of at least 3x3 with output rows this wide take the
// channels-across-lanes kernel (gemm/conv_channels.h). Zen 5, step minima,
// ms, GEMM over gathered panels -> it, one / two threads: ResNet-18
// layer2.0 conv1 (64 -> 128, 56 -> 28) 0.490-0.500 / 0.272-0.275 ->
// 0.450-0.456 / 0.244-0.247 (ONNX Runtime 0.421 at one), ResNet-50
// layer2.0 conv2 (128 -> 128) 0.979-0.990 / 0.551-0.552 -> 0.897-0.908 /
// 0.491-0.492; alone, 28 -> 14 in groups of two rows: 128 -> 256
// 0.459-0.474 -> 0.434-0.451, 256 -> 256 0.948-0.994 -> 0.859-0.917 /
// 0.550-0.557 -> 0.521-0.523. 7 wide lost (ResNet-18 layer4.0 0.51 ->
// 0.61-0.72, ResNet-50's 1.03-1.08 -> 1.31-1.36: each tile streams a
// 590 KB+ weight block for 6 positions), and so did 1x1 stride 2
// (ResNet-50's layer2.0 downsample 0.82 -> 0.90: its parity-plane GEMM
// reads half the input).
constexpr int64_t kConvChannelsMinRow = 14;
// Row buffers up to 4 MiB (ConvChannelsGeometry::row_buffer_floats).
constexpr int64_t kConvChannelsMaxRowBufferFloats = int64_t{1} << 20;

// Node cache keys: W packed as the GEMM's left operand, as its right
// operand for the transposed GEMM, transformed for Winograd's F(2x2, 3x3)
// and for F(4x4, 3x3).
constexpr uint32_t kGemmCacheKey = 0;
constexpr uint32_t kTransposedCacheKey = 1;
constexpr uint32_t kWinogradCacheKey = 2;
constexpr uint32_t kWinograd4CacheKey = 3;
// Winograd for layers with at least this many input and
// output channels (fewer: the transforms outweigh the GEMMs' savings).
constexpr int64_t kWinogradMinChannels = 32;
// F(4x4, 3x3) (output planes >= 27 wide) saves more per product,
// so from 16 input channels: SqueezeNet's 55x55 16 -> 64 3x3s, one thread,
// step minima 0.312 -> 0.223-0.228 ms against the direct path.
constexpr int64_t kWinograd4MinInputChannels = 16;

// W per group as the left operand W_g [mg x kdim], or transposed as the
// right operand W_g^T [kdim x mg].
Result<std::shared_ptr<const PackedGroups>> PackWeights(const Tensor& w, const ConvSetup& s,
                                                        int64_t kdim, bool transposed) {
  auto p = std::make_shared<PackedGroups>();
  const int64_t mg = s.m / s.group;
  for (int64_t gi = 0; gi < s.group; ++gi) {
    const float* wg = w.data<float>() + gi * mg * kdim;
    p->groups.push_back(transposed ? PackedMatrix::PackRight(wg, kdim, true, kdim, mg)
                                   : PackedMatrix::PackLeft(wg, kdim, false, mg, kdim));
  }
  return std::shared_ptr<const PackedGroups>(std::move(p));
}

// Packed weights from the node cache under `key` (made by `make` on first
// use), or made for this call when there is no cache or the cached entry
// does not `fit` (imported state of other dimensions).
Result<std::shared_ptr<const PackedGroups>> CachedGroups(NodeCache* cache, uint32_t key, NodeCache::MakeFn make,
                                                         FunctionRef<bool(const PackedMatrix&, size_t)> fits,
                                                         size_t count) {
  std::shared_ptr<const PreparedKernel> got;
  if (cache != nullptr) {
    ORRERY_ASSIGN_OR_RETURN(got, cache->GetOrMake(key, make));
    const auto* pg = dynamic_cast<const PackedGroups*>(got.get());
    bool ok = pg != nullptr && pg->groups.size() == count;
    for (size_t i = 0; ok && i < count; ++i) ok = fits(pg->groups[i], i);
    if (ok) return std::static_pointer_cast<const PackedGroups>(got);
  }
  ORRERY_ASSIGN_OR_RETURN(got, make());
  return std::static_pointer_cast<const PackedGroups>(got);
}

// The 2-D window fields that Im2ColGeometry and DepthwiseGeometry share,
// from p.g2 and p.inner_begin / inner_end (which must outlive the result).
template <typename G>
G PlaneGeometry(const ConvPrepared& p) {
  const WindowGeometry& g2 = p.g2;
  G r;
  r.h_in = g2.input[0];
  r.w_in = g2.input[1];
  r.w_out = g2.output[1];
  r.kh = g2.kernel[0];
  r.kw = g2.kernel[1];
  r.sh = g2.strides[0];
  r.sw = g2.strides[1];
  r.dh = g2.dilations[0];
  r.dw = g2.dilations[1];
  r.ph = g2.pad_begin[0];
  r.pw = g2.pad_begin[1];
  r.inner_begin = p.inner_begin.data();
  r.inner_end = p.inner_end.data();
  return r;
}

Result<Prepared> PrepareConv(const PrepareContext& ctx) {
  auto p = std::make_shared<ConvPrepared>();
  ORRERY_ASSIGN_OR_RETURN(p->fusion, ReadFusion(ctx.attrs, "Conv"));
  p->loc = LocateInputs(ctx.inputs.size(), p->fusion);
  if (p->loc.b >= 0 && !ctx.inputs[static_cast<size_t>(p->loc.b)].present()) p->loc.b = -1;
  const Shape* b_shape = p->loc.b >= 0 ? &ctx.inputs[static_cast<size_t>(p->loc.b)].shape : nullptr;
  ORRERY_ASSIGN_OR_RETURN(p->s,
                          Setup(ctx.inputs[0].shape, ctx.inputs[1].shape, b_shape, ctx.attrs));
  const ConvSetup& s = p->s;
  const WindowGeometry& g = s.geo;
  p->x_shape = ctx.inputs[0].shape;
  p->y_shape = ctx.outputs[0].shape;
  p->in_vol = g.input_volume();
  p->out_vol = g.output_volume();
  p->k_vol = g.kernel_volume();
  p->cg = s.c / s.group;
  p->mg = s.m / s.group;
  p->kdim = p->cg * p->k_vol;
  if (IsPointwise(g)) {
    p->path = ConvPath::kPointwise;
  } else if (p->cg == 1 && p->mg == 1 && g.rank() <= 2) {
    p->path = ConvPath::kDepthwise;
  } else if (g.rank() <= 2) {
    p->path = ConvPath::kIm2Col2D;
  }
  if (g.rank() <= 2) {
    p->g2 = g.rank() == 1 ? g.WithLeadingUnitAxis() : g;
    for (int64_t t = 0; t < p->g2.kernel[1]; ++t) {
      const IndexRange r = ValidPositions(t, p->g2.input[1], p->g2.output[1], p->g2.strides[1],
                                          p->g2.dilations[1], p->g2.pad_begin[1]);
      p->inner_begin.push_back(r.begin);
      p->inner_end.push_back(r.end);
    }
  }
  if (g.rank() <= 2) {
    p->im2col = PlaneGeometry<gemm_internal::Im2ColGeometry>(*p);
    p->im2col.in_vol = p->in_vol;
  }
  if (p->path == ConvPath::kDepthwise) {
    p->depthwise = PlaneGeometry<gemm_internal::DepthwiseGeometry>(*p);
    p->depthwise.h_out = p->g2.output[0];
    p->flat = gemm_internal::BuildDepthwiseFlatTable(p->depthwise);
    p->flat.AttachTo(&p->depthwise);
  }
  const Tensor* w = ctx.value(1);
  const bool gemm_path = p->path == ConvPath::kPointwise || p->path == ConvPath::kIm2Col2D;
  // 14x14 planes (see kTransposedMaxPositionsNoResidual): non-pointwise
  // layers without a residual, and deep pointwise ones without one.
  const bool gemm_tail = gemm_internal::GemmTailCols(p->out_vol, gemm_internal::ActiveKernels()) > 0;
  const bool transposed_14x14 =
      !p->fusion.residual && TransposedPadsLess(p->out_vol) &&
      ((p->path == ConvPath::kIm2Col2D && !gemm_tail) ||
       (p->path == ConvPath::kPointwise && p->kdim >= kTransposedMinPointwiseDepth &&
        p->kdim >= p->mg && !(gemm_tail && p->mg <= kGemmTailMaxPointwiseChannels)));
  const int64_t max_transposed =
      transposed_14x14 ? kTransposedMaxPositionsNoResidual
          : kTransposedMaxPositions;
  if (p->path == ConvPath::kIm2Col2D) {
    // Gathers beat im2col panels on every strided layer measured (ResNet-18
    // stride-2 3x3 157 -> 172 / 141 -> 174 transposed, 7x7 stride-2 conv1
    // 140 -> 146, 1x1 stride 2 162 -> 167 GFLOP/s, one thread).
    // 1x1 stride 2 on a plane twice the output's size: the input's
    // even-even parity plane (a subsample, split per call into scratch)
    // read by the linear plan's masked loads instead of stride-2 runs and
    // gathers, when the subsample stays within kPhaseMaxBytes (ResNet-50,
    // step minima of two A/Bs of 6-8 alternated rounds, ms: layer3.0
    // downsample (512 channels, 14x14 out) T=1 0.954-0.968 -> 0.930-0.962,
    // T=2 0.591-0.617 -> 0.517-0.571; layer4.0 (1024, 7x7) T=1 0.995-0.999
    // -> 0.933-0.964, T=2 0.618-0.649 -> 0.539-0.610; layer2.0 (256, 28x28:
    // 784 KiB) even at T=1, +7% at T=2, hence the bound).
    // 3x3 stride 2 over its four parity planes lost: the split (4x the
    // output plane, out of L2) cost more than the runs (layer2.0 1.04 ->
    // 1.13 ms, the tile over the planes 1.06; layer3.0 even).
    gemm_internal::ConvDirectPlan phase_plan;
    gemm_internal::PhaseSplit phase_split;
    if (gemm_internal::BuildConvPhasePlan(p->im2col, p->g2.output[0], &phase_plan,
                                          &phase_split) &&
        phase_split.phases == 1 &&
        phase_split.bytes(p->cg) <= kPhaseMaxBytes) {
      p->phase = true;
      p->phase_split = phase_split;
      p->direct_plan = std::move(phase_plan);
      p->direct = true;
    } else {
      p->direct = gemm_internal::BuildConvDirectPlan(p->im2col, p->g2.output[0],
                                                     /*gather=*/true, &p->direct_plan);
    }
  }
  // The direct kernels below apply the epilogue in registers: only the
  // activations the GEMM tile applies there.
  Epilogue fused;
  p->fusion.ApplyTo(&fused);
  const bool post_in_tile = gemm_internal::PostInTile(fused);
  // Both repack W from its values: not when the image kept only the GEMM's
  // packed form (unbound).
  const bool w_values = w != nullptr && !w->unbound();
  if (p->path == ConvPath::kIm2Col2D && s.group == 1 && w_values &&
      p->cg <= gemm_internal::kConvStemMaxChannels && p->g2.kernel[0] <= gemm_internal::kConvStemMaxKh &&
      p->g2.kernel[1] <= gemm_internal::kConvStemMaxKw && p->g2.strides[1] == 2 &&
      p->g2.pad_begin[1] < p->g2.kernel[1] && p->g2.dilations[1] == 1 &&
      ActiveGemmIsa() == GemmIsa::kAvx512) {
    if (post_in_tile) {
      p->stem = true;
      gemm_internal::ConvStemGeometry& sg = p->stem_geo;
      sg.cg = p->cg;
      sg.m = p->mg;
      sg.h_in = p->g2.input[0];
      sg.w_in = p->g2.input[1];
      sg.h_out = p->g2.output[0];
      sg.w_out = p->g2.output[1];
      sg.kh = p->g2.kernel[0];
      sg.sh = p->g2.strides[0];
      sg.ph = p->g2.pad_begin[0];
      sg.dh = p->g2.dilations[0];
      sg.kw = p->g2.kernel[1];
      sg.pw = p->g2.pad_begin[1];
      p->stem_w = gemm_internal::PackConvStemWeights(sg, w->data<float>());
    }
  }
  // The in-place kernels (this one and the tiles below) only where they
  // win (InPlaceConvKernels); the stem kernel above wins on every AVX-512
  // core measured (Intel Xeon: ResNet-18's conv1 1.92 -> 1.53 ms).
  const bool in_place = InPlaceConvKernels();
  if (!p->stem && in_place && p->path == ConvPath::kIm2Col2D && s.group == 1 && w_values &&
      ActiveGemmIsa() == GemmIsa::kAvx512 && p->g2.strides[0] == 2 && p->g2.strides[1] == 2 &&
      p->g2.dilations[0] == 1 && p->g2.dilations[1] == 1 && p->g2.kernel[0] >= 3 && p->g2.kernel[1] >= 3 &&
      p->cg > gemm_internal::kConvStemMaxChannels &&
      p->g2.output[1] >= kConvChannelsMinRow && p->g2.output[1] <= gemm_internal::kConvChannelsMaxGroup) {
    const gemm_internal::ConvChannelsGeometry cgeo = gemm_internal::MakeConvChannelsGeometry(
        p->cg, p->mg, p->g2.input[0], p->g2.input[1], p->g2.output[0], p->g2.output[1],
        p->g2.kernel[0], p->g2.kernel[1], p->g2.strides[0], p->g2.strides[1], p->g2.pad_begin[0],
        p->g2.pad_begin[1]);
    if (post_in_tile && cgeo.row_buffer_floats() <= kConvChannelsMaxRowBufferFloats) {
      p->channels = true;
      p->channels_geo = cgeo;
      p->channels_w = gemm_internal::PackConvChannelsWeights(cgeo, w->data<float>());
      p->channels_off = gemm_internal::ConvChannelsOffsets(cgeo);
    }
  }
  if (!p->stem && !p->channels && p->path == ConvPath::kIm2Col2D && s.group == 1 && w != nullptr &&
      WinogradConvs() && ActiveGemmIsa() != GemmIsa::kPortable &&
      p->cg >= (gemm_internal::WinogradTileFor(p->g2.output[1]) == 4 ? kWinograd4MinInputChannels
                                                                      : kWinogradMinChannels) &&
      p->mg >= kWinogradMinChannels &&
      gemm_internal::WinogradFits(p->g2.kernel[0], p->g2.kernel[1], p->g2.strides[0], p->g2.strides[1],
                                  p->g2.dilations[0], p->g2.dilations[1], p->g2.pad_begin[0],
                                  p->g2.pad_begin[1], p->g2.pad_end[0], p->g2.pad_end[1], p->g2.output[0],
                                  p->g2.output[1])) {
    p->winograd_geo = gemm_internal::MakeWinogradGeometry(
        p->cg, p->mg, p->g2.input[0], p->g2.input[1], p->g2.output[0], p->g2.output[1], p->g2.pad_begin[0],
        p->g2.pad_begin[1], gemm_internal::WinogradTileFor(p->g2.output[1]));
    const gemm_internal::WinogradGeometry& wg = p->winograd_geo;
    auto make = [&]() -> Result<std::shared_ptr<const PreparedKernel>> {
      if (w->unbound()) return PackedValuesMissing("Conv", "W");
      auto u = std::make_shared<PackedGroups>();
      u->groups = gemm_internal::PackWinogradWeights(wg, w->data<float>());
      return std::shared_ptr<const PreparedKernel>(std::move(u));
    };
    auto fits = [&](const PackedMatrix& m, size_t i) {
      const int64_t m0 = static_cast<int64_t>(i) / wg.terms() * gemm_internal::kWinogradChunk;
      return MatchesPacked(m, PackedMatrix::Side::kLeft, std::min(gemm_internal::kWinogradChunk, wg.m - m0), wg.c);
    };
    ORRERY_ASSIGN_OR_RETURN(p->winograd_u,
                            CachedGroups(ctx.node_cache, wg.tile == 4 ? kWinograd4CacheKey : kWinogradCacheKey,
                                         make, fits, static_cast<size_t>(wg.terms() * wg.chunks())));
  }
  // 14x14-like planes take the tile rather than the transposed GEMM, or
  // without the in-place kernels Sgemm over panels (Intel Xeon, ResNet-18's
  // layer3 3x3s: even with or 1-4% faster than the transposed GEMM).
  // (Not over parity planes: the paths stay those measured with gathers.)
  const bool small_plane_tile =
      p->direct && !p->phase && w != nullptr &&
      gemm_internal::PreferConvDirectTileSmallPlane(p->direct_plan, p->mg, p->kdim);
  // A layer the stem, channels or Winograd kernel runs needs no packed GEMM
  // W: with the ISA capped below AVX-512 after Prepare (tests only) Compute
  // falls back to the GEMM over W as stored, or runs Winograd's portable
  // transforms.
  const bool own_kernel = p->stem || p->channels || p->winograd_u != nullptr;
  p->transposed = gemm_path && w != nullptr && p->kdim > 0 && p->out_vol <= max_transposed &&
                  p->mg >= kTransposedMinChannels && !small_plane_tile && !own_kernel;
  if (p->path != ConvPath::kDepthwise && w != nullptr && p->kdim > 0 && !own_kernel) {
    auto make = [&]() -> Result<std::shared_ptr<const PreparedKernel>> {
      if (w->unbound()) return PackedValuesMissing("Conv", "W");
      ORRERY_ASSIGN_OR_RETURN(std::shared_ptr<const PackedGroups> pg,
                              PackWeights(*w, s, p->kdim, p->transposed));
      return std::shared_ptr<const PreparedKernel>(std::move(pg));
    };
    auto fits = [&](const PackedMatrix& m, size_t) {
      return p->transposed ? MatchesPacked(m, PackedMatrix::Side::kRight, p->kdim, p->mg)
                           : MatchesPacked(m, PackedMatrix::Side::kLeft, p->mg, p->kdim);
    };
    const uint32_t key = p->transposed ? kTransposedCacheKey : kGemmCacheKey;  // the layouts differ
    ORRERY_ASSIGN_OR_RETURN(p->packed, CachedGroups(ctx.node_cache, key, make, fits, static_cast<size_t>(s.group)));
  }
  if (p->path == ConvPath::kIm2Col2D) {
    p->direct_tile =
        in_place && p->direct && !p->phase && !p->transposed && p->packed != nullptr &&
        (small_plane_tile || gemm_internal::PreferConvDirectTile(p->direct_plan, p->mg) ||
         gemm_internal::PreferConvDirectTileFullDepth(p->direct_plan, p->mg, p->kdim));
  }
  if (in_place && p->path == ConvPath::kPointwise && g.rank() <= 2 && !p->transposed && p->packed != nullptr &&
      ((p->mg <= kPointwiseTileMaxChannels && p->kdim <= kPointwiseTileMaxDepth) ||
       p->kdim <= gemm_internal::kConvDirectShallowMaxDepth)) {
    // A 1x1 convolution is the linear plan with one tap at offset 0.
    p->direct_tile =
        gemm_internal::BuildConvDirectPlan(p->im2col, p->g2.output[0], /*gather=*/false,
                                           &p->direct_plan) &&
        (gemm_internal::PreferConvDirectTile(p->direct_plan, p->mg) ||
         gemm_internal::PreferConvDirectTileShallow(p->direct_plan, p->kdim));
  }
  if (p->path == ConvPath::kIm2Col2D && p->direct_tile) {
    p->tail_cols = gemm_internal::ConvTailCols(p->direct_plan, p->kdim, gemm_internal::ActiveKernels());
  }
  // Not with the tiles (direct_tile; the pointwise one runs on one thread
  // only, so two threads would sum the tail in another order than one).
  if (gemm_path && p->packed != nullptr && !p->transposed && !p->direct_tile) {
    p->gemm_tail = gemm_internal::GemmTailCols(p->out_vol, gemm_internal::ActiveKernels());
  }
  int64_t scratch = 0;
  if (p->transposed) {
    p->gemm_scratch = static_cast<int64_t>(
        ScratchStride(SgemmScratchBytes({p->out_vol, p->mg, p->kdim}, false, true)));
    scratch = p->gemm_scratch + p->out_vol * p->mg * static_cast<int64_t>(sizeof(float));
  } else if (gemm_path) {
    scratch = SgemmScratchBytes({p->mg, p->out_vol, p->kdim}, p->packed != nullptr, false);
  }
  if (p->phase) {
    // The parity planes of one image's group, at the tail (see ComputeConv).
    scratch += p->phase_split.bytes(p->cg);
  }
  if (p->tail_cols > 0) {
    scratch = std::max(scratch, gemm_internal::ConvTailFloats(p->kdim, p->tail_cols) *
                                    static_cast<int64_t>(sizeof(float)));
  }
  if (p->gemm_tail > 0) {
    // + alignment slack for this part and the parity planes after it.
    scratch += gemm_internal::ConvTailFloats(p->kdim, p->gemm_tail) *
                   static_cast<int64_t>(sizeof(float)) + 128;
  }
  if (p->channels) {
    scratch = std::max(scratch, p->channels_geo.row_buffer_floats() * static_cast<int64_t>(sizeof(float)));
  }
  if (p->winograd_u != nullptr) scratch = std::max(scratch, gemm_internal::WinogradScratchBytes(p->winograd_geo));
  return Prepared{.kernel = std::move(p), .scratch_bytes = scratch};
}

// Depthwise planes (every image's channels) with the epilogue fused in.
Status RunDepthwise(const KernelContext& ctx, const ConvPrepared& p, const float* xd,
                    const float* wd, float* yd, const Epilogue& ep) {
  const gemm_internal::DepthwiseGeometry& dg = p.depthwise;
  const gemm_internal::GemmKernels& kern = gemm_internal::ActiveKernels();
  const int64_t planes = p.s.n * p.s.c;
  const int64_t c = p.s.c;
  // Planes in a few contiguous chunks per thread: a 7x7 plane takes ~0.1 us,
  // less than claiming a task costs when two cores contend for the counter.
  const int64_t nthreads = NumThreads(ctx.threads);
  const int64_t tasks = nthreads > 1 ? std::min<int64_t>(planes, 4 * nthreads) : 1;
  ParallelFor(ctx.threads, tasks, [&](int64_t task, int) {
    kern.depthwise(dg, xd, wd, yd, c, task * planes / tasks, (task + 1) * planes / tasks, ep);
  });
  return Status::Ok();
}

// Y_g = (im2col(X_g)^T W_g^T)^T with the epilogue applied to Y_g after the
// transposition (the GEMM's rows are output positions here).
// `xd` / `dvol`: what the direct plan reads (the parity planes when split)
// and its channel stride; the im2col fallback reads xg.
void RunTransposed(const KernelContext& ctx, const ConvPrepared& p,
                   const gemm_internal::GemmKernels& kern, const float* xg, const float* xd,
                   int64_t dvol, const PackedMatrix* wt, float* yg, const Epilogue& ep) {
  // Y^T [pos x mg] at the end of the scratch; the GEMM gets the rest, at
  // least gemm_scratch bytes per thread (each slice has its own Y^T share).
  const size_t yt_bytes = static_cast<size_t>(p.out_vol * p.mg) * sizeof(float);
  const size_t yt_off = (ctx.scratch.size() - yt_bytes) & ~size_t{63};
  float* yt = reinterpret_cast<float*>(ctx.scratch.data() + yt_off);
  const bool masked = p.direct && kern.conv_rows != nullptr;
  auto panel = [&](int64_t k0, int64_t kc, int64_t i0, int64_t rows, int64_t w, float* dst) {
    if (masked) {
      gemm_internal::ConvDirectLeftPanel(p.direct_plan, xd, dvol, k0, kc, i0, dst, kern);
    } else {
      kern.im2col(p.im2col, xg, k0, kc, i0, rows, w, dst);
    }
  };
  const PanelSource panels(panel);
  LeftOperand a{.data = xg, .ld = p.in_vol, .trans = true};  // pointwise: X_g^T
  if (p.path == ConvPath::kIm2Col2D) a.panels = &panels;
  // 7x7 planes: 7 tiles of 7 positions, not 7 of 8 with a zero row each
  // (Zen 5, 8 x 48 tiles from L1 253 GFLOP/s, 7 x 48 249: 49 useful rows
  // of 56 gave 221). One thread, minima of alternated rounds, ms: ResNet-50
  // layer4 3x3 1.06-1.19 -> 1.06-1.13, 1x1 0.54-0.67 -> 0.48-0.61;
  // ResNet-18 layer4 3x3 1.13-1.15 -> 1.06-1.10; GoogLeNet's 7x7 1x1 and
  // 3x3 5-9% and 2-6%; its 5x5 (48 -> 128) lost 10% and keeps 8 rows.
  // On two threads the 3x3 layers lost 2-4% (ResNet-18 layer4 0.64 ->
  // 0.65-0.67 ms) and keep 8 rows there; the 1x1 gained 3-12%. (Rows per
  // panel change no sum: the same bits either way.)
  if (p.out_vol % 7 == 0 && p.out_vol % kPanelRows != 0 &&
      p.out_vol <= kTransposedMaxPositions &&
      (p.k_vol == 1 || (p.k_vol <= 9 && NumThreads(ctx.threads) == 1))) {
    a.panel_rows = 7;
  }
  Sgemm({p.out_vol, p.mg, p.kdim}, a, RightOperand{.packed = wt}, yt, p.mg, Epilogue{},
        ctx.scratch.first(yt_off), ctx.threads);
  // Transpose and epilogue by channel chunks on every thread, 16 channels
  // at a time so that the epilogue finds them in L1. AVX-512 transposes
  // 16 x 16 blocks in registers (ResNet-50's layer4 conv3, 49 x 2048 + the
  // residual: see transpose.h).
  const int64_t nthreads = NumThreads(ctx.threads);
  const int64_t tasks = nthreads > 1 ? std::min<int64_t>(p.mg, 4 * nthreads) : 1;
  const bool avx512 = ActiveGemmIsa() == GemmIsa::kAvx512;
  ParallelFor(ctx.threads, tasks, [&](int64_t task, int) {
    const int64_t c0 = task * p.mg / tasks, c1 = (task + 1) * p.mg / tasks;
    for (int64_t c = c0; c < c1; c += 16) {
      const int64_t cw = std::min<int64_t>(16, c1 - c);
      float* yc = yg + c * p.out_vol;
      if (avx512) {
        gemm_internal::TransposeAvx512(yt + c, p.mg, p.out_vol, cw, yc, p.out_vol);
      } else {
        gemm_internal::TransposePortable(yt + c, p.mg, p.out_vol, cw, yc, p.out_vol);
      }
      ApplyEpilogue(ep, yc, p.out_vol, c, 0, cw, p.out_vol);
    }
  });
}

// fn(epilogue with image n's bias and residual, its x, its y) for every
// image of the batch.
template <typename Fn>
void ForImages(const ConvPrepared& p, const Epilogue& ep, const float* bd, const float* zd, const float* xd,
               float* yd, Fn&& fn) {
  for (int64_t n = 0; n < p.s.n; ++n) {
    Epilogue e = ep;
    e.row_bias = bd;
    e.residual = zd != nullptr ? zd + n * p.s.m * p.out_vol : nullptr;
    fn(e, xd + n * p.s.c * p.in_vol, yd + n * p.s.m * p.out_vol);
  }
}

// The direct kernels that split an image by output rows (the stem) or row
// groups (conv_channels): per image, guided chunks of `units` (ops/
// parallel.h: a slower core takes fewer), fn(epilogue with the image's
// bias and residual, its x, its y, first unit, end unit, thread).
template <typename Fn>
void ForImageRowChunks(const KernelContext& ctx, const ConvPrepared& p, int64_t units, const Epilogue& ep,
                       const float* bd, const float* zd, const float* xd, float* yd, Fn&& fn) {
  int64_t bounds[kMaxGuidedChunks + 1];
  const int64_t chunks = GuidedBounds(units, NumThreads(ctx.threads), bounds);
  ForImages(p, ep, bd, zd, xd, yd, [&](const Epilogue& e, const float* xn, float* yn) {
    ParallelFor(ctx.threads, chunks,
                [&](int64_t r, int thread) { fn(e, xn, yn, bounds[r], bounds[r + 1], thread); });
  });
}

// The last `cols` columns [n0, n0 + cols) of Y = W B by conv_tail over the
// packed weights, then the epilogue; `b` holds those columns of B compact
// (b[kk * cols + j], ConvTailFloats(k, cols) floats). Row blocks split
// over the threads.
void RunGemmTail(const gemm_internal::GemmKernels& kern, const PackedMatrix& w, int64_t m, int64_t k,
                 const float* b, int64_t n0, int64_t cols, float* y, int64_t ldy, const Epilogue& ep,
                 ThreadGroup* threads) {
  constexpr int64_t kBlockRows = 6 * kPanelRows;  // conv_tail's block
  const int64_t blocks = (m + kBlockRows - 1) / kBlockRows;
  int64_t bounds[kMaxGuidedChunks + 1];
  const int64_t tasks = GuidedBounds(blocks, NumThreads(threads), bounds);
  ParallelFor(threads, tasks, [&](int64_t task, int) {
    const int64_t i0 = bounds[task] * kBlockRows;
    const int64_t rows = std::min(bounds[task + 1] * kBlockRows, m) - i0;
    float* c = y + i0 * ldy + n0;
    kern.conv_tail({.a = w.data() + i0 * k, .k = k, .b = b, .cols = static_cast<int>(cols),
                    .rows = rows, .c = c, .ldc = ldy});
    if (ep.has_post()) kern.epilogue(ep, c, ldy, i0, n0, rows, cols);
  });
}

Status ComputeConv(const KernelContext& ctx, std::span<Tensor> outputs) {
  if (ctx.prepared == nullptr) {
    const TensorType out_type{DType::kFloat32, outputs[0].shape()};
    return PrepareAndCompute(PrepareConv, ComputeConv, ctx, {&out_type, 1}, outputs);
  }
  const auto& p = static_cast<const ConvPrepared&>(*ctx.prepared);
  const Tensor& x = *ctx.inputs[0];
  const Tensor& w = *ctx.inputs[1];
  if (x.shape() != p.x_shape) return Status::Internal("Conv: input shape differs from the plan");
  Tensor& y = outputs[0];
  if (y.num_elements() == 0) return Status::Ok();
  const float* xd = x.data<float>();
  const float* wd = w.data<float>();
  float* yd = y.data<float>();
  const float* bd = p.loc.b >= 0 && ctx.inputs[static_cast<size_t>(p.loc.b)] != nullptr
                        ? ctx.inputs[static_cast<size_t>(p.loc.b)]->data<float>()
                        : nullptr;
  const float* zd =
      p.loc.z >= 0 ? ctx.inputs[static_cast<size_t>(p.loc.z)]->data<float>() : nullptr;
  const ConvSetup& s = p.s;
  Epilogue ep;
  p.fusion.ApplyTo(&ep);
  ep.ld_residual = p.out_vol;

  if (p.path == ConvPath::kDepthwise) {
    ep.row_bias = bd;
    ep.residual = zd;
    return RunDepthwise(ctx, p, xd, wd, yd, ep);
  }
  if (p.winograd_u != nullptr) {
    // Winograd's F(2x2, 3x3) or F(4x4, 3x3) (gemm/conv_winograd.h).
    const std::span<const PackedMatrix> u(p.winograd_u->groups);
    ForImages(p, ep, bd, zd, xd, yd, [&](const Epilogue& e, const float* xn, float* yn) {
      gemm_internal::RunWinograd(p.winograd_geo, xn, u, yn, e, ctx.scratch, ctx.threads);
    });
    return Status::Ok();
  }
  if (p.stem && ActiveGemmIsa() == GemmIsa::kAvx512) {
    const gemm_internal::ConvStemGeometry& sg = p.stem_geo;
    const int64_t blocks = (sg.m + 15) / 16;
    ForImageRowChunks(ctx, p, sg.h_out, ep, bd, zd, xd, yd,
                      [&](const Epilogue& e, const float* xn, float* yn, int64_t r0, int64_t r1, int) {
                        gemm_internal::ConvStemAvx512(sg, xn, p.stem_w.data(), yn, r0, r1, 0, blocks, e);
                      });
    return Status::Ok();
  }
  if (p.channels && ActiveGemmIsa() == GemmIsa::kAvx512) {
    const gemm_internal::ConvChannelsGeometry& cg = p.channels_geo;
    ForImageRowChunks(ctx, p, cg.groups(), ep, bd, zd, xd, yd,
                      [&](const Epilogue& e, const float* xn, float* yn, int64_t g0, int64_t g1, int thread) {
                        float* rows = reinterpret_cast<float*>(ThreadScratch(ctx, thread).data());
                        gemm_internal::ConvChannelsAvx512(cg, xn, p.channels_w.data(), p.channels_off.data(),
                                                          yn, g0, g1, e, rows);
                      });
    return Status::Ok();
  }

  // 3-D+ path only (the others allocate nothing).
  std::vector<float> heap_col;
  std::vector<std::byte> heap_scratch;
  std::optional<Im2Col> im2col_nd;
  const gemm_internal::GemmKernels& kern = gemm_internal::ActiveKernels();
  if (p.path == ConvPath::kIm2ColND) im2col_nd.emplace(s.geo, p.cg);
  // The im2col-free tile's input is likely out of L2 with a batch or over
  // 1 MiB of channels: prefetch it in software (gemm/conv_direct.h).
  // Parity planes (p.phase) whenever a direct kernel may read them; the
  // GEMM and the tile get the scratch before them.
  const bool split = p.phase && (kern.conv_tile != nullptr || kern.conv_panel != nullptr ||
                                 kern.conv_rows != nullptr);
  const int64_t dvol = split ? p.phase_split.plane_vol() : p.in_vol;
  KernelContext gctx = ctx;
  float* planes = nullptr;
  // Guided channel chunks of the split, as the kernels' (ops/parallel.h).
  int64_t split_bounds[kMaxGuidedChunks + 1];
  int64_t split_tasks = 0;
  if (split) {
    const size_t off = (ctx.scratch.size() - static_cast<size_t>(p.phase_split.bytes(p.cg))) & ~size_t{63};
    planes = reinterpret_cast<float*>(ctx.scratch.data() + off);
    gctx.scratch = ctx.scratch.first(off);
    split_tasks = GuidedBounds(p.cg, NumThreads(ctx.threads), split_bounds);
  }
  const bool split_avx512 = split && ActiveGemmIsa() == GemmIsa::kAvx512;
  // The GEMM tail's B at the end of the GEMM's scratch.
  const int64_t tail = kern.conv_tail != nullptr ? p.gemm_tail : 0;
  float* tail_b = nullptr;
  if (tail > 0) {
    const auto bytes = static_cast<size_t>(gemm_internal::ConvTailFloats(p.kdim, tail)) * sizeof(float);
    const size_t off = (gctx.scratch.size() - bytes) & ~size_t{63};
    tail_b = reinterpret_cast<float*>(gctx.scratch.data() + off);
    gctx.scratch = gctx.scratch.first(off);
  }
  const GemmShape gemm_shape{p.mg, p.out_vol - tail, p.kdim};
  const bool prefetch_direct =
      s.n > 1 || p.cg * dvol * static_cast<int64_t>(sizeof(float)) > (int64_t{1} << 20);
  for (int64_t n = 0; n < s.n; ++n) {
    for (int64_t gi = 0; gi < s.group; ++gi) {
      const float* xg = xd + (n * s.c + gi * p.cg) * p.in_vol;
      float* yg = yd + (n * s.m + gi * p.mg) * p.out_vol;
      Epilogue e = ep;
      e.row_bias = bd != nullptr ? bd + gi * p.mg : nullptr;
      e.residual = zd != nullptr ? zd + (n * s.m + gi * p.mg) * p.out_vol : nullptr;
      // What the direct plan reads: the parity planes, split by channel
      // chunks on every thread, or the input itself.
      const float* xp = xg;
      if (split) {
        ParallelFor(ctx.threads, split_tasks, [&](int64_t task, int) {
          const int64_t c0 = split_bounds[task], c1 = split_bounds[task + 1];
          const float* src = xg + c0 * p.in_vol;
          float* dst = planes + c0 * dvol;
          if (split_avx512) {
            gemm_internal::SplitPhasesAvx512(p.phase_split, src, c1 - c0, dst);
          } else {
            gemm_internal::SplitPhases(p.phase_split, src, c1 - c0, dst);
          }
        });
        xp = planes;
      }
      if (p.transposed) {
        RunTransposed(gctx, p, kern, xg, xp, dvol, &p.packed->groups[static_cast<size_t>(gi)], yg,
                      e);
        continue;
      }
      // wd is null when the image kept only the packed form (then set).
      LeftOperand a{.data = wd != nullptr ? wd + gi * p.mg * p.kdim : nullptr, .ld = p.kdim};
      if (p.packed != nullptr) a.packed = &p.packed->groups[static_cast<size_t>(gi)];
      // After Sgemm over all but the last `tail` columns: their im2col (for
      // a pointwise layer a copy) and conv_tail.
      auto run_gemm_tail = [&] {
        if (tail == 0) return;
        const int64_t n0 = p.out_vol - tail;
        kern.im2col(p.im2col, xg, 0, p.kdim, n0, tail, tail, tail_b);
        RunGemmTail(kern, *a.packed, p.mg, p.kdim, tail_b, n0, tail, yg, p.out_vol, e, ctx.threads);
      };
      if (p.path == ConvPath::kPointwise && p.direct_tile && kern.conv_tile != nullptr &&
          NumThreads(ctx.threads) == 1) {
        gemm_internal::RunConvDirect(p.direct_plan, *a.packed, p.mg, p.kdim, p.in_vol, xg, yg, e,
                                     ctx.threads, kern, prefetch_direct);
      } else if (p.path == ConvPath::kPointwise) {
        Sgemm(gemm_shape, a, RightOperand{.data = xg, .ld = p.in_vol}, yg, p.out_vol, e,
              gctx.scratch, ctx.threads);
        run_gemm_tail();
      } else if (p.path == ConvPath::kIm2Col2D && kern.conv_tile != nullptr && p.direct_tile) {
        // The tile path uses no other scratch: its tail's B (the im2col of
        // the last panel's few columns) takes the start.
        float* tile_tail_b = nullptr;
        if (p.tail_cols > 0 && gemm_internal::ConvTailCols(p.direct_plan, p.kdim, kern) == p.tail_cols) {
          tile_tail_b = reinterpret_cast<float*>(gctx.scratch.data());
          kern.im2col(p.im2col, xg, 0, p.kdim, p.out_vol - p.tail_cols, p.tail_cols, p.tail_cols, tile_tail_b);
        }
        gemm_internal::RunConvDirect(p.direct_plan, *a.packed, p.mg, p.kdim, dvol, xp, yg, e,
                                     ctx.threads, kern, prefetch_direct, tile_tail_b);
      } else if (p.path == ConvPath::kIm2Col2D) {
        const bool masked = p.direct && kern.conv_panel != nullptr;
        auto panel = [&](int64_t k0, int64_t kc, int64_t j0, int64_t cols, int64_t w,
                         float* dst) {
          if (masked) {
            gemm_internal::ConvDirectPanel(p.direct_plan, xp, dvol, k0, kc, j0, w, dst, kern);
          } else {
            kern.im2col(p.im2col, xg, k0, kc, j0, cols, w, dst);
          }
        };
        const PanelSource panels(panel);
        Sgemm(gemm_shape, a, RightOperand{.panels = &panels}, yg, p.out_vol, e, gctx.scratch,
              ctx.threads);
        run_gemm_tail();
      } else {
        // Rare: 3-D and higher convolutions use heap buffers.
        const int64_t budget = kHeapColBytes / static_cast<int64_t>(sizeof(float));
        const int64_t tile = std::clamp<int64_t>(budget / std::max<int64_t>(p.kdim, 1), 1,
                                                 p.out_vol);
        heap_col.resize(static_cast<size_t>(p.kdim * tile));
        for (int64_t p0 = 0; p0 < p.out_vol; p0 += tile) {
          const int64_t cols = std::min(tile, p.out_vol - p0);
          im2col_nd->Run(xg, p0, cols, heap_col.data());
          const GemmShape ts{p.mg, cols, p.kdim};
          const size_t bytes =
              static_cast<size_t>(SgemmScratchBytes(ts, a.packed != nullptr, false));
          heap_scratch.resize(bytes + 64);
          auto* base = reinterpret_cast<std::byte*>(
              (reinterpret_cast<uintptr_t>(heap_scratch.data()) + 63) & ~uintptr_t{63});
          Epilogue et = e;
          if (et.residual != nullptr) et.residual += p0;
          Sgemm(ts, a, RightOperand{.data = heap_col.data(), .ld = cols}, yg + p0, p.out_vol, et,
                std::span<std::byte>(base, bytes), nullptr);
        }
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
                                      .max_inputs = 4,
                                      .infer = InferConv,
                                      .compute = ComputeConv,
                                      .prepare = PrepareConv,
                                      .fusions = kFuseResidual | kFuseActivation,
                                      .overwrites_outputs = true,
                                      .serialize_cached = SerializePackedGroups,
                                      .deserialize_cached = DeserializePackedGroups,
                                      .packed_input = [](uint32_t) { return 1; }});  // W, either layout
}

}  // namespace orrery::ops::cpu
