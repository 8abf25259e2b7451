// Recent rate of events: an exponentially decayed sum of their amounts,
// rate(t) = sum_i a_i exp(-(t - t_i) / tau) / tau (a model's requests, a = 1;
// a tenant's lane time, a = ns). O(1), no history; not thread-safe (the owner
// locks).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace orrery {

class RateEstimator {
 public:
  explicit RateEstimator(int64_t tau_ns) : tau_ns_(tau_ns > 0 ? tau_ns : 1) {}

  void Arrive(int64_t now_ns) { Add(now_ns, 1.0); }
  void Add(int64_t now_ns, double amount) {
    weight_ = Decayed(now_ns) + amount;
    at_ns_ = std::max(at_ns_, now_ns);
  }
  // Amount (requests) per second around `now_ns`.
  double PerSec(int64_t now_ns) const { return PerNs(now_ns) * 1e9; }
  double PerNs(int64_t now_ns) const { return Decayed(now_ns) / static_cast<double>(tau_ns_); }

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
