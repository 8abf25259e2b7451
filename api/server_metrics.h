// The server's Prometheus metrics (served by MetricsHttpServer on
// --metrics-listen): request counts and latencies by tenant and model,
// updated by the inference service as requests end, and the scheduler's
// queues, admissions, rejections, lane time and prediction error, copied
// from FairScheduler::Stats() at each scrape.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "api/ledger_writer.h"
#include "api/miss_causes.h"
#include "base/metrics.h"
#include "cache/model_loader.h"
#include "cache/tier_cache.h"
#include "scheduler/scheduler.h"

namespace orrery {

struct ServerMetrics {
  ServerMetrics();

  // The registry rendered after copying in `scheduler`'s current stats.
  // With `loader`, also its segment counters (orrery_segment_loads_total,
  // orrery_segment_rebuilds_total, orrery_model_compiles_total).
  // With `host`, the host cache's (orrery_host_cache_*); with `device`, the
  // device cache's (orrery_device_cache_*). A scheduler with a device adds
  // orrery_device_* (placements, link bytes and seconds, utilisation).
  // With `ledger`, the ledger writer's (orrery_ledger_*); with `journal`
  // (enabled), the catalog's ledger journal (orrery_ledger_journal_*).
  std::string Render(const FairScheduler& scheduler, const ModelLoaderStats* loader = nullptr,
                     const TierStats* host = nullptr, const TierStats* device = nullptr,
                     const LedgerWriter::Stats* ledger = nullptr,
                     const Catalog::LedgerJournalStats* journal = nullptr);

  // Process-wide ModelInfer totals, for the periodic summary log line.
  struct Totals {
    uint64_t ok = 0;
    uint64_t failed = 0;
    int64_t ok_latency_ns = 0;
  };
  // Records one ModelInfer that ended (cheap: three relaxed atomics).
  void CountInfer(bool ok, int64_t latency_ns);
  Totals totals() const;

  metrics::Registry registry;
  // orrery_inference_requests_total{tenant, model, code}: every ModelInfer.
  metrics::MetricFamily* requests = nullptr;
  // orrery_inference_latency_seconds{tenant, model}: successful ModelInfers,
  // end to end inside the server.
  metrics::MetricFamily* latency = nullptr;
  // Admitted requests that missed, by cause (rendered with the host cache's
  // families as orrery_admitted_misses_total{state, how, cause}).
  MissCounters admitted_misses;

 private:
  // The orrery_<tier>_cache_* families of one tier; `moves` names its loads.
  void RenderTier(const std::string& tier, const std::string& moves, const TierStats& t);
  void RenderAdmittedMisses();
  // An unlabelled counter mirroring `v` / a gauge set to `v`.
  void Counter(const std::string& name, const std::string& help, double v);
  void Gauge(const std::string& name, const std::string& help, double v);

  std::atomic<uint64_t> ok_{0}, failed_{0};
  std::atomic<int64_t> ok_latency_ns_{0};
};

}  // namespace orrery
