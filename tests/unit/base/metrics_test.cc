#include "base/metrics.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace orrery::metrics {
namespace {

TEST(MetricsTest, CountersAndGaugesRenderWithEscapedLabels) {
  Registry r;
  MetricFamily& req = r.Family("orrery_requests_total", "Requests.\nBy tenant.",
                               MetricType::kCounter, {"tenant", "model"});
  req.CounterWith({"acme", "m\"1"}).Increment();
  req.CounterWith({"acme", "m\"1"}).Increment(2);
  req.CounterWith({"acme", "m\"1"}).Increment(-5);  // ignored: counters only go up
  r.Family("orrery_queue_depth", "Queued requests.", MetricType::kGauge).GaugeWith({}).Set(3);
  const std::string text = r.Render();
  EXPECT_NE(text.find("# HELP orrery_requests_total Requests.\\nBy tenant.\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("# TYPE orrery_requests_total counter\n"), std::string::npos);
  EXPECT_NE(text.find("orrery_requests_total{tenant=\"acme\",model=\"m\\\"1\"} 3\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("orrery_queue_depth 3\n"), std::string::npos) << text;
  // Families render sorted by name.
  EXPECT_LT(text.find("orrery_queue_depth"), text.find("orrery_requests_total"));
}

TEST(MetricsTest, HistogramBucketsAreCumulative) {
  Registry r;
  Histogram& h = r.Family("lat_seconds", "Latency.", MetricType::kHistogram, {"t"}, {0.1, 1, 10})
                     .HistogramWith({"a"});
  for (double v : {0.05, 0.1, 0.5, 5.0, 50.0}) h.Observe(v);
  EXPECT_EQ(h.count(), 5u);
  EXPECT_DOUBLE_EQ(h.sum(), 55.65);
  const std::string text = r.Render();
  EXPECT_NE(text.find("lat_seconds_bucket{t=\"a\",le=\"0.10000000000000001\"} 2\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("lat_seconds_bucket{t=\"a\",le=\"1\"} 3\n"), std::string::npos) << text;
  EXPECT_NE(text.find("lat_seconds_bucket{t=\"a\",le=\"10\"} 4\n"), std::string::npos);
  EXPECT_NE(text.find("lat_seconds_bucket{t=\"a\",le=\"+Inf\"} 5\n"), std::string::npos);
  EXPECT_NE(text.find("lat_seconds_count{t=\"a\"} 5\n"), std::string::npos);
}

TEST(MetricsTest, ConcurrentIncrementsAreNotLost) {
  Registry r;
  MetricFamily& f = r.Family("c_total", "c", MetricType::kCounter, {"k"});
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&f] {
      Counter& c = f.CounterWith({"x"});
      for (int i = 0; i < 10000; ++i) c.Increment();
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_DOUBLE_EQ(f.CounterWith({"x"}).value(), 40000.0);
}

TEST(MetricsTest, SameNameReturnsTheSameFamily) {
  Registry r;
  MetricFamily& a = r.Family("x_total", "x", MetricType::kCounter);
  MetricFamily& b = r.Family("x_total", "other help", MetricType::kGauge);
  EXPECT_EQ(&a, &b);
  EXPECT_EQ(b.type(), MetricType::kCounter);
}

}  // namespace
}  // namespace orrery::metrics
