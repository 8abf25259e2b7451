// orrery-run: run an ONNX model offline with Orrery's runtime.
//
//   orrery-run MODEL.onnx --input NAME=FILE.pb ... --output-dir DIR
//       One inference; inputs and outputs are ONNX TensorProto files
//       (outputs written as DIR/<output_name>.pb), one summary line per output.
//   orrery-run MODEL.onnx --bench N --threads T [--concurrency C]
//              [--shape NAME=D1,D2,...] [--profile]
//       Random inputs (dynamic dims from --shape, default 1), a warm-up, then
//       N timed runs, each using a lane group of T threads (like ONNX
//       Runtime's intra-op threads), spread over C runs in flight (default
//       1); prints one JSON line with p50/p99/min/mean latency, throughput
//       and the plan (steps, peak arena bytes vs. the naive sum of
//       intermediates). To tell the machine's noise from ours, it also
//       counts per timed run (getrusage: the whole process at C = 1, the
//       run's thread otherwise) page faults (`minflt_per_run`) and runs
//       during which the OS preempted us (`preempted_runs`, involuntary
//       context switches), and gives p99 over the other runs
//       (`p99_unpreempted_ms`; 0 when every run was preempted). The
//       calling thread's CPU time per run gives `p50_cpu_ms` / `p99_cpu_ms`
//       and `off_cpu_ms_per_run` (wall - CPU: with the kernel's paravirt
//       steal accounting, time the host or the OS ran something else);
//       `steal_share` is the host's steal time over the timed window
//       (/proc/stat, all CPUs). At T > 1, `lane_*` count the lane group's
//       hand-offs (runtime/lane_group.h, LaneGroupStats) per run,
//       `lane_prewakes_per_run` the workers woken ahead of a parallel step,
//       `lane_rescues` the lane threads moved onto a waiting one's core
//       because they were stalled in a task (another process had their
//       core).
//   --runs-csv FILE (with --bench): one line per timed run with the above
//       (wall, CPU and off-CPU ms, faults, context switches, lane hand-offs)
//       and every step's ms, to tell a uniformly slow run (the host) from
//       a spike in one step.
//   --spin-us N (with --bench): how long idle lane workers spin before
//       sleeping (runtime/lane_group.h; default 50).
//   --stall-us N (with --bench): how long a lane thread in a task may be
//       off its core before the thread waiting for it moves it onto its own
//       (LaneGroupOptions::stall_ns; default 100, 0: never).
//   --cpus C0,C1,... (with --bench): pin the lane group's threads, caller
//       first (LaneGroupOptions::cpus), as the scheduler's lanes are.
//   --host-probe-us N (with --bench): before each timed run, a fixed
//       register-only loop of about N us (FMA chains, no memory traffic) on
//       the same thread, its time in --runs-csv (`probe_us`): a run that is
//       slow because the core was slow has a slow probe next to it.
//   --profile (either mode) then prints one line per executed step: op,
//       node name, mean time, share, GFLOP/s and GB/s (of the mean), the
//       step's fastest time over the runs (robust to preemption) and, at
//       T > 1, the step's lane hand-offs per run (LaneGroupStats): the
//       caller's barrier waits (`wait_ms`) and jobs that found a worker
//       asleep (`asleep`), to tell an uneven split from slow work.
//
// Exit codes: 0 ok, 1 runtime error (the Status message on stderr), 2 bad usage.
#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <random>
#include <span>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "base/fma_probe.h"
#include "base/json.h"
#include "runtime/execution.h"
#include "runtime/lane_group.h"
#include "runtime/model.h"
#include "runtime/tensor_proto.h"

