#include "api/server_metrics.h"

#include "runtime/executor.h"

namespace orrery {

using metrics::MetricType;

ServerMetrics::ServerMetrics() {
  requests = &registry.Family("orrery_inference_requests_total",
                              "ModelInfer calls by tenant, model and gRPC status code.",
                              MetricType::kCounter, {"tenant", "model", "code"});
  latency = &registry.Family("orrery_inference_latency_seconds",
                             "Server-side latency of successful ModelInfer calls.",
                             MetricType::kHistogram, {"tenant", "model"});
}

void ServerMetrics::CountInfer(bool ok, int64_t latency_ns) {
  if (ok) {
    ok_.fetch_add(1, std::memory_order_relaxed);
    ok_latency_ns_.fetch_add(latency_ns, std::memory_order_relaxed);
  } else {
    failed_.fetch_add(1, std::memory_order_relaxed);
  }
}

ServerMetrics::Totals ServerMetrics::totals() const {
  return Totals{.ok = ok_.load(std::memory_order_relaxed),
                .failed = failed_.load(std::memory_order_relaxed),
                .ok_latency_ns = ok_latency_ns_.load(std::memory_order_relaxed)};
}

void ServerMetrics::Counter(const std::string& name, const std::string& help, double v) {
  registry.Family(name, help, MetricType::kCounter).CounterWith({}).Mirror(v);
}

void ServerMetrics::Gauge(const std::string& name, const std::string& help, double v) {
  registry.Family(name, help, MetricType::kGauge).GaugeWith({}).Set(v);
}

void ServerMetrics::RenderTier(const std::string& tier, const std::string& moves, const TierStats& t) {
  // One set of families per tier, orrery_host_cache_* and
  // orrery_device_cache_*; a "load" is a move into the tier (`moves`).
  const std::string prefix = "orrery_" + tier + "_cache";
  const std::string what = tier + " cache";
  auto gauge = [&](const std::string& name, const std::string& help, double v) {
    Gauge(prefix + name, help, v);
  };
  auto counter = [&](const std::string& name, const std::string& help, double v) {
    Counter(prefix + name, help, v);
  };
  gauge("_capacity_bytes", "Capacity of the " + what + ".", static_cast<double>(t.capacity_bytes));
  gauge("_used_bytes", "Bytes of the " + what + " resident or loading.", static_cast<double>(t.used_bytes));
  gauge("_resident_models", "Model versions resident in the " + what + ".", static_cast<double>(t.resident));
  auto& events = registry.Family(prefix + "_events_total",
                                 "Acquisitions of the " + what + " by outcome, loads (" + moves +
                                     "), evictions, keep-alive pre-warms and expirations.",
                                 MetricType::kCounter, {"event"});
  events.CounterWith({"hit"}).Mirror(static_cast<double>(t.hits));
  events.CounterWith({"join"}).Mirror(static_cast<double>(t.joins));
  events.CounterWith({"miss"}).Mirror(static_cast<double>(t.misses));
  events.CounterWith({"load"}).Mirror(static_cast<double>(t.moves_started));
  events.CounterWith({"load_failed"}).Mirror(static_cast<double>(t.moves_failed));
  events.CounterWith({"eviction"}).Mirror(static_cast<double>(t.evictions));
  events.CounterWith({"prewarm"}).Mirror(static_cast<double>(t.prewarms));
  events.CounterWith({"expiration"}).Mirror(static_cast<double>(t.expirations));
  counter("_idle_byte_seconds_total",
          "Integral of " + what + " bytes resident but unpinned (held for nobody) over time.", t.idle_byte_ns / 1e9);
  gauge("_pinned_bytes", "Bytes of the " + what + " resident and pinned (requests, operator pins).",
        static_cast<double>(t.pinned_bytes));
  gauge("_models", "Model versions registered with the " + what + ".", static_cast<double>(t.entries));
  counter("_loaded_bytes_total", "Bytes moved into the " + what + " by successful loads (" + moves + ").",
          static_cast<double>(t.bytes_moved));
  counter("_load_seconds_total",
          "Summed measured durations of successful " + what + " loads (loaded bytes / this = per-load throughput).",
          static_cast<double>(t.move_ns) / 1e9);
  gauge("_loader_bytes_per_second",
        "Throughput the " + what + " predicts its loads with: EWMA of measured loads' bandwidth, latency excluded.",
        t.bytes_per_sec);
}

void ServerMetrics::RenderAdmittedMisses() {
  auto& family = registry.Family("orrery_admitted_misses_total",
                                 "Requests admitted that then missed their deadline, by their model's host-cache "
                                 "state at admission, how they missed and the first cause (api/miss_causes.h).",
                                 MetricType::kCounter, {"state", "how", "cause"});
  for (Residency state : {Residency::kResident, Residency::kMoving, Residency::kAbsent}) {
    for (int h = 0; h < kMissHowCount; ++h) {
      for (int c = 0; c < kMissCauseCount; ++c) {
        const auto how = static_cast<MissHow>(h);
        const auto cause = static_cast<MissCause>(c);
        const uint64_t n = admitted_misses.Get(state, how, cause);
        if (n == 0) continue;
        family.CounterWith({std::string(ResidencyName(state)), std::string(MissHowName(how)),
                            std::string(MissCauseName(cause))})
            .Mirror(static_cast<double>(n));
      }
    }
  }
}

std::string ServerMetrics::Render(const FairScheduler& scheduler, const ModelLoaderStats* loader,
                                  const TierStats* host, const TierStats* device, const LedgerWriter::Stats* ledger,
                                  const Catalog::LedgerJournalStats* journal) {
  const SchedulerStats s = scheduler.Stats();
  Counter("orrery_lane_callback_seconds_total",
          "Lane time spent in completion callbacks (answers, drops) instead of running requests.",
          static_cast<double>(s.lane_callback_ns) / 1e9);
  Counter("orrery_lane_callback_cpu_seconds_total",
          "Of orrery_lane_callback_seconds_total, the lanes' own CPU time (the rest: waiting or descheduled).",
          static_cast<double>(s.lane_callback_cpu_ns) / 1e9);
  Counter("orrery_lane_callbacks_total", "Completion callback groups lanes ran (one per run or drop batch).",
          static_cast<double>(s.lane_callbacks));
  Counter("orrery_kernel_scratch_shortfalls_total",
          "Kernel calls whose scratch was sized too small and ran on heap scratch instead (a kernel "
          "sizing bug; stays 0).",
          static_cast<double>(runtime::KernelScratchShortfalls()));
  Gauge("orrery_lane_callback_max_seconds", "The longest single completion callback on a lane since start.",
        static_cast<double>(s.lane_callback_max_ns) / 1e9);
  if (ledger != nullptr) {
    Counter("orrery_ledger_appends_total", "Inference ledger entries the ledger writer appended.",
            static_cast<double>(ledger->appends));
    Counter("orrery_ledger_groups_total", "Group writes of the ledger writer (appends / this = group size).",
            static_cast<double>(ledger->groups));
    Counter("orrery_ledger_write_seconds_total", "Time the ledger writer spent in its group writes.",
            static_cast<double>(ledger->write_ns) / 1e9);
    Gauge("orrery_ledger_write_max_seconds", "The longest single group write since start.",
          static_cast<double>(ledger->max_write_ns) / 1e9);
  }
  if (journal != nullptr && journal->enabled) {
    Counter("orrery_ledger_journal_staged_total",
            "Inference ledger entries staged in the ledger journal (storage/ledger_journal.h).",
            static_cast<double>(journal->staged));
    Counter("orrery_ledger_journal_ingests_total",
            "Moves of staged entries into the ledger (staged / this = entries per write).",
            static_cast<double>(journal->ingests));
    Counter("orrery_ledger_journal_full_total",
            "Ledger appends that found the journal full even after moving it (written directly).",
            static_cast<double>(journal->full));
    Gauge("orrery_ledger_journal_used_bytes", "Bytes of staged entries not yet moved into the ledger.",
          static_cast<double>(journal->used_bytes));
  }
  if (host != nullptr) {
    RenderTier("host", "loads (segment reads)", *host);
    RenderAdmittedMisses();
  }
  if (device != nullptr) RenderTier("device", "host -> device transfers", *device);
  Gauge("orrery_lane_utilisation", "Measured lane time / (lanes x 60 s) over the last minute.", s.lane_utilisation);
  if (s.has_device) {
    const DeviceLanesStats& d = s.device;
    auto& placements = registry.Family("orrery_device_placements_total",
                                       "Requests placed by the scheduler, by target (cpu or device).",
                                       MetricType::kCounter, {"target"});
    placements.CounterWith({"device"}).Mirror(static_cast<double>(d.placed_device));
    placements.CounterWith({"cpu"}).Mirror(static_cast<double>(d.placed_cpu));
    Counter("orrery_device_prewarms_total",
            "Transfers started next to a CPU placement, for the model's later requests.",
            static_cast<double>(d.prewarms));
    Counter("orrery_device_link_bytes_total", "Bytes moved host -> device by finished transfers.",
            static_cast<double>(d.bytes_transferred));
    Counter("orrery_device_link_seconds_total",
            "Summed measured durations of finished transfers (link bytes / this = link throughput).",
            static_cast<double>(d.transfer_ns) / 1e9);
    Counter("orrery_device_busy_seconds_total", "Device time held by finished device runs.",
            static_cast<double>(d.device_busy_ns) / 1e9);
    auto& util = registry.Family("orrery_device_utilisation",
                                 "Busy time / window of the device's compute queue and link over the last minute "
                                 "(the simulated device's are simulated times).",
                                 MetricType::kGauge, {"device", "resource"});
    util.GaugeWith({d.device.name, "compute"}).Set(d.device.compute_utilisation);
    util.GaugeWith({d.device.name, "link"}).Set(d.device.link_utilisation);
  }
  if (loader != nullptr) {
    Counter("orrery_segment_loads_total", "Model loads that imported packed weights from a verified segment.",
            static_cast<double>(loader->segment_loads));
    Counter("orrery_segment_rebuilds_total",
            "Segments found missing, corrupt or mismatched at load and rebuilt from the ONNX.",
            static_cast<double>(loader->segment_rebuilds));
    Counter("orrery_model_compiles_total", "Model loads that packed weights from the ONNX.",
            static_cast<double>(loader->compiles));
  }
  Gauge("orrery_lanes", "CPU execution lanes.", s.lanes);
  Gauge("orrery_scheduler_queued", "Requests waiting for a lane.", static_cast<double>(s.queued));
  Counter("orrery_scheduler_preemptions_total", "Executions parked between layers for an urgent request.",
          static_cast<double>(s.preemptions));
  auto& depth = registry.Family("orrery_tenant_queue_depth", "Queued requests per tenant.", MetricType::kGauge,
                                {"tenant"});
  auto& vtime = registry.Family("orrery_tenant_virtual_finish", "Fair-queuing virtual finish time per tenant.",
                                MetricType::kGauge, {"tenant"});
  auto& admitted = registry.Family("orrery_tenant_admitted_total", "Requests admitted by the scheduler.",
                                   MetricType::kCounter, {"tenant"});
  auto& rejected = registry.Family("orrery_tenant_rejected_total",
                                   "Requests refused at admission or dropped before running, by reason.",
                                   MetricType::kCounter, {"tenant", "reason"});
  auto& completed = registry.Family("orrery_tenant_completed_total", "Requests that ran to the end (ok or error).",
                                    MetricType::kCounter, {"tenant"});
  auto& lane_seconds = registry.Family("orrery_tenant_lane_seconds_total", "Measured lane time per tenant.",
                                       MetricType::kCounter, {"tenant"});
  for (const TenantSchedulerStats& t : s.tenants) {
    depth.GaugeWith({t.tenant}).Set(static_cast<double>(t.queued));
    vtime.GaugeWith({t.tenant}).Set(t.virtual_finish);
    admitted.CounterWith({t.tenant}).Mirror(static_cast<double>(t.admitted));
    rejected.CounterWith({t.tenant, "deadline"}).Mirror(static_cast<double>(t.rejected_deadline));
    rejected.CounterWith({t.tenant, "in_flight"}).Mirror(static_cast<double>(t.rejected_in_flight));
    rejected.CounterWith({t.tenant, "dropped"}).Mirror(static_cast<double>(t.dropped));
    completed.CounterWith({t.tenant}).Mirror(static_cast<double>(t.completed));
    lane_seconds.CounterWith({t.tenant}).Mirror(static_cast<double>(t.service_ns) / 1e9);
    if (s.has_device) {
      registry.Family("orrery_tenant_device_seconds_total", "Device time held by a tenant's device runs.",
                      MetricType::kCounter, {"tenant"})
          .CounterWith({t.tenant})
          .Mirror(static_cast<double>(t.device_ns) / 1e9);
    }
  }
  auto& error = registry.Family("orrery_model_prediction_error",
                                "|predicted - measured| / measured execution time per model, by quantile.",
                                MetricType::kGauge, {"model", "quantile"});
  auto& predicted = registry.Family("orrery_model_predicted_seconds",
                                    "Predicted execution time per model and batch size (calibrated, then learned).",
                                    MetricType::kGauge, {"model", "batch"});
  for (const ModelCostStats& m : s.models) {
    error.GaugeWith({m.model_id, "0.5"}).Set(m.error_p50);
    error.GaugeWith({m.model_id, "0.99"}).Set(m.error_p99);
    for (const auto& [batch, ns] : m.estimate_ns) {
      predicted.GaugeWith({m.model_id, std::to_string(batch)}).Set(static_cast<double>(ns) / 1e9);
    }
  }
  return registry.Render();
}

}  // namespace orrery
