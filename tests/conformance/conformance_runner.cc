// conformance_runner: runs the ONNX backend node-test suite against Orrery's
// runtime and kernels. See docs/conformance.md.
//
//   conformance_runner SUITE_DIR [--filter SUBSTR] [--verbose] [--json FILE]
//       [--markdown] [--min-pass-rate R] [--require-op-pass] [--case-timeout SEC]
//
// SUITE_DIR is the generated suite (its node/ subdir is used when present).
// Exit codes: 0 gates passed, 1 gates failed, 2 usage or suite error.
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ops/registry.h"
#include "tests/conformance/report.h"
#include "tests/conformance/suite.h"

namespace orrery::conformance {
namespace {

namespace fs = std::filesystem;

constexpr const char* kUsage =
    "usage: conformance_runner SUITE_DIR [--filter SUBSTR] [--verbose] [--json FILE]\n"
    "       [--markdown] [--min-pass-rate R] [--require-op-pass] [--case-timeout SEC]\n"
    "\n"
    "  SUITE_DIR          generated ONNX backend tests (DIR/node/<case> or DIR/<case>)\n"
    "  --filter SUBSTR    only cases whose name contains SUBSTR\n"
    "  --verbose          one line per case as it finishes\n"
    "  --json FILE        machine-readable results\n"
    "  --markdown         print the per-op table as markdown (docs/conformance.md)\n"
    "  --min-pass-rate R  exit 1 if passed / (passed + failed) < R (default 1)\n"
    "  --require-op-pass  exit 1 if a registered op with cases passes none of them\n"
    "  --case-timeout SEC a case running longer fails (default 20)\n";

// A case whose kernels never return cannot be stopped in-process; after this
// many the remaining cases are reported as not run.
constexpr int kMaxHungCases = 3;

struct Options {
  fs::path suite;
  std::string filter;
  bool verbose = false;
  std::string json;
  bool markdown = false;
  GateOptions gates;
  double case_timeout = 20;
};

std::string Seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3g s", s);
  return buf;
}

bool ParseDouble(const char* s, double* out) {
  char* end = nullptr;
  *out = std::strtod(s, &end);
  return end != s && *end == '\0';
}

// 0 on success, otherwise the exit code.
int ParseArgs(int argc, char** argv, Options* opt) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    const char* v = nullptr;
    if (a == "--help" || a == "-h") {
      std::cout << kUsage;
      std::exit(0);
    } else if (a == "--verbose") {
      opt->verbose = true;
    } else if (a == "--markdown") {
      opt->markdown = true;
    } else if (a == "--require-op-pass") {
      opt->gates.require_op_pass = true;
    } else if (a == "--filter" && (v = value())) {
      opt->filter = v;
    } else if (a == "--json" && (v = value())) {
      opt->json = v;
    } else if (a == "--min-pass-rate" && (v = value()) &&
               ParseDouble(v, &opt->gates.min_pass_rate) && opt->gates.min_pass_rate >= 0 &&
               opt->gates.min_pass_rate <= 1) {
    } else if (a == "--case-timeout" && (v = value()) && ParseDouble(v, &opt->case_timeout) &&
               opt->case_timeout > 0) {
    } else if (!a.starts_with("-") && opt->suite.empty()) {
      opt->suite = a;
    } else {
      std::cerr << "conformance_runner: bad argument '" << a << "'\n" << kUsage;
      return 2;
    }
  }
  if (opt->suite.empty()) {
    std::cerr << kUsage;
    return 2;
  }
  std::error_code ec;
  if (fs::is_directory(opt->suite / "node", ec)) opt->suite /= "node";
  return 0;
}

// One case on its own thread, so that a case that hangs is reported and the
// rest still run. Shared with the thread; outlives it if the thread hangs.
struct Job {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  CaseResult result;
};