namespace orrery {
namespace {

constexpr int kUsageError = 2;
constexpr int kRuntimeError = 1;

constexpr const char* kUsage =
    "usage: orrery-run MODEL.onnx --input NAME=FILE.pb [--input ...] --output-dir DIR "
    "[--profile]\n"
    "       orrery-run MODEL.onnx --bench N [--threads T] [--concurrency C] "
    "[--shape NAME=D1,D2,...] [--profile] [--runs-csv FILE] [--spin-us N] [--stall-us N] "
    "[--host-probe-us N] [--cpus C0,C1,...]\n";

struct Args {
  std::string model;
  std::vector<std::pair<std::string, std::string>> inputs;
  std::string output_dir;
  int64_t bench = -1;
  int64_t threads = 1;
  int64_t concurrency = 1;
  std::map<std::string, Shape> shapes;
  bool profile = false;
  std::string runs_csv;
  int64_t spin_us = -1;  // -1: LaneGroupOptions' default
  int64_t stall_us = -1;  // -1: LaneGroupOptions' default
  int64_t host_probe_us = 0;
  std::vector<int> cpus;  // --cpus: the lane group's threads pinned, caller first
};

int UsageError(const std::string& msg) {
  std::fprintf(stderr, "orrery-run: %s\n%s", msg.c_str(), kUsage);
  return kUsageError;
}

int RuntimeError(const Status& st) {
  std::fprintf(stderr, "orrery-run: %s\n", st.ToString().c_str());
  return kRuntimeError;
}

bool ParseInt(const std::string& s, int64_t* out) {
  if (s.empty()) return false;
  size_t pos = 0;
  try {
    *out = std::stoll(s, &pos);
  } catch (...) {
    return false;
  }
  return pos == s.size();
}

bool SplitNameValue(const std::string& s, std::string* name, std::string* value) {
  const size_t eq = s.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == s.size()) return false;
  *name = s.substr(0, eq);
  *value = s.substr(eq + 1);
  return true;
}

// Returns "" on success, else the usage error message.
std::string ParseArgs(int argc, char** argv, Args* args) {
  std::vector<std::string> a(argv + 1, argv + argc);
  auto need_value = [&](size_t i) { return i + 1 < a.size(); };
  for (size_t i = 0; i < a.size(); ++i) {
    const std::string& arg = a[i];
    if (arg == "--input") {
      if (!need_value(i)) return "--input needs NAME=FILE.pb";
      std::string name, file;
      if (!SplitNameValue(a[++i], &name, &file)) return "--input needs NAME=FILE.pb, got '" + a[i] + "'";
      args->inputs.emplace_back(name, file);
    } else if (arg == "--output-dir") {
      if (!need_value(i)) return "--output-dir needs a directory";
      args->output_dir = a[++i];
    } else if (arg == "--bench") {
      if (!need_value(i) || !ParseInt(a[i + 1], &args->bench) || args->bench < 1) {
        return "--bench needs a positive iteration count";
      }
      ++i;
    } else if (arg == "--threads") {
      if (!need_value(i) || !ParseInt(a[i + 1], &args->threads) || args->threads < 1) {
        return "--threads needs a positive count";
      }
      ++i;
    } else if (arg == "--concurrency") {
      if (!need_value(i) || !ParseInt(a[i + 1], &args->concurrency) || args->concurrency < 1) {
        return "--concurrency needs a positive count";
      }
      ++i;
    } else if (arg == "--shape") {
      if (!need_value(i)) return "--shape needs NAME=D1,D2,...";
      std::string name, dims;
      if (!SplitNameValue(a[++i], &name, &dims)) return "--shape needs NAME=D1,D2,..., got '" + a[i] + "'";
      Shape shape;
      std::stringstream ss(dims);
      std::string d;
      while (std::getline(ss, d, ',')) {
        int64_t v = 0;
        if (!ParseInt(d, &v) || v < 0) return "--shape " + name + ": bad dim '" + d + "'";
        shape.push_back(v);
      }
      args->shapes[name] = shape;
    } else if (arg == "--profile") {
      args->profile = true;
    } else if (arg == "--runs-csv") {
      if (!need_value(i)) return "--runs-csv needs a file";
      args->runs_csv = a[++i];
    } else if (arg == "--host-probe-us") {
      if (!need_value(i) || !ParseInt(a[i + 1], &args->host_probe_us) ||
          args->host_probe_us < 0) {
        return "--host-probe-us needs a count >= 0";
      }
      ++i;
    } else if (arg == "--cpus") {
      if (!need_value(i)) return "--cpus needs C0,C1,...";
      std::stringstream ss(a[++i]);
      std::string c;
      while (std::getline(ss, c, ',')) {
        int64_t v = 0;
        if (!ParseInt(c, &v) || v < 0 || v > 4095) return "--cpus: bad CPU '" + c + "'";
        args->cpus.push_back(static_cast<int>(v));
      }
    } else if (arg == "--stall-us") {
      if (!need_value(i) || !ParseInt(a[i + 1], &args->stall_us) || args->stall_us < 0) {
        return "--stall-us needs a count >= 0";
      }
      ++i;
    } else if (arg == "--spin-us") {
      if (!need_value(i) || !ParseInt(a[i + 1], &args->spin_us) || args->spin_us < 0) {
        return "--spin-us needs a count >= 0";
      }
      ++i;
    } else if (arg == "-h" || arg == "--help") {
      return "help";
    } else if (!arg.empty() && arg[0] == '-') {
      return "unknown option '" + arg + "'";
    } else if (args->model.empty()) {
      args->model = arg;
    } else {
      return "unexpected argument '" + arg + "'";
    }
  }
  if (args->model.empty()) return "missing MODEL.onnx";
  const bool bench = args->bench > 0;
  if (bench && (!args->inputs.empty() || !args->output_dir.empty())) {
    return "--bench cannot be combined with --input / --output-dir";
  }
  if (!bench && args->output_dir.empty()) return "give --output-dir DIR (or --bench N)";
  if (!bench && !args->shapes.empty()) return "--shape is only used with --bench";
  if (!bench && (!args->runs_csv.empty() || args->spin_us >= 0 || args->stall_us >= 0 ||
                 args->host_probe_us > 0 ||
                 !args->cpus.empty())) {
    return "--runs-csv, --spin-us, --stall-us, --host-probe-us and --cpus are only used with "
           "--bench";
  }
  if (!args->cpus.empty() && args->concurrency > 1) return "--cpus needs --concurrency 1";
  return "";
}

Result<std::string> ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return Status::NotFound("cannot open '" + path + "'");
  std::string data((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (f.bad()) return Status::DataLoss("error reading '" + path + "'");
  return data;
}

Status WriteFile(const std::string& path, const std::string& data) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) return Status::PermissionDenied("cannot create '" + path + "'");
  f.write(data.data(), static_cast<std::streamsize>(data.size()));
  if (!f) return Status::DataLoss("error writing '" + path + "'");
  return Status::Ok();
}

