// Inter-arrival times of one model and the keep-alive / pre-warm windows
// derived from them, after INFless (and Shahrad et al.'s hybrid histogram):
// after a request at time t, the next one is expected in
//   [t + prewarm window, t + keep-alive window],
// the prewarm window being a low percentile (default 5th) and the keep-alive
// window a high one (default 99th) of the observed gaps. A model expected
// soon is kept; one not expected for longer than a reload can be unloaded and
// pre-warmed (reloaded) just before its window opens.
//
// Buckets are log-spaced, 4 per octave from 1 ms (about 19% wide) up to
// 2^25 ms (~9 h); longer gaps land in an overflow bucket. Counts age: when
// they reach a maximum (Add's max_total) all are halved, so the windows follow a change of
// pattern. Not thread-safe; Add O(1), Windows O(buckets).
#pragma once

#include <array>
#include <cstdint>

namespace orrery {

struct KeepAliveOptions {
  double prewarm_percentile = 0.05;
  double keepalive_percentile = 0.99;
  int min_samples = 4;        // fewer gaps than this: no windows (plain cost eviction)
  // A model is "predictable" (periodic-like) when prewarm >= this x keep-alive:
  // only then is it unloaded before its window and pre-warmed. A Poisson-like
  // model (p5 / p99 of exponential gaps ~ 0.01) is only kept until its
  // keep-alive window closes, as in Shahrad et al.'s fallback for
  // unrepresentative histograms.
  double min_predictability = 0.25;
  // ... and only with at least this many gaps: a few exponential (Poisson)
  // gaps often look narrow by chance (min / max of 4 gaps passes the 0.25
  // test ~15% of the time, of 8 ~0.8%, of 12 ~0.02%), and a model wrongly
  // called predictable is worth nothing before its "window" and unloaded.
  int min_predictable_samples = 12;
  // A model that is not predictable is not expired before it has been idle
  // this long, however short its keep-alive window: at a high request rate
  // the 99th-percentile gap is tens of milliseconds, and outliving it says
  // little about the next request (exponential gaps have no memory), while
  // expiring costs that request a reload. Memory needed by others is freed
  // by eviction, which does not wait for this.
  int64_t min_idle_ns = 1'000'000'000;
};

struct KeepAliveWindows {
  bool valid = false;       // enough samples to predict
  int64_t prewarm_ns = 0;   // next request not expected before last + prewarm_ns
  int64_t keepalive_ns = 0; // ... nor after last + keepalive_ns (INT64_MAX: unbounded)
  bool predictable = false; // narrow window: unload before it and pre-warm
};

class IdleHistogram {
 public:
  static constexpr int kBucketsPerOctave = 4;
  static constexpr int kOctaves = 25;
  static constexpr int kBuckets = kBucketsPerOctave * kOctaves + 1;  // + overflow
  static constexpr int64_t kBaseNs = 1'000'000;                      // 1 ms

  // Records one gap; halves every count first when the total has reached
  // `max_total`.
  void Add(int64_t gap_ns, double max_total = 256);
  double total() const { return total_; }
  KeepAliveWindows Windows(const KeepAliveOptions& options) const;

  // Bucket bounds, exposed for tests: bucket b holds gaps in [Lower(b), Upper(b)).
  static int BucketOf(int64_t gap_ns);
  static int64_t Lower(int b);
  static int64_t Upper(int b);

 private:
  std::array<double, kBuckets> counts_{};
  double total_ = 0;
  double samples_ = 0;  // not aged: decides `valid`
};

}  // namespace orrery
