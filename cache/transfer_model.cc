#include "cache/transfer_model.h"

#include <algorithm>
#include <cmath>

namespace orrery {

TransferModel::TransferModel(const Options& options) : options_(options) {
  options_.latency_ns = std::max<int64_t>(options_.latency_ns, 0);
  if (!(options_.ewma_alpha > 0 && options_.ewma_alpha <= 1)) options_.ewma_alpha = 0.25;
  ns_per_byte_ = 1e9 / std::max(options_.initial_bytes_per_sec, 1.0);
}

int64_t TransferModel::PredictNs(int64_t bytes) const {
  // Clamped so that absurd inputs cannot overflow int64 (1e18 ns is 31 years).
  const double ns = std::min(std::ceil(static_cast<double>(std::max<int64_t>(bytes, 0)) * ns_per_byte_), 1e18);
  return options_.latency_ns + static_cast<int64_t>(ns);
}

void TransferModel::Observe(int64_t bytes, int64_t measured_ns) {
  ++samples_;
  const int64_t transfer_ns = measured_ns - options_.latency_ns;
  if (bytes <= 0 || transfer_ns <= 0) return;
  const double sample = static_cast<double>(transfer_ns) / static_cast<double>(bytes);
  // The first real sample replaces the configured guess outright.
  ns_per_byte_ = learned_ ? (1 - options_.ewma_alpha) * ns_per_byte_ + options_.ewma_alpha * sample
                          : sample;
  learned_ = true;
}

}  // namespace orrery
