// Resize / Upsample and the coordinate math in ops/resize_util.h. Expected
// values are the ones printed in onnx/backend/test/case/node/resize.py.
#include <gtest/gtest.h>

#include "data_op_test_util.h"
#include "ops/resize_util.h"

namespace orrery::ops {
namespace {

using resize::CoordMode;
using resize::Mode;
using resize::NearestMode;
using testing::Attrs;
using testing::ExpectNear;
using testing::F32;
using testing::I64;
using testing::IsUnsupported;
using testing::Run1;
using testing::RunOptions;
using testing::TryOp;
using testing::Values;

// ---- coordinate math ----

TEST(ResizeUtilTest, OriginalCoordinate) {
  // x = 1 of an axis resized 4 -> 8 (scale 2).
  auto at = [](CoordMode m, double x, double scale, double in, double roi0 = 0, double roi1 = 1) {
    return resize::OriginalCoordinate(m, x, scale, scale * in, in, roi0, roi1);
  };
  EXPECT_DOUBLE_EQ(at(CoordMode::kHalfPixel, 1, 2, 4), 0.25);
  EXPECT_DOUBLE_EQ(at(CoordMode::kAsymmetric, 1, 2, 4), 0.5);
  EXPECT_DOUBLE_EQ(at(CoordMode::kTfHalfPixelForNn, 1, 2, 4), 0.75);
  EXPECT_DOUBLE_EQ(at(CoordMode::kAlignCorners, 1, 2, 4), 3.0 / 7.0);
  EXPECT_DOUBLE_EQ(at(CoordMode::kPytorchHalfPixel, 1, 2, 4), 0.25);
  EXPECT_DOUBLE_EQ(at(CoordMode::kPytorchHalfPixel, 0, 0.25, 4), 0.0);  // one output
  EXPECT_DOUBLE_EQ(at(CoordMode::kAlignCorners, 0, 0.25, 4), 0.0);
  // align_corners uses scale * length, not the integer output length.
  EXPECT_NEAR(at(CoordMode::kAlignCorners, 1, 0.6, 4), 3.0 / 1.4, 1e-12);
  EXPECT_DOUBLE_EQ(at(CoordMode::kTfCropAndResize, 1, 0.75, 4, 0.4, 0.6), 0.4 * 3 + 0.2 * 3 / 2);
  EXPECT_DOUBLE_EQ(at(CoordMode::kTfCropAndResize, 0, 0.25, 4, 0.4, 0.6), 0.5 * 1.0 * 3);
  // half_pixel_symmetric equals half_pixel when the output length is integral.
  EXPECT_DOUBLE_EQ(at(CoordMode::kHalfPixelSymmetric, 3, 2, 4), at(CoordMode::kHalfPixel, 3, 2, 4));
}

TEST(ResizeUtilTest, NearestIndexModes) {
  EXPECT_EQ(resize::NearestIndex(NearestMode::kRoundPreferFloor, 1.5, false), 1);
  EXPECT_EQ(resize::NearestIndex(NearestMode::kRoundPreferFloor, 1.51, false), 2);
  EXPECT_EQ(resize::NearestIndex(NearestMode::kRoundPreferCeil, 1.5, false), 2);
  EXPECT_EQ(resize::NearestIndex(NearestMode::kRoundPreferCeil, 1.49, false), 1);
  EXPECT_EQ(resize::NearestIndex(NearestMode::kFloor, 1.99, false), 1);
  EXPECT_EQ(resize::NearestIndex(NearestMode::kCeil, 1.01, false), 2);
  EXPECT_EQ(resize::NearestIndex(NearestMode::kCeil, 2.0, false), 2);
  EXPECT_EQ(resize::NearestIndex(NearestMode::kRoundPreferFloor, -0.5, false), -1);
  EXPECT_EQ(resize::NearestIndex(NearestMode::kSimple, 1.2, true), 2);
  EXPECT_EQ(resize::NearestIndex(NearestMode::kSimple, 1.8, false), 1);
}

TEST(ResizeUtilTest, CubicCoefficientsSumToOneAndInterpolate) {
  for (double r : {0.0, 0.25, 0.5, 0.9}) {
    double c[4];
    resize::CubicCoefficients(r, -0.75, c);
    EXPECT_NEAR(c[0] + c[1] + c[2] + c[3], 1.0, 1e-12) << r;
  }
  double c[4];
  resize::CubicCoefficients(0.0, -0.5, c);
  EXPECT_NEAR(c[1], 1.0, 1e-12);  // integral coordinates pick the sample itself
  EXPECT_NEAR(c[0], 0.0, 1e-12);
  EXPECT_NEAR(c[2], 0.0, 1e-12);
}

TEST(ResizeUtilTest, AxisTapsClampAndDetectIdentity) {
  resize::Options lin{.mode = Mode::kLinear};
  resize::AxisTaps t = resize::BuildAxisTaps(lin, {.in_len = 2, .out_len = 4, .scale = 2.0});
  ASSERT_EQ(t.taps, 2);
  // y = 0 samples x = -0.25: both taps clamp to index 0.
  EXPECT_EQ(t.index[0], 0);
  EXPECT_EQ(t.index[1], 0);
  EXPECT_FALSE(t.identity);
  resize::AxisTaps same = resize::BuildAxisTaps(lin, {.in_len = 5, .out_len = 5, .scale = 1.0});
  EXPECT_TRUE(same.identity);
  resize::Options cubic{.mode = Mode::kCubic, .exclude_outside = true};
  resize::AxisTaps e = resize::BuildAxisTaps(cubic, {.in_len = 4, .out_len = 8, .scale = 2.0});
  EXPECT_EQ(e.weight[0], 0.0);  // tap at index -2 is outside and excluded
  double sum = 0;
  for (int j = 0; j < 4; ++j) sum += e.weight[static_cast<size_t>(j)];
  EXPECT_NEAR(sum, 1.0, 1e-12);
  resize::Options crop{.mode = Mode::kLinear, .coord = CoordMode::kTfCropAndResize};
  resize::AxisTaps c = resize::BuildAxisTaps(
      crop, {.in_len = 4, .out_len = 3, .scale = 0.75, .roi_start = 0.6, .roi_end = 1.7});
  EXPECT_EQ(c.outside, (std::vector<uint8_t>{0, 1, 1}));
}

// ---- Resize kernel vs the ONNX reference values ----

const std::vector<float> k2x2 = {1, 2, 3, 4};
const std::vector<float> k2x4 = {1, 2, 3, 4, 5, 6, 7, 8};
const std::vector<float> k4x4 = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};

Tensor ResizeScales(const Tensor& x, std::vector<float> scales, Attributes attrs,
                    int64_t opset = 13) {
  Tensor s = F32({static_cast<int64_t>(scales.size())}, scales);
  return Run1("Resize", {&x, nullptr, &s}, attrs, {.opset = opset});
}

Tensor ResizeSizes(const Tensor& x, std::vector<int64_t> sizes, Attributes attrs) {
  Tensor s = I64({static_cast<int64_t>(sizes.size())}, sizes);
  return Run1("Resize", {&x, nullptr, nullptr, &s}, attrs);
}

Attributes Mode(const char* mode, const char* coord = nullptr, const char* nearest = nullptr) {
  Attributes a;
  a.Set("mode", std::string(mode));
  if (coord != nullptr) a.Set("coordinate_transformation_mode", std::string(coord));
  if (nearest != nullptr) a.Set("nearest_mode", std::string(nearest));
  return a;
}

TEST(ResizeTest, NearestScalesAndSizes) {
  Tensor x = F32({1, 1, 2, 2}, k2x2);
  Tensor up = ResizeScales(x, {1, 1, 2, 3}, Mode("nearest"));
  EXPECT_EQ(up.shape(), (Shape{1, 1, 4, 6}));
  EXPECT_EQ(Values<float>(up), (std::vector<float>{1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2,
                                                   3, 3, 3, 4, 4, 4, 3, 3, 3, 4, 4, 4}));
  Tensor x24 = F32({1, 1, 2, 4}, k2x4);
  Tensor down = ResizeScales(x24, {1, 1, 0.6f, 0.6f}, Mode("nearest"));
  EXPECT_EQ(down.shape(), (Shape{1, 1, 1, 2}));
  EXPECT_EQ(Values<float>(down), (std::vector<float>{1, 3}));
  EXPECT_EQ(Values<float>(ResizeSizes(x24, {1, 1, 1, 3}, Mode("nearest"))),
            (std::vector<float>{1, 2, 4}));
  Tensor sz = ResizeSizes(x, {1, 1, 7, 8}, Mode("nearest"));
  EXPECT_EQ(sz.shape(), (Shape{1, 1, 7, 8}));
  const std::vector<float> row1 = {1, 1, 1, 1, 2, 2, 2, 2};
  const std::vector<float> row3 = {3, 3, 3, 3, 4, 4, 4, 4};
  std::vector<float> want;
  for (int r = 0; r < 7; ++r)
    want.insert(want.end(), (r < 4 ? row1 : row3).begin(), (r < 4 ? row1 : row3).end());
  EXPECT_EQ(Values<float>(sz), want);
}

TEST(ResizeTest, NearestModesAndCoordinateModes) {
  Tensor x = F32({1, 1, 4, 4}, k4x4);
  Tensor floor_ac = ResizeSizes(x, {1, 1, 8, 8}, Mode("nearest", "align_corners", "floor"));
  const std::vector<float> fa = Values<float>(floor_ac);
  EXPECT_EQ(std::vector<float>(fa.begin(), fa.begin() + 8),
            (std::vector<float>{1, 1, 1, 2, 2, 3, 3, 4}));
  EXPECT_EQ(fa[3 * 8], 5);
  const std::vector<float> want_ceil = {
      1,  2,  2,  3,  3,  4,  4,  4,  5,  6,  6,  7,  7,  8,  8,  8,  5,  6,  6,  7,  7,  8,
      8,  8,  9,  10, 10, 11, 11, 12, 12, 12, 9,  10, 10, 11, 11, 12, 12, 12, 13, 14, 14, 15,
      15, 16, 16, 16, 13, 14, 14, 15, 15, 16, 16, 16, 13, 14, 14, 15, 15, 16, 16, 16};
  EXPECT_EQ(Values<float>(
                ResizeSizes(x, {1, 1, 8, 8}, Mode("nearest", "asymmetric", "round_prefer_ceil"))),
            want_ceil);
  EXPECT_EQ(Values<float>(ResizeSizes(x, {1, 1, 8, 8}, Mode("nearest", "half_pixel", "ceil"))),
            want_ceil);
}

TEST(ResizeTest, Linear) {
  Tensor x = F32({1, 1, 2, 2}, k2x2);
  ExpectNear(Values<float>(ResizeScales(x, {1, 1, 2, 2}, Mode("linear"))),
             {1, 1.25, 1.75, 2, 1.5, 1.75, 2.25, 2.5, 2.5, 2.75, 3.25, 3.5, 3, 3.25, 3.75, 4});
  ExpectNear(Values<float>(ResizeScales(x, {1, 1, 2, 2}, Mode("linear", "align_corners"))),
             {1, 1.33333333f, 1.66666667f, 2, 1.66666667f, 2, 2.33333333f, 2.66666667f, 2.33333333f,
              2.66666667f, 3, 3.33333333f, 3, 3.33333333f, 3.66666667f, 4});
  Tensor x24 = F32({1, 1, 2, 4}, k2x4);
  ExpectNear(Values<float>(ResizeScales(x24, {1, 1, 0.6f, 0.6f}, Mode("linear"))),
             {2.6666665f, 4.3333331f});
  ExpectNear(Values<float>(ResizeScales(x24, {1, 1, 0.6f, 0.6f}, Mode("linear", "align_corners"))),
             {1, 3.142857f});
  Tensor x44 = F32({1, 1, 4, 4}, k4x4);
  ExpectNear(Values<float>(ResizeSizes(x44, {1, 1, 3, 1}, Mode("linear", "pytorch_half_pixel"))),
             {1.6666666f, 7, 12.333333f});
}

TEST(ResizeTest, CubicVariants) {
  Tensor x = F32({1, 1, 4, 4}, k4x4);
  Tensor up = ResizeScales(x, {1, 1, 2, 2}, Mode("cubic"));
  EXPECT_EQ(up.shape(), (Shape{1, 1, 8, 8}));
  std::vector<float> v = Values<float>(up);
  ExpectNear(std::vector<float>(v.begin(), v.begin() + 8),
             {0.47265625f, 0.76953125f, 1.24609375f, 1.875f, 2.28125f, 2.91015625f, 3.38671875f,
              3.68359375f},
             1e-4f);
  ExpectNear(Values<float>(ResizeScales(x, {1, 1, 0.8f, 0.8f}, Mode("cubic"))),
             {1.47119141f, 2.78125f, 4.08251953f, 6.71142578f, 8.02148438f, 9.32275391f,
              11.91650391f, 13.2265625f, 14.52783203f},
             1e-4f);
  ExpectNear(Values<float>(ResizeScales(x, {1, 1, 0.8f, 0.8f}, Mode("cubic", "align_corners"))),
             {1, 2.39519159f, 3.79038317f, 6.58076634f, 7.97595793f, 9.37114951f, 12.16153268f,
              13.55672427f, 14.95191585f},
             1e-4f);
  Attributes tf = Mode("cubic");
  tf.Set("cubic_coeff_a", -0.5f);
  tf.Set("exclude_outside", int64_t{1});
  ExpectNear(Values<float>(ResizeScales(x, {1, 1, 0.8f, 0.8f}, tf)),
             {1.36812675f, 2.6695014f, 4.0133367f, 6.57362535f, 7.875f, 9.2188353f, 11.94896657f,
              13.25034122f, 14.59417652f},
             1e-4f);
  ExpectNear(Values<float>(ResizeSizes(x, {1, 1, 3, 3}, Mode("cubic"))),
             {1.63078704f, 3.00462963f, 4.37847222f, 7.12615741f, 8.5f, 9.87384259f, 12.62152778f,
              13.99537037f, 15.36921296f},
             1e-4f);
  std::vector<float> asym =
      Values<float>(ResizeScales(x, {1, 1, 2, 2}, Mode("cubic", "asymmetric")));
  ExpectNear(std::vector<float>(asym.begin(), asym.begin() + 8),
             {1, 1.40625f, 2, 2.5f, 3, 3.59375f, 4, 4.09375f}, 1e-4f);
}

TEST(ResizeTest, TrilinearOverEveryAxisMatchesReference) {
  // All three axes resize, so this takes the separable N-d path.
  Tensor x = testing::Iota({2, 3, 4});
  Tensor y = ResizeScales(x, {2, 1.5f, 0.5f}, Mode("linear"));
  EXPECT_EQ(y.shape(), (Shape{4, 4, 2}));
  ExpectNear(Values<float>(y), {0.5f,  2.5f,  2.5f,  4.5f,  5.16667f, 7.16667f, 7.83333f, 9.83333f,
                                3.5f,  5.5f,  5.5f,  7.5f,  8.16667f, 10.1667f, 10.8333f, 12.8333f,
                                9.5f,  11.5f, 11.5f, 13.5f, 14.1667f, 16.1667f, 16.8333f, 18.8333f,
                                12.5f, 14.5f, 14.5f, 16.5f, 17.1667f, 19.1667f, 19.8333f, 21.8333f},
             1e-4f);
  Tensor z = ResizeSizes(x, {3, 2, 4}, Mode("linear", "align_corners"));
  ExpectNear(Values<float>(z), {0,  1,  2,  3,  8,  9,  10, 11, 6,  7,  8,  9,
                                14, 15, 16, 17, 12, 13, 14, 15, 20, 21, 22, 23});
}

TEST(ResizeTest, TfCropAndResize) {
  Tensor x = F32({1, 1, 4, 4}, k4x4);
  Tensor roi = F32({8}, {0, 0, 0.4f, 0.6f, 1, 1, 0.6f, 0.8f});
  Tensor sizes = I64({4}, {1, 1, 3, 3});
  Attributes a = Mode("linear", "tf_crop_and_resize");
  ExpectNear(Values<float>(Run1("Resize", {&x, &roi, nullptr, &sizes}, a)),
             {7.6000004f, 7.9f, 8.2f, 8.8f, 9.1f, 9.400001f, 10, 10.3f, 10.6f}, 1e-4f);
  Tensor roi2 = F32({8}, {0, 0, 0.4f, 0.6f, 1, 1, 1.2f, 1.7f});
  a.Set("extrapolation_value", 10.0f);
  ExpectNear(Values<float>(Run1("Resize", {&x, &roi2, nullptr, &sizes}, a)),
             {7.6000004f, 10, 10, 12.400001f, 10, 10, 10, 10, 10}, 1e-4f);
}

TEST(ResizeTest, AnyDtypeForNearestAndIdentityShortcut) {
  Tensor x = testing::Make<int64_t>(DType::kInt64, {1, 2, 2}, {1, 2, 3, 4});
  Tensor y = ResizeScales(x, {1, 2, 2}, Mode("nearest", "asymmetric", "floor"));
  EXPECT_EQ(Values<int64_t>(y),
            (std::vector<int64_t>{1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4}));
  Tensor u = testing::U8({2, 2}, {1, 2, 3, 4});
  EXPECT_EQ(Values<uint8_t>(ResizeScales(u, {1, 2}, Mode("nearest"))),
            (std::vector<uint8_t>{1, 1, 2, 2, 3, 3, 4, 4}));
  Tensor s2 = F32({2}, {1, 2});
  EXPECT_TRUE(IsUnsupported(TryOp("Resize", {&u, nullptr, &s2}, Mode("linear")).status()));
  Tensor f = F32({2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_EQ(Values<float>(ResizeScales(f, {1, 1}, Mode("linear"))), Values<float>(f));
}

TEST(ResizeTest, RejectsBadArguments) {
  Tensor x = F32({1, 1, 2, 2}, k2x2);
  Tensor s = F32({4}, {1, 1, 2, 2});
  Tensor z = I64({4}, {1, 1, 4, 4});
  EXPECT_EQ(TryOp("Resize", {&x, nullptr, &s, &z}, {}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(TryOp("Resize", {&x}, {}).status().code(), StatusCode::kInvalidArgument);
  Tensor neg = F32({4}, {1, 1, -2, 2});
  EXPECT_EQ(TryOp("Resize", {&x, nullptr, &neg}, {}).status().code(), StatusCode::kInvalidArgument);
  Tensor short_s = F32({2}, {2, 2});
  EXPECT_EQ(TryOp("Resize", {&x, nullptr, &short_s}, {}).status().code(),
            StatusCode::kInvalidArgument);
  Tensor huge = F32({4}, {1, 1, 1e30f, 1e30f});
  EXPECT_FALSE(TryOp("Resize", {&x, nullptr, &huge}, {}).ok());
  Tensor big_sizes = I64({4}, {1, 1, int64_t{1} << 40, int64_t{1} << 40});
  EXPECT_FALSE(TryOp("Resize", {&x, nullptr, nullptr, &big_sizes}, {}).ok());
  Tensor neg_sizes = I64({4}, {1, 1, -1, 2});
  EXPECT_EQ(TryOp("Resize", {&x, nullptr, nullptr, &neg_sizes}, {}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_TRUE(IsUnsupported(TryOp("Resize", {&x, nullptr, &s}, Mode("area")).status()));
  Attributes aa = Mode("linear");
  aa.Set("antialias", int64_t{1});
  EXPECT_TRUE(IsUnsupported(TryOp("Resize", {&x, nullptr, &s}, aa, {.opset = 18}).status()));
  EXPECT_EQ(TryOp("Resize", {&x, nullptr, &s}, {}, {.hide_values = true}).status().code(),
            StatusCode::kUnavailable);
}

TEST(ResizeTest, OnlyResizedAxesAreCapped) {
  // The untouched axis is longer than the resized-axis cap and needs no tables.
  const int64_t n = (int64_t{1} << 24) + 3;
  Tensor x(DType::kUint8, {2, n});
  x.data<uint8_t>()[n - 1] = 7;
  x.data<uint8_t>()[n] = 9;
  Tensor y = ResizeScales(x, {2, 1}, Mode("nearest"));
  ASSERT_EQ(y.shape(), (Shape{4, n}));
  EXPECT_EQ(y.data<uint8_t>()[n - 1], 7);      // row 0 <- input row 0
  EXPECT_EQ(y.data<uint8_t>()[2 * n - 1], 7);  // row 1 <- input row 0
  EXPECT_EQ(y.data<uint8_t>()[3 * n], 9);      // row 3 <- input row 1
  Tensor small = F32({1, 1}, {1});
  Tensor sizes = I64({2}, {1, n});
  EXPECT_EQ(TryOp("Resize", {&small, nullptr, nullptr, &sizes}, Mode("nearest")).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(ResizeTest, Opset18AxesAndAspectRatio) {
  Tensor x = F32({1, 1, 2, 4}, k2x4);
  Tensor s = F32({2}, {2, 0.5f});
  Attributes a = Mode("nearest");
  a.Set("axes", std::vector<int64_t>{2, 3});
  Tensor y = Run1("Resize", {&x, nullptr, &s}, a, {.opset = 18});
  EXPECT_EQ(y.shape(), (Shape{1, 1, 4, 2}));
  Tensor sizes = I64({2}, {4, 4});
  a.Set("keep_aspect_ratio_policy", std::string("not_larger"));
  // min(4/2, 4/4) = 1: the image keeps its size.
  EXPECT_EQ(Run1("Resize", {&x, nullptr, nullptr, &sizes}, a, {.opset = 18}).shape(),
            (Shape{1, 1, 2, 4}));
  a.Set("keep_aspect_ratio_policy", std::string("not_smaller"));
  EXPECT_EQ(Run1("Resize", {&x, nullptr, nullptr, &sizes}, a, {.opset = 18}).shape(),
            (Shape{1, 1, 4, 8}));
}

TEST(UpsampleTest, Opset9InputAndOpset7Attribute) {
  Tensor x = F32({1, 1, 2, 2}, k2x2);
  Tensor s = F32({4}, {1, 1, 2, 3});
  const std::vector<float> want = {1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2,
                                   3, 3, 3, 4, 4, 4, 3, 3, 3, 4, 4, 4};
  EXPECT_EQ(Values<float>(Run1("Upsample", {&x, &s}, Mode("nearest"), {.opset = 9})), want);
  Attributes a = Mode("nearest");
  a.Set("scales", std::vector<float>{1, 1, 2, 3});
  EXPECT_EQ(Values<float>(Run1("Upsample", {&x}, a, {.opset = 7})), want);
  // Linear upsampling uses asymmetric coordinates: x / scale, clamped at the edge.
  Tensor s2 = F32({4}, {1, 1, 1, 2});
  ExpectNear(Values<float>(Run1("Upsample", {&x, &s2}, Mode("linear"), {.opset = 9})),
             {1, 1.5f, 2, 2, 3, 3.5f, 4, 4});
  // Resize-10: same semantics; downsampling nearest rounds up.
  Tensor x24 = F32({1, 1, 2, 4}, k2x4);
  Tensor d = F32({4}, {1, 1, 0.6f, 0.6f});
  EXPECT_EQ(Values<float>(Run1("Resize", {&x24, &d}, Mode("nearest"), {.opset = 10})),
            (std::vector<float>{1, 3}));
}

}  // namespace
}  // namespace orrery::ops
