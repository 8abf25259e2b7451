#include "scheduler/lane_spin.h"

#include <algorithm>

namespace orrery {
namespace {

// A gap longer than this counts as this long, so that one idle minute does
// not keep the lanes from spinning for the next hundred arrivals.
constexpr double kMaxGapNs = 100'000'000;

}  // namespace

void LaneSpin::OnArrival(int64_t now_ns) {
  if (last_arrival_ns_ >= 0) {
    const double gap = std::min(static_cast<double>(std::max<int64_t>(now_ns - last_arrival_ns_, 0)), kMaxGapNs);
    mean_gap_ns_ = has_gap_ ? mean_gap_ns_ + options_.alpha * (gap - mean_gap_ns_) : gap;
    has_gap_ = true;
  }
  last_arrival_ns_ = now_ns;
}

int64_t LaneSpin::BudgetNs() const {
  if (options_.max_spin_ns <= 0 || !has_gap_) return 0;
  const double limit = options_.max_gap_factor * static_cast<double>(options_.max_spin_ns);
  return mean_gap_ns_ <= limit ? options_.max_spin_ns : 0;
}

}  // namespace orrery
