#include "api/server.h"

#include <pthread.h>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <filesystem>
#include <limits>
#include <mutex>
#include <optional>
#include <thread>

#include <absl/synchronization/mutex.h>
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/resource_quota.h>
#include <spdlog/spdlog.h>

#include "api/admin_service.h"
#include "api/billing.h"
#include "api/billing_service.h"
#include "api/health_service.h"
#include "api/inference_service.h"
#include "api/metrics_http.h"
#include "api/model_costs.h"
#include "api/periodic_task.h"
#include "api/model_service.h"
#include "api/service_context.h"
#include "base/cpu_set.h"
#include "storage/segment_recovery.h"
#include "storage/segment_store.h"
#include "tenancy/api_key.h"

namespace orrery {

namespace {

// Every stored version is known to the host tier from the start (sizes from
// the records); one larger than the current budget is logged and refused
// when a request needs it.
Status RegisterStoredModels(const Catalog& catalog, HostTier* host, DeviceTier* device) {
  ORRERY_ASSIGN_OR_RETURN(std::vector<TenantRecord> tenants, catalog.ListTenants());
  for (const TenantRecord& t : tenants) {
    ORRERY_ASSIGN_OR_RETURN(std::vector<ModelRecord> models, catalog.ListModels(t.id()));
    for (const ModelRecord& m : models) {
      if (Status s = host->Register(m); !s.ok()) spdlog::warn("host cache: {}", s.message());
      RegisterWithDevice(device, m);
    }
  }
  return Status::Ok();
}

// A real device's transfer uploads the model's weights through its executor
// (the copy the scheduler planned on the link), and its eviction releases
// them; the simulated device keeps its timed link (empty hooks). The
// weights are read from the compiled model in host RAM: a request's
// transfer finds it there (the request holds it), an operator's device
// pin or prefetch of a model that is not in host RAM moves nothing and the
// model's first device run uploads it (the executor counts that fallback).
DeviceTierHooks GpuTierHooks(const ServerOptions& options, HostTier* host) {
  DeviceTierHooks hooks;
  const DeviceExecutor& exec = options.device_executor;
  if (options.device == nullptr || options.device->simulated() || !exec.upload) return hooks;
  hooks.upload = [host, upload = exec.upload](const ModelKey& key, const std::vector<uint32_t>& pages) -> Status {
    ModelCache::ModelPtr model = host->Peek(key);
    if (model == nullptr) {
      spdlog::info("device tier: {} is not in host RAM; its first device run uploads its weights", key.ToString());
      return Status::Ok();
    }
    return upload(key, *model, pages);
  };
  hooks.release = exec.release;
  return hooks;
}

Result<HostTier::Options> HostTierOptionsOf(const ServerOptions& options) {
  HostTier::Options o{.budget_bytes = options.host_cache_bytes, .loader_threads = options.host_loader_threads};
  if (options.host_eviction == "lru") {
    o.policy = EvictionPolicy::kLru;
  } else if (options.host_eviction != "miss-cost") {
    return Status::InvalidArgument("host eviction policy '" + options.host_eviction +
                                   "' is unknown: use miss-cost or lru");
  }
  if (options.keepalive_tick_ms <= 0 || options.keepalive_tick_ms >= options.prewarm_margin_ms) {
    return Status::InvalidArgument("keep-alive tick (" + std::to_string(options.keepalive_tick_ms) +
                                   " ms) must be > 0 and shorter than the prewarm margin (" +
                                   std::to_string(options.prewarm_margin_ms) + " ms)");
  }
  o.keepalive = options.keepalive && o.policy != EvictionPolicy::kLru;
  o.prewarm_margin_ns = int64_t{options.prewarm_margin_ms} * kNsPerMs;
  return o;
}

}  // namespace

struct Server::Impl {
  // Declaration order is destruction order in reverse: the gRPC server goes
  // first, then the services, the lanes, the cache and finally the catalog.
  std::unique_ptr<Catalog> catalog;
  std::unique_ptr<SegmentStore> segments;
  std::unique_ptr<Tenants> tenants;
  std::unique_ptr<CatalogCache> catalog_cache;
  std::unique_ptr<ModelCache> cache;
  std::unique_ptr<HostTier> host;  // after the cache: its loaders stop first
  std::unique_ptr<DeviceTier> device;  // before the scheduler: its workers call into it
  std::unique_ptr<Admission> admission;
  std::unique_ptr<FairScheduler> scheduler;
  // Before the serving pool and the services, which append to it; Shutdown
  // drains it after them.
  std::unique_ptr<LedgerWriter> ledger_writer;
  // Before the services: the inference service posts to it; Shutdown drains
  // it once the scheduler has answered everything.
  std::unique_ptr<ServingPool> serving;
  ServerMetrics metrics;
  ServiceContext ctx;
  std::unique_ptr<AdminServiceImpl> admin;
  std::unique_ptr<ModelServiceImpl> models;
  std::unique_ptr<InferenceServiceImpl> inference;
  std::unique_ptr<BillingServiceImpl> billing;
  std::unique_ptr<HealthServiceImpl> health;
  std::unique_ptr<grpc::Server> grpc_server;
  // ModelInfer's completion queues, one per thread serving it
  // (InferenceServiceImpl::Serve).
  std::vector<std::unique_ptr<grpc::ServerCompletionQueue>> infer_queues;
  std::vector<std::thread> infer_threads;
  std::unique_ptr<MetricsHttpServer> metrics_http;  // stopped before the scheduler goes
  std::string address;
  std::string metrics_address;
  std::string admin_token_path;
  bool shut_down = false;

