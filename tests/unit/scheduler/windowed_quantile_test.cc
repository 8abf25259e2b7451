#include "base/windowed_quantile.h"

#include <gtest/gtest.h>

namespace orrery {
namespace {

constexpr int64_t kSec = 1'000'000'000;

TEST(WindowedQuantileTest, EmptyIsZero) {
  WindowedQuantile q(0.99, 8, kSec);
  EXPECT_EQ(q.Value(0), 0.0);
  EXPECT_EQ(q.size(), 0u);
}

TEST(WindowedQuantileTest, HighQuantileOfTheLastWindowSamples) {
  // Recomputed every 16th add: multiples of 16 see every sample.
  WindowedQuantile q(0.99, 100, 0);
  for (int i = 1; i <= 96; ++i) q.Add(0, i);  // 1..96
  EXPECT_EQ(q.Value(0), 96.0);
  // 112 small samples push the large ones out of the window.
  for (int i = 0; i < 112; ++i) q.Add(0, 0.5);
  EXPECT_EQ(q.size(), 100u);
  EXPECT_EQ(q.Value(0), 0.5);
}

TEST(WindowedQuantileTest, MedianOfOddCount) {
  WindowedQuantile q(0.5, 16, 0);
  for (double v : {5.0, 1.0, 3.0, 2.0, 4.0}) q.Add(0, v);
  EXPECT_EQ(q.Value(0), 3.0);
}

TEST(WindowedQuantileTest, SamplesExpireSoABurstIsForgotten) {
  WindowedQuantile q(0.99, 64, kSec);
  for (int i = 0; i < 32; ++i) q.Add(0, 50.0);  // a burst at t=0
  EXPECT_EQ(q.Value(kSec / 2), 50.0);
  q.Add(kSec / 2, 1.0);
  // At t = 1 s + 1 ns the burst is older than max_age; the later sample stays.
  EXPECT_EQ(q.Value(kSec + 1), 1.0);
  EXPECT_EQ(q.size(), 1u);
  EXPECT_EQ(q.Value(3 * kSec), 0.0);
}

}  // namespace
}  // namespace orrery
