// orrery-loadgen: open-loop (Poisson or trace) and closed-loop load from many
// tenants and models over real gRPC to orreryd, started here on a loopback
// port with a temp data dir or given by --server. Prints and writes per
// tenant latency percentiles, goodput, deadline attainment, early vs late
// rejections, service vs weight and Jain's index. See bench/README.md.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <absl/synchronization/mutex.h>
#include <grpcpp/grpcpp.h>

#include "api/proto/grpc_predict_v2.grpc.pb.h"
#include "api/proto/orrery.grpc.pb.h"
#include "bench/loadgen/cold_start.h"
#include "bench/loadgen/driver.h"
#include "bench/loadgen/report.h"
#include "bench/loadgen/server_calls.h"
#include "base/cpu_set.h"
#include "bench/loadgen/workload.h"

// tests/integration/orreryd_process.h starts the binary named by this macro.
static std::string g_orreryd_path;  // NOLINT
#define ORRERYD_PATH g_orreryd_path.c_str()
#include "tests/integration/orreryd_process.h"

namespace orrery::loadgen {
namespace {

struct Options {
  std::string server;
  std::string admin_token;
  std::string orreryd = ORRERY_DEFAULT_ORRERYD;
  std::vector<std::string> orreryd_args;
  std::vector<std::string> tenants;
  std::vector<std::string> models;  // NAME=PATH.onnx
  std::string model_dir;            // every NAME.onnx in it
  std::vector<std::string> streams;
  std::string trace;
  double duration_s = 10;
  double warmup_s = 2;
  uint64_t seed = 1;
  std::string csv;
  std::string summary_csv;
  std::string json;
  std::string plot;
  std::string plot_script = ORRERY_PLOT_SCRIPT;
  std::vector<std::string> echo;
  int echo_rounds = 0;
  int channels = 2;
  int completion_threads = 2;
  std::string client_cpus;
  int upload_threads = 4;
  int cold_start = 0;
};

int Fail(const std::string& what) {
  std::cerr << "orrery-loadgen: " << what << "\n";
  return 1;
}

int Main(int argc, char** argv) {
  Options o;
  CLI::App app{"orrery-loadgen: open-loop multi-tenant load against orreryd"};
  app.add_option("--server", o.server, "orreryd HOST:PORT (default: start one on loopback with a temp data dir)");
  app.add_option("--admin-token", o.admin_token, "Admin token of --server (default: ORRERY_ADMIN_TOKEN)");
  app.add_option("--orreryd", o.orreryd, "orreryd binary to start")->capture_default_str();
  app.add_option("--orreryd-arg", o.orreryd_args, "Extra argument for the started orreryd (repeatable)")
      ->allow_extra_args(false);
  app.add_option("--tenant", o.tenants, "NAME[:WEIGHT] (repeatable; tenants named by streams default to weight 1)")
      ->allow_extra_args(false);
  app.add_option("--model", o.models, "NAME=PATH.onnx, uploaded for every tenant that uses it (repeatable)")
      ->allow_extra_args(false);
  app.add_option("--model-dir", o.model_dir, "Directory whose every NAME.onnx is a model NAME (as --model)");
  app.add_option("--stream", o.streams,
                 "TENANT:MODEL:RATE[:DEADLINE_MS]; RATE req/s Poisson, or cN for closed loop with N outstanding")
      ->allow_extra_args(false);
  app.add_option("--trace", o.trace, "CSV of time_s,tenant,model[,deadline_ms] arrivals (times from the start)");
  app.add_option("--duration", o.duration_s, "Measured seconds")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--warmup", o.warmup_s, "Seconds of the same load before measuring")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--seed", o.seed, "Poisson seed")->capture_default_str();
  app.add_option("--csv", o.csv, "Per-request CSV");
  app.add_option("--summary-csv", o.summary_csv, "Per-tenant CSV");
  app.add_option("--json", o.json, "Summary as JSON");
  app.add_option("--plot", o.plot, "PNG plot (python3-matplotlib; needs --csv)");
  app.add_option("--plot-script", o.plot_script, "Plot script")->capture_default_str();
  app.add_option("--echo", o.echo,
                 "HOST:PORT of orrery-echo: after the run, replay the same schedule there with the same payloads "
                 "(repeatable: each in turn; the floor is the one with the lowest p50)");
  app.add_option("--echo-rounds", o.echo_rounds,
                 "With --echo: compare in N rounds instead, each a slice of the schedule (--duration / N after "
                 "0.25 s of warm-up) on orreryd, then on each echo in turn; the overhead and the echoes' p50 are "
                 "pooled over the rounds (0: one replay per echo after the run)")
      ->capture_default_str()
      ->check(CLI::Range(0, 100));
  app.add_option("--client-cpus", o.client_cpus,
                 "After starting orreryd, pin this client to these CPUs (e.g. 0 with orreryd's --serving-cpus 0 "
                 "and --lane-cpus 1), so that it does not take lane time; default: not pinned");
  app.add_option("--channels", o.channels, "gRPC channels (connections)")->capture_default_str()->check(
      CLI::Range(1, 64));
  app.add_option("--completion-threads", o.completion_threads, "Threads draining the completion queue")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  app.add_option("--upload-threads", o.upload_threads, "Uploads in flight while setting up")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  app.add_option("--cold-start", o.cold_start,
                 "Instead of the load: N times per stream, evict its model from the host cache, time one "
                 "inference (cold) and the next (warm); rates are ignored")
      ->check(CLI::NonNegativeNumber);
  CLI11_PARSE(app, argc, argv);
  // As in orreryd (api/server.cc): no lock-order graph in Debian's
  // debug-mode Abseil for gRPC's mutexes, which this client shares CPU 0 with.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);