  // Storage metering: samples every tenant's stored bytes periodically.
  std::unique_ptr<PeriodicTask> sampler;
  // One info line a minute: what the server did since the last one.
  std::unique_ptr<PeriodicTask> summary;
  // Host cache keep-alive expiry and pre-warm (HostTier::Maintain).
  std::unique_ptr<PeriodicTask> keepalive;
  ServerMetrics::Totals last_totals;

  // A Start that failed after the gRPC server was built: nothing was
  // served yet, so nothing waits (Server::Shutdown does the rest).
  ~Impl() {
    if (grpc_server != nullptr && !shut_down) grpc_server->Shutdown(std::chrono::system_clock::now());
    StopInferenceQueues();
  }

  // Once every answer is sent: each queue's last events are drained by its
  // thread (or here, when none started).
  void StopInferenceQueues() {
    for (auto& q : infer_queues) q->Shutdown();
    for (std::thread& t : infer_threads) t.join();
    if (infer_threads.empty()) {
      void* tag = nullptr;
      bool ok = false;
      for (auto& q : infer_queues) {
        while (q->Next(&tag, &ok)) {
        }
      }
    }
    infer_threads.clear();
    infer_queues.clear();
  }

  void SampleStorage(int64_t interval_ms) {
    Result<std::vector<TenantRecord>> tenants_list = tenants->List();
    if (!tenants_list.ok()) {
      spdlog::warn("storage metering: {}", tenants_list.status().ToString());
      return;
    }
    for (const TenantRecord& t : *tenants_list) {
      Result<Catalog::Usage> usage = catalog->TenantUsage(t.id());
      if (!usage.ok() || usage->total_bytes == 0) continue;
      LedgerEntry e;
      e.set_kind(LedgerEntry::STORAGE);
      e.set_tenant_id(t.id());
      e.set_status("OK");
      e.set_stored_bytes(usage->total_bytes);
      e.set_interval_ms(interval_ms);
      e.set_cost_micros(StorageCostMicros(ctx.prices, usage->total_bytes, interval_ms));
      if (Result<bool> r = catalog->AppendLedger(&e); !r.ok()) {
        spdlog::warn("storage metering for tenant {}: {}", t.id(), r.status().ToString());
      }
    }
  }

