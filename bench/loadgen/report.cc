#include "bench/loadgen/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace orrery::loadgen {

namespace {
constexpr int kGrpcDeadlineExceeded = 4;
constexpr int kGrpcResourceExhausted = 8;

std::string Num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.6g", v);
  return buf;
}

void Fill(TenantSummary* t, const std::vector<const Record*>& rs, double window_s) {
  std::vector<double> lat, overhead;
  double lane_sum = 0;
  size_t lane_n = 0;
  uint64_t in_time = 0;
  for (const Record* r : rs) {
    ++t->sent;
    switch (r->outcome) {
      case Outcome::kOk: ++t->ok; ++in_time; break;
      case Outcome::kLate: ++t->ok; ++t->late; break;
      case Outcome::kRejectedEarly: ++t->rejected_early; break;
      case Outcome::kRejectedLate: ++t->rejected_late; break;
      case Outcome::kError: ++t->errors; break;
    }
    if (r->outcome == Outcome::kOk || r->outcome == Outcome::kLate) {
      lat.push_back(static_cast<double>(r->latency_ns) / 1e6);
      if (r->lane_ns >= 0) {
        overhead.push_back(static_cast<double>(r->latency_ns - r->lane_ns) / 1e6);
        lane_sum += static_cast<double>(r->lane_ns) / 1e6;
        ++lane_n;
      }
    }
  }
  t->p50_ms = Percentile(lat, 0.5);
  t->p99_ms = Percentile(lat, 0.99);
  t->p999_ms = Percentile(lat, 0.999);
  t->overhead_p50_ms = Percentile(overhead, 0.5);
  t->lane_ms_mean = lane_n ? lane_sum / static_cast<double>(lane_n) : 0;
  t->goodput_rps = window_s > 0 ? static_cast<double>(in_time) / window_s : 0;
  const uint64_t admitted = t->sent - t->rejected_early;
  t->attainment = admitted ? static_cast<double>(in_time) / static_cast<double>(admitted) : 1.0;
}

void Row(std::ostream& o, const TenantSummary& t) {
  o << t.name << ',' << t.weight << ',' << t.sent << ',' << t.ok << ',' << t.late << ',' << t.rejected_early << ','
    << t.rejected_late << ',' << t.errors << ',' << Num(t.p50_ms) << ',' << Num(t.p99_ms) << ',' << Num(t.p999_ms)
    << ',' << Num(t.goodput_rps) << ',' << Num(t.attainment) << ',' << Num(t.overhead_p50_ms) << ','
    << Num(t.lane_ms_mean) << ',' << t.service_ns << ',' << Num(t.service_share) << ',' << Num(t.weight_share)
    << '\n';
}

void Json(std::ostream& o, const TenantSummary& t) {
  o << "{\"name\":\"" << t.name << "\",\"weight\":" << t.weight << ",\"sent\":" << t.sent << ",\"ok\":" << t.ok
    << ",\"late\":" << t.late << ",\"rejected_early\":" << t.rejected_early << ",\"rejected_late\":" << t.rejected_late
    << ",\"errors\":" << t.errors << ",\"p50_ms\":" << Num(t.p50_ms) << ",\"p99_ms\":" << Num(t.p99_ms)
    << ",\"p999_ms\":" << Num(t.p999_ms) << ",\"goodput_rps\":" << Num(t.goodput_rps)
    << ",\"attainment\":" << Num(t.attainment) << ",\"overhead_p50_ms\":" << Num(t.overhead_p50_ms)
    << ",\"lane_ms_mean\":" << Num(t.lane_ms_mean) << ",\"service_ns\":" << t.service_ns
    << ",\"service_share\":" << Num(t.service_share) << ",\"weight_share\":" << Num(t.weight_share) << "}";
}

}  // namespace

const char* OutcomeName(Outcome o) {
  switch (o) {
    case Outcome::kOk: return "ok";
    case Outcome::kLate: return "late";
    case Outcome::kRejectedEarly: return "rejected_early";
    case Outcome::kRejectedLate: return "rejected_late";
    case Outcome::kError: return "error";
  }
  return "?";
}

