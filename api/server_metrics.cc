#include "api/server_metrics.h"

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

std::string ServerMetrics::Render(const FairScheduler& scheduler, const ModelLoaderStats* loader,
                                  const TierStats* host) {
  const SchedulerStats s = scheduler.Stats();
  if (host != nullptr) {
    registry.Family("orrery_host_cache_capacity_bytes", "Host cache budget (--host-cache-bytes).", MetricType::kGauge)
        .GaugeWith({})
        .Set(static_cast<double>(host->capacity_bytes));
    registry.Family("orrery_host_cache_used_bytes", "Host cache bytes resident or loading.", MetricType::kGauge)
        .GaugeWith({})
        .Set(static_cast<double>(host->used_bytes));
    registry.Family("orrery_host_cache_resident_models", "Model versions resident in the host cache.",
                    MetricType::kGauge)
        .GaugeWith({})
        .Set(static_cast<double>(host->resident));
    auto& events = registry.Family("orrery_host_cache_events_total",
                                   "Host cache acquisitions by outcome, loads, evictions, keep-alive pre-warms and expirations.", MetricType::kCounter,
                                   {"event"});
    events.CounterWith({"hit"}).Mirror(static_cast<double>(host->hits));
    events.CounterWith({"join"}).Mirror(static_cast<double>(host->joins));
    events.CounterWith({"miss"}).Mirror(static_cast<double>(host->misses));
    events.CounterWith({"load"}).Mirror(static_cast<double>(host->moves_started));
    events.CounterWith({"load_failed"}).Mirror(static_cast<double>(host->moves_failed));
    events.CounterWith({"eviction"}).Mirror(static_cast<double>(host->evictions));
    events.CounterWith({"prewarm"}).Mirror(static_cast<double>(host->prewarms));
    events.CounterWith({"expiration"}).Mirror(static_cast<double>(host->expirations));
    registry.Family("orrery_host_cache_idle_byte_seconds_total",
                    "Integral of host cache bytes resident but unpinned (held for nobody) over time.",
                    MetricType::kCounter)
        .CounterWith({})
        .Mirror(host->idle_byte_ns / 1e9);
    registry.Family("orrery_host_cache_pinned_bytes", "Host cache bytes resident and pinned (requests, operator pins).",
                    MetricType::kGauge)
        .GaugeWith({})
        .Set(static_cast<double>(host->pinned_bytes));
    registry.Family("orrery_host_cache_models", "Model versions registered with the host cache.", MetricType::kGauge)
        .GaugeWith({})
        .Set(static_cast<double>(host->entries));
    registry.Family("orrery_host_cache_loaded_bytes_total", "Bytes loaded into the host cache by successful loads.",
                    MetricType::kCounter)
        .CounterWith({})
        .Mirror(static_cast<double>(host->bytes_moved));
    registry.Family("orrery_host_cache_load_seconds_total",
                    "Summed measured durations of successful host cache loads (loaded bytes / this = per-load "
                    "throughput).",
                    MetricType::kCounter)
        .CounterWith({})
        .Mirror(static_cast<double>(host->move_ns) / 1e9);
    registry.Family("orrery_host_cache_loader_bytes_per_second",
                    "Loader throughput the host cache predicts with: EWMA of measured loads' bandwidth, latency excluded "
                    "(the 1e9 prior until the first load).",
                    MetricType::kGauge)
        .GaugeWith({})
        .Set(host->bytes_per_sec);
  }
  if (loader != nullptr) {
    registry.Family("orrery_segment_loads_total", "Model loads that imported packed weights from a verified segment.",
                    MetricType::kCounter)
        .CounterWith({})
        .Mirror(static_cast<double>(loader->segment_loads));
    registry.Family("orrery_segment_rebuilds_total",
                    "Segments found missing, corrupt or mismatched at load and rebuilt from the ONNX.",
                    MetricType::kCounter)
        .CounterWith({})
        .Mirror(static_cast<double>(loader->segment_rebuilds));
    registry.Family("orrery_model_compiles_total", "Model loads that packed weights from the ONNX.",
                    MetricType::kCounter)
        .CounterWith({})
        .Mirror(static_cast<double>(loader->compiles));
  }
  registry.Family("orrery_lanes", "CPU execution lanes.", MetricType::kGauge).GaugeWith({}).Set(s.lanes);
  registry.Family("orrery_scheduler_queued", "Requests waiting for a lane.", MetricType::kGauge)
      .GaugeWith({})
      .Set(static_cast<double>(s.queued));
  registry.Family("orrery_scheduler_preemptions_total", "Executions parked between layers for an urgent request.",
                  MetricType::kCounter)
      .CounterWith({})
      .Mirror(static_cast<double>(s.preemptions));
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
