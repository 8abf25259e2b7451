// What every gRPC service needs from the server: the components below the
// API layer and the server-wide limits. Owned by Server; services borrow it.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "api/catalog_cache.h"
#include "api/proto/orrery.pb.h"
#include "api/device_tier.h"
#include "api/ledger_writer.h"
#include "api/server_metrics.h"
#include "api/serving_pool.h"
#include "cache/host_tier.h"
#include "cache/model_cache.h"
#include "scheduler/scheduler.h"
#include "storage/catalog.h"
#include "tenancy/admission.h"
#include "tenancy/tenants.h"

namespace orrery {

struct ServiceContext {
  Catalog* catalog = nullptr;
  Tenants* tenants = nullptr;
  CatalogCache* catalog_cache = nullptr;  // the inference path's catalog reads
  ModelCache* cache = nullptr;
  HostTier* host = nullptr;  // may be null: every model stays loaded (tests of the API alone)
  DeviceTier* device = nullptr;  // null: no device tier (CPU lanes only)
  Admission* admission = nullptr;  // per-tenant in-flight slots and request rate
  FairScheduler* scheduler = nullptr;
  ServerMetrics* metrics = nullptr;  // may be null (no metrics)
  // Inference work that may block (waiting for a model's load) or that a
  // busy lane hands off (its answers).
  ServingPool* serving = nullptr;
  // Appends inference ledger entries and then sends their answers, on its
  // own thread (api/ledger_writer.h); null: the completing thread appends.
  LedgerWriter* ledger = nullptr;
  // Without the writer: the catalog fsyncs every ledger append before it
  // returns (--ledger-sync-ms 0), so a lane hands every answer off.
  bool ledger_fsync_each = false;
  // A lane hands its answer to `serving` when at least this many requests
  // are queued (ServerOptions::lane_answer_queue); else it answers itself.
  size_t lane_answer_queue = 1;
  std::string admin_token;
  uint64_t max_model_bytes = 0;
  uint64_t max_input_bytes = 0;  // decoded inputs of one inference; 0 = unlimited
  // Calibrate every uploaded model on a lane (api/model_costs.h), at batch
  // sizes up to max_batch.
  bool calibrate_uploads = true;
  int max_batch = 8;
  // False while draining: ServerReady reports it and new inferences are refused.
  std::atomic<bool> ready{false};
  // Inference handlers past the draining check (counted before it is read,
  // so that Drain, which clears `ready` first, never misses one).
  std::atomic<int64_t> in_flight{0};
  v1::PriceTable prices;  // for metering; fixed after start
  int64_t start_unix_ms = 0;
};

}  // namespace orrery
