#include "scheduler/recent_speed.h"

#include <algorithm>

namespace orrery {

void RecentSpeed::Add(int64_t end_ns, int64_t measured_ns, int64_t predicted_ns) {
  if (!enabled() || predicted_ns <= 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  measured_ns = std::max<int64_t>(measured_ns, 0);
  steps_.push_back(Step{end_ns, measured_ns, predicted_ns});
  measured_sum_ += measured_ns;
  predicted_sum_ += predicted_ns;
  ExpireLocked(end_ns);
  last_.store(FactorLocked(), std::memory_order_relaxed);
  if (end_ns > newest_end_ns_.load(std::memory_order_relaxed)) {
    newest_end_ns_.store(end_ns, std::memory_order_relaxed);
  }
}

double RecentSpeed::Factor(int64_t now_ns) {
  if (!enabled()) return 1.0;
  std::lock_guard<std::mutex> lock(mu_);
  ExpireLocked(now_ns);
  const double f = FactorLocked();
  last_.store(f, std::memory_order_relaxed);
  return f;
}

void RecentSpeed::ExpireLocked(int64_t now_ns) {
  while (!steps_.empty() && steps_.front().end_ns <= now_ns - window_ns_) {
    measured_sum_ -= steps_.front().measured_ns;
    predicted_sum_ -= steps_.front().predicted_ns;
    steps_.pop_front();
  }
}

double RecentSpeed::FactorLocked() const {
  if (predicted_sum_ <= 0 || predicted_sum_ < min_predicted_ns_) return 1.0;
  const double f = static_cast<double>(measured_sum_) / static_cast<double>(predicted_sum_);
  return std::clamp(f, 1.0, std::max(max_factor_, 1.0));
}

}  // namespace orrery
