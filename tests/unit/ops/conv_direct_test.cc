// The convolution panel tables (ops/cpu/gemm/conv_direct.h): which
// geometries get a linear or a gather plan, the gather offsets and masks,
// and the refusal of offsets that would overflow the gathers' int32 indexes.
// (The panels' values are checked against the naive convolution in
// conv_test.cc.)
#include "ops/cpu/gemm/conv_direct.h"

#include <gtest/gtest.h>

#include <cstdint>

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