Outcome Classify(int grpc_code, const std::string& message, int64_t latency_ns, int64_t deadline_us) {
  if (grpc_code == 0) {
    return deadline_us > 0 && latency_ns > deadline_us * 1000 ? Outcome::kLate : Outcome::kOk;
  }
  if (grpc_code == kGrpcResourceExhausted) return Outcome::kRejectedEarly;
  if (grpc_code == kGrpcDeadlineExceeded) {
    // The scheduler's admission refusal names the predicted completion; a
    // queued request dropped later says so; anything else (the client's own
    // gRPC deadline) is late too.
    if (message.find("dropped before running") != std::string::npos) return Outcome::kRejectedLate;
    // Admitted, then refused once its model's load had ended (too late):
    // it used the loader and waited, so it is not an early rejection.
    if (message.find("after waiting for its model's load") != std::string::npos) return Outcome::kRejectedLate;
    if (message.find("predicted completion") != std::string::npos) return Outcome::kRejectedEarly;
    return Outcome::kRejectedLate;
  }
  return Outcome::kError;
}

double Percentile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const double rank = std::ceil(q * static_cast<double>(values.size()));
  size_t i = rank < 1 ? 0 : static_cast<size_t>(rank) - 1;
  return values[std::min(i, values.size() - 1)];
}

double JainIndex(const std::vector<double>& x) {
  double sum = 0, sq = 0;
  for (double v : x) {
    sum += v;
    sq += v * v;
  }
  if (x.empty() || sq == 0) return 0;
  return sum * sum / (static_cast<double>(x.size()) * sq);
}

Summary Summarise(const std::vector<Record>& records, const std::vector<StreamInfo>& streams,
                  const std::vector<std::pair<std::string, uint32_t>>& tenants, double window_s,
                  const std::map<std::string, int64_t>& service_ns) {
  Summary s;
  s.window_s = window_s;
  std::vector<const Record*> all;
  for (const Record& r : records) all.push_back(&r);
  s.total.name = "all";
  s.total.weight = 0;
  Fill(&s.total, all, window_s);

  double total_service = 0, total_weight = 0;
  for (const auto& [name, weight] : tenants) {
    TenantSummary t;
    t.name = name;
    t.weight = weight;
    std::vector<const Record*> mine;
    int64_t lane_sum = 0;
    for (const Record& r : records) {
      if (streams[static_cast<size_t>(r.stream)].tenant != name) continue;
      mine.push_back(&r);
      if (r.lane_ns > 0) lane_sum += r.lane_ns;
    }
    Fill(&t, mine, window_s);
    auto it = service_ns.find(name);
    t.service_ns = it != service_ns.end() ? it->second : lane_sum;
    if (t.sent > 0) {
      total_service += static_cast<double>(t.service_ns);
      total_weight += weight;
    }
    s.tenants.push_back(t);
  }
  std::vector<double> normalised;
  for (TenantSummary& t : s.tenants) {
    if (t.sent == 0) continue;
    t.service_share = total_service > 0 ? static_cast<double>(t.service_ns) / total_service : 0;
    t.weight_share = total_weight > 0 ? t.weight / total_weight : 0;
    normalised.push_back(static_cast<double>(t.service_ns) / t.weight);
  }
  s.jain_index = JainIndex(normalised);
  std::vector<double> lag;
  for (const Record& r : records) lag.push_back(static_cast<double>(r.send_lag_ns) / 1e6);
  s.send_lag_p99_ms = Percentile(lag, 0.99);
  s.send_lag_max_ms = Percentile(lag, 1.0);
  const double rejected = static_cast<double>(s.total.rejected_early + s.total.rejected_late);
  s.rejected_early_fraction = rejected > 0 ? static_cast<double>(s.total.rejected_early) / rejected : 1.0;
  return s;
}