  void LogSummary(std::chrono::seconds every) {
    const ServerMetrics::Totals now = metrics.totals();
    const uint64_t ok = now.ok - last_totals.ok;
    const uint64_t failed = now.failed - last_totals.failed;
    const double mean_ms =
        ok == 0 ? 0.0 : static_cast<double>(now.ok_latency_ns - last_totals.ok_latency_ns) / 1e6 / static_cast<double>(ok);
    last_totals = now;
    const SchedulerStats s = scheduler->Stats();
    std::string device;
    if (s.has_device) {
      device = fmt::format("; {} device: {} runs and {} transfers so far, last minute compute {:.0f}% / link {:.0f}% busy",
                           s.device.device.name, s.device.placed_device, s.device.transfers,
                           s.device.device.compute_utilisation * 100, s.device.device.link_utilisation * 100);
    }
    spdlog::info("last {} s: {} inferences ({} ok, {} failed), mean ok latency {:.3f} ms; {} queued on {} lanes "
                 "({:.0f}% busy, last minute); {} tenants seen by the scheduler{}",
                 every.count(), ok + failed, ok, failed, mean_ms, s.queued, s.lanes, s.lane_utilisation * 100,
                 s.tenants.size(), device);
  }
};

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Server::~Server() { Shutdown(); }

const std::string& Server::address() const { return impl_->address; }
const std::string& Server::metrics_address() const { return impl_->metrics_address; }
const std::string& Server::admin_token_path() const { return impl_->admin_token_path; }

Result<std::unique_ptr<Server>> Server::Start(const ServerOptions& options) {
  ORRERY_RETURN_IF_ERROR(CheckCpusAllowed(options.lane_cpus, "lane CPUs"));
  ORRERY_RETURN_IF_ERROR(CheckCpusAllowed(options.serving_cpus, "serving CPUs"));
  ORRERY_RETURN_IF_ERROR(CheckCpusAllowed(options.ledger_writer_cpus, "ledger writer CPUs"));
  // Debian's Abseil is built without NDEBUG, so every absl::Mutex lock in
  // gRPC kept a lock-order graph for deadlock detection: 8-10% of the front
  // end's CPU per request (A/B, docs/benchmarks.md, night of 2026-11-23).
  // Only absl::Mutex is affected: gRPC's locks, not ours (std::mutex).
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  // Before any thread exists, so that all of them inherit the mask.
  if (!options.serving_cpus.empty()) ORRERY_RETURN_IF_ERROR(PinThisThread(options.serving_cpus));
  auto impl = std::make_unique<Impl>();
  std::error_code ec;
  std::filesystem::create_directories(options.data_dir, ec);
  if (ec) {
    return Status::FailedPrecondition("cannot create data dir '" + options.data_dir + "': " + ec.message());
  }
  ORRERY_ASSIGN_OR_RETURN(impl->ctx.admin_token, LoadOrCreateAdminToken(options.data_dir, &impl->admin_token_path));
  ORRERY_ASSIGN_OR_RETURN(impl->ctx.prices, LoadPriceTable(options.price_table));
  if (options.storage_sample_seconds < 0) {
    return Status::InvalidArgument("storage sample interval must not be negative");
  }
  if (options.ledger_sync_ms < 0) return Status::InvalidArgument("ledger sync interval must not be negative");
  if (options.ledger_journal_kib < 0) return Status::InvalidArgument("ledger journal size must not be negative");
  ORRERY_ASSIGN_OR_RETURN(impl->catalog, Catalog::Open((std::filesystem::path(options.data_dir) / "catalog").string(),
                                                       Catalog::Options{.ledger_sync_interval_ms = options.ledger_sync_ms,
                                                                        .ledger_journal_bytes = static_cast<size_t>(
                                                                            options.ledger_journal_kib) << 10}));
  // Segments are derived from the catalog: recover them against it before
  // anything can upload or load.
  ORRERY_ASSIGN_OR_RETURN(impl->segments, SegmentStore::Open(options.data_dir));
  ORRERY_ASSIGN_OR_RETURN(SegmentRecoveryReport recovered, RecoverSegments(*impl->catalog, impl->segments.get()));
  spdlog::info("segments: {} live, {} orphans and {} unfinished writes removed", recovered.live,
               recovered.orphans_removed, recovered.temps_removed);
  impl->tenants = std::make_unique<Tenants>(impl->catalog.get());
  impl->catalog_cache = std::make_unique<CatalogCache>(impl->catalog.get(), impl->tenants.get());
  // A GPU uploads weights from their values: its segments keep them.
  impl->cache = std::make_unique<ModelCache>(impl->catalog.get(), impl->segments.get(),
                                             /*packed_only_images=*/options.device == nullptr);
  ORRERY_ASSIGN_OR_RETURN(HostTier::Options host_options, HostTierOptionsOf(options));
  ORRERY_ASSIGN_OR_RETURN(impl->host, HostTier::Create(host_options, impl->cache.get(), SteadyClock::Get()));
  std::shared_ptr<Device> device = options.device;
  if (!options.sim_device.empty()) {
    if (device != nullptr) return Status::InvalidArgument("--sim-device and a GPU (--device) are exclusive");
    ORRERY_ASSIGN_OR_RETURN(device, SimulatedDevice::Create(options.sim_device));
  }
  if (device != nullptr) {
    // Requests are placed only on a device that can run them: the
    // simulated one (on the CPU, with the device's timing) or one with an
    // executor (a GPU: the models whose plans it supports).
    const bool place = device->simulated() || options.device_executor.run != nullptr;
    ORRERY_ASSIGN_OR_RETURN(impl->device, MakeDeviceTier(device, place, GpuTierHooks(options, impl->host.get())));
    spdlog::info("device tier: {}; {}", device->Describe(),
                 place ? "requests are placed on it or the CPU lanes by predicted completion"
                       : "listed and cached only: requests run on the CPU lanes (no executor for it)");
  }
  ORRERY_RETURN_IF_ERROR(RegisterStoredModels(*impl->catalog, impl->host.get(), impl->device.get()));
  impl->admission = std::make_unique<Admission>();
  if (options.max_batch < 1) return Status::InvalidArgument("max batch must be at least 1");
  if (options.lane_threads < 1) return Status::InvalidArgument("lane threads must be at least 1");
  if (options.affinity_window_us < 0) return Status::InvalidArgument("affinity window must be at least 0");
  if (!(options.lane_speed_alpha >= 0 && options.lane_speed_alpha <= 1)) {
    return Status::InvalidArgument("lane speed alpha must be within [0, 1]");
  }
  if (!(options.light_share_fraction >= 0 && options.light_share_fraction <= 1)) {
    return Status::InvalidArgument("light share fraction must be in [0, 1]");
  }
  if (!(options.deadline_margin_fraction >= 0 && options.deadline_margin_fraction < 1)) {
    return Status::InvalidArgument("deadline margin must be in [0, 1)");
  }
  const bool margin = options.deadline_margin_fraction > 0;
  if (!(options.deadline_margin_min_ms >= 0 && options.deadline_margin_min_ms <= 5)) {
    return Status::InvalidArgument("deadline margin floor must be within [0, 5] ms");
  }
  if (options.recent_speed_window_ms < 0 || options.recent_speed_window_ms > 10'000) {
    return Status::InvalidArgument("recent speed window must be within [0, 10000] ms");
  }
  if (!(options.queue_horizon_fraction > 0 && options.queue_horizon_fraction <= 1)) {
    return Status::InvalidArgument("queue horizon must be in (0, 1]");
  }
  if (options.admission_probe_ms < 0) return Status::InvalidArgument("admission probe interval must not be negative");
  if (options.lane_spin_us < 0) return Status::InvalidArgument("lane spin must not be negative");
  if (options.lane_answer_queue < 0) return Status::InvalidArgument("lane answer queue must be 0 (auto) or more");
  const bool own_lane_cpus = CpuListsDisjoint(options.lane_cpus, options.serving_cpus);
  impl->scheduler = std::make_unique<FairScheduler>(
      FairSchedulerOptions{.lanes = options.lanes,
                           .lane_threads = options.lane_threads,
                           .lane_cpus = options.lane_cpus,
                           .max_batch = options.max_batch,
                           .light_share_fraction = options.light_share_fraction,
                           .affinity_window_ns = options.affinity_window_us * 1000,
                           .lane_speed_alpha = options.lane_speed_alpha,
                           .deadline_margin_fraction = options.deadline_margin_fraction,
                           .deadline_margin_min_ns = margin ? std::llround(options.deadline_margin_min_ms * 1e6) : 0,
                           .deadline_margin_max_ns = margin ? 5'000'000 : 0,
                           .recent_speed_window_ns = options.recent_speed_window_ms * 1'000'000,
                           .at_risk_plans_stack = options.at_risk_plans_stack,
                           .drop_at_predicted_cost = options.drop_at_predicted_cost,
                           .queue_horizon_fraction = options.queue_horizon_fraction,
                           .probe_interval_ns = options.admission_probe_ms * 1'000'000,
                           .lane_spin_ns = own_lane_cpus ? options.lane_spin_us * 1000 : 0,
                           .device = impl->device != nullptr ? impl->device->lanes.get() : nullptr,
                           .device_executor = options.device_executor});
  const int lanes = impl->scheduler->lanes();
  ORRERY_RETURN_IF_ERROR(LoadCostProfiles(*impl->catalog, impl->scheduler.get()));

  impl->ctx.catalog = impl->catalog.get();
  impl->ctx.tenants = impl->tenants.get();
  impl->ctx.catalog_cache = impl->catalog_cache.get();
  impl->ctx.cache = impl->cache.get();
  impl->ctx.host = impl->host.get();
  impl->ctx.device = impl->device.get();
  impl->ctx.admission = impl->admission.get();
  impl->ctx.scheduler = impl->scheduler.get();
  impl->ctx.metrics = &impl->metrics;
  impl->serving = std::make_unique<ServingPool>(options.max_rpc_threads, options.serving_cpus);
  impl->ctx.serving = impl->serving.get();
  impl->ctx.ledger_fsync_each = options.ledger_sync_ms == 0;
  if (options.ledger_writer) {
    impl->ledger_writer = std::make_unique<LedgerWriter>(impl->catalog.get(), options.ledger_writer_cpus);
    impl->ctx.ledger = impl->ledger_writer.get();
  }
  impl->ctx.lane_answer_queue = static_cast<size_t>(
      options.lane_answer_queue > 0 ? options.lane_answer_queue
      : own_lane_cpus              ? std::numeric_limits<int>::max()
                                   : 1);
  impl->ctx.max_model_bytes = options.max_model_bytes;
  impl->ctx.max_input_bytes = options.max_input_bytes;
  impl->ctx.max_batch = options.max_batch;
  impl->ctx.calibrate_uploads = options.calibrate_uploads;
  impl->admin = std::make_unique<AdminServiceImpl>(&impl->ctx);
  impl->models = std::make_unique<ModelServiceImpl>(&impl->ctx);
  impl->inference = std::make_unique<InferenceServiceImpl>(&impl->ctx);
  impl->billing = std::make_unique<BillingServiceImpl>(&impl->ctx);
  impl->health = std::make_unique<HealthServiceImpl>(&impl->ctx);
  impl->ctx.start_unix_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                std::chrono::system_clock::now().time_since_epoch())
                                .count();

