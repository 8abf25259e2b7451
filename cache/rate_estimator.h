// Recent request rate of one model: an exponentially decayed count of
// arrivals, rate(t) = sum_i exp(-(t - t_i) / tau) / tau. O(1), no history;
// not thread-safe (the owning cache locks).
#pragma once

#include <cmath>
#include <cstdint>

namespace orrery {

class RateEstimator {
 public:
  explicit RateEstimator(int64_t tau_ns) : tau_ns_(tau_ns > 0 ? tau_ns : 1) {}

  void Arrive(int64_t now_ns) {
    weight_ = Decayed(now_ns) + 1.0;
    at_ns_ = now_ns;
  }
  // Requests per second around `now_ns`.
  double PerSec(int64_t now_ns) const { return Decayed(now_ns) / static_cast<double>(tau_ns_) * 1e9; }

 private:
  double Decayed(int64_t now_ns) const {
    if (weight_ == 0) return 0;
    const double dt = static_cast<double>(now_ns > at_ns_ ? now_ns - at_ns_ : 0);
    return weight_ * std::exp(-dt / static_cast<double>(tau_ns_));
  }

  int64_t tau_ns_;
  double weight_ = 0;
  int64_t at_ns_ = 0;
};

}  // namespace orrery
