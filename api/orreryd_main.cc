// orreryd: the Orrery server. Embedded defaults: data in ./orrery-data, gRPC on
// 127.0.0.1:8500. SIGTERM / SIGINT stop it gracefully.
#include <malloc.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include "api/server.h"
#include "api/version.h"
#include "base/cpu_set.h"
#include "cache/cuda_backend.h"

int main(int argc, char** argv) {
  // Large blocks (1 MiB and up: segment read buffers that loaded models'
  // weights live in, packed weights) are mmapped one by one and go back to
  // the OS when freed. glibc's default raises this threshold after the first
  // such free, and later blocks then come from arenas that do not shrink:
  // cycling 100 models of ~3 MiB through a 160 MiB host cache left orreryd
  // at ~980 MB RSS instead of ~500 MB (cache/README.md, memory bound).
  // The threshold sits at 1 MiB, not lower, because a request's own blocks
  // (output tensors, the encoded response, gRPC's slices) are often 128 KiB
  // or more: as fresh mmaps each one was faulted in page by page and
  // unmapped after the answer, ~98 page faults per mlp_deep request (128 KiB
  // output; the lane's CPU per request 2.74 -> 2.43 ms). The 2 MiB trim
  // threshold keeps an arena's free top for the next request instead of
  // returning it after every answer. Cost: S4's peak RSS 2034 -> 2049-2055
  // MiB (bound 2104).
  mallopt(M_MMAP_THRESHOLD, 1 << 20);
  mallopt(M_TRIM_THRESHOLD, 2 << 20);
  orrery::ServerOptions options;
  std::string port_file;
  std::string metrics_port_file;
  std::string log_level = "info";
  std::string device = "cpu";
  CLI::App app{"orreryd: multi-tenant ONNX inference server"};
  app.set_version_flag("--version", std::string("orreryd ") + orrery::kOrreryVersion);
  app.add_option("--data-dir", options.data_dir, "Directory for the catalog and the admin token")
      ->capture_default_str();
  app.add_option("--listen", options.listen, "gRPC address HOST:PORT (port 0 picks a free one)")
      ->capture_default_str();
  app.add_option("--max-model-bytes", options.max_model_bytes, "Largest ONNX model accepted")
      ->capture_default_str();
  app.add_option("--max-input-bytes", options.max_input_bytes,
                 "Largest total size of one inference's decoded inputs (0 = no limit)")
      ->capture_default_str();
  app.add_option("--max-request-bytes", options.max_request_bytes, "Largest single gRPC message")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--max-rpc-threads", options.max_rpc_threads,
                 "Threads handling RPCs; past it new RPCs get RESOURCE_EXHAUSTED at once")
      ->capture_default_str()
      ->check(CLI::Range(8, 1 << 16));
  app.add_option("--lane-spin-us", options.lane_spin_us,
                 "An idle lane polls its queue this long before sleeping, when --lane-cpus and --serving-cpus "
                 "are disjoint (0 = off)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{100'000}));
  app.add_option("--host-cache-bytes", options.host_cache_bytes,
                 "RAM budget for loaded models (segment bytes); larger models are refused at upload")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--host-loader-threads", options.host_loader_threads, "Model loads (segment reads) in flight")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--host-eviction", options.host_eviction,
                 "Host cache eviction: miss-cost (expected miss cost, fair shares) or lru (plain LRU, no keep-alive)")
      ->capture_default_str()
      ->check(CLI::IsMember({"miss-cost", "lru"}));
  std::string keepalive = options.keepalive ? "on" : "off";
  app.add_option("--keepalive", keepalive,
                 "Host cache keep-alive expiry and pre-warm from each model's idle-time histogram (on|off)")
      ->capture_default_str()
      ->check(CLI::IsMember({"on", "off"}));
  app.add_option("--keepalive-tick-ms", options.keepalive_tick_ms,
                 "How often keep-alive expiry and pre-warm run (shorter than --prewarm-margin-ms)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--prewarm-margin-ms", options.prewarm_margin_ms,
                 "Start a pre-warm this long before its predicted reload must start")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--lanes", options.lanes,
                 "CPU execution lanes (0 = one per --lane-threads CPUs of --lane-cpus, else of the cores)")
      ->capture_default_str();
  app.add_option("--lane-threads", options.lane_threads,
                 "Threads per lane: a request's kernels split across them (a lane group)")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  std::string lane_cpus;
  std::string serving_cpus;
  std::string ledger_writer_cpus;
  app.add_option("--lane-cpus", lane_cpus,
                 "Pin the lanes to these CPUs (e.g. 1 or 2-7; lane i on the i-th, cyclically); default: not pinned");
  app.add_option("--serving-cpus", serving_cpus,
                 "Run every other thread (gRPC, loaders, ledger) on these CPUs (e.g. 0); default: any CPU");
  app.add_option("--lane-answer-queue", options.lane_answer_queue,
                 "A lane answers the request it ran itself unless this many requests are queued, then a serving "
                 "thread does (0 = auto: 1, or never when --lane-cpus and --serving-cpus are disjoint)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--max-batch", options.max_batch,
                 "Largest batch formed from queued same-model requests (1 = no batching)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--affinity-window-us", options.affinity_window_us,
                 "A lane may keep running the model it just ran (warm weights) while its tenant is at most this much "
                 "lane time ahead of fair order (0 = strict fair order)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--lane-speed-alpha", options.lane_speed_alpha,
                 "A lane predicts each run as the model's estimate x its recent speed (measured / estimate of its "
                 "last runs of any model), an EWMA with this weight per run (0 = the estimate alone; planning keeps "
                 "the estimate either way)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--light-share", options.light_share_fraction,
                 "A tenant using less than this fraction of its fair share of the lanes goes before a tenant over its "
                 "share, whose requests that can then no longer start in time are dropped (0 = off: fair and "
                 "deadline-at-risk order for everyone)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--deadline-margin", options.deadline_margin_fraction,
                 "Finish this share of each request's time to its deadline early (within --deadline-margin-min-ms "
                 "and 5 ms), for gRPC and the network on the way back to the client (0 = plan to the deadline exactly)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 0.99));
  app.add_option("--deadline-margin-min-ms", options.deadline_margin_min_ms,
                 "The --deadline-margin's floor: the way back takes as long for a tight deadline as for a loose one")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 5.0));
  app.add_option("--recent-speed-window-ms", options.recent_speed_window_ms,
                 "Admission plans each request with how much slower than predicted the lanes ran over this last "
                 "stretch (host stall spells reject tight deadlines at once instead of missing them; 0 = off)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{10'000}));
  app.add_option("--at-risk-stack", options.at_risk_plans_stack,
                 "Between layers, run a queued request first when it would miss its deadline waiting for the rest of "
                 "the running and the parked requests at their slowdown bounds (false: the running request's "
                 "predicted remainder alone)")
      ->capture_default_str();
  app.add_option("--drop-at-predicted-cost", options.drop_at_predicted_cost,
                 "Drop a queued request once it can no longer finish by its deadline at its predicted cost (false: "
                 "already once past its latest start at its model's slowdown bound, as admission plans it)")
      ->capture_default_str();
  app.add_option("--queue-horizon", options.queue_horizon_fraction,
                 "Admit a request only if its predicted wait for queued and running work is at most this fraction "
                 "of the time left to its deadline: the queue stays short, so a slow spell of the lanes turns into "
                 "rejections at admission rather than drops of admitted requests (1 = the deadline alone)")
      ->capture_default_str()
      ->check(CLI::Range(0.01, 1.0));
  app.add_option("--admission-probe-ms", options.admission_probe_ms,
                 "With the lanes idle, admit a request refused for its deadline if its model had nothing admitted "
                 "for this long and its predicted cost alone fits (so an over-grown estimate is corrected by a run "
                 "instead of refusing everything; 0 = off)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{60'000}));
  app.add_option("--ledger-writer", options.ledger_writer,
                 "Append inference ledger entries on a writer thread of their own, which answers each request once "
                 "its entry is written (false: the lane or serving thread that completes the request appends it)")
      ->capture_default_str();
  app.add_option("--ledger-writer-cpus", ledger_writer_cpus,
                 "Run the ledger writer's thread on these CPUs (e.g. 0-1: any; default: the serving CPUs)");
  app.add_option("--calibrate-uploads", options.calibrate_uploads,
                 "Calibrate each uploaded model on a lane (billed to its tenant)")
      ->capture_default_str();
  app.add_option("--port-file", port_file, "Write the bound HOST:PORT to this file once serving");
  app.add_option("--metrics-listen", options.metrics_listen,
                 "Prometheus metrics HOST:PORT (GET /metrics); empty = off")
      ->capture_default_str();
  app.add_option("--metrics-port-file", metrics_port_file,
                 "Write the bound metrics HOST:PORT to this file once serving");
  app.add_option("--price-table", options.price_table,
                 "Billing prices as JSON (docs/operations.md); default: built-in prices");
  app.add_option("--summary-seconds", options.summary_seconds,
                 "Log a summary line (requests, errors, latency, queues) this often (0 = off)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--ledger-sync-ms", options.ledger_sync_ms,
                 "0: fsync each inference's ledger entry before answering; N: answer once it is written to the "
                 "OS (survives kill -9) and fsync every N ms (power loss may lose the last N ms of entries)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--ledger-journal-kib", options.ledger_journal_kib,
                 "With --ledger-sync-ms > 0: stage inference ledger entries in a journal file of this size (survives "
                 "kill -9; moved into the catalog every --ledger-sync-ms) instead of writing each to the catalog "
                 "before answering (0 = off)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--storage-sample-seconds", options.storage_sample_seconds,
                 "Sample and bill every tenant's stored bytes this often (0 = off)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--device", device,
                 "cpu, auto (a GPU if there is one) or cuda[:N]; without a GPU orreryd logs it "
                 "and runs CPU-only")
      ->capture_default_str();
  app.add_option("--sim-device", options.sim_device,
                 "A simulated accelerator: memory=BYTES,link-gbps=G,latency-us=L[,page=BYTES][,speedup=S] "
                 "(execution runs on the CPU with the device's timing; docs/operations.md)");
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  options.keepalive = keepalive == "on";
  spdlog::set_level(spdlog::level::from_str(log_level));
  for (auto [text, cpus, flag] : {std::tuple{&lane_cpus, &options.lane_cpus, "--lane-cpus"},
                                  std::tuple{&serving_cpus, &options.serving_cpus, "--serving-cpus"},
                                  std::tuple{&ledger_writer_cpus, &options.ledger_writer_cpus, "--ledger-writer-cpus"}}) {
    if (text->empty()) continue;
    orrery::Result<std::vector<int>> parsed = orrery::ParseCpuList(*text);
    if (!parsed.ok()) {
      std::fprintf(stderr, "%s: %s\n", flag, parsed.status().message().c_str());
      return 2;
    }
    *cpus = std::move(parsed).value();
  }

  orrery::Result<orrery::DeviceSelection> selection = orrery::ParseDeviceSelection(device);
  if (!selection.ok()) {
    std::fprintf(stderr, "%s\n", selection.status().message().c_str());
    return 2;
  }
  // The GPU is opened (arena, staging, link measured) and becomes the
  // server's device tier (cache, transfers, CacheList, stats); the scheduler
  // places requests on it by predicted completion when their model's plan
  // runs there (the module's runtime::CudaExecutor), else on the CPU lanes.
  // The CUDA backend is a module loaded here, only when the driver reports a
  // GPU (cache/cuda_backend.h), so a CPU server maps no CUDA library. Kept
  // open until shutdown; the executor outlives the server.
  std::unique_ptr<orrery::Device> gpu;
  std::unique_ptr<orrery::GpuExecutor> gpu_executor;
  if (selection->kind != orrery::DeviceSelection::Kind::kCpu) {
    orrery::Result<orrery::OpenedGpu> opened = orrery::OpenCudaGpu(selection->ordinal);
    if (opened.ok()) {
      gpu = std::move(opened->device);
      gpu_executor = std::move(opened->executor);
      spdlog::info("device: {} (opened)", gpu->Describe());
      orrery::GpuExecutor* exec = gpu_executor.get();
      options.device_executor.supports = [exec](const orrery::InferenceRequest& r) {
        return r.model != nullptr && exec->Supports(*r.model, r.inputs).ok();
      };
      options.device_executor.run = [exec](const orrery::InferenceRequest& r) {
        return exec->Run(r.cache_key.ToString(), *r.model, r.inputs);
      };
      // The device tier's transfers upload the weights, its evictions free
      // them (api/device_tier.h).
      options.device_executor.upload = [exec](const orrery::ModelKey& key, const orrery::CompiledModel& model,
                                              const std::vector<uint32_t>& pages) {
        return exec->Upload(key.ToString(), model, pages);
      };
      options.device_executor.release = [exec](const orrery::ModelKey& key) { exec->Release(key.ToString()); };
    } else if (selection->kind == orrery::DeviceSelection::Kind::kCuda) {
      spdlog::warn("--device {}: {}; continuing CPU-only", device, opened.status().message());
    } else {
      spdlog::info("--device auto: {}; running CPU-only", opened.status().message());
    }
  }

  // Block the stop signals in every thread; the main thread waits for them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  if (gpu != nullptr && !options.sim_device.empty()) {
    std::fprintf(stderr, "--sim-device and --device %s are exclusive\n", device.c_str());
    return 2;
  }
  options.device = std::move(gpu);
  orrery::Result<std::unique_ptr<orrery::Server>> server = orrery::Server::Start(options);
  if (!server.ok()) {
    spdlog::error("cannot start: {}", server.status().ToString());
    return 1;
  }
  if (!(*server)->admin_token_path().empty()) {
    spdlog::info("admin token in {}", (*server)->admin_token_path());
  } else {
    spdlog::info("admin token from ORRERY_ADMIN_TOKEN");
  }
  // Write then rename, so a reader never sees a partial address. The metrics
  // file goes first: once the gRPC port file exists, both are there.
  auto write_address = [](const std::string& path, const std::string& address) {
    const std::string tmp = path + ".tmp";
    std::ofstream(tmp) << address << "\n";
    std::rename(tmp.c_str(), path.c_str());
  };
  if (!metrics_port_file.empty()) write_address(metrics_port_file, (*server)->metrics_address());
  if (!port_file.empty()) write_address(port_file, (*server)->address());

  int sig = 0;
  sigwait(&stop_signals, &sig);
  spdlog::info("received {}", sig == SIGTERM ? "SIGTERM" : "SIGINT");
  (*server)->Shutdown();
  return 0;
}