  // Workload first: bad flags fail before anything starts.
  std::vector<StreamSpec> streams;
  for (const std::string& s : o.streams) {
    Result<StreamSpec> spec = ParseStream(s);
    if (!spec.ok()) return Fail(spec.status().message());
    streams.push_back(*spec);
  }
  const int64_t warmup_ns = static_cast<int64_t>(o.warmup_s * 1e9);
  const int64_t duration_ns = static_cast<int64_t>(o.duration_s * 1e9);
  std::vector<Arrival> arrivals = PoissonSchedule(streams, warmup_ns + duration_ns, o.seed);
  if (!o.trace.empty()) {
    Result<std::vector<Arrival>> trace = ReadTrace(o.trace, &streams);
    if (!trace.ok()) return Fail(trace.status().message());
    arrivals.insert(arrivals.end(), trace->begin(), trace->end());
    std::stable_sort(arrivals.begin(), arrivals.end(),
                     [](const Arrival& a, const Arrival& b) { return a.at_ns < b.at_ns; });
  }
  if (streams.empty()) return Fail("no load: give --stream or --trace");
  std::map<std::string, std::string> model_paths;
  if (!o.model_dir.empty()) {
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(o.model_dir, ec)) {
      if (entry.path().extension() == ".onnx") model_paths[entry.path().stem().string()] = entry.path().string();
    }
    if (ec || model_paths.empty()) return Fail("--model-dir '" + o.model_dir + "': no NAME.onnx files");
  }
  for (const std::string& m : o.models) {
    size_t eq = m.find('=');
    if (eq == std::string::npos || eq == 0) return Fail("--model '" + m + "': expected NAME=PATH.onnx");
    model_paths[m.substr(0, eq)] = m.substr(eq + 1);
  }
  std::vector<std::pair<std::string, uint32_t>> tenants;
  std::map<std::string, size_t> tenant_index;
  for (const std::string& t : o.tenants) {
    Result<TenantSpec> spec = ParseTenant(t);
    if (!spec.ok()) return Fail(spec.status().message());
    tenant_index[spec->name] = tenants.size();
    tenants.emplace_back(spec->name, spec->weight);
  }
  std::map<std::string, std::set<std::string>> uses;  // tenant -> models
  for (const StreamSpec& s : streams) {
    if (!model_paths.count(s.model)) return Fail("stream model '" + s.model + "' has no --model NAME=PATH");
    if (!tenant_index.count(s.tenant)) {
      tenant_index[s.tenant] = tenants.size();
      tenants.emplace_back(s.tenant, 1);
    }
    uses[s.tenant].insert(s.model);
  }

