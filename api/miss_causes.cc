#include "api/miss_causes.h"

namespace orrery {

MissCause ClassifyMiss(const LoadTrace& trace, int64_t tolerance_ns) {
  if (trace.at_admission.state == Residency::kResident && trace.at_acquire != Residency::kResident) {
    return MissCause::kEvictedAfterAdmission;
  }
  if (trace.room_wait_ns > tolerance_ns) return MissCause::kRoomWait;
  if (trace.at_admission.state == Residency::kResident) return MissCause::kLane;
  if (trace.ready_ns > trace.at_admission.ready_ns + tolerance_ns) return MissCause::kLoadLate;
  return MissCause::kAfterLoad;
}

std::string_view MissHowName(MissHow how) {
  switch (how) {
    case MissHow::kAcquireFailed: return "acquire_failed";
    case MissHow::kRejectedLate: return "rejected_after_load";
    case MissHow::kDropped: return "dropped";
    case MissHow::kEndedLate: return "ended_late";
  }
  return "?";
}

std::string_view MissCauseName(MissCause cause) {
  switch (cause) {
    case MissCause::kEvictedAfterAdmission: return "evicted_after_admission";
    case MissCause::kRoomWait: return "room_wait";
    case MissCause::kLoadLate: return "load_late";
    case MissCause::kAfterLoad: return "after_load";
    case MissCause::kLane: return "lane";
  }
  return "?";
}

namespace {
size_t Index(Residency state, MissHow how, MissCause cause) {
  return (static_cast<size_t>(state) * kMissHowCount + static_cast<size_t>(how)) * kMissCauseCount +
         static_cast<size_t>(cause);
}
}  // namespace

void MissCounters::Count(Residency at_admission, MissHow how, MissCause cause) {
  counts_[Index(at_admission, how, cause)].fetch_add(1, std::memory_order_relaxed);
}

uint64_t MissCounters::Get(Residency at_admission, MissHow how, MissCause cause) const {
  return counts_[Index(at_admission, how, cause)].load(std::memory_order_relaxed);
}

}  // namespace orrery
