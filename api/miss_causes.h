// Why an admitted request missed its deadline (issue 7, the many-models
// scenario): a request that admission accepts must finish in time, so each
// one that does not is counted by how it missed and by the first cause that
// explains it, from what admission predicted about its model's weights and
// what then happened to them. Served as
// orrery_admitted_misses_total{state, how, cause} (server_metrics.cc).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <string_view>

#include "cache/tier_cache.h"

namespace orrery {

// How an admitted request missed.
enum class MissHow {
  kAcquireFailed,    // the host tier gave no weights (room never freed, load failed)
  kRejectedLate,     // the scheduler's admission refused it after waiting for its load
  kDropped,          // queued, dropped before running
  kEndedLate,        // ran, but ended after its deadline
};
inline constexpr int kMissHowCount = 4;

// The first of these that holds, in this order.
enum class MissCause {
  kEvictedAfterAdmission,  // resident at admission, gone (or reloading) when acquired
  kRoomWait,               // waited for room in the host tier (pinned / loading models held it)
  kLoadLate,               // its load ended later than admission predicted
  kAfterLoad,              // loaded as predicted; the queue or lane then ran long
  kLane,                   // resident throughout; the queue or lane ran long
};
inline constexpr int kMissCauseCount = 5;

// What one request saw of its model's weights, on the host tier's clock.
struct LoadTrace {
  int64_t admitted_ns = 0;                          // when admission predicted
  Readiness at_admission;                           // state and predicted ready at admission
  Residency at_acquire = Residency::kResident;      // what Acquire found
  int64_t room_wait_ns = 0;                         // Acquire's wait for room
  int64_t ready_ns = 0;                             // measured: when Acquire returned
  // Not resident at admission, or no longer when acquired: it waited for a load.
  bool waited_for_load() const {
    return at_admission.state != Residency::kResident || at_acquire != Residency::kResident;
  }
};

// `tolerance_ns`: lateness below this is noise, not a cause.
MissCause ClassifyMiss(const LoadTrace& trace, int64_t tolerance_ns);

std::string_view MissHowName(MissHow how);
std::string_view MissCauseName(MissCause cause);

// Counters by admission state x how x cause. Thread-safe (relaxed atomics).
class MissCounters {
 public:
  void Count(Residency at_admission, MissHow how, MissCause cause);
  uint64_t Get(Residency at_admission, MissHow how, MissCause cause) const;

 private:
  static constexpr int kStates = 3;
  std::array<std::atomic<uint64_t>, kStates * kMissHowCount * kMissCauseCount> counts_{};
};

}  // namespace orrery
