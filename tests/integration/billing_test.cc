// Billing end to end against the real orreryd: a mix of good, failing and
// rejected requests from two tenants is billed exactly for the billable ones
// at the configured prices, totals reconcile, tenants see only their own
// ledger; after kill -9 the ledger matches what clients were told; storage
// is metered; the admin endpoints (scheduler stats, drain / resume, server
// info) work and need the admin token.
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/tensor_proto.h"
#include "tests/integration/orreryd_process.h"
#include "tests/integration/rpc_client.h"

namespace orrery {
namespace {

using orrery::testing::ModelPath;

using orrery::testing::Call;
using orrery::testing::OrrerydProcess;
using orrery::testing::ReadFileOrEmpty;
using orrery::testing::Stubs;
using InferStub = inference::GRPCInferenceService::Stub;

NamedTensor Input() {
  Result<NamedTensor> t = ParseTensorProto(ReadFileOrEmpty(ModelPath("mlp", "test_data_set_0/input_0.pb")));
  EXPECT_TRUE(t.ok());
  return t.ok() ? std::move(t).value() : NamedTensor{};
}

std::string Id(std::string_view prefix, int n) {
  std::string s(prefix);
  s += std::to_string(n);
  return s;
}

// A price file in the server's data dir's parent temp area; removed by the test.
class PriceFile {
 public:
  explicit PriceFile(const std::string& json) {
    path_ = testing::MakeTempDir("orrery-prices-") + "/prices.json";
    std::ofstream(path_) << json;
  }
  ~PriceFile() {
    std::error_code ec;
    std::filesystem::remove_all(std::filesystem::path(path_).parent_path(), ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

grpc::Status Infer(InferStub* stub, const std::string& key, const std::string& id, inference::ModelInferResponse* resp,
                   bool bad_input = false) {
  inference::ModelInferRequest req = testing::InferRequest("mlp", "", Input());
  req.set_id(id);
  if (bad_input) req.mutable_inputs(0)->set_name("not_an_input");
  return Call(stub, &InferStub::ModelInfer, key, req, resp);
}

v1::BillingReportResponse TenantReport(const std::shared_ptr<grpc::Channel>& channel, const std::string& key,
                                       const v1::BillingReportRequest& req = {}) {
  auto stub = v1::BillingService::NewStub(channel);
  v1::BillingReportResponse resp;
  grpc::Status s = Call(stub.get(), &v1::BillingService::Stub::Report, key, req, &resp);
  EXPECT_TRUE(s.ok()) << s.error_message();
  return resp;
}

v1::BillingReportResponse AdminReport(Stubs* stubs, const std::string& admin, const std::string& tenant) {
  v1::BillingReportRequest req;
  req.set_tenant(tenant);
  v1::BillingReportResponse resp;
  grpc::Status s = Call(stubs->admin.get(), &v1::AdminService::Stub::BillingReport, admin, req, &resp);
  EXPECT_TRUE(s.ok()) << s.error_message();
  return resp;
}

// Sum of lines = per-model aggregates = per-day aggregates = totals, and
// (unfiltered) = the server-side counters.
void ExpectReconciles(const v1::BillingReportResponse& r, bool unfiltered = true) {
  int64_t lines = 0, by_model = 0, by_day = 0;
  uint64_t model_entries = 0, day_entries = 0;
  uint64_t line_bytes = 0, model_bytes = 0, day_bytes = 0;
  for (const auto& l : r.lines()) {
    lines += l.cost_micros();
    line_bytes += l.bytes_loaded();
  }
  for (const auto& a : r.by_model()) {
    by_model += a.cost_micros();
    model_entries += a.entries();
    model_bytes += a.bytes_loaded();
  }
  for (const auto& a : r.by_day()) {
    by_day += a.cost_micros();
    day_entries += a.entries();
    day_bytes += a.bytes_loaded();
  }
  EXPECT_EQ(model_bytes, line_bytes);
  EXPECT_EQ(day_bytes, line_bytes);
  EXPECT_EQ(static_cast<uint64_t>(r.lines_size()), r.total_entries());
  EXPECT_EQ(model_entries, r.total_entries());
  EXPECT_EQ(day_entries, r.total_entries());
  EXPECT_EQ(lines, r.total_cost_micros());
  EXPECT_EQ(by_model, r.total_cost_micros());
  EXPECT_EQ(by_day, r.total_cost_micros());
  if (unfiltered) {
    EXPECT_EQ(r.counter_entries(), r.total_entries());
    EXPECT_EQ(r.counter_cost_micros(), r.total_cost_micros());
  }
}

struct Tenant {
  std::string id, key;
};

Tenant MakeTenant(Stubs* stubs, const std::string& admin, const std::string& name, const v1::Quotas* quotas = nullptr) {
  v1::CreateTenantResponse t;
  grpc::Status s = testing::CreateTenant(stubs->admin.get(), admin, name, &t, quotas);
  EXPECT_TRUE(s.ok()) << s.error_message();
  v1::UploadModelResponse up;
  s = testing::UploadModel(stubs->models.get(), t.api_key(), "mlp", ReadFileOrEmpty(ModelPath("mlp", "model.onnx")), &up);
  EXPECT_TRUE(s.ok()) << s.error_message();
  return {t.tenant().id(), t.api_key()};
}

TEST(BillingTest, MixOfRequestsFromTwoTenantsBillsExactlyTheBillableOnes) {
  // 1e9 micros per lane-second and per GB loaded: one micro per
  // lane-nanosecond and per byte loaded, so every line's cost must equal its
  // measured lane time plus its bytes loaded. The host cache holds one of
  // the two tenants' models (24 KiB segments), so their requests keep
  // evicting each other's: many lines are misses that pay for their load.
  // These tests count inference entries exactly; the calibration entry an
  // upload adds is covered by scheduling_test.cc.
  PriceFile prices(R"({"currency": "EUR", "lane_second_micros": 1000000000, "gb_loaded_micros": 1000000000})");
  OrrerydProcess server({"--price-table", prices.path(), "--storage-sample-seconds", "0", "--lanes", "2",
                         "--host-cache-bytes", "30000", "--calibrate-uploads", "false"});
  ASSERT_TRUE(server.Start()) << "orreryd did not start";
  Stubs stubs(server.channel());
  const std::string admin = server.admin_token();
  v1::Quotas tight;
  tight.set_requests_per_second(1);
  tight.set_burst_requests(3);
  const Tenant a = MakeTenant(&stubs, admin, "acme");
  const Tenant b = MakeTenant(&stubs, admin, "bravo", &tight);
  inference::ModelInferResponse resp;

  std::set<std::string> a_billable, b_billable, not_billable;
  // acme: good requests with client ids; one without (the server makes one
  // up and returns it); bad input (refused before the scheduler); a retry
  // of a billed id; an invalid request id.
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(Infer(stubs.infer.get(), a.key, Id("a-", i), &resp).ok());
    EXPECT_EQ(resp.id(), Id("a-", i));
    a_billable.insert(Id("a-", i));
  }
  ASSERT_TRUE(Infer(stubs.infer.get(), a.key, "", &resp).ok());
  ASSERT_EQ(resp.id().rfind("r_", 0), 0u) << resp.id();
  a_billable.insert(resp.id());
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(Infer(stubs.infer.get(), a.key, Id("a-bad-", i), &resp, /*bad_input=*/true).error_code(),
              grpc::StatusCode::INVALID_ARGUMENT);
    not_billable.insert(Id("a-bad-", i));
  }
  ASSERT_TRUE(Infer(stubs.infer.get(), a.key, "a-0", &resp).ok());  // retry: runs, billed once
  EXPECT_EQ(resp.id(), "a-0");
  grpc::Status bad_id = Infer(stubs.infer.get(), a.key, "has space", &resp);
  EXPECT_EQ(bad_id.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(bad_id.error_message().find("request id"), std::string::npos) << bad_id.error_message();

  // bravo: burst 3 at 1 request/s, so a quick run of 8 gets some rejected at
  // admission (RESOURCE_EXHAUSTED): those are free.
  int rejected = 0;
  for (int i = 0; i < 8; ++i) {
    grpc::Status s = Infer(stubs.infer.get(), b.key, Id("b-", i), &resp);
    if (s.ok()) {
      b_billable.insert(Id("b-", i));
    } else {
      EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
      not_billable.insert(Id("b-", i));
      ++rejected;
    }
  }
  EXPECT_GE(rejected, 1);
  EXPECT_GE(b_billable.size(), 3u);
  // The same request id in another tenant is another request.
  if (Infer(stubs.infer.get(), b.key, "a-1", &resp).ok()) b_billable.insert("a-1");

  int loaded_lines = 0;
  auto check_tenant = [&](const Tenant& t, const std::set<std::string>& billable) {
    const v1::BillingReportResponse r = TenantReport(server.channel(), t.key);
    std::set<std::string> ids;
    for (const auto& l : r.lines()) {
      EXPECT_EQ(l.tenant_id(), t.id) << "another tenant's line in the report";
      EXPECT_EQ(l.kind(), "inference");
      EXPECT_EQ(l.status(), "OK");
      EXPECT_EQ(l.model(), "mlp");
      EXPECT_EQ(l.model_version(), 1u);
      EXPECT_EQ(l.batch_size(), 1u);
      EXPECT_EQ(l.batch_share(), 1.0);
      EXPECT_GT(l.lane_ns(), 0);
      EXPECT_EQ(l.cost_micros(), l.lane_ns() + static_cast<int64_t>(l.bytes_loaded()))
          << "price: 1 micro per lane-ns and per byte loaded";
      EXPECT_TRUE(l.bytes_loaded() == 0 || l.bytes_loaded() == 20480) << l.bytes_loaded();
      loaded_lines += l.bytes_loaded() > 0 ? 1 : 0;
      EXPECT_GE(l.start_unix_us(), l.arrival_unix_us());
      EXPECT_GE(l.end_unix_us(), l.start_unix_us());
      EXPECT_TRUE(ids.insert(l.request_id()).second) << "billed twice: " << l.request_id();
    }
    EXPECT_EQ(ids, billable);
    EXPECT_EQ(r.prices().currency(), "EUR");
    EXPECT_EQ(r.prices().lane_second_micros(), 1'000'000'000);
    ExpectReconciles(r);
    EXPECT_GT(r.total_cost_micros(), 0);
    return r;
  };
  const v1::BillingReportResponse ra = check_tenant(a, a_billable);
  const v1::BillingReportResponse rb = check_tenant(b, b_billable);
  // acme's first request missed (bravo's upload had evicted its model), and
  // so did bravo's first after acme's run.
  EXPECT_EQ(loaded_lines, 2);
  for (const v1::BillingReportResponse* r : {&ra, &rb}) {
    for (const auto& l : r->lines()) EXPECT_EQ(not_billable.count(l.request_id()), 0u) << l.request_id();
  }

  // A tenant cannot ask for another tenant's report.
  auto billing = v1::BillingService::NewStub(server.channel());
  v1::BillingReportRequest other;
  other.set_tenant(b.id);
  v1::BillingReportResponse out;
  EXPECT_EQ(Call(billing.get(), &v1::BillingService::Stub::Report, a.key, other, &out).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(Call(billing.get(), &v1::BillingService::Stub::Report, std::string("ork_wrong"), v1::BillingReportRequest(),
                 &out)
                .error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  // The admin report needs the admin token.
  EXPECT_EQ(Call(stubs.admin.get(), &v1::AdminService::Stub::BillingReport, a.key, v1::BillingReportRequest(), &out)
                .error_code(),
            grpc::StatusCode::PERMISSION_DENIED);

  // Admin: one tenant by name equals the tenant's own report; all tenants
  // is the union and reconciles too.
  const v1::BillingReportResponse admin_b = AdminReport(&stubs, admin, "bravo");
  EXPECT_EQ(admin_b.total_cost_micros(), rb.total_cost_micros());
  EXPECT_EQ(admin_b.lines_size(), rb.lines_size());
  const v1::BillingReportResponse all = AdminReport(&stubs, admin, "");
  ExpectReconciles(all);
  EXPECT_EQ(all.total_cost_micros(), ra.total_cost_micros() + rb.total_cost_micros());
  EXPECT_EQ(all.total_entries(), ra.total_entries() + rb.total_entries());
  v1::BillingReportRequest unknown;
  unknown.set_tenant("nobody");
  EXPECT_EQ(Call(stubs.admin.get(), &v1::AdminService::Stub::BillingReport, admin, unknown, &out).error_code(),
            grpc::StatusCode::NOT_FOUND);

  // Filters: a model that does not exist gives nothing; an empty time window
  // gives nothing; a bad window is INVALID_ARGUMENT.
  v1::BillingReportRequest filtered;
  filtered.set_model("other");
  EXPECT_EQ(TenantReport(server.channel(), a.key, filtered).lines_size(), 0);
  filtered.set_model("mlp");
  EXPECT_EQ(TenantReport(server.channel(), a.key, filtered).total_cost_micros(), ra.total_cost_micros());
  filtered.set_from_unix_ms(1);
  filtered.set_to_unix_ms(2);
  EXPECT_EQ(TenantReport(server.channel(), a.key, filtered).lines_size(), 0);
  filtered.set_to_unix_ms(1);
  EXPECT_EQ(Call(billing.get(), &v1::BillingService::Stub::Report, a.key, filtered, &out).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);

  // A deleted tenant's ledger stays attributable (admin, by id).
  v1::DeleteTenantRequest del;
  del.set_tenant("acme");
  v1::DeleteTenantResponse del_resp;
  ASSERT_TRUE(Call(stubs.admin.get(), &v1::AdminService::Stub::DeleteTenant, admin, del, &del_resp).ok());
  EXPECT_EQ(AdminReport(&stubs, admin, a.id).total_cost_micros(), ra.total_cost_micros());
}

// Kills the server 4 times under load and checks the ledger against what the
// clients were told; `ledger_writer`: --ledger-writer (api/ledger_writer.h).
void KillNineCycles(bool ledger_writer) {
  OrrerydProcess server({"--storage-sample-seconds", "0", "--lanes", "2", "--calibrate-uploads", "false",
                         "--ledger-writer", ledger_writer ? "true" : "false"});
  ASSERT_TRUE(server.Start()) << "orreryd did not start";
  std::string admin = server.admin_token();
  std::vector<Tenant> tenants;
  {
    Stubs stubs(server.channel());
    v1::Quotas limited;  // so that some requests are rejected at admission
    limited.set_requests_per_second(20);
    limited.set_burst_requests(5);
    tenants.push_back(MakeTenant(&stubs, admin, "alpha"));
    tenants.push_back(MakeTenant(&stubs, admin, "beta", &limited));
  }
  enum class Outcome { kOk, kRejected, kUnknown };
  std::mutex mu;
  std::map<std::pair<int, std::string>, Outcome> sent;  // (tenant index, request id)
  std::mt19937 rng(42);
  constexpr int kCycles = 4;
  for (int cycle = 0; cycle < kCycles; ++cycle) {
    std::atomic<bool> stop{false};
    std::atomic<int> ok_count{0};
    std::vector<std::thread> clients;
    for (int c = 0; c < 4; ++c) {
      clients.emplace_back([&, c] {
        const int ti = c % 2;
        auto stub = inference::GRPCInferenceService::NewStub(server.channel());
        for (int n = 0; !stop.load(); ++n) {
          std::string id = Id("k", cycle);
          id += Id("-c", c);
          id += Id("-", n);
          inference::ModelInferResponse resp;
          grpc::Status s = Infer(stub.get(), tenants[ti].key, id, &resp);
          Outcome o = Outcome::kUnknown;
          if (s.ok()) {
            EXPECT_EQ(resp.id(), id);
            o = Outcome::kOk;
            ok_count.fetch_add(1);
          } else if (s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
            o = Outcome::kRejected;
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
          }
          std::lock_guard<std::mutex> lock(mu);
          sent[{ti, id}] = o;
          if (o == Outcome::kUnknown) return;  // the server is gone
        }
      });
    }
    // Kill at a random moment once some responses have come back.
    while (ok_count.load() < 10) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    std::this_thread::sleep_for(std::chrono::milliseconds(std::uniform_int_distribution<int>(0, 300)(rng)));
    server.Kill();
    stop.store(true);
    for (std::thread& t : clients) t.join();
    ASSERT_TRUE(server.Start()) << "orreryd did not restart after kill -9 (cycle " << cycle << ")";

    // Every OK response has exactly one OK entry; no entry for a request
    // rejected at admission; no entry for a request never sent; unknown
    // outcomes (in flight at the kill) have at most one.
    for (int ti = 0; ti < 2; ++ti) {
      const v1::BillingReportResponse r = TenantReport(server.channel(), tenants[ti].key);
      ExpectReconciles(r);
      std::map<std::string, int> seen;
      for (const auto& l : r.lines()) {
        ++seen[l.request_id()];
        std::lock_guard<std::mutex> lock(mu);
        auto it = sent.find({ti, l.request_id()});
        ASSERT_NE(it, sent.end()) << "ledger entry for a request never sent: " << l.request_id();
        EXPECT_NE(it->second, Outcome::kRejected) << "billed a request rejected at admission: " << l.request_id();
        if (it->second == Outcome::kOk) {
          EXPECT_EQ(l.status(), "OK") << l.request_id();
        }
      }
      std::lock_guard<std::mutex> lock(mu);
      int ok = 0, rejected = 0;
      for (const auto& [k, o] : sent) {
        if (k.first != ti) continue;
        const int n = seen.count(k.second) ? seen[k.second] : 0;
        if (o == Outcome::kOk) {
          ++ok;
          EXPECT_EQ(n, 1) << "OK response " << k.second << " has " << n << " ledger entries";
        } else if (o == Outcome::kRejected) {
          ++rejected;
          EXPECT_EQ(n, 0) << k.second;
        } else {
          EXPECT_LE(n, 1) << k.second;
        }
      }
      EXPECT_GT(ok, 0);
      std::printf("cycle %d tenant %d: %d OK, %d rejected at admission, %d ledger entries\n", cycle, ti, ok, rejected,
                  r.lines_size());
      if (ti == 1 && cycle == kCycles - 1) {
        EXPECT_GT(rejected, 0) << "the quota never rejected anything";
      }
    }
  }

  // A retry of an acknowledged request after the restarts runs again and is
  // not billed a second time.
  std::string acked;
  for (const auto& [k, o] : sent) {
    if (k.first == 0 && o == Outcome::kOk) acked = k.second;
  }
  ASSERT_FALSE(acked.empty());
  const v1::BillingReportResponse before = TenantReport(server.channel(), tenants[0].key);
  auto stub = inference::GRPCInferenceService::NewStub(server.channel());
  inference::ModelInferResponse resp;
  ASSERT_TRUE(Infer(stub.get(), tenants[0].key, acked, &resp).ok());
  const v1::BillingReportResponse after = TenantReport(server.channel(), tenants[0].key);
  EXPECT_EQ(after.total_entries(), before.total_entries());
  EXPECT_EQ(after.total_cost_micros(), before.total_cost_micros());
}

TEST(BillingTest, AfterKillNineTheLedgerMatchesWhatClientsReceived) { KillNineCycles(false); }

// The same with the ledger writer thread appending and answering.
TEST(BillingTest, AfterKillNineTheLedgerMatchesWhatClientsReceivedWithTheLedgerWriter) { KillNineCycles(true); }

TEST(BillingTest, StoredBytesAreSampledAndBilled) {
  // A price high enough that a few KB for a second cost whole micros.
  PriceFile prices(R"({"gb_month_stored_micros": 2592000000000})");
  OrrerydProcess server({"--price-table", prices.path(), "--storage-sample-seconds", "1", "--calibrate-uploads", "false"});
  ASSERT_TRUE(server.Start()) << "orreryd did not start";
  Stubs stubs(server.channel());
  const Tenant t = MakeTenant(&stubs, server.admin_token(), "store");
  const uint64_t size = ReadFileOrEmpty(ModelPath("mlp", "model.onnx")).size();
  v1::BillingReportResponse r;
  for (int i = 0; i < 100; ++i) {  // up to 10 s on a loaded machine
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    r = TenantReport(server.channel(), t.key);
    if (r.lines_size() >= 2) break;
  }
  ASSERT_GE(r.lines_size(), 2);
  for (const auto& l : r.lines()) {
    EXPECT_EQ(l.kind(), "storage");
    EXPECT_EQ(l.stored_bytes(), size);
    EXPECT_EQ(l.interval_ms(), 1000);
    // bytes * ms * price / (1e9 * 30 days in ms) = bytes / 1000, rounded.
    EXPECT_EQ(l.cost_micros(), static_cast<int64_t>((size + 500) / 1000));
  }
  ASSERT_EQ(r.by_model_size(), 1);
  EXPECT_EQ(r.by_model(0).model(), "(storage)");
  ExpectReconciles(r);
  // A model filter selects inference lines only.
  v1::BillingReportRequest only_mlp;
  only_mlp.set_model("mlp");
  EXPECT_EQ(TenantReport(server.channel(), t.key, only_mlp).lines_size(), 0);
}

TEST(BillingTest, AdminSchedulerStatsDrainResumeAndServerInfo) {
  OrrerydProcess server({"--storage-sample-seconds", "0", "--lanes", "1", "--calibrate-uploads", "false"});
  ASSERT_TRUE(server.Start()) << "orreryd did not start";
  Stubs stubs(server.channel());
  const std::string admin = server.admin_token();
  const Tenant t = MakeTenant(&stubs, admin, "ops");
  inference::ModelInferResponse resp;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(Infer(stubs.infer.get(), t.key, "", &resp).ok());

  v1::SchedulerStatsResponse stats;
  ASSERT_TRUE(Call(stubs.admin.get(), &v1::AdminService::Stub::SchedulerStats, admin, v1::SchedulerStatsRequest(),
                   &stats)
                  .ok());
  EXPECT_EQ(stats.lanes(), 1);
  ASSERT_EQ(stats.tenants_size(), 1);
  EXPECT_EQ(stats.tenants(0).tenant_id(), t.id);
  EXPECT_EQ(stats.tenants(0).completed(), 3u);
  EXPECT_EQ(stats.tenants(0).admitted(), 3u);
  EXPECT_GT(stats.tenants(0).service_ns(), 0);
  ASSERT_GE(stats.models_size(), 1);
  EXPECT_EQ(stats.models(0).model_id(), t.id + "/mlp@1");
  EXPECT_EQ(Call(stubs.admin.get(), &v1::AdminService::Stub::SchedulerStats, t.key, v1::SchedulerStatsRequest(),
                 &stats)
                .error_code(),
            grpc::StatusCode::PERMISSION_DENIED);

  v1::ServerInfoResponse info;
  ASSERT_TRUE(
      Call(stubs.admin.get(), &v1::AdminService::Stub::ServerInfo, admin, v1::ServerInfoRequest(), &info).ok());
  EXPECT_FALSE(info.version().empty());
  EXPECT_FALSE(info.draining());
  EXPECT_EQ(info.lanes(), 1);
  EXPECT_GT(info.start_unix_ms(), 0);

  v1::DrainRequest drain;
  drain.set_timeout_ms(10'000);
  v1::DrainResponse drained;
  ASSERT_TRUE(Call(stubs.admin.get(), &v1::AdminService::Stub::Drain, admin, drain, &drained).ok());
  EXPECT_TRUE(drained.drained());
  EXPECT_EQ(drained.in_flight(), 0);
  grpc::Status refused = Infer(stubs.infer.get(), t.key, "during-drain", &resp);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_NE(refused.error_message().find("draining"), std::string::npos);
  ASSERT_TRUE(
      Call(stubs.admin.get(), &v1::AdminService::Stub::ServerInfo, admin, v1::ServerInfoRequest(), &info).ok());
  EXPECT_TRUE(info.draining());
  v1::ResumeResponse resumed;
  ASSERT_TRUE(Call(stubs.admin.get(), &v1::AdminService::Stub::Resume, admin, v1::ResumeRequest(), &resumed).ok());
  EXPECT_TRUE(Infer(stubs.infer.get(), t.key, "after-resume", &resp).ok());
  // The refused request was never billed; the later one was.
  const v1::BillingReportResponse r = TenantReport(server.channel(), t.key);
  std::set<std::string> ids;
  for (const auto& l : r.lines()) ids.insert(l.request_id());
  EXPECT_EQ(ids.count("during-drain"), 0u);
  EXPECT_EQ(ids.count("after-resume"), 1u);
  EXPECT_EQ(r.total_entries(), 4u);
  drain.set_timeout_ms(-1);
  EXPECT_EQ(Call(stubs.admin.get(), &v1::AdminService::Stub::Drain, admin, drain, &drained).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
}

}  // namespace
}  // namespace orrery

namespace orrery {
namespace {

// Not a correctness test: prints ModelInfer latency as the client sees it,
// sequential and with 4 concurrent clients, now that every request waits for
// its ledger entry's fsync. Run with --gtest_also_run_disabled_tests
// --gtest_filter='*MeasureInferLatency*'.
TEST(BillingTest, DISABLED_MeasureInferLatency) {
  OrrerydProcess server({"--storage-sample-seconds", "0", "--lanes", "2", "--calibrate-uploads", "false"});
  ASSERT_TRUE(server.Start());
  Stubs stubs(server.channel());
  const Tenant t = MakeTenant(&stubs, server.admin_token(), "bench");
  v1::UpdateTenantRequest up;  // no rate limit in the way
  up.set_tenant("bench");
  up.mutable_quotas()->set_requests_per_second(1'000'000);
  up.mutable_quotas()->set_burst_requests(1'000'000);
  v1::UpdateTenantResponse up_resp;
  ASSERT_TRUE(Call(stubs.admin.get(), &v1::AdminService::Stub::UpdateTenant, server.admin_token(), up, &up_resp).ok());
  inference::ModelInferResponse resp;
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(Infer(stubs.infer.get(), t.key, "", &resp).ok());  // warm up
  constexpr int kN = 400;
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < kN; ++i) ASSERT_TRUE(Infer(stubs.infer.get(), t.key, "", &resp).ok());
  const double seq_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / kN;
  t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> clients;
  for (int c = 0; c < 4; ++c) {
    clients.emplace_back([&] {
      auto stub = inference::GRPCInferenceService::NewStub(server.channel());
      inference::ModelInferResponse r;
      for (int i = 0; i < kN / 4; ++i) EXPECT_TRUE(Infer(stub.get(), t.key, "", &r).ok());
    });
  }
  for (std::thread& c : clients) c.join();
  const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const v1::BillingReportResponse r = TenantReport(server.channel(), t.key, [] {
    v1::BillingReportRequest q;
    q.set_omit_lines(true);
    return q;
  }());
  std::printf("ModelInfer (mlp, billed): %.0f us per request sequentially; 4 clients: %.0f requests/s; mean lane "
              "time %.1f us\n",
              seq_us, kN / wall_s, r.total_entries() ? r.by_model(0).lane_ns() / 1000.0 / r.total_entries() : 0.0);
  EXPECT_EQ(r.total_entries(), static_cast<uint64_t>(20 + 2 * kN));
}

}  // namespace
}  // namespace orrery
