// Predicted execution time per (model, batch size), learned from
// measurements, and how wrong the predictions have been.
//
// Inference cost is predictable (a fixed sequence of layers), so the
// scheduler plans with it: admission, fair-queue charges and deadline checks
// all use Predict(). Sources, best first:
//   1. measurements of this (model, batch): a calibration run sets the
//      estimate outright (Calibrate), later runs move it by an EWMA (Record);
//   2. measurements of the same model at another batch size, scaled
//      linearly by batch (the nearest measured batch size);
//   3. a prior from the plan's FLOPs and bytes (SetWorkPrior), at assumed
//      machine rates;
//   4. nothing: Predict says so (known = false, ns = 0).
// Error statistics are kept per model: |predicted - measured| / measured of
// the last `error_window` Record() calls.
//
// Not thread-safe (the scheduler calls it under its lock). Predict and
// Record cost O(log models + log batch sizes); Errors() sorts the window.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <vector>

namespace orrery {

struct CostModelOptions {
  // Weight of a new measurement, once the estimate has 1 / ewma_alpha
  // samples (a calibration counts as one); before that, their running mean
  // (each sample 1 / (n + 1)), so that a calibration that ran slow is not
  // kept for the 1 / alpha runs a plain EWMA would keep it. Low because
  // one run says little: on the Zen 5 host a run's layers share its speed
  // (within a run 2.4%, between runs 10.8%) and consecutive runs correlate
  // ~0.27, so a fast-moving estimate follows noise (scenario 3, 2026-11-23:
  // 0.05 / 0.02 measured a p99 error of 14.1-16.1% against 17.2-23.1% with
  // 0.2 / 0.1, three rounds alternated, h-pred).
  double ewma_alpha = 0.05;
  // The weight (at least) of a run admitted only to correct the estimate:
  // admission's probe past an over-estimate (FairScheduler's
  // probe_interval_ns), one per 50 ms while the lanes are idle. At
  // ewma_alpha a 2x over-estimate would take ~28 probes (1.4 s of refusing
  // everything); at 0.2 it takes ~7.
  double correction_alpha = 0.2;
  // A measurement more than this factor off the estimate moves it as if it
  // were at the bound: one run descheduled by the OS must not double the
  // prediction, while a real change still converges (within ~1 /
  // ewma_alpha runs, ~2 / correction_alpha probes). < 1: off.
  double max_update_factor = 2.0;
  size_t error_window = 4096;      // relative errors kept per model
  // SlowdownBound: the quantile of measured / predicted over the last
  // `slowdown_window` runs of a model, once it has `slowdown_min_samples`.
  double slowdown_quantile = 0.99;
  size_t slowdown_window = 512;
  size_t slowdown_min_samples = 20;
  double slowdown_max = 3.0;       // a bound is never above this
  // Weight of a run in its cache state's factor (measured / the overall
  // estimate, see CacheState): slower than the estimate's, since the
  // factor is a property of the model and the caches, not of the minute.
  // A state's factor does not move while the estimate for the run's batch
  // size is still in its running mean: the estimate takes all of a slow
  // calibration's correction then, and no factor soaks up part of it.
  double state_alpha = 0.02;
  double flops_per_ns = 4.0;       // prior: assumed compute rate (4 GFLOP/s)
  double bytes_per_ns = 4.0;       // prior: assumed memory rate (4 GB/s)
};

// Whether the model's weights are likely in the CPU caches when a run starts:
// warm when the lane's previous run was the same model and ended just
// before, cold otherwise. An 8 MB MLP ran 0.88 ms back to back but 1.5 ms
// after other work had evicted it from the shared L3 on the development VM,
// so one estimate for both is off by ~40% either way. Each state has a
// factor per model on the overall estimate (1 until runs in that state
// say otherwise), not an estimate of its own: an own estimate moved only
// by that state's runs went stale (a slow calibration left `mlp_long`'s warm
// estimate at 19.2 ms, its runs taking 10, until the first warm runs
// half a second into scenario 5), and on the AMD host, with no cache effect
// for these models, two estimates each learned from half the runs were
// further off than one. Unknown (admission: the lane is not chosen yet)
// plans for the slower of the overall and the cold one.
enum class CacheState { kUnknown, kWarm, kCold };

struct CostPrediction {
  int64_t ns = 0;
  bool known = false;     // false: no measurement and no prior; ns is 0
  bool measured = false;  // from a measurement of this exact (model, batch)
  size_t steps = 0;       // layers a run executes, once seen (0 = unknown)
};

// Per model, for stats.
struct ModelCostStats {
  std::string model_id;
  uint64_t samples = 0;         // Record() calls so far
  size_t window = 0;            // errors the percentiles are taken over
  double error_p50 = 0;         // |predicted - measured| / measured
  double error_p90 = 0;
  double error_p99 = 0;
  double error_max = 0;
  int64_t last_predicted_ns = 0;
  int64_t last_measured_ns = 0;
  // Means over the samples that had a prediction: their ratio shows a bias
  // the percentiles (of the absolute error) hide.
  int64_t mean_predicted_ns = 0;
  int64_t mean_measured_ns = 0;
  size_t steps = 0;                    // layers per run, once known
  std::map<int, int64_t> estimate_ns;  // current estimate per measured batch size
  std::map<int, int64_t> calibrated_ns;  // what calibration measured, per batch size
};

class CostModel {
 public:
  explicit CostModel(CostModelOptions options = {}) : options_(options) {}

