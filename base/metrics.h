// Process metrics in the Prometheus data model, rendered in its text
// exposition format (version 0.0.4) for the metrics endpoint.
//
// A MetricFamily has a name, help text, a type and label names; each
// distinct tuple of label values is one series. Updating a series is a few
// atomic operations once the caller holds it: look a series up once (WithLabels
// takes a lock and may allocate) and keep the reference, which stays valid for
// the registry's lifetime. Render() takes each family's lock briefly.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace orrery::metrics {

class Counter {
 public:
  void Increment(double by = 1.0);
  // For counters kept elsewhere (e.g. the scheduler's totals), copied in at
  // scrape time: raises the value to `total`, never lowers it.
  void Mirror(double total);
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

class Gauge {
 public:
  void Set(double v) { value_.store(v, std::memory_order_relaxed); }
  void Add(double by);
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

// Cumulative buckets with fixed upper bounds (ascending; +Inf is implicit).
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void Observe(double v);
  uint64_t count() const { return count_.load(std::memory_order_relaxed); }
  double sum() const { return sum_.load(std::memory_order_relaxed); }
  const std::vector<double>& bounds() const { return bounds_; }
  // Observations <= bounds()[i] (cumulative), i < bounds().size().
  uint64_t cumulative(size_t i) const;

 private:
  std::vector<double> bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> buckets_;  // per bound, not cumulative
  std::atomic<uint64_t> count_{0};
  std::atomic<double> sum_{0.0};
};

enum class MetricType { kCounter, kGauge, kHistogram };

// Latency buckets in seconds, 100 µs to 10 s.
std::vector<double> DefaultLatencyBuckets();

class MetricFamily {
 public:
  MetricFamily(std::string name, std::string help, MetricType type,
               std::vector<std::string> label_names, std::vector<double> bounds = {});

  // The series for these label values (one per label name; missing values
  // are empty strings, extra ones are ignored). Created on first use.
  Counter& CounterWith(const std::vector<std::string>& label_values);
  Gauge& GaugeWith(const std::vector<std::string>& label_values);
  Histogram& HistogramWith(const std::vector<std::string>& label_values);

  const std::string& name() const { return name_; }
  MetricType type() const { return type_; }
  void Render(std::string* out) const;

 private:
  struct Series {
    Counter counter;
    Gauge gauge;
    std::unique_ptr<Histogram> histogram;
  };
  Series& SeriesWith(const std::vector<std::string>& label_values);
  std::string LabelText(const std::vector<std::string>& values, const std::string& extra) const;

  const std::string name_, help_;
  const MetricType type_;
  const std::vector<std::string> label_names_;
  const std::vector<double> bounds_;
  mutable std::mutex mu_;
  std::map<std::vector<std::string>, std::unique_ptr<Series>> series_;
};

class Registry {
 public:
  // Returns the family registered under `name`, creating it on first use
  // (later calls with the same name return the first one as is).
  MetricFamily& Family(const std::string& name, const std::string& help, MetricType type,
                       std::vector<std::string> label_names = {},
                       std::vector<double> bounds = {});
  // Every family, sorted by name, in the text exposition format.
  std::string Render() const;

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::unique_ptr<MetricFamily>> families_;
};

// Escapes a label value for the text format (backslash, quote, newline).
std::string EscapeLabelValue(const std::string& v);

}  // namespace orrery::metrics
