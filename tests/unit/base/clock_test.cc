#include "base/clock.h"

#include <gtest/gtest.h>

namespace orrery {
namespace {

TEST(FakeClockTest, MovesOnlyForwardAndOnlyWhenTold) {
  FakeClock clock(100);
  EXPECT_EQ(clock.NowNs(), 100);
  clock.AdvanceNs(50);
  EXPECT_EQ(clock.NowNs(), 150);
  clock.AdvanceNs(-10);  // ignored
  EXPECT_EQ(clock.NowNs(), 150);
  clock.AdvanceTo(120);  // in the past: ignored
  EXPECT_EQ(clock.NowNs(), 150);
  clock.AdvanceTo(1000);
  EXPECT_EQ(clock.NowNs(), 1000);
}

TEST(SteadyClockTest, IsMonotonic) {
  const Clock* c = SteadyClock::Get();
  int64_t a = c->NowNs();
  int64_t b = c->NowNs();
  EXPECT_LE(a, b);
}

}  // namespace
}  // namespace orrery