bool WriteRequestsCsv(const std::string& path, const std::vector<Record>& records,
                      const std::vector<StreamInfo>& streams) {
  std::ofstream o(path);
  o << "tenant,model,sent_s,latency_ms,code,outcome,deadline_ms,lane_ms,queue_ms,send_lag_ms,server_ms,predicted_lane_ms,load_ms,load_pred_ms,"
       "request_path_ms,response_path_ms\n";
  for (const Record& r : records) {
    const StreamInfo& st = streams[static_cast<size_t>(r.stream)];
    o << st.tenant << ',' << st.model << ',' << Num(static_cast<double>(r.sent_ns) / 1e9) << ','
      << Num(static_cast<double>(r.latency_ns) / 1e6) << ',' << r.grpc_code << ',' << OutcomeName(r.outcome) << ','
      << Num(static_cast<double>(r.deadline_us) / 1e3) << ','
      << (r.lane_ns >= 0 ? Num(static_cast<double>(r.lane_ns) / 1e6) : "") << ','
      << (r.queue_ns >= 0 ? Num(static_cast<double>(r.queue_ns) / 1e6) : "") << ','
      << Num(static_cast<double>(r.send_lag_ns) / 1e6) << ','
      << (r.server_ns >= 0 ? Num(static_cast<double>(r.server_ns) / 1e6) : "") << ','
      << (r.predicted_lane_ns > 0 ? Num(static_cast<double>(r.predicted_lane_ns) / 1e6) : "") << ','
      << (r.load_wait_ns >= 0 ? Num(static_cast<double>(r.load_wait_ns) / 1e6) : "") << ','
      << (r.load_predicted_ns >= 0 ? Num(static_cast<double>(r.load_predicted_ns) / 1e6) : "") << ','
      << (r.request_path_ns >= 0 ? Num(static_cast<double>(r.request_path_ns) / 1e6) : "") << ','
      << (r.response_path_ns >= 0 ? Num(static_cast<double>(r.response_path_ns) / 1e6) : "") << '\n';
  }
  return static_cast<bool>(o);
}

bool WriteSummaryCsv(const std::string& path, const Summary& s) {
  std::ofstream o(path);
  o << "tenant,weight,sent,ok,late,rejected_early,rejected_late,errors,p50_ms,p99_ms,p999_ms,goodput_rps,"
       "attainment,overhead_p50_ms,lane_ms_mean,service_ns,service_share,weight_share\n";
  for (const TenantSummary& t : s.tenants) Row(o, t);
  Row(o, s.total);
  return static_cast<bool>(o);
}

std::string SummaryJson(const Summary& s) {
  std::ostringstream o;
  o << "{\"window_s\":" << Num(s.window_s) << ",\"jain_index\":" << Num(s.jain_index)
    << ",\"rejected_early_fraction\":" << Num(s.rejected_early_fraction) << ",\"echo_p50_ms\":" << Num(s.echo_p50_ms)
    << ",\"echo_p99_ms\":" << Num(s.echo_p99_ms) << ",\"echo_rounds\":" << s.echo_rounds
    << ",\"rounds_overhead_p50_ms\":" << Num(s.rounds_overhead_p50_ms) << ",\"send_lag_p99_ms\":" << Num(s.send_lag_p99_ms)
    << ",\"send_lag_max_ms\":" << Num(s.send_lag_max_ms) << ",\"echoes\":[";
  for (size_t i = 0; i < s.echoes.size(); ++i) {
    o << (i ? "," : "") << "{\"address\":\"" << s.echoes[i].address << "\",\"p50_ms\":" << Num(s.echoes[i].p50_ms)
      << ",\"p99_ms\":" << Num(s.echoes[i].p99_ms) << ",\"request_path_p50_ms\":" << Num(s.echoes[i].request_path_p50_ms)
      << ",\"response_path_p50_ms\":" << Num(s.echoes[i].response_path_p50_ms) << '}';
  }
  o << "],\"total\":";
  Json(o, s.total);
  o << ",\"tenants\":[";
  for (size_t i = 0; i < s.tenants.size(); ++i) {
    if (i) o << ',';
    Json(o, s.tenants[i]);
  }
  o << "],\"model_error_p50\":{";
  bool first = true;
  for (const auto& [m, e] : s.model_error_p50) {
    o << (first ? "" : ",") << '"' << m << "\":" << Num(e);
    first = false;
  }
  o << "},\"model_error_p99\":{";
  first = true;
  for (const auto& [m, e] : s.model_error_p99) {
    o << (first ? "" : ",") << '"' << m << "\":" << Num(e);
    first = false;
  }
  o << "},\"server\":{";
  first = true;
  for (const auto& [k, v] : s.server) {
    o << (first ? "" : ",") << '"' << k << "\":" << Num(v);
    first = false;
  }
  o << "}}";
  return o.str();
}

