// How much slower than predicted the lanes have run in the last few
// milliseconds: measured / predicted lane time summed over the steps that
// ended within a short window. Admission plans with it (FairScheduler,
// recent_speed_window_ns) so that a host stall spell -- this VM's CPU is
// sometimes taken away and every run goes 1.5-2x slower for tens of ms --
// turns tight-deadline requests into rejections at admission while it lasts,
// instead of admitting them on the long-run estimates and missing.
//
// The cost model's SlowdownBound is a high quantile over a model's last
// 512 runs (seconds of history, one model): it covers run-to-run noise but
// says nothing about whether the machine is slow right now, and a spell
// onset is seen only after several of that model's own runs. This sees
// every lane step of every model as it ends.
//
// Thread-safe (its own mutex: lanes call Add between steps without the
// scheduler's lock). Add and Factor are O(1) amortised; Factor expires old
// samples.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <mutex>

namespace orrery {

class RecentSpeed {
 public:
  // window_ns <= 0: off (Factor is always 1). The factor is trusted only
  // once the window holds at least min_predicted_ns of predicted work, so
  // that one descheduled step does not reject everything; it stays within
  // [1, max_factor].
  RecentSpeed(int64_t window_ns, int64_t min_predicted_ns, double max_factor)
      : window_ns_(window_ns), min_predicted_ns_(min_predicted_ns), max_factor_(max_factor) {}

  bool enabled() const { return window_ns_ > 0; }
  // A lane step that ended at `end_ns` took `measured_ns` against
  // `predicted_ns` (the run's prediction / its steps). Ignored when off or
  // predicted_ns <= 0 (no prediction).
  void Add(int64_t end_ns, int64_t measured_ns, int64_t predicted_ns);
  // Sum measured / sum predicted of the steps that ended in (now - window,
  // now], within [1, max_factor]; 1 when off or too little was predicted.
  double Factor(int64_t now_ns);
  // Factor as of the last Add or Factor call (no lock), or 1 once every
  // step seen has left the window by `now_ns`: for the lanes' check between
  // steps. Why the expiry: a spell's factor must not outlive the spell on
  // lanes that went idle (nothing calls Add then).
  double last(int64_t now_ns) const {
    if (newest_end_ns_.load(std::memory_order_relaxed) <= now_ns - window_ns_) return 1.0;
    return last_.load(std::memory_order_relaxed);
  }

 private:
  struct Step {
    int64_t end_ns;
    int64_t measured_ns;
    int64_t predicted_ns;
  };
  void ExpireLocked(int64_t now_ns);
  double FactorLocked() const;

  const int64_t window_ns_;
  const int64_t min_predicted_ns_;
  const double max_factor_;
  std::mutex mu_;
  std::deque<Step> steps_;  // newest last
  int64_t measured_sum_ = 0;
  int64_t predicted_sum_ = 0;
  std::atomic<double> last_{1.0};
  std::atomic<int64_t> newest_end_ns_{INT64_MIN};  // end of the newest step added
};

}  // namespace orrery
