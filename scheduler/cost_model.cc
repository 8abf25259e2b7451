#include "scheduler/cost_model.h"

#include <algorithm>
#include <cmath>

namespace orrery {
namespace {

// The entry for `batch`; between two known batch sizes, the line through
// them (a batch's cost is a fixed part plus a part per row: calibrated 4 and
// 8 predict 6 far better than 4 scaled by 6/4); outside them, the nearest
// one scaled linearly by batch. Empty map: -1.
double ScaledFrom(const std::map<int, double>& by_batch, int batch) {
  if (by_batch.empty()) return -1;
  auto it = by_batch.lower_bound(batch);
  if (it != by_batch.end() && it->first == batch) return it->second;
  if (it != by_batch.end() && it != by_batch.begin()) {
    auto below = std::prev(it);
    const double t = static_cast<double>(batch - below->first) / static_cast<double>(it->first - below->first);
    return below->second + t * (it->second - below->second);
  }
  auto nearest = it == by_batch.end() ? std::prev(it) : it;
  return nearest->second * static_cast<double>(std::max(batch, 1)) / std::max(nearest->first, 1);
}

// Nearest-rank index (0-based) of quantile p in n values.
size_t NearestRank(size_t n, double p) {
  const size_t i = static_cast<size_t>(std::ceil(p * static_cast<double>(n)));
  return std::clamp<size_t>(i, 1, n) - 1;
}

double Percentile(const std::vector<double>& sorted, double p) {
  return sorted.empty() ? 0 : sorted[NearestRank(sorted.size(), p)];
}

// The same value without sorting all of `values` (which it reorders): O(n).
// Runs on a lane after every 16th run of a model, where sorting the 512
// ratios was ~0.7% of the lane's time serving a 20 us model.
double SelectPercentile(std::vector<double>* values, double p) {
  if (values->empty()) return 0;
  const auto nth = values->begin() + static_cast<std::ptrdiff_t>(NearestRank(values->size(), p));
  std::nth_element(values->begin(), nth, values->end());
  return *nth;
}

}  // namespace

CostPrediction CostModel::Predict(const std::string& model_id, int batch, CacheState state) const {
  auto it = models_.find(model_id);
  if (it == models_.end()) return {};
  const ModelEntry& e = it->second;
  if (double ns = ScaledFrom(e.estimate_ns, batch); ns >= 0) {
    ns *= state == CacheState::kWarm   ? e.warm_factor
          : state == CacheState::kCold ? e.cold_factor
                                       : std::max(e.cold_factor, 1.0);
    return {.ns = std::llround(ns), .known = true, .measured = e.estimate_ns.count(batch) > 0, .steps = e.steps};
  }
  if (double ns = ScaledFrom(e.prior_ns, batch); ns >= 0) {
    return {.ns = std::llround(ns), .known = true, .measured = false, .steps = e.steps};
  }
  return {.steps = e.steps};
}

void CostModel::Calibrate(const std::string& model_id, int batch, int64_t measured_ns) {
  if (measured_ns <= 0) return;
  ModelEntry& e = models_[model_id];
  e.estimate_ns[batch] = static_cast<double>(measured_ns);
  e.estimate_samples[batch] = 1;
  e.calibrated_ns[batch] = measured_ns;
}

void CostModel::SetWorkPrior(const std::string& model_id, int batch, int64_t flops, int64_t bytes) {
  // A roofline-style bound: whichever of compute and memory takes longer.
  double ns = std::max(static_cast<double>(flops) / options_.flops_per_ns,
                       static_cast<double>(bytes) / options_.bytes_per_ns);
  models_[model_id].prior_ns[batch] = std::max(ns, 1.0);
}

namespace {

// The weight of the next sample of an estimate that has `n` (running mean
// first, then the EWMA; see CostModelOptions::ewma_alpha).
double SampleWeight(uint64_t n, double alpha) { return std::max(alpha, 1.0 / static_cast<double>(n + 1)); }

// The first measurement sets the estimate; later ones move it by
// SampleWeight, the sample clamped to max_update_factor of the estimate.
void Update(std::map<int, double>* by_batch, std::map<int, uint64_t>* samples, int batch, int64_t measured_ns,
            double alpha, const CostModelOptions& options) {
  uint64_t& n = (*samples)[batch];
  auto [it, inserted] = by_batch->try_emplace(batch, static_cast<double>(measured_ns));
  if (inserted) {
    n = 1;
    return;
  }
  double sample = static_cast<double>(measured_ns);
  if (options.max_update_factor >= 1) {
    sample = std::clamp(sample, it->second / options.max_update_factor, it->second * options.max_update_factor);
  }
  it->second += SampleWeight(n, alpha) * (sample - it->second);
  ++n;
}

}  // namespace

void CostModel::Record(const std::string& model_id, int batch, int64_t predicted_ns, int64_t measured_ns,
                       CacheState state, int64_t estimate_ns, bool correcting) {
  if (measured_ns <= 0) return;
  ModelEntry& e = models_[model_id];
  ++e.samples;
  e.last_predicted_ns = predicted_ns;
  e.last_measured_ns = measured_ns;
  if (predicted_ns > 0) {
    e.errors.push_back(std::abs(static_cast<double>(predicted_ns - measured_ns)) / static_cast<double>(measured_ns));
    while (e.errors.size() > options_.error_window) e.errors.pop_front();
    const int64_t planned = estimate_ns > 0 ? estimate_ns : predicted_ns;
    e.ratios.push_back(static_cast<double>(measured_ns) / static_cast<double>(planned));
    while (e.ratios.size() > options_.slowdown_window) e.ratios.pop_front();
    if (e.ratios.size() >= options_.slowdown_min_samples && e.samples % 16 == 0) {
      std::vector<double> ratios(e.ratios.begin(), e.ratios.end());
      e.slowdown_bound = std::clamp(SelectPercentile(&ratios, options_.slowdown_quantile), 1.0, options_.slowdown_max);
    }
    e.sum_predicted += static_cast<double>(predicted_ns);
    e.sum_measured += static_cast<double>(measured_ns);
    ++e.predicted_samples;
  }
  const double overall = ScaledFrom(e.estimate_ns, batch);
  auto count = e.estimate_samples.find(batch);
  const bool estimate_settled =
      count == e.estimate_samples.end() || SampleWeight(count->second, options_.ewma_alpha) <= options_.ewma_alpha;
  if (state != CacheState::kUnknown && overall > 0 && estimate_settled) {
    const double speed = predicted_ns > 0 && estimate_ns > 0
                             ? static_cast<double>(predicted_ns) / static_cast<double>(estimate_ns)
                             : 1.0;
    double& factor = state == CacheState::kWarm ? e.warm_factor : e.cold_factor;
    double sample = static_cast<double>(measured_ns) / (overall * speed);
    if (options_.max_update_factor >= 1) {
      sample = std::clamp(sample, factor / options_.max_update_factor, factor * options_.max_update_factor);
    }
    factor += options_.state_alpha * (sample - factor);
  }
  const double alpha = correcting ? std::max(options_.ewma_alpha, options_.correction_alpha) : options_.ewma_alpha;
  Update(&e.estimate_ns, &e.estimate_samples, batch, measured_ns, alpha, options_);
}

double CostModel::SlowdownBound(const std::string& model_id) const {
  auto it = models_.find(model_id);
  return it == models_.end() ? 1.0 : it->second.slowdown_bound;
}

void CostModel::SetSteps(const std::string& model_id, size_t steps) { models_[model_id].steps = steps; }

void CostModel::Erase(const std::string& model_id) { models_.erase(model_id); }

std::vector<ModelCostStats> CostModel::Stats() const {
  std::vector<ModelCostStats> out;
  out.reserve(models_.size());
  for (const auto& [id, e] : models_) {
    ModelCostStats s;
    s.model_id = id;
    s.samples = e.samples;
    std::vector<double> sorted(e.errors.begin(), e.errors.end());
    std::sort(sorted.begin(), sorted.end());
    s.window = sorted.size();
    s.error_p50 = Percentile(sorted, 0.50);
    s.error_p90 = Percentile(sorted, 0.90);
    s.error_p99 = Percentile(sorted, 0.99);
    s.error_max = sorted.empty() ? 0 : sorted.back();
    s.last_predicted_ns = e.last_predicted_ns;
    s.last_measured_ns = e.last_measured_ns;
    if (e.predicted_samples > 0) {
      s.mean_predicted_ns = std::llround(e.sum_predicted / static_cast<double>(e.predicted_samples));
      s.mean_measured_ns = std::llround(e.sum_measured / static_cast<double>(e.predicted_samples));
    }
    s.steps = e.steps;
    for (const auto& [batch, ns] : e.estimate_ns) s.estimate_ns[batch] = std::llround(ns);
    s.calibrated_ns = e.calibrated_ns;
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace orrery
