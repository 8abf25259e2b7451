// Coordinate math for Resize / Upsample, kept in plain functions of plain
// values so the CPU kernel, its tests and a future GPU kernel share it.
// The formulas follow the ONNX reference (onnx/backend/test/case/node/
// resize.py): coordinates are computed in double, "length_resized" is
// scale * length_original (not the integer output length), and sampling
// beyond the edges clamps to the edge element.
#pragma once

#include <cmath>
#include <cstdint>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace orrery::ops::resize {

enum class Mode { kNearest, kLinear, kCubic };

enum class CoordMode {
  kHalfPixel,
  kHalfPixelSymmetric,  // opset 19
  kPytorchHalfPixel,
  kAlignCorners,
  kAsymmetric,
  kTfHalfPixelForNn,
  kTfCropAndResize,
};

enum class NearestMode {
  kRoundPreferFloor,
  kRoundPreferCeil,
  kFloor,
  kCeil,
  kSimple,  // Upsample and Resize-10: floor when upsampling, ceil when downsampling
};

Result<Mode> ParseMode(std::string_view s);
Result<CoordMode> ParseCoordMode(std::string_view s);
Result<NearestMode> ParseNearestMode(std::string_view s);

// The input coordinate that output coordinate `x` samples along one axis.
// `scale` is output/input, `length_resized` is scale * length_original, and
// roi_start/roi_end are used only by tf_crop_and_resize.
inline double OriginalCoordinate(CoordMode mode, double x, double scale, double length_resized,
                                 double length_original, double roi_start, double roi_end) {
  switch (mode) {
    case CoordMode::kHalfPixel:
      return (x + 0.5) / scale - 0.5;
    case CoordMode::kHalfPixelSymmetric: {
      const double adjustment = std::floor(length_resized) / length_resized;
      const double center = length_original / 2;
      const double offset = center * (1 - adjustment);
      return offset + (x + 0.5) / scale - 0.5;
    }
    case CoordMode::kPytorchHalfPixel:
      return length_resized > 1 ? (x + 0.5) / scale - 0.5 : 0.0;
    case CoordMode::kAlignCorners:
      return length_resized == 1 ? 0.0 : x * (length_original - 1) / (length_resized - 1);
    case CoordMode::kAsymmetric:
      return x / scale;
    case CoordMode::kTfHalfPixelForNn:
      return (x + 0.5) / scale;
    case CoordMode::kTfCropAndResize:
      if (length_resized > 1) {
        return roi_start * (length_original - 1) +
               x * (roi_end - roi_start) * (length_original - 1) / (length_resized - 1);
      }
      return 0.5 * (roi_start + roi_end) * (length_original - 1);
  }
  return x;
}

// The nearest input index for x_original (not yet clamped to the axis).
inline int64_t NearestIndex(NearestMode mode, double x, bool downsampling) {
  const double f = std::floor(x);
  const double r = x - f;
  switch (mode) {
    case NearestMode::kRoundPreferFloor:
      return static_cast<int64_t>(r <= 0.5 ? f : f + 1);
    case NearestMode::kRoundPreferCeil:
      return static_cast<int64_t>(r < 0.5 ? f : f + 1);
    case NearestMode::kFloor:
      return static_cast<int64_t>(f);
    case NearestMode::kCeil:
      return static_cast<int64_t>(std::ceil(x));
    case NearestMode::kSimple:
      return static_cast<int64_t>(downsampling ? std::ceil(x) : std::trunc(x));
  }
  return static_cast<int64_t>(f);
}

// Keys cubic convolution weights for the samples at floor(x) - 1 .. floor(x) + 2,
// where ratio = x - floor(x) and a is cubic_coeff_a.
inline void CubicCoefficients(double ratio, double a, double out[4]) {
  const double r1 = ratio + 1, r2 = 1 - ratio, r3 = 2 - ratio;
  out[0] = ((a * r1 - 5 * a) * r1 + 8 * a) * r1 - 4 * a;
  out[1] = ((a + 2) * ratio - (a + 3)) * ratio * ratio + 1;
  out[2] = ((a + 2) * r2 - (a + 3)) * r2 * r2 + 1;
  out[3] = ((a * r3 - 5 * a) * r3 + 8 * a) * r3 - 4 * a;
}

inline int64_t ClampIndex(int64_t i, int64_t length) {
  return i < 0 ? 0 : (i >= length ? length - 1 : i);
}

struct Options {
  Mode mode = Mode::kNearest;
  CoordMode coord = CoordMode::kHalfPixel;
  NearestMode nearest = NearestMode::kRoundPreferFloor;
  double cubic_a = -0.75;
  bool exclude_outside = false;
};

struct AxisSpec {
  int64_t in_len = 0;
  int64_t out_len = 0;
  double scale = 1.0;  // output / input
  double roi_start = 0.0;
  double roi_end = 1.0;
};

// True when the axis is untouched whatever the mode: same length, scale 1
// and a coordinate mode that maps x to x exactly.
inline bool IsTrivialIdentity(const Options& opt, const AxisSpec& axis) {
  return axis.out_len == axis.in_len && axis.scale == 1.0 &&
         opt.coord != CoordMode::kTfCropAndResize && opt.coord != CoordMode::kTfHalfPixelForNn;
}

// Sampling taps of one axis: output position y reads input indices
// index[y * taps + j] (already clamped into the axis) with weights
// weight[y * taps + j]. outside[y] marks tf_crop_and_resize positions that
// take the extrapolation value instead.
struct AxisTaps {
  int taps = 1;
  std::vector<int64_t> index;
  std::vector<double> weight;
  std::vector<uint8_t> outside;
  // Every y reads exactly input y with weight 1. For trivial identities
  // (IsTrivialIdentity) the tables are left empty: an untouched axis can be
  // as long as the input, and its tables would be many times its size.
  bool identity = false;

  int64_t Index(size_t y, size_t j = 0) const {
    return index.empty() ? static_cast<int64_t>(y) : index[y * static_cast<size_t>(taps) + j];
  }
  bool Outside(size_t y) const { return !outside.empty() && outside[y] != 0; }
};

// Requires in_len > 0 (an empty axis has nothing to sample).
AxisTaps BuildAxisTaps(const Options& opt, const AxisSpec& axis);

}  // namespace orrery::ops::resize