std::string Summary(const NamedTensor& t) {
  std::string s = t.name + ": " + std::string(DTypeName(t.tensor.dtype())) + " " +
                  ShapeToString(t.tensor.shape());
  if (t.tensor.dtype() == DType::kFloat32 && t.tensor.num_elements() > 0) {
    const float* d = t.tensor.data<float>();
    const int64_t n = t.tensor.num_elements();
    double sum = 0;
    float mn = d[0], mx = d[0];
    for (int64_t i = 0; i < n; ++i) {
      sum += d[i];
      mn = std::min(mn, d[i]);
      mx = std::max(mx, d[i]);
    }
    char buf[128];
    std::snprintf(buf, sizeof(buf), " min=%g max=%g mean=%g", mn, mx, sum / static_cast<double>(n));
    s += buf;
  }
  return s;
}

Result<Tensor> RandomTensor(const TensorSpec& spec, const Shape& shape, std::mt19937_64& rng) {
  ORRERY_ASSIGN_OR_RETURN(Tensor t, Tensor::Allocate(spec.dtype, shape));
  const int64_t n = t.num_elements();
  switch (spec.dtype) {
    case DType::kFloat32: {
      std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
      for (int64_t i = 0; i < n; ++i) t.data<float>()[i] = dist(rng);
      break;
    }
    case DType::kFloat64: {
      std::uniform_real_distribution<double> dist(-1.0, 1.0);
      for (int64_t i = 0; i < n; ++i) t.data<double>()[i] = dist(rng);
      break;
    }
    case DType::kInt64: {
      std::uniform_int_distribution<int64_t> dist(0, 9);
      for (int64_t i = 0; i < n; ++i) t.data<int64_t>()[i] = dist(rng);
      break;
    }
    case DType::kInt32: {
      std::uniform_int_distribution<int32_t> dist(0, 9);
      for (int64_t i = 0; i < n; ++i) t.data<int32_t>()[i] = dist(rng);
      break;
    }
    case DType::kBool: {
      std::uniform_int_distribution<int> dist(0, 1);
      for (int64_t i = 0; i < n; ++i) t.data<uint8_t>()[i] = static_cast<uint8_t>(dist(rng));
      break;
    }
    default:
      break;  // zeros
  }
  return t;
}

runtime::LaneGroupStats Delta(const runtime::LaneGroupStats& a, const runtime::LaneGroupStats& b) {
  return runtime::LaneGroupStats{.jobs = a.jobs - b.jobs,
                                 .asleep_jobs = a.asleep_jobs - b.asleep_jobs,
                                 .waits = a.waits - b.waits,
                                 .wait_ns = a.wait_ns - b.wait_ns,
                                 .prewakes = a.prewakes - b.prewakes,
                                 .rescues = a.rescues - b.rescues};
}

