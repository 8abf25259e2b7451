// LaneSpin: how long an idle lane spins before it sleeps on the scheduler's
// condition variable.
//
// Waking a sleeping thread on another CPU costs a futex syscall on the
// submitting CPU and, on a VM, an IPI plus the halted vCPU's re-entry (on
// the 2-core bench VM ~7 us one way at the median, 11-33 us at p99:
// bench/wake_latency). A lane that spins a little after its queue
// empties takes the next request without either. Spinning burns its CPU,
// so it is only worth it on a CPU the lane has to itself (orreryd uses it
// only when lane CPUs are pinned and disjoint from the serving CPUs, and
// leaves it off by default: scenario 7's p50 did not improve) and
// only while requests arrive often: the lane spins `max_spin_ns` when the
// recent mean gap between arrivals is at most `max_gap_factor` x that,
// else not at all (an idle server's lanes sleep).
//
// Not thread-safe: the scheduler calls it under its lock. O(1).
#pragma once

#include <cstdint>

namespace orrery {

struct LaneSpinOptions {
  int64_t max_spin_ns = 0;  // 0 = never spin
  double max_gap_factor = 4;
  // Weight of the newest gap in the mean (an EWMA over ~1 / alpha arrivals).
  double alpha = 1.0 / 16;
};

class LaneSpin {
 public:
  explicit LaneSpin(LaneSpinOptions options = {}) : options_(options) {}

  // A request arrived at `now_ns` (any clock, monotonic).
  void OnArrival(int64_t now_ns);
  // How long an idle lane spins now: max_spin_ns or 0.
  int64_t BudgetNs() const;
  // The recent mean gap between arrivals; 0 until two have been seen.
  int64_t mean_gap_ns() const { return static_cast<int64_t>(mean_gap_ns_); }

 private:
  LaneSpinOptions options_;
  int64_t last_arrival_ns_ = -1;
  bool has_gap_ = false;
  double mean_gap_ns_ = 0;
};

}  // namespace orrery
