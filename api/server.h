// The Orrery server: opens the catalog, starts the lanes and the gRPC
// services. Used by orreryd and by in-process tests.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "cache/device.h"
#include "scheduler/request.h"

namespace orrery {

struct ServerOptions {
  std::string data_dir = "orrery-data";
  std::string listen = "127.0.0.1:8500";  // port 0 picks a free port
  uint64_t max_model_bytes = uint64_t{1} << 30;
  uint64_t max_input_bytes = uint64_t{64} << 20;  // decoded inputs of one inference
  int max_request_bytes = 64 << 20;       // largest single gRPC message
  // Threads gRPC may run handlers on (one per RPC being handled). Past it a
  // new RPC is refused at once with RESOURCE_EXHAUSTED ("Server Threadpool
  // Exhausted") instead of the server growing a thread per queued request.
  // Threads stay once started (idle ones poll), so they are not created
  // per request.
  int max_rpc_threads = 512;
  int lanes = 0;                          // 0 = one per lane_threads lane CPUs, else cores
  int lane_threads = 1;                   // threads per lane (a lane group runs one request)
  // CPUs the lanes are pinned to (lane i on lane_cpus[i % size]); empty:
  // lanes are not pinned. With serving_cpus disjoint from them, request
  // handling never deschedules a lane mid-run, so lane times stay what the
  // scheduler predicted.
  std::vector<int> lane_cpus;
  // CPUs for every other thread the server starts (gRPC handlers, loaders,
  // ledger, metrics): Start pins the calling thread to them before creating
  // any, and threads inherit the mask. Empty: not restricted.
  std::vector<int> serving_cpus;
  // CPUs of the ledger writer's thread (api/ledger_writer.h); empty: the
  // serving CPUs, as every other thread.
  std::vector<int> ledger_writer_cpus;
  // A lane answers the request it ran itself (metering, encoding, the
  // write) unless this many requests are queued: then a serving thread
  // answers it and the lane runs the next. 0 = auto: 1 when lanes share
  // CPUs with serving; never when they have CPUs of their own, where
  // answering costs the front end nothing and a hand-off loads the serving
  // CPUs, which a backlog means are busy too (scenario 7: a third of its
  // answers handed off took CPU 0 to ~95% busy; scenario 2: with A's
  // backlog every answer was handed off, and B's p99 was 6.9-17.8 ms
  // against 3.5-3.7 ms with the lanes answering).
  int lane_answer_queue = 0;
  // Largest batch the scheduler forms from queued requests (1 = no
  // batching) and calibrates at upload.
  int max_batch = 8;
  // Cache affinity (FairSchedulerOptions::affinity_window_ns): a lane may
  // keep running the model it just ran while that tenant is at most this
  // much lane time ahead of fair order; 0 = strict fair order.
  int64_t affinity_window_us = 2000;
  // A lane predicts each run as the model's estimate x the lane's recent
  // speed, learned with this weight per run
  // (FairSchedulerOptions::lane_speed_alpha); 0 = the estimate alone.
  // 0 by default: on 2026-11-23 consecutive runs' lane time / its usual
  // correlated 0.27 (median of 27 scenario 5 runs; 0.77-0.84 when the speed
  // was added), and following each run with weight 0.3 made the reported
  // prediction noisier than the model's estimate alone (scenario 3 p99
  // error 1 point higher in the replay of those runs).
  double lane_speed_alpha = 0;
  // A tenant below this fraction of its fair share goes before one over
  // its share (FairSchedulerOptions::light_share_fraction); 0 = off.
  // 0.75 by default since the queue horizon keeps the heavy tenant's queued
  // requests off their latest starts (scheduler/README.md, light tenants).
  double light_share_fraction = 0.75;
  // The scheduler finishes this share of a request's time to its deadline
  // early, within [deadline_margin_min_ms, 5] ms, for gRPC and the network
  // on the way back (FairSchedulerOptions::deadline_margin_fraction); 0 =
  // plan to the client's deadline exactly.
  double deadline_margin_fraction = 0.05;
  // The margin's floor (FairSchedulerOptions::deadline_margin_min_ns): the
  // way back does not shrink with the deadline (1.5 ms was tried for
  // scenario 5's 10 ms deadlines: not conclusive, scheduler/README.md).
  double deadline_margin_min_ms = 0.5;
  // Admission plans with how much slower than predicted the lanes ran over
  // this last stretch of time (FairSchedulerOptions::recent_speed_window_ns):
  // host stall spells turn into rejections at admission; 0 = off (the
  // default until quiet-machine runs show it helps; try 20).
  int64_t recent_speed_window_ms = 0;
  // A lane's at-risk check between steps plans the rest of the running and
  // the parked requests, each at its slowdown bound
  // (FairSchedulerOptions::at_risk_plans_stack); false = the running
  // request's predicted remainder alone.
  bool at_risk_plans_stack = true;
  // A queued request is dropped once its predicted cost no longer fits its
  // deadline, not already past its latest start at its slowdown bound
  // (FairSchedulerOptions::drop_at_predicted_cost); false = the latter.
  bool drop_at_predicted_cost = true;
  // A request is admitted only if its wait for queued and running work is
  // at most this fraction of the time left to its deadline
  // (FairSchedulerOptions::queue_horizon_fraction); 1 = the deadline alone.
  double queue_horizon_fraction = 0.5;
  // Admission's way back from an over-estimate
  // (FairSchedulerOptions::probe_interval_ns): with the lanes idle, a
  // request refused for its deadline whose model had nothing admitted for
  // this long is admitted anyway if its predicted cost alone fits; 0 = off.
  int64_t admission_probe_ms = 50;
  // An idle lane polls its queue this long before it sleeps
  // (FairSchedulerOptions::lane_spin_ns), only when lane_cpus and
  // serving_cpus are disjoint (the lanes then spin on CPUs no serving
  // thread needs); 0 = off. api/README.md has the measurements.
  int64_t lane_spin_us = 200;
  // Inference ledger entries are appended by a writer thread of their own,
  // which answers each request once its entry is written (api/ledger_writer.h);
  // false = the thread that completes the request appends it (a lane, unless
  // it hands the answer off). Off by default: on, every answer leaves from
  // the writer's thread (a cross-CPU hand-off), and scenario 7's overhead
  // went from 1.51x to 2.2x the echo; on is for data dirs on disks shared
  // with heavy writers, where a lane could block in its append
  // (api/README.md has both measurements).
  bool ledger_writer = false;
  bool calibrate_uploads = true;          // calibrate each upload on a lane
  // Prometheus text metrics over HTTP (GET /metrics); "" = none. Port 0
  // picks a free port (see metrics_address()).
  std::string metrics_listen = "127.0.0.1:8502";
  // Billing prices as JSON (docs/operations.md); "" = the built-in defaults.
  std::string price_table;
  // Ledger durability (storage/catalog.h, docs/operations.md): 0 = every
  // inference's ledger entry is fsynced before its response; N > 0 = it is
  // written to the OS before the response (survives kill -9) and fsynced
  // within N ms (a power loss may lose the last ~N ms of entries).
  int ledger_sync_ms = 100;
  // With ledger_sync_ms > 0: the ledger journal's size in KiB
  // (Catalog::Options::ledger_journal_bytes): a lane stages each inference's
  // entry there (~1 us) instead of writing it to RocksDB (~13-40 us of lane
  // time a request), and the catalog moves them every ledger_sync_ms. 8 MiB
  // holds ~40,000 entries. 0 = off.
  int ledger_journal_kib = 8192;
  // Every this many seconds each tenant's stored bytes are sampled into the
  // ledger and billed for the interval; 0 = no storage metering.
  int storage_sample_seconds = 3600;
  // An info log line every this many seconds summing up requests, errors,
  // latency and queues since the last one; 0 = none.
  int summary_seconds = 60;
  // RAM budget of the host cache of loaded models (cache/host_tier.h): a
  // model's segment size counts against it; larger models are refused at
  // upload, others evicted when the room is needed.
  int64_t host_cache_bytes = int64_t{4} << 30;
  int host_loader_threads = 2;  // segment loads in flight
  // The device tier (api/device_tier.h): a simulated accelerator from this
  // --sim-device spec (cache/device.h; "" = none), or `device`, a GPU the
  // caller opened (--device; requests are placed on it only with a
  // device_executor). At most one of the two.
  std::string sim_device;
  std::shared_ptr<Device> device;
  // How requests placed on `device` run (a GPU's executor); empty for the
  // simulated device. A real device without one is listed and cached, but
  // requests are never placed on it.
  DeviceExecutor device_executor;
  // Host cache eviction: "miss-cost" (expected miss cost, fair shares) or
  // "lru" (plain least-recently-used, the benchmarks' baseline; implies no
  // keep-alive).
  std::string host_eviction = "miss-cost";
  // Keep-alive expiry and pre-warm of host-cache models from their idle-time
  // histograms (cache/README.md), checked every `keepalive_tick_ms`, which
  // must be shorter than `prewarm_margin_ms`.
  bool keepalive = true;
  int keepalive_tick_ms = 20;
  int prewarm_margin_ms = 50;
};

class Server {
 public:
  // Starts serving; returns once the port is bound. Errors: the data dir
  // cannot be created, the catalog cannot be opened (e.g. locked by another
  // server), or the address cannot be bound.
  static Result<std::unique_ptr<Server>> Start(const ServerOptions& options);
  ~Server();

  // "HOST:PORT" with the port actually bound.
  const std::string& address() const;
  // "HOST:PORT" of the metrics endpoint, "" when there is none.
  const std::string& metrics_address() const;
  // Path of the admin token file, or "" when ORRERY_ADMIN_TOKEN supplied it.
  const std::string& admin_token_path() const;

  // Stops accepting, lets in-flight RPCs finish (up to `grace`), drains the
  // lanes and closes the catalog. Idempotent.
  void Shutdown(std::chrono::milliseconds grace = std::chrono::seconds(30));

  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

 private:
  struct Impl;
  explicit Server(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace orrery