// Per-step times summed over runs (all runs of one shape set have the same steps).
struct ProfileSum {
  std::vector<StepProfile> steps;
  std::vector<int64_t> min_ns;  // per step: the fastest run (robust to preemption)
  // Per step, summed over runs: the caller's barrier waits and the jobs
  // that found a lane worker asleep (LaneGroupStats deltas; 0 at T = 1).
  std::vector<int64_t> wait_ns, asleep_jobs;
  int64_t runs = 0;

  void Add(const std::vector<StepProfile>& run, std::span<const runtime::LaneGroupStats> lanes) {
    if (steps.empty()) {
      steps = run;
      for (const StepProfile& s : run) min_ns.push_back(s.ns);
      wait_ns.assign(run.size(), 0);
      asleep_jobs.assign(run.size(), 0);
    } else {
      for (size_t i = 0; i < steps.size() && i < run.size(); ++i) {
        steps[i].ns += run[i].ns;
        min_ns[i] = std::min(min_ns[i], run[i].ns);
      }
    }
    for (size_t i = 0; i < steps.size() && i < lanes.size(); ++i) {
      wait_ns[i] += lanes[i].wait_ns;
      asleep_jobs[i] += lanes[i].asleep_jobs;
    }
    ++runs;
  }
  void Merge(const ProfileSum& other) {
    if (other.runs == 0) return;
    if (steps.empty()) {
      *this = other;
      return;
    }
    for (size_t i = 0; i < steps.size() && i < other.steps.size(); ++i) {
      steps[i].ns += other.steps[i].ns;
      min_ns[i] = std::min(min_ns[i], other.min_ns[i]);
      wait_ns[i] += other.wait_ns[i];
      asleep_jobs[i] += other.asleep_jobs[i];
    }
    runs += other.runs;
  }
};

// One inference through Execution (what CompiledModel::Run does), adding the
// step times to `profile` when given and writing them to `step_ns` (without
// allocating) when it is not empty.
Result<std::vector<NamedTensor>> RunSteps(const CompiledModel& model,
                                          const std::vector<NamedTensor>& inputs,
                                          ProfileSum* profile, PlanStats* stats,
                                          runtime::LaneGroup* threads,
                                          std::span<int64_t> step_ns = {}) {
  ORRERY_ASSIGN_OR_RETURN(Execution ex, Execution::Start(model, inputs, {.threads = ops::NumThreads(threads)}));
  // Per step lane hand-offs, only when profiling (allocates).
  std::vector<runtime::LaneGroupStats> lanes;
  while (!ex.done()) {
    const runtime::LaneGroupStats before = threads->stats();
    ORRERY_RETURN_IF_ERROR(ex.Step(threads));
    if (profile != nullptr) lanes.push_back(Delta(threads->stats(), before));
  }
  ORRERY_ASSIGN_OR_RETURN(std::vector<NamedTensor> outs, ex.TakeOutputs());
  for (size_t i = 0; i < step_ns.size() && i < ex.num_steps(); ++i) step_ns[i] = ex.step_ns(i);
  if (profile != nullptr) profile->Add(ex.Profile(), lanes);
  if (stats != nullptr) *stats = ex.plan_stats();
  return outs;
}

void PrintProfile(const ProfileSum& p) {
  if (p.runs == 0) return;
  double total = 0;
  for (const StepProfile& s : p.steps) total += static_cast<double>(s.ns);
  std::printf("%-5s %-20s %-32s %10s %7s %9s %8s %10s %8s %7s\n", "step", "op", "name", "mean_ms",
              "share", "GFLOP/s", "GB/s", "min_ms", "wait_ms", "asleep");
  for (size_t i = 0; i < p.steps.size(); ++i) {
    const StepProfile& s = p.steps[i];
    const double mean_ns = static_cast<double>(s.ns) / static_cast<double>(p.runs);
    const double gflops = mean_ns > 0 ? static_cast<double>(s.flops) / mean_ns : 0.0;
    const double gbs = mean_ns > 0 ? static_cast<double>(s.bytes) / mean_ns : 0.0;
    const double runs = static_cast<double>(p.runs);
    std::printf("%-5zu %-20s %-32s %10.4f %6.1f%% %9.2f %8.2f %10.4f %8.4f %7.2f\n", i,
                s.op_type.c_str(), s.name.empty() ? "-" : s.name.c_str(), mean_ns / 1e6,
                total > 0 ? 100.0 * static_cast<double>(s.ns) / total : 0.0, gflops, gbs,
                static_cast<double>(p.min_ns[i]) / 1e6,
                static_cast<double>(p.wait_ns[i]) / 1e6 / runs,
                static_cast<double>(p.asleep_jobs[i]) / runs);
  }
}

