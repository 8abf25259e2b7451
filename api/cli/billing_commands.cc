// `orrery billing report` (tenant key) and `orrery admin billing report`,
// `orrery admin scheduler stats`, `orrery admin server drain|resume|info`
// (admin token).
#include <cinttypes>
#include <cstdio>
#include <ctime>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "api/cli/commands.h"
#include "api/cli/common.h"
#include "api/proto/orrery.grpc.pb.h"

namespace orrery::cli {
namespace {

// "1.234567" units from micro-units.
std::string Money(int64_t micros) {
  char buf[48];
  const char* sign = micros < 0 ? "-" : "";
  const uint64_t m = micros < 0 ? static_cast<uint64_t>(-(micros + 1)) + 1 : static_cast<uint64_t>(micros);
  std::snprintf(buf, sizeof(buf), "%s%" PRIu64 ".%06" PRIu64, sign, m / 1000000, m % 1000000);
  return buf;
}

std::string Utc(int64_t unix_us) {
  if (unix_us == 0) return "-";
  const std::time_t t = static_cast<std::time_t>(unix_us / 1000000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
  char out[48];
  std::snprintf(out, sizeof(out), "%s.%03dZ", buf, static_cast<int>((unix_us / 1000) % 1000));
  return out;
}

void PrintCsv(const v1::BillingReportResponse& r) {
  std::cout << "record,tenant_id,day,model,model_version,request_id,status,arrival_unix_us,start_unix_us,"
               "end_unix_us,queue_us,batch_size,batch_share,lane_ns,bytes_loaded,stored_bytes,interval_ms,entries,"
               "cost_micros,placement,device_ns,bytes_transferred\n";
  for (const v1::BillingLine& l : r.lines()) {
    std::cout << l.kind() << "," << l.tenant_id() << ",," << l.model() << "," << l.model_version() << ","
              << l.request_id() << "," << l.status() << "," << l.arrival_unix_us() << "," << l.start_unix_us() << ","
              << l.end_unix_us() << "," << l.queue_us() << "," << l.batch_size() << "," << l.batch_share() << ","
              << l.lane_ns() << "," << l.bytes_loaded() << "," << l.stored_bytes() << "," << l.interval_ms()
              << ",1," << l.cost_micros() << "," << l.placement() << "," << l.device_ns() << ","
              << l.bytes_transferred() << "\n";
  }
  for (const v1::BillingAggregate& a : r.by_model()) {
    std::cout << "by_model," << a.tenant_id() << ",," << a.model() << ",,,,,,,,,," << a.lane_ns() << ","
              << a.bytes_loaded() << ",,," << a.entries() << "," << a.cost_micros() << ",," << a.device_ns() << ","
              << a.bytes_transferred() << "\n";
  }
  for (const v1::BillingAggregate& a : r.by_day()) {
    std::cout << "by_day," << a.tenant_id() << "," << a.day() << ",,,,,,,,,,," << a.lane_ns() << ","
              << a.bytes_loaded() << ",,," << a.entries() << "," << a.cost_micros() << ",," << a.device_ns() << ","
              << a.bytes_transferred() << "\n";
  }
  std::cout << "total,,,,,,,,,,,,,,,,," << r.total_entries() << "," << r.total_cost_micros() << ",,,\n";
}

void PrintTable(const v1::BillingReportResponse& r, bool show_tenant) {
  const std::string cur = r.prices().currency();
  if (r.lines_size() > 0) {
    std::cout << std::left;
    if (show_tenant) std::cout << std::setw(20) << "TENANT";
    std::cout << std::setw(26) << "END (UTC)" << std::setw(10) << "KIND" << std::setw(20) << "MODEL"
              << std::setw(36) << "REQUEST ID" << std::setw(20) << "STATUS" << std::setw(12) << "QUEUE us"
              << std::setw(14) << "LANE us" << std::setw(12) << "LOADED B" << "COST " << cur << "\n";
    for (const v1::BillingLine& l : r.lines()) {
      if (show_tenant) std::cout << std::setw(20) << l.tenant_id();
      const std::string model =
          l.kind() == "storage" ? std::to_string(l.stored_bytes()) + " B" : l.model() + "@" + std::to_string(l.model_version());
      std::cout << std::setw(26) << Utc(l.end_unix_us() != 0 ? l.end_unix_us() : l.unix_ms() * 1000)
                << std::setw(10) << l.kind() << std::setw(20) << model << std::setw(36) << l.request_id()
                << std::setw(20) << l.status() << std::setw(12) << l.queue_us() << std::setw(14)
                << l.lane_ns() / 1000 << std::setw(12) << l.bytes_loaded() << Money(l.cost_micros()) << "\n";
    }
    std::cout << "\n";
  }
  std::cout << "BY MODEL\n";
  for (const v1::BillingAggregate& a : r.by_model()) {
    if (show_tenant) std::cout << std::setw(20) << a.tenant_id();
    std::cout << std::setw(24) << a.model() << std::setw(10) << a.entries() << std::setw(16)
              << a.lane_ns() / 1000 << Money(a.cost_micros()) << "\n";
  }
  std::cout << "BY DAY\n";
  for (const v1::BillingAggregate& a : r.by_day()) {
    if (show_tenant) std::cout << std::setw(20) << a.tenant_id();
    std::cout << std::setw(24) << a.day() << std::setw(10) << a.entries() << std::setw(16)
              << a.lane_ns() / 1000 << Money(a.cost_micros()) << "\n";
  }
  std::cout << "TOTAL " << r.total_entries() << " entries, " << Money(r.total_cost_micros()) << " " << cur
            << " (server counter: " << r.counter_entries() << " entries, " << Money(r.counter_cost_micros()) << " "
            << cur << ")\n";
}

int PrintReport(const GlobalOptions& g, const BillingFlags& f, const v1::BillingReportResponse& r, bool admin) {
  const std::string format = g.json ? "json" : f.format;
  if (format == "json") {
    std::cout << ToJson(r) << "\n";
  } else if (format == "csv") {
    PrintCsv(r);
  } else {
    PrintTable(r, admin);
  }
  return 0;
}

Result<v1::BillingReportRequest> ReportRequest(const BillingFlags& f) {
  v1::BillingReportRequest req;
  if (f.format != "table" && f.format != "csv" && f.format != "json") {
    return orrery::Status::InvalidArgument("--format must be table, csv or json");
  }
  if (!f.from.empty()) {
    ORRERY_ASSIGN_OR_RETURN(int64_t ms, ParseTimeMs(f.from));
    req.set_from_unix_ms(ms);
  }
  if (!f.to.empty()) {
    ORRERY_ASSIGN_OR_RETURN(int64_t ms, ParseTimeMs(f.to));
    req.set_to_unix_ms(ms);
  }
  req.set_model(f.model);
  return req;
}

std::unique_ptr<v1::AdminService::Stub> AdminStub(const GlobalOptions& g, grpc::ClientContext* ctx) {
  Authorize(ctx, g.admin_token);
  return v1::AdminService::NewStub(Connect(g));
}

}  // namespace

Result<int64_t> ParseTimeMs(const std::string& s) {
  // YYYY-MM-DD (UTC midnight), YYYY-MM-DDTHH:MM:SSZ, or Unix milliseconds.
  std::tm tm{};
  for (const char* fmt : {"%Y-%m-%dT%H:%M:%SZ", "%Y-%m-%d"}) {
    tm = std::tm{};
    const char* end = strptime(s.c_str(), fmt, &tm);
    if (end != nullptr && *end == '\0') return static_cast<int64_t>(timegm(&tm)) * 1000;
  }
  if (!s.empty() && s.find_first_not_of("0123456789") == std::string::npos && s.size() < 19) {
    return static_cast<int64_t>(std::stoll(s));
  }
  return orrery::Status::InvalidArgument("time '" + s + "' is not YYYY-MM-DD, YYYY-MM-DDTHH:MM:SSZ or Unix milliseconds");
}

int BillingReport(const GlobalOptions& g, const BillingFlags& flags) {
  if (!NeedKey(g)) return 1;
  Result<v1::BillingReportRequest> req = ReportRequest(flags);
  if (!req.ok()) return Fail(req.status().message());
  grpc::ClientContext ctx;
  Authorize(&ctx, g.api_key);
  auto stub = v1::BillingService::NewStub(Connect(g));
  v1::BillingReportResponse resp;
  grpc::Status s = stub->Report(&ctx, *req, &resp);
  if (!s.ok()) return Fail(s, g);
  return PrintReport(g, flags, resp, /*admin=*/false);
}

int AdminBillingReport(const GlobalOptions& g, const BillingFlags& flags, const std::string& tenant) {
  if (!NeedAdmin(g)) return 1;
  Result<v1::BillingReportRequest> req = ReportRequest(flags);
  if (!req.ok()) return Fail(req.status().message());
  req->set_tenant(tenant);
  grpc::ClientContext ctx;
  auto stub = AdminStub(g, &ctx);
  v1::BillingReportResponse resp;
  grpc::Status s = stub->BillingReport(&ctx, *req, &resp);
  if (!s.ok()) return Fail(s, g);
  return PrintReport(g, flags, resp, /*admin=*/true);
}

int AdminSchedulerStats(const GlobalOptions& g) {
  if (!NeedAdmin(g)) return 1;
  grpc::ClientContext ctx;
  auto stub = AdminStub(g, &ctx);
  v1::SchedulerStatsResponse r;
  grpc::Status s = stub->SchedulerStats(&ctx, v1::SchedulerStatsRequest(), &r);
  if (!s.ok()) return Fail(s, g);
  if (g.json) {
    std::cout << ToJson(r) << "\n";
    return 0;
  }
  std::cout << "lanes " << r.lanes() << " (" << r.lane_utilisation() * 100 << "% busy, last minute), virtual time "
            << r.virtual_time() << ", queued " << r.queued() << ", preemptions " << r.preemptions()
            << ", affinity runs " << r.affinity_dispatches() << "\n";
  std::cout << "admission plans waits +" << r.admission_wait_slack() * 100 << "% and "
            << static_cast<double>(r.response_margin_ns()) / 1e6 << " ms after the lane\n";
  std::cout << "lanes spent " << static_cast<double>(r.lane_callback_ns()) / 1e6
            << " ms in completion callbacks (longest " << static_cast<double>(r.lane_callback_max_ns()) / 1e6
            << " ms)\n";
  if (r.has_device()) {
    const v1::DeviceSchedulerInfo& d = r.device();
    std::cout << "device " << d.description() << (d.placing() ? "" : " (requests not placed on it)") << ": "
              << d.placed_device() << " requests run on it, " << d.placed_cpu() << " placed on the CPU, "
              << d.queued() << " queued; " << d.transfers() << " transfers (" << d.bytes_transferred()
              << " bytes, " << d.prewarms() << " pre-warms); last " << d.window_seconds() << " s: compute "
              << d.compute_utilisation() * 100 << "% busy, link " << d.link_utilisation() * 100 << "% busy\n";
  }
  std::cout
            << std::left << std::setw(20) << "TENANT" << std::setw(8) << "WEIGHT" << std::setw(8) << "QUEUED"
            << std::setw(10) << "INFLIGHT" << std::setw(10) << "ADMITTED" << std::setw(10) << "REJECTED"
            << std::setw(10) << "DROPPED" << std::setw(11) << "COMPLETED" << std::setw(8) << "FAILED"
            << "SERVICE ms\n";
  for (const v1::TenantSchedulerInfo& t : r.tenants()) {
    std::cout << std::setw(20) << t.tenant_id() << std::setw(8) << t.weight() << std::setw(8) << t.queued()
              << std::setw(10) << t.in_flight() << std::setw(10) << t.admitted() << std::setw(10)
              << t.rejected_deadline() + t.rejected_in_flight() << std::setw(10) << t.dropped() << std::setw(11)
              << t.completed() << std::setw(8) << t.failed() << t.service_ns() / 1000000 << "\n";
  }
  std::cout << std::setw(40) << "MODEL" << std::setw(10) << "SAMPLES" << std::setw(10) << "ERR p50" << std::setw(10)
            << "ERR p90" << "ERR max\n";
  for (const v1::ModelCostInfo& m : r.models()) {
    std::cout << std::setw(40) << m.model_id() << std::setw(10) << m.samples() << std::setw(10) << m.error_p50()
              << std::setw(10) << m.error_p90() << m.error_max() << "\n";
  }
  return 0;
}

int AdminServerDrain(const GlobalOptions& g, int64_t timeout_ms) {
  if (!NeedAdmin(g)) return 1;
  grpc::ClientContext ctx;
  auto stub = AdminStub(g, &ctx);
  v1::DrainRequest req;
  req.set_timeout_ms(timeout_ms);
  v1::DrainResponse r;
  grpc::Status s = stub->Drain(&ctx, req, &r);
  if (!s.ok()) return Fail(s, g);
  if (g.json) {
    std::cout << ToJson(r) << "\n";
  } else if (r.drained()) {
    std::cout << "drained: no inference in flight; new ones are refused until `orrery admin server resume`\n";
  } else {
    std::cout << "not drained yet: " << r.in_flight() << " inferences in flight (" << r.queued()
              << " queued); new ones are refused\n";
  }
  return r.drained() ? 0 : 2;
}

int AdminServerResume(const GlobalOptions& g) {
  if (!NeedAdmin(g)) return 1;
  grpc::ClientContext ctx;
  auto stub = AdminStub(g, &ctx);
  v1::ResumeResponse r;
  grpc::Status s = stub->Resume(&ctx, v1::ResumeRequest(), &r);
  if (!s.ok()) return Fail(s, g);
  std::cout << (g.json ? "{\"resumed\":true}" : "resumed: admitting inferences") << "\n";
  return 0;
}

int AdminServerInfo(const GlobalOptions& g) {
  if (!NeedAdmin(g)) return 1;
  grpc::ClientContext ctx;
  auto stub = AdminStub(g, &ctx);
  v1::ServerInfoResponse r;
  grpc::Status s = stub->ServerInfo(&ctx, v1::ServerInfoRequest(), &r);
  if (!s.ok()) return Fail(s, g);
  if (g.json) {
    std::cout << ToJson(r) << "\n";
    return 0;
  }
  std::cout << "version      " << r.version() << "\nbuild type   " << r.build_type() << "\ncompiler     "
            << r.compiler() << "\ngit commit   " << r.git_commit() << "\nstarted      "
            << Utc(r.start_unix_ms() * 1000) << "\nlanes        " << r.lanes() << "\ndraining     "
            << (r.draining() ? "yes" : "no") << "\nin flight    " << r.in_flight() << "\n";
  return 0;
}

}  // namespace orrery::cli
