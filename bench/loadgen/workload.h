// orrery-loadgen's workload: which tenant sends which model when. Streams
// (Poisson open loop or closed loop) and trace files become one arrival
// schedule, computed up front so that sending never waits on anything but the
// clock. Pure functions, no I/O except ReadTrace.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace orrery::loadgen {

// `--stream TENANT:MODEL:RATE[:DEADLINE_MS]`. RATE is requests per second
// (Poisson arrivals) or `cN` (closed loop, N requests outstanding).
struct StreamSpec {
  std::string tenant;
  std::string model;
  double rate = 0;          // Poisson, requests/s; 0 when closed loop
  int closed = 0;           // > 0: closed loop with this many outstanding
  int64_t deadline_us = 0;  // 0 = none (sent as OIP parameter timeout_us)
};

Result<StreamSpec> ParseStream(const std::string& text);

// `--tenant NAME[:WEIGHT]`.
struct TenantSpec {
  std::string name;
  uint32_t weight = 1;
};
Result<TenantSpec> ParseTenant(const std::string& text);

struct Arrival {
  int64_t at_ns = 0;  // since the start of the run
  int stream = 0;     // index into the stream list
};

// Poisson arrivals of every open-loop stream over [0, duration_ns), merged and
// sorted by time. Deterministic for a seed.
std::vector<Arrival> PoissonSchedule(const std::vector<StreamSpec>& streams, int64_t duration_ns, uint64_t seed);

// A trace file: CSV lines `time_s,tenant,model[,deadline_ms]` (a header line
// and lines starting with '#' are skipped). Each distinct (tenant, model,
// deadline) becomes a stream appended to `streams` (rate 0); the arrivals are
// returned sorted. INVALID_ARGUMENT names the line of a malformed entry.
Result<std::vector<Arrival>> ParseTrace(const std::string& text, std::vector<StreamSpec>* streams);
Result<std::vector<Arrival>> ReadTrace(const std::string& path, std::vector<StreamSpec>* streams);

}  // namespace orrery::loadgen