int RunOnce(const Args& args, const CompiledModel& model) {
  std::vector<NamedTensor> inputs;
  for (const auto& [name, file] : args.inputs) {
    Result<std::string> bytes = ReadFile(file);
    if (!bytes.ok()) return RuntimeError(bytes.status());
    Result<NamedTensor> t = ParseTensorProto(*bytes);
    if (!t.ok()) return RuntimeError(t.status().WithPrefix("input '" + name + "' (" + file + ")"));
    inputs.push_back(NamedTensor{name, std::move(t->tensor)});
  }
  ProfileSum profile;
  runtime::LaneGroup lanes(runtime::LaneGroupOptions{.threads = static_cast<int>(args.threads)});
  Result<std::vector<NamedTensor>> outs =
      RunSteps(model, inputs, args.profile ? &profile : nullptr, nullptr, &lanes);
  if (!outs.ok()) return RuntimeError(outs.status());
  std::error_code ec;
  std::filesystem::create_directories(args.output_dir, ec);
  if (ec) {
    return RuntimeError(Status::PermissionDenied("cannot create '" + args.output_dir +
                                                 "': " + ec.message()));
  }
  for (const NamedTensor& t : *outs) {
    // Output names may contain '/' (e.g. exported PyTorch names); keep files flat.
    std::string file = t.name;
    std::replace(file.begin(), file.end(), '/', '_');
    const std::string path = (std::filesystem::path(args.output_dir) / (file + ".pb")).string();
    Status st = WriteFile(path, SerializeTensorProto(t));
    if (!st.ok()) return RuntimeError(st);
    std::printf("%s -> %s\n", Summary(t).c_str(), path.c_str());
  }
  if (args.profile) PrintProfile(profile);
  return 0;
}

// Page faults, context switches and the calling thread's CPU time so far
// (see the header).
struct Disturbances {
  long minflt = 0;
  long majflt = 0;
  long nvcsw = 0;
  long nivcsw = 0;
  int64_t cpu_ns = 0;  // this thread's; excludes stolen time (paravirt steal accounting)

  Disturbances operator-(const Disturbances& o) const {
    return Disturbances{minflt - o.minflt, majflt - o.majflt, nvcsw - o.nvcsw, nivcsw - o.nivcsw,
                        cpu_ns - o.cpu_ns};
  }
};

Disturbances Now(bool whole_process) {
  rusage u{};
  getrusage(whole_process ? RUSAGE_SELF : RUSAGE_THREAD, &u);
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return Disturbances{u.ru_minflt, u.ru_majflt, u.ru_nvcsw, u.ru_nivcsw,
                      static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec};
}

// Steal and total jiffies of all CPUs from /proc/stat's first line; {0, 0}
// when unreadable (not Linux, or a kernel without steal accounting).
std::pair<int64_t, int64_t> StealJiffies() {
  std::ifstream f("/proc/stat");
  std::string cpu;
  f >> cpu;
  if (!f || cpu != "cpu") return {0, 0};
  int64_t v[8] = {};  // user nice system idle iowait irq softirq steal
  int64_t total = 0;
  for (int64_t& x : v) {
    f >> x;
    total += x;
  }
  return f ? std::make_pair(v[7], total) : std::make_pair(int64_t{0}, int64_t{0});
}

