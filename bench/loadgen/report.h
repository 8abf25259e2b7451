// orrery-loadgen's results: one Record per measured request, summarised per
// tenant (latency percentiles, goodput, deadline attainment, early vs late
// rejections, service vs weight) and written as CSV and JSON. Pure
// computation plus file writes; nothing here talks to the server.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace orrery::loadgen {

enum class Outcome {
  kOk,             // OK within its deadline (or no deadline)
  kLate,           // OK, after its deadline
  kRejectedEarly,  // refused at admission: DEADLINE_EXCEEDED / RESOURCE_EXHAUSTED before queueing
  kRejectedLate,   // dropped after queueing, or the client's gRPC deadline ran out
  kError,          // anything else
};
const char* OutcomeName(Outcome o);

struct Record {
  int stream = 0;
  int64_t sent_ns = 0;     // intended send time since the start of the run
  int64_t latency_ns = 0;  // from the intended send time (no coordinated omission)
  int grpc_code = 0;
  Outcome outcome = Outcome::kOk;
  int64_t deadline_us = 0;  // 0 = none
  int64_t lane_ns = -1;     // server-measured execution time (-1 = not reported)
  int64_t queue_ns = -1;    // server-measured queueing time (-1 = not reported)
  int64_t send_lag_ns = 0;  // actual - intended send time: the client falling behind
  int64_t server_ns = -1;   // time in orreryd's handler, arrival to response (-1 = not reported)
  int64_t predicted_lane_ns = -1;  // the scheduler's prediction of lane_ns (-1 = not reported)
  int64_t load_wait_ns = -1;       // server: waited for the model's weights (host cache load)
  int64_t load_predicted_ns = -1;  // server: that load's prediction (0 = was resident)
  // gRPC and the network split at the server's arrival stamp
  // (orrery_arrival_steady_ns; the client and the server on one host): the
  // actual send to the handler, and the handler's answer (arrival +
  // server_ns, or the arrival for orrery-echo) to its receipt here. -1 = not
  // reported. send lag + request path + server + response path = latency.
  int64_t request_path_ns = -1;
  int64_t response_path_ns = -1;
};

// Classifies a finished call. `message` distinguishes the scheduler's
// "dropped before running" (late) from an admission refusal (early).
Outcome Classify(int grpc_code, const std::string& message, int64_t latency_ns, int64_t deadline_us);

// Nearest-rank percentile (q in [0, 1]) of unsorted values; 0 when empty.
double Percentile(std::vector<double> values, double q);

// Jain's fairness index of x: (sum x)^2 / (n * sum x^2); 1 = perfectly fair.
double JainIndex(const std::vector<double>& x);

struct TenantSummary {
  std::string name;
  uint32_t weight = 1;
  uint64_t sent = 0, ok = 0, late = 0, rejected_early = 0, rejected_late = 0, errors = 0;
  double p50_ms = 0, p99_ms = 0, p999_ms = 0;  // OK responses (in time or late)
  double goodput_rps = 0;                      // OK within deadline per second of the window
  double attainment = 0;                       // OK in time / admitted (sent - rejected early)
  double overhead_p50_ms = 0;                  // latency - lane time, p50 over OK responses
  double lane_ms_mean = 0;                     // mean server-measured execution time
  int64_t service_ns = -1;                     // lane time from the scheduler stats (-1 = unknown)
  double service_share = 0, weight_share = 0;
};

// One echo server's replay of the schedule (--echo).
struct EchoSummary {
  std::string address;
  double p50_ms = 0, p99_ms = 0;
  double request_path_p50_ms = -1, response_path_p50_ms = -1;  // -1 = not reported
};

struct Summary {
  double window_s = 0;
  std::vector<TenantSummary> tenants;
  TenantSummary total;       // name "all"
  double jain_index = 0;     // over service / weight of the tenants that sent requests
  double rejected_early_fraction = 0;  // early / (early + late) rejections; 1 when none
  std::map<std::string, double> model_error_p99;  // model -> relative prediction error p99 (admin stats)
  std::map<std::string, double> model_error_p50;
  // Bare gRPC round trip, when measured: the echo with the lowest p50 (the
  // floor), and every echo replayed, in --echo order.
  double echo_p50_ms = -1, echo_p99_ms = -1;
  std::vector<EchoSummary> echoes;
  // --echo-rounds: how many, and orreryd's overhead (latency - lane time)
  // p50 over the rounds' slices, which the echoes' p50 then also cover.
  int echo_rounds = 0;
  double rounds_overhead_p50_ms = -1;
  double send_lag_p99_ms = 0, send_lag_max_ms = 0;  // how far the sender fell behind its schedule
  // Server-side numbers the caller adds (host cache counters over the
  // measured window, setup timings), written as the JSON object "server".
  std::map<std::string, double> server;
};

struct StreamInfo {
  std::string tenant;
  std::string model;
};

// `service_ns`: per tenant name, from the scheduler stats (absent = use the
// sum of lane_ns reported in responses).
Summary Summarise(const std::vector<Record>& records, const std::vector<StreamInfo>& streams,
                  const std::vector<std::pair<std::string, uint32_t>>& tenants, double window_s,
                  const std::map<std::string, int64_t>& service_ns);

// Files: per request (`tenant,model,sent_s,latency_ms,code,outcome,deadline_ms,lane_ms,queue_ms,send_lag_ms,
// server_ms,predicted_lane_ms,load_ms,load_pred_ms,request_path_ms,response_path_ms`),
// per tenant summary CSV, and the summary as one JSON object. False on an I/O error.
bool WriteRequestsCsv(const std::string& path, const std::vector<Record>& records,
                      const std::vector<StreamInfo>& streams);
bool WriteSummaryCsv(const std::string& path, const Summary& s);
std::string SummaryJson(const Summary& s);
std::string SummaryTable(const Summary& s);

}  // namespace orrery::loadgen
