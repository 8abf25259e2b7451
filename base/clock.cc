#include "base/clock.h"

#include <chrono>

namespace orrery {

int64_t SteadyClock::NowNs() const {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

const SteadyClock* SteadyClock::Get() {
  static const SteadyClock clock;  // trivially destructible state: usable at exit
  return &clock;
}

void FakeClock::AdvanceNs(int64_t ns) {
  if (ns > 0) now_ns_.fetch_add(ns, std::memory_order_acq_rel);
}

void FakeClock::AdvanceTo(int64_t t_ns) {
  int64_t cur = now_ns_.load(std::memory_order_acquire);
  while (cur < t_ns && !now_ns_.compare_exchange_weak(cur, t_ns, std::memory_order_acq_rel)) {
  }
}

}  // namespace orrery