  std::vector<int> client_cpus;
  if (!o.client_cpus.empty()) {
    Result<std::vector<int>> cpus = ParseCpuList(o.client_cpus);
    if (!cpus.ok()) return Fail("--client-cpus: " + cpus.status().message());
    client_cpus = std::move(cpus).value();
  }

  // The server.
  std::unique_ptr<testing::OrrerydProcess> proc;
  std::string address = o.server;
  std::string admin_token = o.admin_token;
  if (admin_token.empty() && std::getenv("ORRERY_ADMIN_TOKEN") != nullptr) admin_token = std::getenv("ORRERY_ADMIN_TOKEN");
  if (address.empty()) {
    g_orreryd_path = o.orreryd;
    proc = std::make_unique<testing::OrrerydProcess>(o.orreryd_args);
    if (!proc->Start()) return Fail("could not start " + o.orreryd);
    address = proc->address();
    admin_token = proc->admin_token();
    std::cerr << "orrery-loadgen: started orreryd on " << address << "\n";
  } else if (admin_token.empty()) {
    return Fail("--server needs --admin-token or ORRERY_ADMIN_TOKEN");
  }
  if (!client_cpus.empty()) {
    // After the spawn: orreryd must not inherit the client's mask.
    if (Status s = PinThisProcess(client_cpus); !s.ok()) return Fail("--client-cpus: " + s.message());
  }
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  std::vector<std::unique_ptr<inference::GRPCInferenceService::Stub>> infer_stubs;
  for (int i = 0; i < o.channels; ++i) {
    grpc::ChannelArguments args;
    args.SetInt("orrery.loadgen.channel", i);  // distinct args: a connection each
    args.SetMaxReceiveMessageSize(-1);
    channels.push_back(grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args));
    infer_stubs.push_back(inference::GRPCInferenceService::NewStub(channels.back()));
  }
  auto admin = v1::AdminService::NewStub(channels[0]);
  auto models = v1::ModelService::NewStub(channels[0]);

  // Tenants (unique names per run, so a shared server keeps older runs apart),
  // with quotas high enough that only the scheduler rejects.
  const std::string run_id = std::to_string(getpid()) + "-" +
                             std::to_string(std::chrono::system_clock::now().time_since_epoch().count() % 1000000);
  std::map<std::string, std::string> keys, ids;  // name -> api key / tenant id
  for (const auto& [name, weight] : tenants) {
    grpc::ClientContext ctx;
    WithAuth(&ctx, admin_token);
    v1::CreateTenantRequest req;
    req.set_name("lg-" + run_id + "-" + name);
    req.set_weight(weight);
    req.mutable_quotas()->set_max_inflight_requests(1000000);
    req.mutable_quotas()->set_requests_per_second(1000000);
    req.mutable_quotas()->set_burst_requests(1000000);
    v1::CreateTenantResponse resp;
    grpc::Status st = admin->CreateTenant(&ctx, req, &resp);
    if (!st.ok()) return Fail("create tenant " + name + ": " + st.error_message());
    keys[name] = resp.api_key();
    ids[resp.tenant().id()] = name;
  }
  std::map<std::string, std::string> model_bytes;
  std::vector<std::pair<std::string, std::string>> to_upload;  // tenant, model
  for (const auto& [tenant, used] : uses) {
    for (const std::string& m : used) {
      if (!model_bytes.count(m)) {
        model_bytes[m] = ReadAll(model_paths[m]);
        if (model_bytes[m].empty()) return Fail("model file '" + model_paths[m] + "' is empty or unreadable");
      }
      to_upload.emplace_back(tenant, m);
    }
  }
  const auto upload_start = std::chrono::steady_clock::now();
  {
    std::atomic<size_t> next{0};
    std::mutex failed_mu;
    std::string failed;
    std::vector<std::thread> uploaders;
    for (int i = 0; i < o.upload_threads; ++i) {
      uploaders.emplace_back([&] {
        for (size_t k = next++; k < to_upload.size(); k = next++) {
          const auto& [tenant, m] = to_upload[k];
          grpc::Status st = Upload(models.get(), keys[tenant], m, model_bytes[m]);
          if (!st.ok()) {
            std::lock_guard<std::mutex> lock(failed_mu);
            failed = "upload " + m + " for " + tenant + ": " + st.error_message();
            next = to_upload.size();
          }
        }
      });
    }
    for (std::thread& t : uploaders) t.join();
    if (!failed.empty()) return Fail(failed);
  }
  const size_t uploads = to_upload.size();
  const double upload_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - upload_start).count();
  std::cerr << "orrery-loadgen: uploaded " << uploads << " models in " << upload_s << " s\n";
  std::vector<Target> targets;
  std::vector<StreamInfo> infos;
  for (size_t i = 0; i < streams.size(); ++i) {
    const StreamSpec& s = streams[i];
    Target t;
    t.stub = infer_stubs[i % infer_stubs.size()].get();
    t.channel = channels[i % channels.size()];
    t.api_key = keys[s.tenant];
    grpc::Status st = BuildRequest(models.get(), t.api_key, s.model, &t.request);
    if (!st.ok()) return Fail("describe " + s.model + ": " + st.error_message());
    if (s.deadline_us > 0) (*t.request.mutable_parameters())["timeout_us"].set_int64_param(s.deadline_us);
    t.deadline_us = s.deadline_us;
    t.closed = s.closed;
    targets.push_back(std::move(t));
    infos.push_back({s.tenant, s.model});
  }

  if (o.cold_start > 0) {
    std::string json = "{\"cold_start\":[";
    for (size_t i = 0; i < streams.size(); ++i) {
      std::vector<ColdStart> runs;
      grpc::Status st = MeasureColdStarts(admin.get(), admin_token, infer_stubs[0].get(),
                                          "lg-" + run_id + "-" + streams[i].tenant, targets[i].api_key,
                                          targets[i].request, o.cold_start, &runs);
      if (!st.ok()) return Fail("cold start of " + streams[i].model + ": " + st.error_message());
      std::cout << ColdStartTable(streams[i].model, runs);
      json += (i ? "," : "") + ColdStartJson(streams[i].model, runs);
    }
    v1::CacheTierInfo cache;
    if (HostCacheInfo(admin.get(), admin_token, &cache).ok()) {
      json += "],\"host_loader_bytes_per_sec\":" + std::to_string(cache.bytes_per_sec()) + "}";
    } else {
      json += "]}";
    }
    if (!o.json.empty()) {
      std::ofstream out(o.json);
      out << json << "\n";
      if (!out) return Fail("cannot write " + o.json);
    }
    if (proc) proc->Stop();
    return 0;
  }

  // The run. Server stats are snapshotted at the end of the warm-up, at the
  // end of the measured window and after the last response. Service (lane
  // time per tenant) is the difference over the measured window itself: the
  // drain after it serves every closed-loop stream's last `c` requests
  // whatever the weights (64 each in scenario 1, ~1/8 of w1's service), so
  // counting up to the last response overstated the light tenants' shares.
  // Counters and model statistics are read after the last response.
  v1::SchedulerStatsResponse before, at_window_end, after;
  bool have_window_end = false;
  v1::CacheTierInfo cache_before, cache_after;
  // Admitted requests that missed, by cause (orreryd's metrics; only for an
  // orreryd this run started, whose metrics address it knows).
  const std::string metrics_address = proc ? proc->metrics_address() : "";
  std::map<std::string, double> misses_before;
  RunOptions ro;
  ro.warmup_ns = warmup_ns;
  ro.duration_ns = duration_ns;
  ro.completion_threads = o.completion_threads;
  std::chrono::steady_clock::time_point stats_before_at;
  ro.on_warmup_end = [&] {
    stats_before_at = std::chrono::steady_clock::now();
    (void)SchedulerStats(admin.get(), admin_token, &before);
    (void)HostCacheInfo(admin.get(), admin_token, &cache_before);
    misses_before = AdmittedMisses(metrics_address);
  };
  ro.on_window_end = [&] { have_window_end = SchedulerStats(admin.get(), admin_token, &at_window_end).ok(); };
  std::cerr << "orrery-loadgen: " << tenants.size() << " tenants, " << streams.size() << " streams, "
            << arrivals.size() << " scheduled arrivals, " << o.warmup_s << " s warm-up + " << o.duration_s << " s\n";
  std::vector<Record> records = RunWorkload(targets, arrivals, ro);
  grpc::Status st = SchedulerStats(admin.get(), admin_token, &after);
  if (!st.ok()) return Fail("scheduler stats: " + st.error_message());
  const double stats_window_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - stats_before_at).count();
  std::map<std::string, int64_t> service;
  for (const auto& t : after.tenants()) {
    auto name = ids.find(t.tenant_id());
    if (name == ids.end()) continue;
    int64_t base = 0, end = t.service_ns();
    for (const auto& b : before.tenants()) {
      if (b.tenant_id() == t.tenant_id()) base = b.service_ns();
    }
    for (const auto& e : at_window_end.tenants()) {
      if (have_window_end && e.tenant_id() == t.tenant_id()) end = e.service_ns();
    }
    service[name->second] = end - base;
    std::cerr << "orrery-loadgen: scheduler: tenant " << name->second << " weight " << t.weight() << " admitted "
              << t.admitted() << " rejected " << t.rejected_deadline() << "+" << t.rejected_in_flight() << " dropped "
              << t.dropped() << " completed " << t.completed() << " longest wait " << t.max_wait_ns() / 1e6
              << " ms\n";
  }
  Summary summary = Summarise(records, infos, tenants, o.duration_s, service);
  summary.server["upload_seconds"] = upload_s;
  summary.server["models_uploaded"] = static_cast<double>(uploads);
  if (HostCacheInfo(admin.get(), admin_token, &cache_after).ok()) {
    // Counters over the measured window (from the end of the warm-up).
    const auto delta = [&](const char* name, double a, double b) { summary.server[name] = a - b; };
    delta("host_hits", cache_after.hits(), cache_before.hits());
    delta("host_joins", cache_after.joins(), cache_before.joins());
    delta("host_misses", cache_after.misses(), cache_before.misses());
    delta("host_loads", cache_after.loads(), cache_before.loads());
    delta("host_evictions", cache_after.evictions(), cache_before.evictions());
    delta("host_prewarms", cache_after.prewarms(), cache_before.prewarms());
    delta("host_expirations", cache_after.expirations(), cache_before.expirations());
    delta("host_bytes_loaded", cache_after.bytes_loaded(), cache_before.bytes_loaded());
    delta("host_load_seconds", cache_after.load_seconds(), cache_before.load_seconds());
    delta("host_idle_byte_seconds", cache_after.idle_byte_seconds(), cache_before.idle_byte_seconds());
    summary.server["host_capacity_bytes"] = static_cast<double>(cache_after.capacity_bytes());
    summary.server["host_resident_bytes_end"] = static_cast<double>(cache_after.resident_bytes());
    summary.server["host_loader_bytes_per_sec"] = cache_after.bytes_per_sec();
  }
  {
    // The scheduler's own counters over the measured window and drain:
    // runs parked between layers, taken out of fair order for warm
    // weights, batched, dropped before running, lane time in callbacks.
    const auto delta = [&](const char* name, double a, double b) { summary.server[name] = a - b; };
    delta("sched_preemptions", static_cast<double>(after.preemptions()), static_cast<double>(before.preemptions()));
    delta("sched_affinity_dispatches", static_cast<double>(after.affinity_dispatches()),
          static_cast<double>(before.affinity_dispatches()));
    delta("sched_batches", static_cast<double>(after.batches()), static_cast<double>(before.batches()));
    delta("sched_lane_callback_ms", static_cast<double>(after.lane_callback_ns()) / 1e6,
          static_cast<double>(before.lane_callback_ns()) / 1e6);
    double dropped_after = 0, dropped_before = 0;
    for (const auto& t : after.tenants()) dropped_after += static_cast<double>(t.dropped());
    for (const auto& t : before.tenants()) dropped_before += static_cast<double>(t.dropped());
    delta("sched_dropped", dropped_after, dropped_before);
  }
  for (const auto& [name, n] : AdmittedMisses(metrics_address)) {
    summary.server[name] = n - misses_before[name];  // over the measured window
  }
  if (after.has_device()) {
    // The device tier over the measured window (orreryd --sim-device).
    const v1::DeviceSchedulerInfo& a = after.device();
    const v1::DeviceSchedulerInfo& b = before.device();
    const auto delta = [&](const char* name, double x, double y) { summary.server[name] = x - y; };
    summary.server["device_window_seconds"] = stats_window_s;
    delta("device_placed", a.placed_device(), b.placed_device());
    delta("device_placed_cpu", a.placed_cpu(), b.placed_cpu());
    delta("device_prewarms", a.prewarms(), b.prewarms());
    delta("device_transfers", a.transfers(), b.transfers());
    delta("device_bytes_transferred", a.bytes_transferred(), b.bytes_transferred());
    delta("device_transfer_seconds", a.transfer_seconds(), b.transfer_seconds());
    delta("device_busy_seconds", a.device_busy_seconds(), b.device_busy_seconds());
    delta("device_overlap_seconds", a.overlap_seconds(), b.overlap_seconds());
    delta("device_fair_reordered", a.fair_reordered(), b.fair_reordered());
    delta("device_waited_unplanned_transfer", a.waited_unplanned_transfer(), b.waited_unplanned_transfer());
    delta("device_late", a.late(), b.late());
    delta("device_late_slow_transfer", a.late_slow_transfer(), b.late_slow_transfer());
    delta("device_late_unplanned_transfer", a.late_unplanned_transfer(), b.late_unplanned_transfer());
    delta("device_late_overrun", a.late_overrun(), b.late_overrun());
  }
  for (const auto& m : after.models()) {
    // model_id is tenant_id/name@version: report as tenant/model.
    const std::string& id = m.model_id();
    size_t slash = id.find('/');
    if (slash == std::string::npos || !ids.count(id.substr(0, slash))) continue;
    const std::string label = ids[id.substr(0, slash)] + "/" + id.substr(slash + 1);
    summary.model_error_p50[label] = m.error_p50();
    summary.model_error_p99[label] = m.error_p99();
  }

  // The echo comparison: the host's speed changes for seconds at a time
  // (here by up to 1.4x in every part of a round trip), so with one replay
  // after the run, orreryd and the echo could each land in a different
  // spell; --echo-rounds alternates short slices so that both see the same.
  std::vector<std::unique_ptr<inference::GRPCInferenceService::Stub>> echo_stubs;
  std::vector<std::vector<Target>> echo_targets;
  for (const std::string& address : o.echo) {
    auto echo_channel = grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
    echo_stubs.push_back(inference::GRPCInferenceService::NewStub(echo_channel));
    echo_targets.push_back(targets);
    for (Target& t : echo_targets.back()) {
      t.stub = echo_stubs.back().get();
      t.channel = echo_channel;
      t.api_key.clear();
    }
  }
  RunOptions eo = ro;
  eo.on_warmup_end = nullptr;
  eo.on_window_end = nullptr;
  std::vector<std::vector<Record>> echo_records(o.echo.size());
  if (!o.echo.empty() && o.echo_rounds > 0) {
    eo.warmup_ns = 250'000'000;
    eo.duration_ns = duration_ns / o.echo_rounds;
    std::vector<Record> ours;
    for (int round = 0; round < o.echo_rounds; ++round) {
      std::vector<Record> slice = RunWorkload(targets, arrivals, eo);
      ours.insert(ours.end(), slice.begin(), slice.end());
      for (size_t i = 0; i < o.echo.size(); ++i) {
        std::vector<Record> echo_slice = RunWorkload(echo_targets[i], arrivals, eo);
        echo_records[i].insert(echo_records[i].end(), echo_slice.begin(), echo_slice.end());
      }
    }
    // The overhead as the main run's summary computes it, over the rounds.
    const TenantSummary rounds = Summarise(ours, infos, tenants, o.duration_s, {}).total;
    if (rounds.ok == 0) return Fail("orreryd answered nothing in the echo rounds");
    summary.echo_rounds = o.echo_rounds;
    summary.rounds_overhead_p50_ms = rounds.overhead_p50_ms;
  } else {
    for (size_t i = 0; i < o.echo.size(); ++i) echo_records[i] = RunWorkload(echo_targets[i], arrivals, eo);
  }
  for (size_t i = 0; i < o.echo.size(); ++i) {
    const std::string& address = o.echo[i];
    std::vector<double> lat, request_path, response_path;
    for (const Record& r : echo_records[i]) {
      if (r.grpc_code != 0) continue;
      lat.push_back(static_cast<double>(r.latency_ns) / 1e6);
      if (r.request_path_ns >= 0) request_path.push_back(static_cast<double>(r.request_path_ns) / 1e6);
      if (r.response_path_ns >= 0) response_path.push_back(static_cast<double>(r.response_path_ns) / 1e6);
    }
    if (lat.empty()) return Fail("echo server " + address + " answered nothing");
    EchoSummary e{address, Percentile(lat, 0.5), Percentile(lat, 0.99)};
    if (!request_path.empty()) e.request_path_p50_ms = Percentile(request_path, 0.5);
    if (!response_path.empty()) e.response_path_p50_ms = Percentile(response_path, 0.5);
    summary.echoes.push_back(e);
    if (summary.echo_p50_ms < 0 || e.p50_ms < summary.echo_p50_ms) {
      summary.echo_p50_ms = e.p50_ms;
      summary.echo_p99_ms = e.p99_ms;
    }
  }

  std::cout << SummaryTable(summary);
  if (!o.csv.empty() && !WriteRequestsCsv(o.csv, records, infos)) return Fail("cannot write " + o.csv);
  if (!o.summary_csv.empty() && !WriteSummaryCsv(o.summary_csv, summary)) return Fail("cannot write " + o.summary_csv);
  if (!o.json.empty()) {
    std::ofstream out(o.json);
    out << SummaryJson(summary) << "\n";
    if (!out) return Fail("cannot write " + o.json);
  }
  if (!o.plot.empty()) {
    if (o.csv.empty() || o.summary_csv.empty()) return Fail("--plot needs --csv and --summary-csv");
    const std::string cmd = "/usr/bin/python3 '" + o.plot_script + "' '" + o.csv + "' '" + o.summary_csv + "' '" +
                            o.plot + "'";
    if (std::system(cmd.c_str()) != 0) return Fail("plot failed: " + cmd);
  }
  if (proc) proc->Stop();
  return 0;
}

}  // namespace
}  // namespace orrery::loadgen

int main(int argc, char** argv) { return orrery::loadgen::Main(argc, argv); }