  // The overall estimate for the batch size (measured, interpolated or
  // scaled) x the cache state's factor; kUnknown: x the cold factor when it
  // is above 1.
  CostPrediction Predict(const std::string& model_id, int batch, CacheState state = CacheState::kUnknown) const;

  // A calibration run: the estimate for (model, batch) becomes `measured_ns`.
  void Calibrate(const std::string& model_id, int batch, int64_t measured_ns);
  // A prior for a model never measured, from its plan's total FLOPs and bytes.
  void SetWorkPrior(const std::string& model_id, int batch, int64_t flops, int64_t bytes);
  // A finished run that was predicted to take `predicted_ns` (0 when nothing
  // was known: no error sample then). The first measurement of a batch size
  // sets the estimate; later ones move it by the EWMA (the sample clamped to
  // max_update_factor of the estimate). measured_ns <= 0 is ignored (a fake
  // clock in tests).
  // The run's cache state (if known) also moves that state's factor by
  // measured / (overall estimate x the lane's speed).
  // `estimate_ns`: what Predict said before the lane's speed adjusted it
  // into `predicted_ns` (0: the same; their ratio is the lane's speed). The
  // error statistics compare predicted_ns; SlowdownBound compares
  // estimate_ns, since admission multiplies the estimate (not knowing the
  // lane's speed) by it.
  // `correcting`: the run was admitted only to correct the estimate (a
  // probe): it moves it with at least correction_alpha.
  void Record(const std::string& model_id, int batch, int64_t predicted_ns, int64_t measured_ns,
              CacheState state = CacheState::kUnknown, int64_t estimate_ns = 0, bool correcting = false);

  // The number of steps (layers) the model's plan runs, for per-layer
  // estimates (predicted / steps).
  void SetSteps(const std::string& model_id, size_t steps);

  // How much slower than predicted a run of the model may be: the
  // slowdown_quantile of measured / predicted over recent runs, within
  // [1, slowdown_max]; 1 until enough runs were seen. Admission multiplies
  // a request's own predicted cost by it, so that the noise of this machine
  // (not its mean, which the estimate follows) is planned for. O(1): the
  // quantile is recomputed every 16 runs in Record.
  double SlowdownBound(const std::string& model_id) const;

  // True once the model has any estimate or prior (a calibration, a run).
  bool Knows(const std::string& model_id) const { return models_.count(model_id) > 0; }

  // Forgets a model (deleted, or a new version compiled under the same id).
  void Erase(const std::string& model_id);

  std::vector<ModelCostStats> Stats() const;

 private:
  struct ModelEntry {
    std::map<int, double> estimate_ns;  // measured batch sizes
    std::map<int, uint64_t> estimate_samples;  // per batch size: calibrations + runs since
    double warm_factor = 1.0;           // CacheState::kWarm runs / overall estimate
    double cold_factor = 1.0;           // CacheState::kCold runs / overall estimate
    std::map<int, double> prior_ns;     // from FLOPs/bytes
    std::map<int, int64_t> calibrated_ns;
    double sum_predicted = 0, sum_measured = 0;
    uint64_t predicted_samples = 0;
    std::deque<double> errors;
    std::deque<double> ratios;  // measured / predicted, for SlowdownBound
    double slowdown_bound = 1.0;
    uint64_t samples = 0;
    size_t steps = 0;
    int64_t last_predicted_ns = 0;
    int64_t last_measured_ns = 0;
  };

  CostModelOptions options_;
  std::map<std::string, ModelEntry> models_;
};

}  // namespace orrery
