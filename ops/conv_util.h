// Sliding-window arithmetic shared by Conv, ConvTranspose and the pooling
// kernels: output sizes, auto_pad, and the ranges of kernel taps / output
// positions that stay inside the input, so loops skip padding without
// per-element branches.
//
// The first half is plain inline integer math on one spatial axis (no
// allocation, no Status) so device kernels can share it. The second half
// reads and validates node attributes and resolves a whole window geometry.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "ops/attributes.h"

namespace orrery::ops {

// ---------------- Index math on one spatial axis ----------------

// floor(a / b) and ceil(a / b) for b > 0 and any sign of a.
constexpr int64_t FloorDiv(int64_t a, int64_t b) {
  const int64_t q = a / b;
  return (a % b != 0 && a < 0) ? q - 1 : q;
}
constexpr int64_t CeilDiv(int64_t a, int64_t b) {
  const int64_t q = a / b;
  return (a % b != 0 && a > 0) ? q + 1 : q;
}

// Extent of a dilated kernel.
constexpr int64_t EffectiveKernel(int64_t kernel, int64_t dilation) {
  return (kernel - 1) * dilation + 1;
}

// Number of window positions over the padded input:
//   floor((in + pads - ek) / stride) + 1, or with ceil_mode the ceiling,
// dropping a last window that would start inside the end padding (the
// ONNX >= 19 / PyTorch rule). Returns 0 when the window does not fit at all.
constexpr int64_t WindowOutputSize(int64_t in, int64_t kernel, int64_t stride, int64_t dilation,
                                   int64_t pad_begin, int64_t pad_end, bool ceil_mode = false) {
  const int64_t span = in + pad_begin + pad_end - EffectiveKernel(kernel, dilation);
  if (span < 0) return 0;
  int64_t out = (ceil_mode ? CeilDiv(span, stride) : span / stride) + 1;
  if (ceil_mode && (out - 1) * stride >= in + pad_begin) --out;
  return out;
}

struct AxisPads {
  int64_t begin = 0;
  int64_t end = 0;
};

// auto_pad SAME_UPPER / SAME_LOWER: pads that give out = ceil(in / stride);
// an odd total puts the extra element at the end (upper) or beginning (lower).
constexpr AxisPads SamePads(int64_t in, int64_t kernel, int64_t stride, int64_t dilation,
                            bool upper) {
  const int64_t out = CeilDiv(in, stride);
  const int64_t total =
      std::max<int64_t>(0, (out - 1) * stride + EffectiveKernel(kernel, dilation) - in);
  const int64_t small = total / 2;
  return upper ? AxisPads{small, total - small} : AxisPads{total - small, small};
}

// ConvTranspose output extent for explicit pads.
constexpr int64_t TransposeOutputSize(int64_t in, int64_t kernel, int64_t stride,
                                      int64_t dilation, int64_t output_padding,
                                      int64_t pad_begin, int64_t pad_end) {
  return stride * (in - 1) + output_padding + EffectiveKernel(kernel, dilation) - pad_begin -
         pad_end;
}

// ConvTranspose pads that produce a requested output extent (explicit
// output_shape, or in * stride under SAME_*), per the ONNX formula with
// floor division: SAME_UPPER puts the odd element at the end, anything else
// at the beginning. A negative total (output larger than the full result)
// gives negative pads: the extra positions hold only the bias.
constexpr AxisPads TransposePadsForOutput(int64_t in, int64_t kernel, int64_t stride,
                                          int64_t dilation, int64_t output_padding, int64_t out,
                                          bool same_upper) {
  const int64_t total = stride * (in - 1) + output_padding + EffectiveKernel(kernel, dilation) - out;
  const int64_t half = FloorDiv(total, 2);
  return same_upper ? AxisPads{half, total - half} : AxisPads{total - half, half};
}

// Half-open index range; empty when end <= begin.
struct IndexRange {
  int64_t begin = 0;
  int64_t end = 0;
  constexpr int64_t size() const { return end > begin ? end - begin : 0; }
};

// Kernel taps t in [0, kernel) of the window at output position `o` whose
// input index o * stride - pad_begin + t * dilation lies in [0, in).
constexpr IndexRange ValidTaps(int64_t o, int64_t in, int64_t kernel, int64_t stride,
                               int64_t dilation, int64_t pad_begin) {
  const int64_t start = o * stride - pad_begin;
  const int64_t begin = start < 0 ? std::min(kernel, CeilDiv(-start, dilation)) : 0;
  const int64_t end = start >= in ? 0 : std::min(kernel, CeilDiv(in - start, dilation));
  return {begin, std::max(begin, end)};
}

// Positions o in [0, out) for which kernel tap `t` reads an index
// o * stride - pad_begin + t * dilation inside [0, in). ConvTranspose's
// scatter uses it with the roles of input and output swapped.
constexpr IndexRange ValidPositions(int64_t t, int64_t in, int64_t out, int64_t stride,
                                    int64_t dilation, int64_t pad_begin) {
  const int64_t offset = t * dilation - pad_begin;
  const int64_t begin = std::min(out, offset < 0 ? CeilDiv(-offset, stride) : int64_t{0});
  const int64_t last = FloorDiv(in - 1 - offset, stride);  // may be < 0
  const int64_t end = std::clamp<int64_t>(last + 1, 0, out);
  return {begin, std::max(begin, end)};
}

// ---------------- Attributes and whole geometries ----------------

enum class AutoPad { kNotSet, kSameUpper, kSameLower, kValid };

// Bounds on strides, dilations, pads and output_padding (kernel and output
// sizes are bounded by tensor sizes): keeps every product above far from
// int64 overflow for any input a tensor can hold.
inline constexpr int64_t kMaxWindowAttr = int64_t{1} << 24;
// Bound on a kernel_shape or ConvTranspose output_shape entry.
inline constexpr int64_t kMaxWindowExtent = int64_t{1} << 34;

// Validated window attributes of one node, one entry per spatial axis.
struct WindowAttrs {
  std::vector<int64_t> kernel;
  std::vector<int64_t> strides;
  std::vector<int64_t> dilations;
  std::vector<int64_t> pads;  // begins, then ends (2 * rank); zeros when absent
  AutoPad auto_pad = AutoPad::kNotSet;
  bool ceil_mode = false;
};

struct WindowAttrOptions {
  // Kernel taken from the weights (Conv / ConvTranspose); a kernel_shape
  // attribute must then agree. Empty: kernel_shape is required (pooling).
  std::span<const int64_t> weight_kernel = {};
  bool allow_dilations = true;  // else a dilations attribute other than all-1 is rejected
  bool allow_ceil_mode = false;
};

// Reads kernel_shape, strides, dilations, pads, auto_pad (and ceil_mode) for a
// node with `rank` spatial axes; INVALID_ARGUMENT naming `op` and the bad value.
Result<WindowAttrs> ReadWindowAttrs(std::string_view op, const Attributes& attrs, size_t rank,
                                    const WindowAttrOptions& options);

// A window resolved against an input: explicit pads and output sizes.
struct WindowGeometry {
  std::vector<int64_t> input;
  std::vector<int64_t> kernel;
  std::vector<int64_t> strides;
  std::vector<int64_t> dilations;
  std::vector<int64_t> pad_begin;
  std::vector<int64_t> pad_end;
  std::vector<int64_t> output;

