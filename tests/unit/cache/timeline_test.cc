#include "cache/timeline.h"

#include <gtest/gtest.h>

#include "cache/idle_histogram.h"
#include "cache/transfer_model.h"

namespace orrery {
namespace {

TEST(ResourceTimelineTest, OneSlotQueuesWork) {
  ResourceTimeline link(1);
  Interval a, b;
  uint64_t ida = link.Reserve(100, 50, &a);
  uint64_t idb = link.Reserve(100, 30, &b);
  EXPECT_EQ(a.start_ns, 100);
  EXPECT_EQ(a.end_ns, 150);
  EXPECT_EQ(b.start_ns, 150);  // queued behind a
  EXPECT_EQ(b.end_ns, 180);
  EXPECT_EQ(link.FreeAtNs(), 180);
  EXPECT_EQ(link.pending(), 2u);
  // a finishes late: b moves.
  EXPECT_TRUE(link.Finish(ida, 170));
  EXPECT_EQ(link.Get(idb)->start_ns, 170);
  EXPECT_EQ(link.Get(idb)->end_ns, 200);
  EXPECT_FALSE(link.Get(ida).has_value());
  EXPECT_FALSE(link.Finish(ida, 170));
}

TEST(ResourceTimelineTest, SlotsRunConcurrentlyAndEarliestIsRespected) {
  ResourceTimeline loader(2);
  Interval a, b, c;
  loader.Reserve(0, 100, &a);
  loader.Reserve(0, 40, &b);
  loader.Reserve(0, 10, &c);
  EXPECT_EQ(a.start_ns, 0);
  EXPECT_EQ(b.start_ns, 0);
  EXPECT_EQ(c.start_ns, 40);  // the slot that frees first
  Interval d = loader.Predict(500, 10);
  EXPECT_EQ(d.start_ns, 500);
  EXPECT_EQ(loader.pending(), 3u);  // Predict reserves nothing
}

TEST(ResourceTimelineTest, CancelMovesLaterWorkUpAndBusyCountsOverlap) {
  ResourceTimeline link(1);
  Interval a, b;
  uint64_t ida = link.Reserve(0, 100, &a);
  uint64_t idb = link.Reserve(0, 100, &b);
  EXPECT_TRUE(link.Cancel(ida));
  EXPECT_EQ(link.Get(idb)->start_ns, 0);
  EXPECT_TRUE(link.Finish(idb, 80));
  EXPECT_EQ(link.BusyNs(0, 1000), 80);
  EXPECT_EQ(link.BusyNs(40, 60), 20);
  link.Prune(100);
  EXPECT_EQ(link.BusyNs(0, 1000), 0);
}

TEST(TransferModelTest, PredictsLatencyPlusBytesOverBandwidthAndLearns) {
  TransferModel m({.initial_bytes_per_sec = 1e9, .latency_ns = 100, .ewma_alpha = 0.5});
  EXPECT_EQ(m.PredictNs(1000), 1100);  // 1 byte/ns
  m.Observe(1000, 100 + 2000);         // measured 0.5 byte/ns: the first sample replaces the guess
  EXPECT_DOUBLE_EQ(m.bytes_per_sec(), 0.5e9);
  EXPECT_EQ(m.PredictNs(1000), 2100);
  m.Observe(1000, 100 + 1000);  // 1 ns/byte, EWMA of 2 and 1 ns/byte with 0.5 -> 1.5 ns/byte
  EXPECT_DOUBLE_EQ(m.bytes_per_sec(), 1e9 / 1.5);
  EXPECT_EQ(m.PredictNs(1000), 1600);
  m.Observe(1000, 50);  // shorter than the latency: no bandwidth information
  EXPECT_DOUBLE_EQ(m.bytes_per_sec(), 1e9 / 1.5);
  EXPECT_EQ(m.samples(), 3u);
}

// Transfers alternating fast and slow: the prediction converges on their mean
// duration (what a queue of them takes), not on the duration at their mean
// bandwidth, which is shorter.
TEST(TransferModelTest, AlternatingTransfersArePredictedAtTheirMeanDuration) {
  TransferModel m({.initial_bytes_per_sec = 1e9, .latency_ns = 0, .ewma_alpha = 0.01});
  for (int i = 0; i < 4000; ++i) m.Observe(1000, i % 2 == 0 ? 1000 : 3000);  // 1 and 3 ns/byte
  EXPECT_NEAR(static_cast<double>(m.PredictNs(1000)), 2000.0, 20.0);  // mean bandwidth would say 1500
}

TEST(IdleHistogramTest, WindowsArePercentilesOfGaps) {
  IdleHistogram h;
  KeepAliveOptions o;
  EXPECT_FALSE(h.Windows(o).valid);
  for (int i = 0; i < 99; ++i) h.Add(1000 * 1'000'000LL);  // 1 s
  h.Add(60'000 * 1'000'000LL);                            // one 60 s gap
  KeepAliveWindows w = h.Windows(o);
  ASSERT_TRUE(w.valid);
  // Both percentiles fall in the 1 s bucket: prewarm at its lower bound,
  // keep-alive to its upper bound (buckets are 2^(1/4) wide).
  EXPECT_LE(w.prewarm_ns, 1000 * 1'000'000LL);
  EXPECT_GT(w.prewarm_ns, 800 * 1'000'000LL);
  EXPECT_GT(w.keepalive_ns, 1000 * 1'000'000LL);
  EXPECT_LT(w.keepalive_ns, 1300 * 1'000'000LL);
  // Bucket bounds are contiguous.
  for (int b = 0; b + 1 < IdleHistogram::kBuckets; ++b) {
    EXPECT_EQ(IdleHistogram::Upper(b), IdleHistogram::Lower(b + 1));
  }
  EXPECT_EQ(IdleHistogram::BucketOf(5), 0);
  EXPECT_EQ(IdleHistogram::BucketOf(INT64_MAX), IdleHistogram::kBuckets - 1);
}

TEST(IdleHistogramTest, AFewNarrowGapsAreNotYetPredictable) {
  // Four similar gaps happen by chance with Poisson arrivals: valid windows,
  // but not predictable until min_predictable_samples gaps agree.
  IdleHistogram h;
  KeepAliveOptions o;
  for (int i = 0; i < 4; ++i) h.Add((100 + 5 * i) * 1'000'000LL);
  KeepAliveWindows w = h.Windows(o);
  ASSERT_TRUE(w.valid);
  EXPECT_FALSE(w.predictable);
  for (int i = 4; i < o.min_predictable_samples; ++i) h.Add((100 + 5 * (i % 4)) * 1'000'000LL);
  EXPECT_TRUE(h.Windows(o).predictable);
}

TEST(IdleHistogramTest, AgingFollowsAChangeOfPattern) {
  IdleHistogram h;
  KeepAliveOptions o;
  for (int i = 0; i < 256; ++i) h.Add(10 * 1'000'000LL, /*max_total=*/64);  // 10 ms
  for (int i = 0; i < 256; ++i) h.Add(5000 * 1'000'000LL, /*max_total=*/64);  // then 5 s
  KeepAliveWindows w = h.Windows(o);
  ASSERT_TRUE(w.valid);
  EXPECT_GT(w.prewarm_ns, 4000 * 1'000'000LL);  // the old 10 ms gaps have aged out
  EXPECT_LE(h.total(), 64.0);
}

}  // namespace
}  // namespace orrery
