#include "scheduler/recent_speed.h"

#include <gtest/gtest.h>

namespace orrery {
namespace {

constexpr int64_t kMs = 1'000'000;

TEST(RecentSpeedTest, OffIsAlwaysOne) {
  RecentSpeed speed(0, 0, 3.0);
  speed.Add(10 * kMs, 5 * kMs, 1 * kMs);
  EXPECT_FALSE(speed.enabled());
  EXPECT_DOUBLE_EQ(speed.Factor(10 * kMs), 1.0);
  EXPECT_DOUBLE_EQ(speed.last(10 * kMs), 1.0);
}

TEST(RecentSpeedTest, SumsMeasuredOverPredictedWithinTheWindow) {
  RecentSpeed speed(20 * kMs, 2 * kMs, 3.0);
  speed.Add(100 * kMs, 1 * kMs, 1 * kMs);
  // 1 ms predicted is too little to trust.
  EXPECT_DOUBLE_EQ(speed.Factor(100 * kMs), 1.0);
  speed.Add(105 * kMs, 2 * kMs, 1 * kMs);
  EXPECT_DOUBLE_EQ(speed.Factor(105 * kMs), 1.5);  // 3 ms measured / 2 predicted
  EXPECT_DOUBLE_EQ(speed.last(105 * kMs), 1.5);
  // The step of 100 ms leaves the window at 120 ms: one 1 ms step is left.
  EXPECT_DOUBLE_EQ(speed.Factor(120 * kMs), 1.0);
  speed.Add(121 * kMs, 4 * kMs, 2 * kMs);
  EXPECT_DOUBLE_EQ(speed.Factor(121 * kMs), 2.0);  // (2 + 4) / (1 + 2)
  // Everything expires: back to 1.
  EXPECT_DOUBLE_EQ(speed.Factor(200 * kMs), 1.0);
}

TEST(RecentSpeedTest, LastForgetsASpellOnceItsStepsLeftTheWindow) {
  RecentSpeed speed(20 * kMs, 0, 3.0);
  speed.Add(100 * kMs, 4 * kMs, 2 * kMs);
  EXPECT_DOUBLE_EQ(speed.last(100 * kMs), 2.0);
  EXPECT_DOUBLE_EQ(speed.last(119 * kMs), 2.0);  // still in the window
  // The lanes went idle: no Add or Factor call, yet the spell is over.
  EXPECT_DOUBLE_EQ(speed.last(120 * kMs), 1.0);
  EXPECT_DOUBLE_EQ(speed.last(500 * kMs), 1.0);
}

TEST(RecentSpeedTest, StaysWithinOneAndTheMaximum) {
  RecentSpeed speed(20 * kMs, 0, 3.0);
  speed.Add(100 * kMs, 1 * kMs, 4 * kMs);  // faster than predicted: not a margin to spend
  EXPECT_DOUBLE_EQ(speed.Factor(100 * kMs), 1.0);
  speed.Add(101 * kMs, 50 * kMs, 1 * kMs);
  EXPECT_DOUBLE_EQ(speed.Factor(101 * kMs), 3.0);
  speed.Add(102 * kMs, 7 * kMs, 0);  // no prediction: ignored
  EXPECT_DOUBLE_EQ(speed.Factor(102 * kMs), 3.0);
}

}  // namespace
}  // namespace orrery