  // grpc.health.v1 (for load balancers and grpc_health_probe) is our own
  // (api/health_service.h), not gRPC's, which brings the callback API's
  // threads; server reflection lets grpc_cli / grpcurl list and call every
  // service.
  grpc::EnableDefaultHealthCheckService(false);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(options.listen, grpc::InsecureServerCredentials(), &port);
  builder.SetMaxReceiveMessageSize(options.max_request_bytes);
  builder.SetMaxSendMessageSize(options.max_request_bytes);
  grpc::ResourceQuota quota("orreryd");
  quota.SetMaxThreads(options.max_rpc_threads);
  builder.SetResourceQuota(quota);
  // A handler thread that finishes goes back to polling instead of exiting.
  // gRPC's default (at most 2 idle pollers) made every burst of more than
  // two RPCs in flight create threads and end them again: ~400 thread
  // creations a second at 2,000 inferences/s, a quarter of the serving
  // CPU's time (bench/README.md, scenario 7). Idle threads stay, up to the
  // peak number in flight (bounded by max_rpc_threads).
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MAX_POLLERS, options.max_rpc_threads);
  builder.RegisterService(impl->admin.get());
  builder.RegisterService(impl->models.get());
  builder.RegisterService(impl->inference.get());
  builder.RegisterService(impl->billing.get());
  builder.RegisterService(impl->health.get());
  // Two ModelInfer threads per serving CPU (per core, at most 8, when not
  // pinned: receiving needs a few cores, not all), each with its own queue:
  // each receives and queues requests on its own, without handing them
  // over. With one per CPU, a flood on a CPU shared with other busy threads
  // (scenario 2: A at 10x its share, the client on the same CPU) left
  // requests waiting in gRPC for 9-12 ms (B's p99 6.9x its p99 alone); with
  // two, 2.9-3.1 ms, as the callback API's 3.4-4.0.
  const size_t infer_cpus = options.serving_cpus.empty()
                                ? std::clamp<size_t>(std::thread::hardware_concurrency(), 1, 8)
                                : options.serving_cpus.size();
  const size_t infer_threads = 2 * infer_cpus;
  for (size_t i = 0; i < infer_threads; ++i) impl->infer_queues.push_back(builder.AddCompletionQueue());
  impl->grpc_server = builder.BuildAndStart();
  if (!impl->grpc_server || port == 0) {
    return Status::Unavailable("cannot listen on '" + options.listen + "' (address in use or invalid)");
  }
  std::string host = options.listen.substr(0, options.listen.rfind(':'));
  impl->address = host + ":" + std::to_string(port);
  if (!options.metrics_listen.empty()) {
    Impl* raw = impl.get();
    ORRERY_ASSIGN_OR_RETURN(impl->metrics_http,
                            MetricsHttpServer::Start(options.metrics_listen, [raw] {
                              const ModelLoaderStats loader = raw->cache->loader().stats();
                              const TierStats host = raw->host->stats();
                              std::optional<TierStats> device;
                              if (raw->device != nullptr) device = raw->device->cache->Stats();
                              std::optional<LedgerWriter::Stats> ledger;
                              if (raw->ledger_writer != nullptr) ledger = raw->ledger_writer->stats();
                              const Catalog::LedgerJournalStats journal = raw->catalog->ledger_journal_stats();
                              return raw->metrics.Render(*raw->scheduler, &loader, &host, device ? &*device : nullptr,
                                                         ledger ? &*ledger : nullptr, &journal);
                            }));
    impl->metrics_address = impl->metrics_http->address();
  }
  for (auto& q : impl->infer_queues) {
    impl->infer_threads.emplace_back([service = impl->inference.get(), q = q.get()] {
      (void)pthread_setname_np(pthread_self(), "orreryd-infer");
      service->Serve(q);
    });
  }
  impl->ctx.ready.store(true);
  Impl* raw = impl.get();
  if (options.storage_sample_seconds > 0) {
    const std::chrono::seconds every(options.storage_sample_seconds);
    impl->sampler = std::make_unique<PeriodicTask>(every, [raw, every] {
      raw->SampleStorage(std::chrono::duration_cast<std::chrono::milliseconds>(every).count());
    });
  }
  if (options.summary_seconds > 0) {
    const std::chrono::seconds every(options.summary_seconds);
    impl->summary = std::make_unique<PeriodicTask>(every, [raw, every] { raw->LogSummary(every); });
  }
  {  // keep-alive off: Maintain still trims malloc arenas after evictions
    impl->keepalive = std::make_unique<PeriodicTask>(std::chrono::milliseconds(options.keepalive_tick_ms), [raw] {
      const HostTier::MaintainReport r = raw->host->Maintain();
      for (const ModelKey& k : r.expired) spdlog::debug("host cache: keep-alive expired {}", k.ToString());
      for (const ModelKey& k : r.prewarmed) spdlog::debug("host cache: pre-warming {}", k.ToString());
    });
  }
  spdlog::info("orreryd listening on {} ({} lanes of {} thread{}{}{}, data dir '{}'); metrics {}; host cache {} bytes, "
               "{} eviction, keep-alive {}",
               impl->address, lanes, options.lane_threads, options.lane_threads == 1 ? "" : "s",
               options.lane_cpus.empty() ? "" : " on CPUs " + FormatCpuList(options.lane_cpus),
               options.serving_cpus.empty() ? "" : ", serving on CPUs " + FormatCpuList(options.serving_cpus),
               options.data_dir, impl->metrics_address.empty() ? "off" : "on http://" + impl->metrics_address + "/metrics",
               options.host_cache_bytes, options.host_eviction, host_options.keepalive ? "on" : "off");
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

void Server::Shutdown(std::chrono::milliseconds grace) {
  if (!impl_ || impl_->shut_down) return;
  impl_->shut_down = true;
  impl_->ctx.ready.store(false);
  impl_->health->Stop();  // NOT_SERVING, and open health watches end
  spdlog::info("shutting down: finishing in-flight requests");
  impl_->grpc_server->Shutdown(std::chrono::system_clock::now() + grace);
  impl_->grpc_server->Wait();
  impl_->metrics_http.reset();
  impl_->sampler.reset();
  impl_->summary.reset();
  impl_->keepalive.reset();
  impl_->scheduler->Shutdown();
  impl_->serving.reset();  // the answers lanes handed off, before the catalog closes
  impl_->ledger_writer.reset();  // their ledger entries and answers
  impl_->StopInferenceQueues();  // every answer's completion drained
  impl_->catalog.reset();  // closes RocksDB cleanly
  spdlog::info("shutdown complete");
}

}  // namespace orrery
