// The server's Prometheus metrics (served by MetricsHttpServer on
// --metrics-listen): request counts and latencies by tenant and model,
// updated by the inference service as requests end, and the scheduler's
// queues, admissions, rejections, lane time and prediction error, copied
// from FairScheduler::Stats() at each scrape.
#pragma once

#include <string>

#include "base/metrics.h"
#include "scheduler/scheduler.h"

namespace orrery {

struct ServerMetrics {
  ServerMetrics();

  // The registry rendered after copying in `scheduler`'s current stats.
  std::string Render(const FairScheduler& scheduler);

  metrics::Registry registry;
  // orrery_inference_requests_total{tenant, model, code}: every ModelInfer.
  metrics::MetricFamily* requests = nullptr;
  // orrery_inference_latency_seconds{tenant, model}: successful ModelInfers,
  // end to end inside the server.
  metrics::MetricFamily* latency = nullptr;
};

}  // namespace orrery
