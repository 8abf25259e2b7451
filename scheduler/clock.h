// Time source for the scheduler: nanoseconds on a monotonic clock. The
// scheduler reads time only through a Clock so that queueing, fairness and
// admission can be tested deterministically with a FakeClock.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace orrery {

class Clock {
 public:
  virtual ~Clock() = default;
  // Nanoseconds since an arbitrary, fixed epoch; never decreases. Cheap
  // (one clock_gettime for the real clock) and thread-safe.
  virtual int64_t NowNs() const = 0;
};

// std::chrono::steady_clock.
class SteadyClock final : public Clock {
 public:
  int64_t NowNs() const override {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  // A process-wide instance (stateless).
  static const Clock* Get() {
    static const SteadyClock clock;
    return &clock;
  }
};

// Moves only when told to. Thread-safe.
class FakeClock final : public Clock {
 public:
  explicit FakeClock(int64_t start_ns = 1'000'000'000) : now_(start_ns) {}
  int64_t NowNs() const override { return now_.load(std::memory_order_acquire); }
  void AdvanceNs(int64_t ns) { now_.fetch_add(ns, std::memory_order_acq_rel); }

 private:
  std::atomic<int64_t> now_;
};

}  // namespace orrery