std::string SummaryTable(const Summary& s) {
  std::ostringstream o;
  char buf[512];
  std::snprintf(buf, sizeof(buf), "%-12s %4s %7s %7s %5s %7s %6s %4s %8s %8s %8s %9s %7s %8s %6s %6s\n", "tenant", "w",
                "sent", "ok", "late", "rej_er", "rej_lt", "err", "p50ms", "p99ms", "p99.9ms", "goodput/s", "attain",
                "ovh50ms", "svc%", "w%");
  o << buf;
  auto line = [&](const TenantSummary& t) {
    std::snprintf(buf, sizeof(buf),
                  "%-12s %4u %7llu %7llu %5llu %7llu %6llu %4llu %8.3f %8.3f %8.3f %9.1f %7.4f %8.3f %6.1f %6.1f\n",
                  t.name.c_str(), t.weight, static_cast<unsigned long long>(t.sent),
                  static_cast<unsigned long long>(t.ok), static_cast<unsigned long long>(t.late),
                  static_cast<unsigned long long>(t.rejected_early), static_cast<unsigned long long>(t.rejected_late),
                  static_cast<unsigned long long>(t.errors), t.p50_ms, t.p99_ms, t.p999_ms, t.goodput_rps,
                  t.attainment, t.overhead_p50_ms, 100 * t.service_share, 100 * t.weight_share);
    o << buf;
  };
  for (const TenantSummary& t : s.tenants) line(t);
  line(s.total);
  std::snprintf(buf, sizeof(buf),
                "window %.2f s, Jain's index (service/weight) %.4f, early rejections %.4f, send lag p99 %.3f ms max "
                "%.3f ms\n",
                s.window_s, s.jain_index, s.rejected_early_fraction, s.send_lag_p99_ms, s.send_lag_max_ms);
  o << buf;
  for (const auto& [m, e] : s.model_error_p99) {
    std::snprintf(buf, sizeof(buf), "model %s: prediction error p50 %.4f p99 %.4f\n", m.c_str(),
                  s.model_error_p50.count(m) ? s.model_error_p50.at(m) : 0.0, e);
    o << buf;
  }
  if (!s.server.empty()) {
    o << "server:";
    for (const auto& [k, v] : s.server) {
      std::snprintf(buf, sizeof(buf), " %s=%.6g", k.c_str(), v);
      o << buf;
    }
    o << "\n";
  }
  for (const EchoSummary& e : s.echoes) {
    std::snprintf(buf, sizeof(buf), "echo round trip (%s) p50 %.3f ms p99 %.3f ms", e.address.c_str(), e.p50_ms,
                  e.p99_ms);
    o << buf;
    if (e.request_path_p50_ms >= 0 && e.response_path_p50_ms >= 0) {
      std::snprintf(buf, sizeof(buf), "; p50 request path %.3f ms, response path %.3f ms", e.request_path_p50_ms,
                    e.response_path_p50_ms);
      o << buf;
    }
    o << "\n";
  }
  if (s.echo_rounds > 0) {
    std::snprintf(buf, sizeof(buf), "over %d alternated rounds: orreryd's overhead p50 %.3f ms\n", s.echo_rounds,
                  s.rounds_overhead_p50_ms);
    o << buf;
  }
  return o.str();
}

}  // namespace orrery::loadgen
