#include "base/windowed_quantile.h"

#include <algorithm>
#include <vector>

namespace orrery {

void WindowedQuantile::Add(int64_t at_ns, double value) {
  samples_.emplace_back(at_ns, value);
  while (samples_.size() > window_) samples_.pop_front();
  if (++added_ % 16 != 0 && added_ > 16) return;
  Recompute();
}

double WindowedQuantile::Value(int64_t now_ns) {
  bool expired = false;
  while (max_age_ns_ > 0 && !samples_.empty() && samples_.front().first < now_ns - max_age_ns_) {
    samples_.pop_front();
    expired = true;
  }
  if (expired) Recompute();
  return value_;
}

void WindowedQuantile::Recompute() {
  if (samples_.empty()) {
    value_ = 0;
    return;
  }
  std::vector<double> sorted;
  sorted.reserve(samples_.size());
  for (const auto& [at, v] : samples_) sorted.push_back(v);
  const size_t k = std::min(sorted.size() - 1, static_cast<size_t>(quantile_ * static_cast<double>(sorted.size())));
  std::nth_element(sorted.begin(), sorted.begin() + static_cast<std::ptrdiff_t>(k), sorted.end());
  value_ = sorted[k];
}

}  // namespace orrery
