#include "api/miss_causes.h"

#include <gtest/gtest.h>

namespace orrery {
namespace {

constexpr int64_t kTol = 1'000'000;

LoadTrace Trace(Residency at_admission, int64_t predicted_ready, Residency found, int64_t room_wait, int64_t ready) {
  LoadTrace t;
  t.admitted_ns = 0;
  t.at_admission = Readiness{at_admission, predicted_ready};
  t.at_acquire = found;
  t.room_wait_ns = room_wait;
  t.ready_ns = ready;
  return t;
}

TEST(MissCausesTest, FirstCauseThatHoldsInOrder) {
  // Resident at admission, absent when acquired: evicted in between (even if
  // it also waited for room).
  EXPECT_EQ(ClassifyMiss(Trace(Residency::kResident, 0, Residency::kAbsent, 5 * kTol, 9 * kTol), kTol),
            MissCause::kEvictedAfterAdmission);
  EXPECT_EQ(ClassifyMiss(Trace(Residency::kResident, 0, Residency::kMoving, 0, 9 * kTol), kTol),
            MissCause::kEvictedAfterAdmission);
  // Waited for room longer than the tolerance.
  EXPECT_EQ(ClassifyMiss(Trace(Residency::kAbsent, 50 * kTol, Residency::kAbsent, 2 * kTol, 40 * kTol), kTol),
            MissCause::kRoomWait);
  // Its load ended more than the tolerance after admission's prediction.
  EXPECT_EQ(ClassifyMiss(Trace(Residency::kAbsent, 50 * kTol, Residency::kAbsent, 0, 52 * kTol), kTol),
            MissCause::kLoadLate);
  EXPECT_EQ(ClassifyMiss(Trace(Residency::kMoving, 10 * kTol, Residency::kMoving, 0, 30 * kTol), kTol),
            MissCause::kLoadLate);
  // Loaded within the tolerance: the queue or lane afterwards.
  EXPECT_EQ(ClassifyMiss(Trace(Residency::kAbsent, 50 * kTol, Residency::kAbsent, 0, 50 * kTol + kTol / 2), kTol),
            MissCause::kAfterLoad);
  // Resident throughout.
  EXPECT_EQ(ClassifyMiss(Trace(Residency::kResident, 0, Residency::kResident, 0, 10), kTol), MissCause::kLane);
  EXPECT_FALSE(Trace(Residency::kResident, 0, Residency::kResident, 0, 10).waited_for_load());
  EXPECT_TRUE(Trace(Residency::kResident, 0, Residency::kAbsent, 0, 10).waited_for_load());
  EXPECT_TRUE(Trace(Residency::kMoving, 5, Residency::kResident, 0, 10).waited_for_load());
}

TEST(MissCausesTest, CountersAreKeptPerStateHowAndCause) {
  MissCounters c;
  c.Count(Residency::kAbsent, MissHow::kRejectedLate, MissCause::kLoadLate);
  c.Count(Residency::kAbsent, MissHow::kRejectedLate, MissCause::kLoadLate);
  c.Count(Residency::kResident, MissHow::kDropped, MissCause::kLane);
  EXPECT_EQ(c.Get(Residency::kAbsent, MissHow::kRejectedLate, MissCause::kLoadLate), 2u);
  EXPECT_EQ(c.Get(Residency::kResident, MissHow::kDropped, MissCause::kLane), 1u);
  EXPECT_EQ(c.Get(Residency::kMoving, MissHow::kRejectedLate, MissCause::kLoadLate), 0u);
  EXPECT_EQ(c.Get(Residency::kAbsent, MissHow::kEndedLate, MissCause::kLoadLate), 0u);
  EXPECT_EQ(MissCauseName(MissCause::kLoadLate), "load_late");
  EXPECT_EQ(MissHowName(MissHow::kRejectedLate), "rejected_after_load");
}

}  // namespace
}  // namespace orrery