// Runs `info` with the wall-clock limit. *hung is set when the thread had to
// be abandoned.
CaseResult RunGuarded(const CaseInfo& info, const Options& opt, bool* hung) {
  auto job = std::make_shared<Job>();
  std::thread worker([job, info, tol = Tolerance{}]() {
    CaseResult r = RunCase(info, tol);
    std::lock_guard<std::mutex> lock(job->mu);
    job->result = std::move(r);
    job->done = true;
    job->cv.notify_all();
  });
  const auto limit = std::chrono::duration<double>(opt.case_timeout);
  std::unique_lock<std::mutex> lock(job->mu);
  *hung = !job->cv.wait_for(lock, limit, [&] { return job->done; });
  if (*hung) {
    lock.unlock();
    worker.detach();
    CaseResult r;
    r.name = info.name;
    r.op = info.op;
    r.outcome = Outcome::kFailed;
    r.reason = "timed out: still running after " + Seconds(opt.case_timeout);
    r.group = r.reason;
    r.seconds = opt.case_timeout;
    return r;
  }
  CaseResult r = std::move(job->result);
  lock.unlock();
  worker.join();
  if (r.outcome != Outcome::kFailed && r.seconds > opt.case_timeout) {
    r.outcome = Outcome::kFailed;
    r.reason = "took " + Seconds(r.seconds) + ", over the " + Seconds(opt.case_timeout) + " limit";
    r.group = r.reason;
  }
  return r;
}

int Main(int argc, char** argv) {
  Options opt;
  if (int rc = ParseArgs(argc, argv, &opt); rc != 0) return rc;

  Result<std::vector<CaseInfo>> all = DiscoverCases(opt.suite);
  if (!all.ok()) {
    std::cerr << "conformance_runner: " << all.status().ToString() << "\n";
    return 2;
  }
  std::vector<CaseInfo> cases;
  for (CaseInfo& c : *all) {
    if (c.name.find(opt.filter) != std::string::npos) cases.push_back(std::move(c));
  }
  if (cases.empty()) {
    std::cerr << "conformance_runner: no case in " << opt.suite.string()
              << (opt.filter.empty() ? "" : " matches '" + opt.filter + "'") << "\n";
    return 2;
  }

  std::vector<CaseResult> results;
  int hung = 0;
  for (const CaseInfo& c : cases) {
    CaseResult r;
    if (hung >= kMaxHungCases) {
      r.name = c.name;
      r.op = c.op;
      r.outcome = Outcome::kFailed;
      r.reason = "not run: " + std::to_string(hung) + " earlier cases hung";
      r.group = r.reason;
    } else {
      bool this_hung = false;
      r = RunGuarded(c, opt, &this_hung);
      hung += this_hung ? 1 : 0;
    }
    if (opt.verbose) {
      std::printf("%-7s %s [%s] %.3fs%s%s\n", std::string(OutcomeName(r.outcome)).c_str(),
                  r.name.c_str(), r.op.c_str(), r.seconds, r.reason.empty() ? "" : ": ",
                  r.reason.c_str());
      std::fflush(stdout);
    }
    results.push_back(std::move(r));
  }

  const std::vector<std::string> registered = ops::OpRegistry::Global().OpTypes(ops::Backend::kCpu);
  // Registered ops only count when the filter could have selected their cases.
  std::vector<std::string> gated_ops = registered;
  if (!opt.filter.empty()) {
    const std::map<std::string, Counts> by_op = ByOp(results);
    std::erase_if(gated_ops, [&](const std::string& op) { return by_op.count(op) == 0; });
  }
  const GateResult gates = CheckGates(results, gated_ops, opt.gates);

  if (opt.markdown) {
    PrintMarkdown(std::cout, results, registered);
  } else {
    PrintText(std::cout, results);
    std::cout << "\n";
    for (const std::string& w : gates.warnings) std::cout << "warning: " << w << "\n";
    for (const std::string& e : gates.errors) std::cout << "GATE FAILED: " << e << "\n";
    std::cout << SummaryLine(Total(results)) << "\n";
  }
  if (opt.markdown) {
    for (const std::string& w : gates.warnings) std::cerr << "warning: " << w << "\n";
    for (const std::string& e : gates.errors) std::cerr << "GATE FAILED: " << e << "\n";
  }
  if (!opt.json.empty()) {
    std::ofstream out(opt.json);
    PrintJson(out, results, gates);
    if (!out) {
      std::cerr << "conformance_runner: cannot write " << opt.json << "\n";
      return 2;
    }
  }
  const int rc = gates.ok ? 0 : 1;
  if (hung > 0) {
    // Hung worker threads cannot be joined; leave without running
    // destructors under them.
    std::cout.flush();
    std::fflush(stdout);
    std::_Exit(rc);
  }
  return rc;
}

}  // namespace
}  // namespace orrery::conformance

int main(int argc, char** argv) { return orrery::conformance::Main(argc, argv); }
