#include "cache/idle_histogram.h"

#include <algorithm>
#include <cmath>

namespace orrery {

int IdleHistogram::BucketOf(int64_t gap_ns) {
  if (gap_ns < kBaseNs) return 0;
  const double octaves = std::log2(static_cast<double>(gap_ns) / static_cast<double>(kBaseNs));
  const int b = static_cast<int>(std::floor(octaves * kBucketsPerOctave));
  return std::clamp(b, 0, kBuckets - 1);
}

int64_t IdleHistogram::Lower(int b) {
  if (b <= 0) return 0;
  return static_cast<int64_t>(static_cast<double>(kBaseNs) *
                              std::exp2(static_cast<double>(b) / kBucketsPerOctave));
}

int64_t IdleHistogram::Upper(int b) {
  if (b >= kBuckets - 1) return INT64_MAX;
  return static_cast<int64_t>(static_cast<double>(kBaseNs) *
                              std::exp2(static_cast<double>(b + 1) / kBucketsPerOctave));
}

void IdleHistogram::Add(int64_t gap_ns, double max_total) {
  if (total_ >= max_total) {
    for (double& c : counts_) c /= 2;
    total_ /= 2;
  }
  counts_[static_cast<size_t>(BucketOf(std::max<int64_t>(gap_ns, 0)))] += 1;
  total_ += 1;
  samples_ += 1;
}

KeepAliveWindows IdleHistogram::Windows(const KeepAliveOptions& options) const {
  KeepAliveWindows w;
  if (samples_ < options.min_samples || total_ <= 0) return w;
  w.valid = true;
  // The prewarm window takes the lower bound of its bucket (reload early
  // rather than late); the keep-alive window the upper bound (keep a little
  // longer rather than miss).
  const double low = options.prewarm_percentile * total_;
  const double high = options.keepalive_percentile * total_;
  double cum = 0;
  bool low_set = false;
  for (int b = 0; b < kBuckets; ++b) {
    cum += counts_[static_cast<size_t>(b)];
    if (!low_set && cum >= low && counts_[static_cast<size_t>(b)] > 0) {
      w.prewarm_ns = Lower(b);
      low_set = true;
    }
    if (cum >= high && counts_[static_cast<size_t>(b)] > 0) {
      w.keepalive_ns = Upper(b);
      break;
    }
  }
  if (w.keepalive_ns == 0) w.keepalive_ns = INT64_MAX;
  w.predictable = samples_ >= options.min_predictable_samples && w.keepalive_ns != INT64_MAX &&
                  static_cast<double>(w.prewarm_ns) >=
                      options.min_predictability * static_cast<double>(w.keepalive_ns);
  return w;
}

}  // namespace orrery
