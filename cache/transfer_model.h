// Predicted duration of moving bytes between tiers (disk -> host RAM, host ->
// device): latency + bytes / bandwidth, with the bandwidth learned from an
// exponentially weighted moving average of measured transfers' time per byte.
//
// Time per byte, not bytes per time: the average of bandwidths overstates the
// bandwidth when transfers vary (one at 1 GB/s and one at 0.33 GB/s average
// 0.67 GB/s, while the two took as long as two at 0.5 GB/s), so a queue of
// loads predicted with it ended ~25% later than predicted in the many-models
// scenario and admission let in requests that then missed.
// A sample's bandwidth is bytes / (measured - latency); samples no longer than
// the latency carry no bandwidth information and only count. The bandwidth is
// per transfer: with k transfers in flight it converges to what each one gets,
// which is what a prediction for one more transfer needs. Not thread-safe
// (the owning cache locks); O(1).
#pragma once

#include <cstdint>

namespace orrery {

class TransferModel {
 public:
  struct Options {
    double initial_bytes_per_sec = 1e9;  // used until the first sample
    int64_t latency_ns = 100'000;        // fixed per-transfer cost
    double ewma_alpha = 0.25;            // weight of the newest sample, (0, 1]
  };

  explicit TransferModel(const Options& options);

  int64_t PredictNs(int64_t bytes) const;
  void Observe(int64_t bytes, int64_t measured_ns);

  double bytes_per_sec() const { return 1e9 / ns_per_byte_; }
  int64_t latency_ns() const { return options_.latency_ns; }
  uint64_t samples() const { return samples_; }

 private:
  Options options_;
  double ns_per_byte_;
  uint64_t samples_ = 0;
  bool learned_ = false;
};

}  // namespace orrery
