// The convolution panel tables (ops/cpu/gemm/conv_direct.h): which
// geometries get a linear or a gather plan, the gather offsets and masks,
// and the refusal of offsets that would overflow the gathers' int32 indexes.
// (The panels' values are checked against the naive convolution in
// conv_test.cc.)
#include "ops/cpu/gemm/conv_direct.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "ops/cpu/gemm/sgemm.h"

namespace orrery::ops::cpu::gemm_internal {
namespace {

Im2ColGeometry Geometry(int64_t h_in, int64_t w_in, int64_t w_out, int64_t k, int64_t s,
                        int64_t p) {
  Im2ColGeometry g;
  g.h_in = h_in;
  g.w_in = w_in;
  g.w_out = w_out;
  g.kh = g.kw = k;
  g.sh = g.sw = s;
  g.ph = g.pw = p;
  g.in_vol = h_in * w_in;
  return g;
}

TEST(ConvDirectPlanTest, SameSizeStrideOneIsLinear) {
  ConvDirectPlan plan;
  ASSERT_TRUE(BuildConvDirectPlan(Geometry(7, 7, 7, 3, 1, 1), 7, /*gather=*/false, &plan));
  EXPECT_TRUE(plan.linear());
  EXPECT_EQ(plan.positions(), 49);
  EXPECT_EQ(plan.panels(), 2);
  // Tap (0, 0) reads p - 7 - 1: position 0 (row 0) is padding, 8 is not.
  EXPECT_EQ(plan.off[0], -8);
  EXPECT_EQ(plan.masks[0] & 1u, 0u);
  EXPECT_EQ((plan.masks[0] >> 8) & 1u, 1u);
}

TEST(ConvDirectPlanTest, StridedNeedsGather) {
  const Im2ColGeometry g = Geometry(14, 14, 7, 3, 2, 1);
  ConvDirectPlan plan;
  EXPECT_FALSE(BuildConvDirectPlan(g, 7, /*gather=*/false, &plan));
  ASSERT_TRUE(BuildConvDirectPlan(g, 7, /*gather=*/true, &plan));
  EXPECT_FALSE(plan.linear());
  ASSERT_EQ(plan.base.size(), 2u * 48 + 8);  // + 8: a left panel from any position
  // Output (1, 2) is position 9: input row 2, column 4.
  EXPECT_EQ(plan.base[9], 2 * 14 + 4);
  EXPECT_EQ(plan.base[49], 0);  // past the plane
  // Tap (1, 1) (centre) is inside for every position; tap (0, 0) is padding
  // for output row 0 and column 0 only.
  const uint16_t* centre = &plan.masks[4 * 3];
  EXPECT_EQ(centre[0], 0xffff);
  EXPECT_EQ(centre[1], 0xffff);
  EXPECT_EQ(centre[2], 0xffff);
  const uint16_t* corner = &plan.masks[0];
  EXPECT_EQ(corner[0] & 0x7fu, 0u);       // row 0
  EXPECT_EQ((corner[0] >> 7) & 1u, 0u);   // row 1, column 0
  EXPECT_EQ((corner[0] >> 8) & 1u, 1u);   // row 1, column 1
  // The second panel holds position 48 only.
  EXPECT_EQ(plan.masks[(9 + 4) * 3], 1u);
  EXPECT_EQ(plan.masks[(9 + 4) * 3 + 1], 0u);
}

TEST(ConvDirectPlanTest, RefusesOffsetsBeyondInt32) {
  // A 2^20-wide input row read at stride 2 over 2048 output rows: offsets
  // up to ~2^32.
  ConvDirectPlan plan;
  EXPECT_FALSE(BuildConvDirectPlan(Geometry(4096, int64_t{1} << 20, int64_t{1} << 19, 1, 2, 0),
                                   2048, /*gather=*/true, &plan));
  // Huge padding: the most negative tap offset does not fit either.
  EXPECT_FALSE(BuildConvDirectPlan(Geometry(4, 4, 5, 1, 1, int64_t{1} << 40), 4,
                                   /*gather=*/true, &plan));
}

// Stride 2 on a plane twice the output: a 3x3 pad 1 window reads all four
// parity planes (tap (0, 0): the odd-odd plane one row and column up), a
// 1x1 only the even-even one; odd planes and stride 1 do not fit.
TEST(ConvDirectPlanTest, StrideTwoParityPlanes) {
  ConvDirectPlan plan;
  PhaseSplit split;
  ASSERT_TRUE(BuildConvPhasePlan(Geometry(14, 14, 7, 3, 2, 1), 7, &plan, &split));
  EXPECT_TRUE(plan.linear());
  EXPECT_EQ(split.phases, 4);
  EXPECT_EQ(split.plane_vol(), 4 * 49);
  // Tap (1, 1) reads the even-even plane at the position itself.
  EXPECT_EQ(plan.off[4], split.slot[0] * 49);
  // Tap (0, 0): input (2 oh - 1, 2 ow - 1), odd-odd, one row and column up.
  EXPECT_EQ(plan.off[0], split.slot[3] * 49 - 7 - 1);
  // Tap (2, 1): input (2 oh + 1, 2 ow), odd-even, no shift.
  EXPECT_EQ(plan.off[7], split.slot[2] * 49);
  const uint16_t* corner = &plan.masks[0];
  EXPECT_EQ(corner[0] & 0x7fu, 0u);      // row 0 is padding
  EXPECT_EQ((corner[0] >> 7) & 1u, 0u);  // row 1, column 0
  EXPECT_EQ((corner[0] >> 8) & 1u, 1u);  // row 1, column 1
  EXPECT_EQ(plan.masks[4 * 3 + 2] & 1u, 1u);  // centre, position 32
  ASSERT_TRUE(BuildConvPhasePlan(Geometry(56, 56, 28, 1, 2, 0), 28, &plan, &split));
  EXPECT_EQ(split.phases, 1);
  EXPECT_EQ(split.slot[0], 0);
  EXPECT_EQ(plan.off[0], 0);
  EXPECT_FALSE(BuildConvPhasePlan(Geometry(13, 13, 7, 3, 2, 1), 7, &plan, &split));
  EXPECT_FALSE(BuildConvPhasePlan(Geometry(14, 14, 14, 3, 1, 1), 14, &plan, &split));
}

// The parity planes, portable and AVX-512 (widths around the 16-lane
// vectors, the 32 inputs they read), against the definition.
TEST(ConvDirectPlanTest, SplitPhasesMatchesDefinition) {
  for (const int64_t w_out : {1, 7, 14, 15, 16, 17, 28, 33}) {
    ConvDirectPlan plan;
    PhaseSplit split;
    const int64_t h_out = 3, channels = 2;
    ASSERT_TRUE(BuildConvPhasePlan(Geometry(2 * h_out, 2 * w_out, w_out, 3, 2, 1), h_out, &plan,
                                   &split));
    std::vector<float> x(static_cast<size_t>(channels * 4 * h_out * w_out));
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i) + 0.5f;
    std::vector<float> want(static_cast<size_t>(channels * split.plane_vol()) + 16, -1.0f);
    std::vector<float> got = want;
    SplitPhases(split, x.data(), channels, want.data());
    for (int64_t c = 0; c < channels; ++c) {
      for (int par = 0; par < 4; ++par) {
        for (int64_t i = 0; i < h_out; ++i) {
          for (int64_t j = 0; j < w_out; ++j) {
            const float v = want[static_cast<size_t>(
                (c * split.phases + split.slot[par]) * h_out * w_out + i * w_out + j)];
            ASSERT_EQ(v, x[static_cast<size_t>(c * 4 * h_out * w_out +
                                               (2 * i + par / 2) * 2 * w_out + 2 * j + par % 2)]);
          }
        }
      }
    }
    if (ActiveGemmIsa() != GemmIsa::kAvx512) continue;
    SplitPhasesAvx512(split, x.data(), channels, got.data());
    EXPECT_EQ(got, want) << "w_out " << w_out;  // the tail past the planes untouched too
  }
}

TEST(ConvDirectPlanTest, HugePlanesKeepIm2Col) {
  // 4096 x 4096 outputs of a 7x7 kernel: ~350k panels of 294-byte masks.
  ConvDirectPlan plan;
  EXPECT_FALSE(BuildConvDirectPlan(Geometry(4096, 4096, 4096, 7, 1, 3), 4096,
                                   /*gather=*/true, &plan));
  EXPECT_TRUE(BuildConvDirectPlan(Geometry(224, 224, 112, 7, 2, 3), 112, /*gather=*/true,
                                  &plan));
}

}  // namespace
}  // namespace orrery::ops::cpu::gemm_internal
