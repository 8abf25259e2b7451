#include "ops/resize_util.h"

#include <algorithm>
#include <string>

namespace orrery::ops::resize {

Result<Mode> ParseMode(std::string_view s) {
  if (s == "nearest") return Mode::kNearest;
  if (s == "linear" || s == "bilinear") return Mode::kLinear;
  if (s == "cubic") return Mode::kCubic;
  return Status::InvalidArgument("unsupported mode '" + std::string(s) + "'");
}

Result<CoordMode> ParseCoordMode(std::string_view s) {
  if (s == "half_pixel") return CoordMode::kHalfPixel;
  if (s == "half_pixel_symmetric") return CoordMode::kHalfPixelSymmetric;
  if (s == "pytorch_half_pixel") return CoordMode::kPytorchHalfPixel;
  if (s == "align_corners") return CoordMode::kAlignCorners;
  if (s == "asymmetric") return CoordMode::kAsymmetric;
  if (s == "tf_half_pixel_for_nn") return CoordMode::kTfHalfPixelForNn;
  if (s == "tf_crop_and_resize") return CoordMode::kTfCropAndResize;
  return Status::InvalidArgument("unsupported coordinate_transformation_mode '" + std::string(s) +
                                 "'");
}

Result<NearestMode> ParseNearestMode(std::string_view s) {
  if (s == "round_prefer_floor") return NearestMode::kRoundPreferFloor;
  if (s == "round_prefer_ceil") return NearestMode::kRoundPreferCeil;
  if (s == "floor") return NearestMode::kFloor;
  if (s == "ceil") return NearestMode::kCeil;
  return Status::InvalidArgument("unsupported nearest_mode '" + std::string(s) + "'");
}

AxisTaps BuildAxisTaps(const Options& opt, const AxisSpec& axis) {
  AxisTaps t;
  t.taps = opt.mode == Mode::kNearest ? 1 : (opt.mode == Mode::kLinear ? 2 : 4);
  if (IsTrivialIdentity(opt, axis)) {
    t.identity = true;
    return t;
  }
  const size_t n = static_cast<size_t>(axis.out_len);
  const size_t taps = static_cast<size_t>(t.taps);
  t.index.assign(n * taps, 0);
  t.weight.assign(n * taps, 0.0);
  t.outside.assign(n, 0);
  const double in_len = static_cast<double>(axis.in_len);
  const double length_resized = axis.scale * in_len;
  const bool downsampling = axis.scale < 1.0;
  t.identity = axis.out_len == axis.in_len;
  for (size_t y = 0; y < n; ++y) {
    double x = OriginalCoordinate(opt.coord, static_cast<double>(y), axis.scale, length_resized,
                                  in_len, axis.roi_start, axis.roi_end);
    int64_t* idx = &t.index[y * taps];
    double* w = &t.weight[y * taps];
    if (opt.coord == CoordMode::kTfCropAndResize && !(x >= 0 && x <= in_len - 1)) {
      t.outside[y] = 1;
      t.identity = false;
      continue;
    }
    // Every tap is clamped to the edge, so coordinates further out than the
    // widest (cubic) kernel give the same samples; bounding x also keeps the
    // float -> int conversions below defined for hostile scales.
    if (std::isnan(x)) x = 0.0;
    x = std::clamp(x, -3.0, in_len + 3.0);
    if (opt.mode == Mode::kNearest) {
      idx[0] = ClampIndex(NearestIndex(opt.nearest, x, downsampling), axis.in_len);
      w[0] = 1.0;
    } else {
      const double f = std::floor(x);
      const double ratio = x - f;
      const int64_t base = static_cast<int64_t>(f);
      if (opt.mode == Mode::kLinear) {
        idx[0] = base;
        idx[1] = base + 1;
        w[0] = 1.0 - ratio;
        w[1] = ratio;
      } else {
        double c[4];
        CubicCoefficients(ratio, opt.cubic_a, c);
        double sum = 0.0;
        for (size_t j = 0; j < 4; ++j) {
          idx[j] = base - 1 + static_cast<int64_t>(j);
          w[j] = c[j];
          if (opt.exclude_outside && (idx[j] < 0 || idx[j] >= axis.in_len)) w[j] = 0.0;
          sum += w[j];
        }
        if (opt.exclude_outside && sum != 0.0) {
          for (size_t j = 0; j < 4; ++j) w[j] /= sum;
        }
      }
      for (size_t j = 0; j < taps; ++j) idx[j] = ClampIndex(idx[j], axis.in_len);
    }
    if (t.identity) {
      double self_w = 0.0;
      bool others_zero = true;
      for (size_t j = 0; j < taps; ++j) {
        if (idx[j] == static_cast<int64_t>(y)) {
          self_w += w[j];
        } else if (w[j] != 0.0) {
          others_zero = false;
        }
      }
      if (self_w != 1.0 || !others_zero) t.identity = false;
    }
  }
  return t;
}

}  // namespace orrery::ops::resize
