// Sgemm's scratch sizing covers every part of a shape a kernel runs after
// sizing once for the whole (a convolution's columns before its GEMM tail,
// Winograd's last chunk of rows). A slice too small runs on heap scratch
// and is counted (SgemmScratchShortfalls), so a sizing bug shows in any
// build, not only as a heap overflow under AddressSanitizer.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "op_test_util.h"
#include "ops/cpu/gemm/sgemm.h"
#include "ops/registry.h"
#include "parallel_test_util.h"

namespace orrery::ops::cpu {
namespace {

using ops::testing::RandomTensor;
using ops::testing::RunOp;
using ops::testing::Values;

// SgemmScratchBytes for a shape is enough for any with the same K and no
// more rows or columns. 196 columns against 1024 rows, K 256, took two
// chunks of 144 columns, and 192 columns one of 192.
TEST(GemmScratchTest, ScratchCoversSmallerShapes) {
  for (const bool a_packed : {true, false}) {
    for (const int64_t k : {27, 64, 128, 192, 256, 576, 1152}) {
      for (const int64_t m : {16, 64, 256, 512, 1024, 2048}) {
        for (const int64_t n : {49, 196, 784, 3136}) {
          const int64_t whole = SgemmScratchBytes({m, n, k}, a_packed, false);
          for (const int64_t mm : {int64_t{1}, m / 3 + 1, m - 1, m}) {
            for (const int64_t nn : {int64_t{1}, n / 2, n - n % 48, n - 1, n}) {
              if (nn < 1) continue;
              ASSERT_LE(SgemmScratchBytes({mm, nn, k}, a_packed, false), whole)
                  << "m " << mm << " of " << m << ", n " << nn << " of " << n << ", k " << k
                  << (a_packed ? ", A packed" : "");
            }
          }
        }
      }
    }
  }
}

// The shape that wrote past its scratch: ResNet-50's layer3 conv3 width
// (256 -> 1024 at 14x14) with a residual, whose last 4 columns go to the
// GEMM tail kernel. The fused result equals Conv then Add; no call fell
// back to heap scratch.
TEST(GemmScratchTest, PointwiseWithTailAndResidual) {
  const int64_t before = SgemmScratchShortfalls();
  const Tensor x = RandomTensor({1, 256, 14, 14}, 1);
  const Tensor w = RandomTensor({1024, 256, 1, 1}, 2);
  const Tensor b = RandomTensor({1024}, 3);
  auto plain = RunOp("Conv", {&x, &w, &b});
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  const Tensor z = RandomTensor((*plain)[0].shape(), 4);
  Attributes fused;
  fused.Set("_fused_residual", int64_t{1});
  fused.Set("_fused_activation", std::string("Relu"));
  for (const int threads : {1, 2}) {
    testing::SpawnThreads group(threads);
    auto got = RunOp("Conv", {&x, &w, &b, &z}, fused, 13, &group);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    const std::vector<float> y = Values<float>((*got)[0]);
    const std::vector<float> p = Values<float>((*plain)[0]), r = Values<float>(z);
    ASSERT_EQ(y.size(), p.size());
    for (size_t i = 0; i < y.size(); ++i) {
      const float want = p[i] + r[i] > 0.0f ? p[i] + r[i] : 0.0f;
      ASSERT_NEAR(y[i], want, 1e-3f) << "at " << i << " on " << threads << " threads";
    }
  }
  EXPECT_EQ(SgemmScratchShortfalls(), before);
}

// Pointwise and 3x3 convolutions on 7x7 / 14x14 / 28x28 planes (columns
// past whole panels go to the GEMM tail; odd channel counts leave partial
// last chunks), with and without a residual, on one and two threads: no
// Sgemm call is short of scratch.
TEST(GemmScratchTest, ConvolutionsNeverFallBack) {
  const int64_t before = SgemmScratchShortfalls();
  uint32_t seed = 10;
  struct Case {
    int64_t c, m, hw, kernel;
  };
  const std::vector<Case> cases = {
      {256, 1024, 14, 1}, {128, 512, 28, 1}, {512, 2048, 7, 1}, {64, 640, 14, 1},
      {96, 1000, 14, 1},  {160, 960, 7, 1},  {64, 1024, 14, 3}, {32, 200, 28, 3},
      {64, 72, 14, 3},    {48, 1100, 14, 3}, {128, 300, 28, 3},
  };
  for (const Case& cc : cases) {
    const Tensor x = RandomTensor({1, cc.c, cc.hw, cc.hw}, seed++);
    const Tensor w = RandomTensor({cc.m, cc.c, cc.kernel, cc.kernel}, seed++);
    Attributes plain;
    if (cc.kernel == 3) plain.Set("pads", std::vector<int64_t>{1, 1, 1, 1});
    const Tensor z = RandomTensor({1, cc.m, cc.hw, cc.hw}, seed++);
    Attributes residual = plain;
    residual.Set("_fused_residual", int64_t{1});
    for (const int threads : {1, 2}) {
      testing::SpawnThreads group(threads);
      auto a = RunOp("Conv", {&x, &w}, plain, 13, &group);
      ASSERT_TRUE(a.ok()) << a.status().ToString();
      auto r = RunOp("Conv", {&x, &w, &z}, residual, 13, &group);
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      EXPECT_EQ(SgemmScratchShortfalls(), before)
          << cc.c << " -> " << cc.m << " at " << cc.hw << "x" << cc.hw << ", " << cc.kernel << "x"
          << cc.kernel << ", " << threads << " threads";
    }
  }
}

// Random convolutions (seeded; 1x1 / 3x3 / 5x5, strides 1 and 2, groups
// and depthwise, planes 1..40, up to 1100 output channels), with and
// without a residual, on one and two threads: each run on exactly its
// declared scratch (AddressSanitizer sees any write past it) and none
// falls back; the fused residual equals Conv then Add.
TEST(GemmScratchTest, RandomConvolutions) {
  const int64_t before = SgemmScratchShortfalls();
  std::mt19937 gen(20261125);
  auto pick = [&](std::initializer_list<int64_t> v) {
    return *(v.begin() + std::uniform_int_distribution<size_t>(0, v.size() - 1)(gen));
  };
  uint32_t seed = 100;
  for (int i = 0; i < 60; ++i) {
    const int64_t kernel = pick({1, 1, 3, 3, 5});
    const int64_t stride = pick({1, 1, 2});
    const int64_t hw = std::uniform_int_distribution<int64_t>(kernel, 40)(gen);
    const bool depthwise = pick({0, 0, 0, 1}) == 1;
    const int64_t group = depthwise ? 1 : pick({1, 1, 1, 2});
    // Per group: cg input and mg output channels (depthwise: mg groups of one).
    const int64_t cg = depthwise ? 1 : pick({3, 16, 40, 64, 130, 256});
    int64_t mg = depthwise ? pick({8, 24, 96}) : pick({8, 24, 72, 200, 520, 1100});
    // Keep each case under ~40 MFLOP.
    while (mg > 8 && 2 * group * mg * cg * kernel * kernel * hw * hw > 40'000'000) mg /= 2;
    const int64_t gg = depthwise ? mg : group;
    const int64_t m = depthwise ? mg : group * mg, c = gg * cg;
    const Tensor x = RandomTensor({1, c, hw, hw}, seed++);
    const Tensor w = RandomTensor({m, cg, kernel, kernel}, seed++);
    Attributes plain;
    plain.Set("strides", std::vector<int64_t>{stride, stride});
    const int64_t pad = kernel / 2;
    plain.Set("pads", std::vector<int64_t>{pad, pad, pad, pad});
    plain.Set("group", gg);
    SCOPED_TRACE(std::to_string(c) + " -> " + std::to_string(m) + " at " + std::to_string(hw) + ", " +
                 std::to_string(kernel) + "x" + std::to_string(kernel) + " / " + std::to_string(stride) +
                 ", group " + std::to_string(gg));
    for (const int threads : {1, 2}) {
      testing::SpawnThreads group_threads(threads);
      auto a = RunOp("Conv", {&x, &w}, plain, 13, &group_threads);
      ASSERT_TRUE(a.ok()) << a.status().ToString();
      const Tensor z = RandomTensor((*a)[0].shape(), seed++);
      Attributes residual = plain;
      residual.Set("_fused_residual", int64_t{1});
      auto r = RunOp("Conv", {&x, &w, &z}, residual, 13, &group_threads);
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      const std::vector<float> ya = Values<float>((*a)[0]), yr = Values<float>((*r)[0]), vz = Values<float>(z);
      for (size_t j = 0; j < ya.size(); ++j) ASSERT_NEAR(yr[j], ya[j] + vz[j], 1e-3f) << "at " << j;
    }
  }
  EXPECT_EQ(SgemmScratchShortfalls(), before);
}

}  // namespace
}  // namespace orrery::ops::cpu