// The --host-probe-us loop is base/fma_probe.h's fixed FMA (or integer)
// chain: only the core's speed moves its wall time.
class HostProbe {
 public:
  // Sizes the loop to about `us` from the fastest of a few trials; 0: off.
  explicit HostProbe(int64_t us) {
    if (us <= 0) return;
#if defined(__x86_64__)
    fma_ = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#endif
    double best = 1e30;
    for (int i = 0; i < 5; ++i) best = std::min(best, TimeUs(10'000));
    iterations_ = std::max<int64_t>(100, static_cast<int64_t>(10'000.0 * static_cast<double>(us) /
                                                              std::max(best, 1e-3)));
  }
  // The loop's wall time in us (0 when off).
  double Run() const { return iterations_ > 0 ? TimeUs(iterations_) : 0.0; }

 private:
  double TimeUs(int64_t n) const {
    const auto t0 = std::chrono::steady_clock::now();
#if defined(__x86_64__)
    volatile float sink = fma_ ? probe::Fma256(n) : probe::ScalarAlu(n);
#else
    volatile float sink = probe::ScalarAlu(n);
#endif
    (void)sink;
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0)
        .count();
  }
  bool fma_ = false;
  int64_t iterations_ = 0;
};

// One timed run as --runs-csv writes it.
struct RunRecord {
  double ms = 0;
  double probe_us = 0;  // --host-probe-us loop right before the run
  Disturbances d;
  runtime::LaneGroupStats lanes;  // this run's hand-offs (deltas)
};

Status WriteRunsCsv(const std::string& path, const CompiledModel& model,
                    const std::vector<NamedTensor>& inputs, int threads,
                    const std::vector<std::vector<RunRecord>>& records,
                    const std::vector<std::vector<int64_t>>& step_ns, size_t num_steps) {
  // The step names, from one more (untimed) run's profile.
  std::vector<std::string> names;
  // Started for the timed runs' group size: a batch run a row per thread
  // has that many fewer steps.
  Result<Execution> ex = Execution::Start(model, inputs, {.threads = threads});
  if (ex.ok()) {
    while (!ex->done() && ex->Step().ok()) {
    }
    for (const StepProfile& p : ex->Profile()) names.push_back(p.op_type);
  }
  std::ofstream f(path, std::ios::trunc);
  if (!f) return Status::PermissionDenied("cannot create '" + path + "'");
  f << "worker,run,wall_ms,cpu_ms,off_cpu_ms,minflt,majflt,nvcsw,nivcsw,lane_jobs,"
       "lane_asleep_jobs,lane_waits,lane_wait_ms,probe_us,lane_rescues";
  for (size_t s = 0; s < num_steps; ++s) {
    f << ",s" << s << ":" << (s < names.size() ? names[s] : std::string("?"));
  }
  f << "\n";
  char buf[64];
  auto ms = [&](double v) {
    std::snprintf(buf, sizeof(buf), "%.4f", v);
    return std::string(buf);
  };
  for (size_t w = 0; w < records.size(); ++w) {
    for (size_t i = 0; i < records[w].size(); ++i) {
      const RunRecord& r = records[w][i];
      const double cpu_ms = static_cast<double>(r.d.cpu_ns) / 1e6;
      f << w << "," << i << "," << ms(r.ms) << "," << ms(cpu_ms) << ","
        << ms(std::max(0.0, r.ms - cpu_ms)) << "," << r.d.minflt << "," << r.d.majflt << ","
        << r.d.nvcsw << "," << r.d.nivcsw << "," << r.lanes.jobs << "," << r.lanes.asleep_jobs
        << "," << r.lanes.waits << "," << ms(static_cast<double>(r.lanes.wait_ns) / 1e6) << ","
        << ms(r.probe_us) << "," << r.lanes.rescues;
      for (size_t s = 0; s < num_steps; ++s) {
        f << "," << ms(static_cast<double>(step_ns[w][i * num_steps + s]) / 1e6);
      }
      f << "\n";
    }
  }
  f.close();
  if (!f) return Status::DataLoss("error writing '" + path + "'");
  return Status::Ok();
}

int Bench(const Args& args, const CompiledModel& model) {
  const ModelSignature& sig = model.signature();
  for (const auto& [name, shape] : args.shapes) {
    bool found = false;
    for (const TensorSpec& s : sig.inputs) found = found || s.name == name;
    if (!found) return UsageError("--shape names unknown input '" + name + "'");
  }
  std::mt19937_64 rng(42);
  std::vector<NamedTensor> inputs;
  for (const TensorSpec& spec : sig.inputs) {
    Shape shape = spec.shape;
    auto it = args.shapes.find(spec.name);
    if (it != args.shapes.end()) {
      shape = it->second;
    } else {
      for (int64_t& d : shape) d = d < 0 ? 1 : d;
    }
    Result<Tensor> t = RandomTensor(spec, shape, rng);
    if (!t.ok()) return RuntimeError(t.status().WithPrefix("input '" + spec.name + "'"));
    inputs.push_back(NamedTensor{spec.name, std::move(t).value()});
  }
  // N runs in total, spread over C workers that run concurrently, each with
  // its own lane group of T threads (each run takes its own arena from the
  // plan's pool).
  const int64_t workers = std::min(args.concurrency, args.bench);
  std::vector<std::vector<double>> per_thread(static_cast<size_t>(workers));
  std::vector<std::vector<RunRecord>> records(static_cast<size_t>(workers));
  std::vector<std::vector<int64_t>> step_ns(static_cast<size_t>(workers));
  std::vector<ProfileSum> profiles(static_cast<size_t>(workers));
  std::vector<Status> errors(static_cast<size_t>(workers));
  std::vector<PlanStats> worker_stats(static_cast<size_t>(workers));
  runtime::LaneGroupOptions lane_options{.threads = static_cast<int>(args.threads)};
  if (args.spin_us >= 0) lane_options.spin_ns = args.spin_us * 1000;
  if (args.stall_us >= 0) lane_options.stall_ns = args.stall_us * 1000;
  lane_options.cpus = args.cpus;
  auto worker = [&](int64_t t) {
    runtime::LaneGroup lanes(lane_options);
    PlanStats& stats = worker_stats[static_cast<size_t>(t)];
    // Warm-up: specialise the plan, fill the arena pool, pack weights.
    const int64_t warmup = std::max<int64_t>(1, std::min<int64_t>(args.bench / 10, 10));
    for (int64_t i = 0; i < warmup; ++i) {
      Result<std::vector<NamedTensor>> r = RunSteps(model, inputs, nullptr, &stats, &lanes);
      if (!r.ok()) {
        errors[static_cast<size_t>(t)] = r.status();
        return;
      }
    }
    const int64_t n = args.bench / workers + (t < args.bench % workers ? 1 : 0);
    std::vector<double>& ms = per_thread[static_cast<size_t>(t)];
    ms.reserve(static_cast<size_t>(n));
    std::vector<RunRecord>& recs = records[static_cast<size_t>(t)];
    recs.reserve(static_cast<size_t>(n));
    // Every run's step times only when asked for (steps x runs int64s).
    const size_t steps = args.runs_csv.empty() ? 0 : stats.num_steps;
    std::vector<int64_t>& steps_ns = step_ns[static_cast<size_t>(t)];
    steps_ns.assign(steps * static_cast<size_t>(n), 0);
    const HostProbe probe(args.host_probe_us);
    for (int64_t i = 0; i < n; ++i) {
      const double probe_us = probe.Run();
      const runtime::LaneGroupStats l0 = lanes.stats();
      const Disturbances d0 = Now(workers == 1);
      const auto t0 = std::chrono::steady_clock::now();
      Result<std::vector<NamedTensor>> r =
          RunSteps(model, inputs, args.profile ? &profiles[static_cast<size_t>(t)] : nullptr,
                   nullptr, &lanes,
                   std::span<int64_t>(steps_ns.data() + static_cast<size_t>(i) * steps, steps));
      const auto t1 = std::chrono::steady_clock::now();
      const Disturbances d1 = Now(workers == 1);
      if (!r.ok()) {
        errors[static_cast<size_t>(t)] = r.status();
        return;
      }
      ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
      recs.push_back(RunRecord{
          .ms = ms.back(), .probe_us = probe_us, .d = d1 - d0, .lanes = Delta(lanes.stats(), l0)});
    }
  };
  const std::pair<int64_t, int64_t> steal0 = StealJiffies();
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> pool;
  for (int64_t t = 1; t < workers; ++t) pool.emplace_back(worker, t);
  worker(0);
  for (std::thread& th : pool) th.join();
  const double wall_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::pair<int64_t, int64_t> steal1 = StealJiffies();
  for (const Status& st : errors) {
    if (!st.ok()) return RuntimeError(st);
  }
  const PlanStats& stats = worker_stats[0];
  std::vector<double> ms, calm, cpu;  // all runs; runs not preempted; CPU ms per run
  long minflt = 0, majflt = 0, nvcsw = 0, preempted = 0;
  double off_cpu_ms = 0;
  runtime::LaneGroupStats lane_sum;
  ProfileSum profile;
  for (size_t t = 0; t < per_thread.size(); ++t) {
    ms.insert(ms.end(), per_thread[t].begin(), per_thread[t].end());
    for (size_t i = 0; i < per_thread[t].size(); ++i) {
      const RunRecord& r = records[t][i];
      minflt += r.d.minflt;
      majflt += r.d.majflt;
      nvcsw += r.d.nvcsw;
      const double cpu_ms = static_cast<double>(r.d.cpu_ns) / 1e6;
      cpu.push_back(cpu_ms);
      off_cpu_ms += std::max(0.0, r.ms - cpu_ms);
      lane_sum.jobs += r.lanes.jobs;
      lane_sum.asleep_jobs += r.lanes.asleep_jobs;
      lane_sum.waits += r.lanes.waits;
      lane_sum.wait_ns += r.lanes.wait_ns;
      lane_sum.prewakes += r.lanes.prewakes;
      lane_sum.rescues += r.lanes.rescues;
      if (r.d.nivcsw > 0) {
        ++preempted;
      } else {
        calm.push_back(per_thread[t][i]);
      }
    }
    profile.Merge(profiles[t]);
  }
  if (!args.runs_csv.empty()) {
    Status st = WriteRunsCsv(args.runs_csv, model, inputs, static_cast<int>(args.threads), records, step_ns,
                             step_ns.empty() || per_thread[0].empty()
                                 ? 0
                                 : step_ns[0].size() / per_thread[0].size());
    if (!st.ok()) return RuntimeError(st);
  }
  std::vector<double> sorted = ms;
  std::sort(sorted.begin(), sorted.end());
  std::sort(calm.begin(), calm.end());
  std::sort(cpu.begin(), cpu.end());
  const int64_t jiffies = steal1.second - steal0.second;
  const double steal_share =
      jiffies > 0 ? static_cast<double>(steal1.first - steal0.first) / static_cast<double>(jiffies)
                  : 0.0;
  const double runs = static_cast<double>(ms.size());
  auto pct_of = [](const std::vector<double>& v, double p) {
    if (v.empty()) return 0.0;
    // Nearest rank.
    size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(v.size())));
    rank = std::clamp<size_t>(rank, 1, v.size());
    return v[rank - 1];
  };
  auto pct = [&](double p) { return pct_of(sorted, p); };
  double sum = 0;
  for (double v : ms) sum += v;
  std::printf(
      "{\"model\":%s,\"iterations\":%lld,\"threads\":%lld,\"concurrency\":%lld,"
      "\"p50_ms\":%.4f,\"p99_ms\":%.4f,"
      "\"min_ms\":%.4f,\"mean_ms\":%.4f,\"throughput_per_s\":%.2f,\"steps\":%zu,"
      "\"dynamic_steps\":%zu,\"folded_nodes\":%zu,\"fused_nodes\":%zu,\"flops\":%lld,"
      "\"arena_bytes\":%lld,\"naive_bytes\":%lld,\"minflt_per_run\":%.2f,"
      "\"preempted_runs\":%ld,\"p99_unpreempted_ms\":%.4f,\"majflt\":%ld,"
      "\"nvcsw_per_run\":%.2f,\"p50_cpu_ms\":%.4f,\"p99_cpu_ms\":%.4f,"
      "\"off_cpu_ms_per_run\":%.4f,\"steal_share\":%.4f,\"lane_jobs_per_run\":%.2f,"
      "\"lane_asleep_jobs_per_run\":%.2f,\"lane_waits_per_run\":%.2f,"
      "\"lane_wait_ms_per_run\":%.4f,\"lane_prewakes_per_run\":%.2f,\"lane_rescues\":%lld}\n",
      JsonQuote(args.model).c_str(), static_cast<long long>(args.bench),
      static_cast<long long>(args.threads), static_cast<long long>(workers), pct(50), pct(99),
      sorted.front(),
      sum / static_cast<double>(ms.size()), static_cast<double>(ms.size()) / wall_s,
      stats.num_steps, stats.dynamic_steps, stats.folded_nodes, stats.fused_nodes,
      static_cast<long long>(stats.flops),
      static_cast<long long>(stats.arena_bytes), static_cast<long long>(stats.naive_bytes),
      static_cast<double>(minflt) / runs, preempted, pct_of(calm, 99), majflt,
      static_cast<double>(nvcsw) / runs, pct_of(cpu, 50), pct_of(cpu, 99), off_cpu_ms / runs,
      steal_share, static_cast<double>(lane_sum.jobs) / runs,
      static_cast<double>(lane_sum.asleep_jobs) / runs, static_cast<double>(lane_sum.waits) / runs,
      static_cast<double>(lane_sum.wait_ns) / 1e6 / runs,
      static_cast<double>(lane_sum.prewakes) / runs, static_cast<long long>(lane_sum.rescues));
  if (args.profile) PrintProfile(profile);
  return 0;
}

int Main(int argc, char** argv) {
  Args args;
  const std::string err = ParseArgs(argc, argv, &args);
  if (err == "help") {
    std::printf("%s", kUsage);
    return 0;
  }
  if (!err.empty()) return UsageError(err);
  Result<std::string> bytes = ReadFile(args.model);
  if (!bytes.ok()) return RuntimeError(bytes.status());
  Result<std::unique_ptr<CompiledModel>> model = CompiledModel::Compile(*bytes);
  if (!model.ok()) return RuntimeError(model.status());
  return args.bench > 0 ? Bench(args, **model) : RunOnce(args, **model);
}

}  // namespace
}  // namespace orrery

int main(int argc, char** argv) { return orrery::Main(argc, argv); }
