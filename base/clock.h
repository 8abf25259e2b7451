// Time for the scheduler, the caches and placement, injectable so that
// every queueing, fairness, admission and policy decision is deterministic
// under test.
//
// Times are int64 nanoseconds on a monotonic axis whose origin is the
// clock's own (only differences and comparisons mean anything). SteadyClock
// reads std::chrono::steady_clock; FakeClock only moves when a test moves it,
// so tests never sleep. Both are thread-safe and cost one atomic load (or a
// clock_gettime) per NowNs().
#pragma once

#include <atomic>
#include <cstdint>

namespace orrery {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual int64_t NowNs() const = 0;
};

class SteadyClock final : public Clock {
 public:
  int64_t NowNs() const override;
  // A process-wide instance (never destroyed).
  static const SteadyClock* Get();
};

class FakeClock final : public Clock {
 public:
  // The default start is 1 s, so that 0 can mean "no time" (e.g. no deadline).
  explicit FakeClock(int64_t start_ns = 1'000'000'000) : now_ns_(start_ns) {}
  int64_t NowNs() const override { return now_ns_.load(std::memory_order_acquire); }
  // Moves time forward by `ns` (>= 0; a negative step is ignored: time is monotonic).
  void AdvanceNs(int64_t ns);
  // Sets the time to max(now, t_ns).
  void AdvanceTo(int64_t t_ns);

 private:
  std::atomic<int64_t> now_ns_;
};

constexpr int64_t kNsPerUs = 1000;
constexpr int64_t kNsPerMs = 1000 * kNsPerUs;
constexpr int64_t kNsPerSec = 1000 * kNsPerMs;

}  // namespace orrery
