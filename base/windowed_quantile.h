// A high quantile of recent samples: the last `window` values, each kept at
// most `max_age_ns`. Admission plans with such margins (the time after the
// lane, how much longer than predicted queued waits turn out), so they must
// follow the machine as it is now, and forget a burst once it is over.
//
// Not thread-safe (the scheduler calls it under its lock). Add is O(1)
// amortised: the quantile is recomputed (O(window)) on each of the first 16
// adds and then every 16th; Value is O(1) unless samples expired, when it
// recomputes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <utility>

namespace orrery {

class WindowedQuantile {
 public:
  // quantile in [0, 1]; max_age_ns <= 0: samples never expire.
  WindowedQuantile(double quantile, size_t window, int64_t max_age_ns)
      : quantile_(quantile), window_(window == 0 ? 1 : window), max_age_ns_(max_age_ns) {}

  void Add(int64_t at_ns, double value);
  // The quantile of the samples no older than max_age_ns at `now_ns`; 0 when
  // there are none.
  double Value(int64_t now_ns);
  // The quantile as last computed (no expiry), for stats.
  double last() const { return value_; }
  // Samples held (after the last expiry).
  size_t size() const { return samples_.size(); }

 private:
  void Recompute();

  double quantile_;
  size_t window_;
  int64_t max_age_ns_;
  std::deque<std::pair<int64_t, double>> samples_;  // (when, value), newest last
  uint64_t added_ = 0;
  double value_ = 0;
};

}  // namespace orrery
