#include "base/metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace orrery::metrics {
namespace {

void AtomicAdd(std::atomic<double>& a, double by) {
  double cur = a.load(std::memory_order_relaxed);
  while (!a.compare_exchange_weak(cur, cur + by, std::memory_order_relaxed)) {
  }
}

std::string FormatValue(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.17g", v);
  return buf;
}

const char* TypeName(MetricType t) {
  switch (t) {
    case MetricType::kCounter: return "counter";
    case MetricType::kGauge: return "gauge";
    case MetricType::kHistogram: return "histogram";
  }
  return "untyped";
}

std::string EscapeHelp(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

std::string EscapeLabelValue(const std::string& v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

void Counter::Increment(double by) {
  if (by > 0) AtomicAdd(value_, by);  // counters never go down
}

void Counter::Mirror(double total) {
  double cur = value_.load(std::memory_order_relaxed);
  while (total > cur && !value_.compare_exchange_weak(cur, total, std::memory_order_relaxed)) {
  }
}

void Gauge::Add(double by) { AtomicAdd(value_, by); }

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)) {
  std::sort(bounds_.begin(), bounds_.end());
  buckets_ = std::make_unique<std::atomic<uint64_t>[]>(bounds_.size());
  for (size_t i = 0; i < bounds_.size(); ++i) buckets_[i].store(0);
}

void Histogram::Observe(double v) {
  const auto it = std::lower_bound(bounds_.begin(), bounds_.end(), v);
  if (it != bounds_.end()) {
    buckets_[static_cast<size_t>(it - bounds_.begin())].fetch_add(1, std::memory_order_relaxed);
  }
  count_.fetch_add(1, std::memory_order_relaxed);
  AtomicAdd(sum_, v);
}

uint64_t Histogram::cumulative(size_t i) const {
  uint64_t n = 0;
  for (size_t b = 0; b <= i && b < bounds_.size(); ++b) {
    n += buckets_[b].load(std::memory_order_relaxed);
  }
  return n;
}

std::vector<double> DefaultLatencyBuckets() {
  return {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
          0.025,  0.05,    0.1,    0.25,  0.5,    1.0,   2.5, 5.0, 10.0};
}

MetricFamily::MetricFamily(std::string name, std::string help, MetricType type,
                           std::vector<std::string> label_names, std::vector<double> bounds)
    : name_(std::move(name)),
      help_(std::move(help)),
      type_(type),
      label_names_(std::move(label_names)),
      bounds_(bounds.empty() && type == MetricType::kHistogram ? DefaultLatencyBuckets()
                                                               : std::move(bounds)) {}

MetricFamily::Series& MetricFamily::SeriesWith(const std::vector<std::string>& label_values) {
  std::vector<std::string> key(label_names_.size());
  for (size_t i = 0; i < key.size() && i < label_values.size(); ++i) key[i] = label_values[i];
  std::lock_guard<std::mutex> lock(mu_);
  auto it = series_.find(key);
  if (it == series_.end()) {
    auto s = std::make_unique<Series>();
    if (type_ == MetricType::kHistogram) s->histogram = std::make_unique<Histogram>(bounds_);
    it = series_.emplace(std::move(key), std::move(s)).first;
  }
  return *it->second;
}

Counter& MetricFamily::CounterWith(const std::vector<std::string>& label_values) {
  return SeriesWith(label_values).counter;
}
Gauge& MetricFamily::GaugeWith(const std::vector<std::string>& label_values) {
  return SeriesWith(label_values).gauge;
}
Histogram& MetricFamily::HistogramWith(const std::vector<std::string>& label_values) {
  Series& s = SeriesWith(label_values);
  if (s.histogram == nullptr) {
    // A family of another type used as a histogram: give it buckets anyway.
    std::lock_guard<std::mutex> lock(mu_);
    if (s.histogram == nullptr) s.histogram = std::make_unique<Histogram>(bounds_);
  }
  return *s.histogram;
}

std::string MetricFamily::LabelText(const std::vector<std::string>& values,
                                    const std::string& extra) const {
  std::string out;
  for (size_t i = 0; i < label_names_.size(); ++i) {
    if (!out.empty()) out += ',';
    out += label_names_[i] + "=\"" + EscapeLabelValue(values[i]) + "\"";
  }
  if (!extra.empty()) {
    if (!out.empty()) out += ',';
    out += extra;
  }
  return out.empty() ? "" : "{" + out + "}";
}

void MetricFamily::Render(std::string* out) const {
  *out += "# HELP " + name_ + " " + EscapeHelp(help_) + "\n";
  *out += "# TYPE " + name_ + " " + TypeName(type_) + "\n";
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [labels, s] : series_) {
    switch (type_) {
      case MetricType::kCounter:
        *out += name_ + LabelText(labels, "") + " " + FormatValue(s->counter.value()) + "\n";
        break;
      case MetricType::kGauge:
        *out += name_ + LabelText(labels, "") + " " + FormatValue(s->gauge.value()) + "\n";
        break;
      case MetricType::kHistogram: {
        const Histogram& h = *s->histogram;
        for (size_t i = 0; i < h.bounds().size(); ++i) {
          *out += name_ + "_bucket" +
                  LabelText(labels, "le=\"" + FormatValue(h.bounds()[i]) + "\"") + " " +
                  std::to_string(h.cumulative(i)) + "\n";
        }
        *out += name_ + "_bucket" + LabelText(labels, "le=\"+Inf\"") + " " +
                std::to_string(h.count()) + "\n";
        *out += name_ + "_sum" + LabelText(labels, "") + " " + FormatValue(h.sum()) + "\n";
        *out += name_ + "_count" + LabelText(labels, "") + " " + std::to_string(h.count()) + "\n";
        break;
      }
    }
  }
}

MetricFamily& Registry::Family(const std::string& name, const std::string& help,
                               MetricType type, std::vector<std::string> label_names,
                               std::vector<double> bounds) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = families_.find(name);
  if (it == families_.end()) {
    it = families_
             .emplace(name, std::make_unique<MetricFamily>(name, help, type,
                                                           std::move(label_names),
                                                           std::move(bounds)))
             .first;
  }
  return *it->second;
}

std::string Registry::Render() const {
  std::string out;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [name, family] : families_) family->Render(&out);
  return out;
}

}  // namespace orrery::metrics