  size_t rank() const { return input.size(); }
  int64_t input_volume() const;
  int64_t output_volume() const;
  int64_t kernel_volume() const;
  // The same window with a leading unit axis (1-D kernels reuse 2-D loops).
  WindowGeometry WithLeadingUnitAxis() const;
};

// Conv / pooling: applies auto_pad and computes the output; INVALID_ARGUMENT
// when an axis has no window position (kernel larger than the padded input).
Result<WindowGeometry> ResolveWindow(std::string_view op, const WindowAttrs& attrs,
                                     std::span<const int64_t> input);

// ConvTranspose: output_padding and output_shape (spatial entries, or the
// full rank with N and C first) as read from the node; empty when absent.
Result<WindowGeometry> ResolveTransposeWindow(std::string_view op, const WindowAttrs& attrs,
                                              std::span<const int64_t> input,
                                              std::span<const int64_t> output_padding,
                                              std::span<const int64_t> output_shape);

// A run of positions [begin, end) along the innermost axis of a row-major
// grid, at coordinates `outer` on the other axes; `offset` is the position of
// `begin` relative to the first position of the split.
struct GridRun {
  std::vector<int64_t> outer;
  int64_t begin = 0;
  int64_t end = 0;
  int64_t offset = 0;
};

// Splits the flattened positions [first, first + count) of grid `dims` into
// runs along the innermost axis (how im2col tiles walk the grid).
std::vector<GridRun> SplitIntoRuns(std::span<const int64_t> dims, int64_t first, int64_t count);

// The walk im2col (Conv) and col2im (ConvTranspose) share: positions of one
// grid (`from`: Conv's output, ConvTranspose's input) through every kernel
// tap into the grid the taps land in (`to`: the other one), by the window
// index position * stride - pad_begin + tap * dilation on each axis.
class WindowWalk {
 public:
  // `g` must outlive the walk; `from` and `to` are g.output and g.input or
  // the reverse.
  WindowWalk(const WindowGeometry& g, std::span<const int64_t> from, std::span<const int64_t> to);

  // For each of `channels` channels and each kernel tap t (the last axis
  // fastest), over the runs of positions [p0, p0 + cols) of `from`
  // (SplitIntoRuns): visit(c, t, run, lo, hi, at), where [lo, hi) within
  // [run.begin, run.end) are the run's positions whose tap lands inside
  // `to` (lo == hi: none does) and `at` is the flat index in `to` where
  // position lo lands; position lo + i lands at at + i * (last stride).
  // Allocates the runs and a tap counter per call.
  template <class Visit>
  void Run(int64_t p0, int64_t cols, int64_t channels, Visit&& visit) const {
    const std::vector<GridRun> runs = SplitIntoRuns(from_, p0, cols);
    const size_t r = g_.rank();
    const size_t last = r - 1;
    const int64_t k_vol = g_.kernel_volume();
    std::vector<int64_t> tap(r, 0);
    for (int64_t c = 0; c < channels; ++c) {
      std::fill(tap.begin(), tap.end(), 0);
      for (int64_t t = 0; t < k_vol; ++t) {
        const IndexRange inner = inner_[static_cast<size_t>(tap[last])];
        const int64_t off = tap[last] * g_.dilations[last] - g_.pad_begin[last];
        for (const GridRun& run : runs) {
          int64_t base = 0;
          bool inside = true;
          for (size_t j = 0; j < last; ++j) {
            const int64_t i = run.outer[j] * g_.strides[j] - g_.pad_begin[j] + tap[j] * g_.dilations[j];
            if (i < 0 || i >= to_[j]) {
              inside = false;
              break;
            }
            base += i * to_strides_[j];
          }
          const int64_t lo = std::clamp(inner.begin, run.begin, run.end);
          const int64_t hi = inside ? std::clamp(inner.end, lo, run.end) : lo;
          visit(c, t, run, lo, hi, base + lo * g_.strides[last] + off);
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
  std::span<const int64_t> from_, to_;
  std::vector<int64_t> to_strides_;
  std::vector<IndexRange> inner_;  // positions of `from` landing inside `to`, per innermost tap
};

}  // namespace orrery::ops
