#include "scheduler/lane_spin.h"

#include <gtest/gtest.h>

namespace orrery {
namespace {

constexpr int64_t kUs = 1000;

TEST(LaneSpinTest, NeverSpinsWhenOff) {
  LaneSpin spin(LaneSpinOptions{.max_spin_ns = 0});
  for (int64_t t = 0; t < 100; ++t) spin.OnArrival(t * 10 * kUs);
  EXPECT_EQ(spin.BudgetNs(), 0);
}

TEST(LaneSpinTest, SleepsUntilArrivalsHaveAGap) {
  LaneSpin spin(LaneSpinOptions{.max_spin_ns = 100 * kUs});
  EXPECT_EQ(spin.BudgetNs(), 0);
  spin.OnArrival(0);
  EXPECT_EQ(spin.BudgetNs(), 0);  // one arrival says nothing about the rate
  spin.OnArrival(250 * kUs);
  EXPECT_EQ(spin.mean_gap_ns(), 250 * kUs);
  EXPECT_EQ(spin.BudgetNs(), 100 * kUs);
}

TEST(LaneSpinTest, SpinsOnlyWhileArrivalsAreFrequent) {
  LaneSpinOptions options{.max_spin_ns = 100 * kUs, .max_gap_factor = 4};
  LaneSpin spin(options);
  int64_t t = 0;
  for (int i = 0; i < 200; ++i) spin.OnArrival(t += 250 * kUs);  // 4,000/s
  EXPECT_EQ(spin.BudgetNs(), 100 * kUs);
  for (int i = 0; i < 200; ++i) spin.OnArrival(t += 2'000 * kUs);  // 500/s: gaps of 20x the spin
  EXPECT_GT(spin.mean_gap_ns(), 400 * kUs);
  EXPECT_EQ(spin.BudgetNs(), 0);
  for (int i = 0; i < 200; ++i) spin.OnArrival(t += 100 * kUs);  // busy again
  EXPECT_EQ(spin.BudgetNs(), 100 * kUs);
}

TEST(LaneSpinTest, OneLongIdleGapDoesNotStopSpinningForLong) {
  LaneSpin spin(LaneSpinOptions{.max_spin_ns = 100 * kUs, .alpha = 1.0 / 16});
  int64_t t = 0;
  for (int i = 0; i < 100; ++i) spin.OnArrival(t += 100 * kUs);
  spin.OnArrival(t += 3'600'000'000'000);  // an idle hour counts as 100 ms
  EXPECT_EQ(spin.BudgetNs(), 0);
  int busy_arrivals = 0;
  while (spin.BudgetNs() == 0 && busy_arrivals < 1000) {
    spin.OnArrival(t += 100 * kUs);
    ++busy_arrivals;
  }
  EXPECT_LT(busy_arrivals, 100);  // back to spinning within ~alpha^-1 x log(gap ratio) arrivals
}

}  // namespace
}  // namespace orrery
