// The admin cache endpoints and the metering of cold loads against the real
// orreryd (--host-cache-bytes 60000: room for two 24 KiB mlp segments, not
// three): CacheList shows each version's state, size, pins and last use;
// after CacheEvict the next request is a miss billed for the bytes it loaded
// at gb_loaded_micros while hits are billed 0; an operator pin survives the
// pressure of other models until unpinned; CachePrefetch makes the next
// request a hit; a tenant key gets PERMISSION_DENIED; unknown names are
// NOT_FOUND naming them.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "runtime/tensor_proto.h"
#include "tests/common/http_client.h"
#include "tests/integration/orreryd_process.h"
#include "tests/integration/rpc_client.h"

namespace orrery {
namespace {

using orrery::testing::Call;
using orrery::testing::ModelPath;
using orrery::testing::OrrerydProcess;
using orrery::testing::ReadFileOrEmpty;
using orrery::testing::Stubs;
using AdminStub = v1::AdminService::Stub;
using InferStub = inference::GRPCInferenceService::Stub;

constexpr uint64_t kSegmentBytes = 20480;  // the mlp's segment (weights packed only): what a miss loads
// 3 micros per byte loaded (3e9 per GB) and free lane time: a line's cost is
// exactly 3 x its bytes_loaded.
constexpr const char* kPrices = R"({"lane_second_micros": 0, "gb_loaded_micros": 3000000000})";

class CacheAdminTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string dir = testing::MakeTempDir("orrery-prices-");
    prices_dir_ = dir;
    std::ofstream(dir + "/prices.json") << kPrices;
    server_ = std::make_unique<OrrerydProcess>(std::vector<std::string>{
        "--lanes", "1", "--host-cache-bytes", "60000", "--calibrate-uploads", "false", "--price-table", dir + "/prices.json",
        "--storage-sample-seconds", "0"});
    ASSERT_TRUE(server_->Start());
    stubs_ = std::make_unique<Stubs>(server_->channel());
    admin_ = server_->admin_token();
    v1::CreateTenantResponse tenant;
    ASSERT_TRUE(testing::CreateTenant(stubs_->admin.get(), admin_, "acme", &tenant).ok());
    key_ = tenant.api_key();
    tenant_id_ = tenant.tenant().id();
  }
  void TearDown() override {
    server_.reset();
    std::error_code ec;
    std::filesystem::remove_all(prices_dir_, ec);
  }

  void Upload(const std::string& name) {
    v1::UploadModelResponse up;
    grpc::Status s =
        testing::UploadModel(stubs_->models.get(), key_, name, ReadFileOrEmpty(ModelPath("mlp", "model.onnx")), &up);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }

  // One inference with request id `id`; its billing line.
  v1::BillingLine Infer(const std::string& model, const std::string& id) {
    Result<NamedTensor> input = ParseTensorProto(ReadFileOrEmpty(ModelPath("mlp", "test_data_set_0/input_0.pb")));
    EXPECT_TRUE(input.ok());
    inference::ModelInferRequest req = testing::InferRequest(model, "", *input);
    req.set_id(id);
    inference::ModelInferResponse resp;
    grpc::Status s = Call(stubs_->infer.get(), &InferStub::ModelInfer, key_, req, &resp);
    EXPECT_TRUE(s.ok()) << model << ": " << s.error_message();
    const v1::BillingReportResponse report = Report();
    for (const v1::BillingLine& l : report.lines()) {
      if (l.request_id() == id) return l;
    }
    ADD_FAILURE() << "no billing line for " << id;
    return {};
  }

  v1::BillingReportResponse Report() {
    auto billing = v1::BillingService::NewStub(server_->channel());
    v1::BillingReportResponse r;
    EXPECT_TRUE(Call(billing.get(), &v1::BillingService::Stub::Report, key_, v1::BillingReportRequest(), &r).ok());
    return r;
  }

  v1::CacheListResponse List(const std::string& tenant = "") {
    v1::CacheListRequest req;
    req.set_tenant(tenant);
    v1::CacheListResponse r;
    grpc::Status s = Call(stubs_->admin.get(), &AdminStub::CacheList, admin_, req, &r);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return r;
  }

  // The entry of `model` (version 1) in the list.
  v1::CacheEntry Entry(const std::string& model) {
    const v1::CacheListResponse list = List();
    for (const v1::CacheEntry& e : list.entries()) {
      if (e.model() == model && e.version() == 1) return e;
    }
    ADD_FAILURE() << "no cache entry for " << model;
    return {};
  }

  using Action = grpc::Status (AdminStub::*)(grpc::ClientContext*, const v1::CacheModelRequest&,
                                             v1::CacheModelResponse*);
  grpc::Status Act(Action action, const std::string& model, v1::CacheModelResponse* resp = nullptr,
                   const std::string& tenant = "acme", uint64_t version = 0, const std::string& tier = "",
                   const std::string& secret = "") {
    v1::CacheModelRequest req;
    req.set_tenant(tenant);
    req.set_model(model);
    req.set_version(version);
    req.set_tier(tier);
    v1::CacheModelResponse local;
    return Call(stubs_->admin.get(), action, secret.empty() ? admin_ : secret, req, resp != nullptr ? resp : &local);
  }

  std::string prices_dir_;
  std::unique_ptr<OrrerydProcess> server_;
  std::unique_ptr<Stubs> stubs_;
  std::string admin_, key_, tenant_id_;
};

TEST_F(CacheAdminTest, ListShowsStatesAndAnEvictedModelsNextRequestIsABilledMiss) {
  Upload("a");
  Upload("b");
  // Uploaded versions are resident (prefetched at upload), never used.
  v1::CacheListResponse list = List();
  ASSERT_EQ(list.tiers_size(), 1);
  EXPECT_EQ(list.tiers(0).tier(), "host");
  EXPECT_EQ(list.tiers(0).capacity_bytes(), 60000u);
  EXPECT_EQ(list.tiers(0).models(), 2u);
  ASSERT_EQ(list.entries_size(), 2);
  for (const v1::CacheEntry& e : list.entries()) {
    EXPECT_EQ(e.tier(), "host");
    EXPECT_EQ(e.tenant(), "acme");
    EXPECT_EQ(e.tenant_id(), tenant_id_);
    EXPECT_EQ(e.state(), "resident") << e.model();
    EXPECT_EQ(e.size_bytes(), kSegmentBytes);
    EXPECT_EQ(e.pins(), 0u);
    EXPECT_EQ(e.last_use_unix_ms(), 0) << "no request yet";
  }

  // A hit pays nothing for loading.
  const int64_t before_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                std::chrono::system_clock::now().time_since_epoch())
                                .count();
  const v1::BillingLine hit = Infer("a", "hit-1");
  EXPECT_EQ(hit.bytes_loaded(), 0u);
  EXPECT_EQ(hit.cost_micros(), 0);
  const v1::CacheEntry used = Entry("a");
  EXPECT_GE(used.last_use_unix_ms(), before_ms - 1000);
  EXPECT_LE(used.last_use_unix_ms(), before_ms + 60'000);
  EXPECT_EQ(Entry("b").last_use_unix_ms(), 0);

  v1::CacheModelResponse evicted;
  ASSERT_TRUE(Act(&AdminStub::CacheEvict, "a", &evicted).ok());
  EXPECT_EQ(evicted.entry().state(), "absent");
  EXPECT_EQ(Entry("a").state(), "absent");
  EXPECT_EQ(Entry("b").state(), "resident");
  // Evicting an absent version changes nothing and succeeds.
  EXPECT_TRUE(Act(&AdminStub::CacheEvict, "a").ok());

  // The next request misses: it pays for the segment it loaded, at the
  // documented price (round(bytes * gb_loaded_micros / 1e9)).
  const v1::BillingLine miss = Infer("a", "miss-1");
  EXPECT_EQ(miss.bytes_loaded(), kSegmentBytes);
  EXPECT_EQ(miss.cost_micros(), static_cast<int64_t>(3 * kSegmentBytes));
  EXPECT_EQ(Entry("a").state(), "resident");
  const v1::BillingLine hit2 = Infer("a", "hit-2");
  EXPECT_EQ(hit2.bytes_loaded(), 0u);
  EXPECT_EQ(hit2.cost_micros(), 0);

  // Lines, aggregates, totals and the server's counters reconcile.
  const v1::BillingReportResponse r = Report();
  EXPECT_EQ(r.total_entries(), 3u);
  EXPECT_EQ(r.total_cost_micros(), static_cast<int64_t>(3 * kSegmentBytes));
  EXPECT_EQ(r.counter_cost_micros(), r.total_cost_micros());
  ASSERT_EQ(r.by_model_size(), 1);
  EXPECT_EQ(r.by_model(0).bytes_loaded(), kSegmentBytes);
  EXPECT_EQ(r.by_model(0).cost_micros(), r.total_cost_micros());
  ASSERT_EQ(r.by_day_size(), 1);
  EXPECT_EQ(r.by_day(0).bytes_loaded(), kSegmentBytes);

  // The tier's counters and the metrics: one request miss (uploads and
  // operator actions are not requests), two hits.
  list = List();
  EXPECT_EQ(list.tiers(0).misses(), 1u);
  EXPECT_EQ(list.tiers(0).hits(), 2u);
  EXPECT_GE(list.tiers(0).evictions(), 1u);
  EXPECT_GE(list.tiers(0).bytes_loaded(), 3 * kSegmentBytes);  // two uploads + the miss
  EXPECT_GT(list.tiers(0).bytes_per_sec(), 0);
  const std::string m = server_->metrics_address();
  EXPECT_EQ(testing::MetricSample(m, "orrery_host_cache_events_total{event=\"miss\"}"), 1);
  EXPECT_EQ(testing::MetricSample(m, "orrery_host_cache_events_total{event=\"hit\"}"), 2);
  EXPECT_GE(testing::MetricSample(m, "orrery_host_cache_events_total{event=\"eviction\"}"), 1);
  EXPECT_EQ(testing::MetricSample(m, "orrery_host_cache_loaded_bytes_total"), static_cast<double>(list.tiers(0).bytes_loaded()));
  EXPECT_GT(testing::MetricSample(m, "orrery_host_cache_load_seconds_total"), 0);
  EXPECT_GT(testing::MetricSample(m, "orrery_host_cache_loader_bytes_per_second"), 0);
  EXPECT_EQ(testing::MetricSample(m, "orrery_host_cache_models"), 2);
}

TEST_F(CacheAdminTest, OperatorPinSurvivesPressureFromOtherModelsUntilUnpinned) {
  for (const char* name : {"a", "b", "c"}) Upload(name);
  v1::CacheModelResponse pinned;
  ASSERT_TRUE(Act(&AdminStub::CachePin, "a", &pinned).ok());
  EXPECT_EQ(pinned.entry().state(), "resident");
  EXPECT_EQ(pinned.entry().pins(), 1u);
  EXPECT_EQ(pinned.entry().operator_pins(), 1u);
  const double evictions0 = testing::MetricSample(server_->metrics_address(), "orrery_host_cache_events_total{event=\"eviction\"}");
  // b and c share the room left: they evict each other, never a.
  for (int round = 0; round < 3; ++round) {
    for (const char* name : {"b", "c"}) Infer(name, std::string(name) + "-" + std::to_string(round));
    EXPECT_EQ(Entry("a").state(), "resident") << "round " << round;
  }
  EXPECT_GE(testing::MetricSample(server_->metrics_address(), "orrery_host_cache_events_total{event=\"eviction\"}"), evictions0 + 4);
  EXPECT_EQ(Infer("a", "a-pinned").bytes_loaded(), 0u);

  grpc::Status s = Act(&AdminStub::CacheEvict, "a");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << s.error_message();
  EXPECT_NE(s.error_message().find("pinned"), std::string::npos) << s.error_message();
  EXPECT_EQ(Entry("a").state(), "resident");

  v1::CacheModelResponse unpinned;
  ASSERT_TRUE(Act(&AdminStub::CacheUnpin, "a", &unpinned).ok());
  EXPECT_EQ(unpinned.entry().pins(), 0u);
  s = Act(&AdminStub::CacheUnpin, "a");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << s.error_message();
  ASSERT_TRUE(Act(&AdminStub::CacheEvict, "a").ok());
  EXPECT_EQ(Entry("a").state(), "absent");
}

TEST_F(CacheAdminTest, PrefetchMakesTheNextRequestAHit) {
  for (const char* name : {"a", "b"}) Upload(name);
  ASSERT_TRUE(Act(&AdminStub::CacheEvict, "a").ok());
  ASSERT_EQ(Entry("a").state(), "absent");
  v1::CacheModelResponse fetched;
  ASSERT_TRUE(Act(&AdminStub::CachePrefetch, "a", &fetched).ok());
  EXPECT_EQ(fetched.entry().state(), "resident");
  EXPECT_EQ(fetched.entry().pins(), 0u);
  const v1::BillingLine line = Infer("a", "after-prefetch");
  EXPECT_EQ(line.bytes_loaded(), 0u);
  EXPECT_EQ(line.cost_micros(), 0);
  EXPECT_EQ(testing::MetricSample(server_->metrics_address(), "orrery_host_cache_events_total{event=\"miss\"}"), 0);
  EXPECT_EQ(testing::MetricSample(server_->metrics_address(), "orrery_host_cache_events_total{event=\"hit\"}"), 1);
  // Prefetching a resident version is a no-op.
  EXPECT_TRUE(Act(&AdminStub::CachePrefetch, "a").ok());
}

TEST_F(CacheAdminTest, WrongCallerAndUnknownNamesAreRefusedAndChangeNothing) {
  Upload("a");
  // A tenant key is not the admin token.
  v1::CacheListResponse out;
  EXPECT_EQ(Call(stubs_->admin.get(), &AdminStub::CacheList, key_, v1::CacheListRequest(), &out).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  for (Action action : {&AdminStub::CacheEvict, &AdminStub::CachePin, &AdminStub::CacheUnpin,
                        &AdminStub::CachePrefetch}) {
    EXPECT_EQ(Act(action, "a", nullptr, "acme", 0, "", key_).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  }
  EXPECT_EQ(Entry("a").state(), "resident");
  EXPECT_EQ(Entry("a").pins(), 0u);

  grpc::Status s = Act(&AdminStub::CachePin, "a", nullptr, "nobody");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_NE(s.error_message().find("nobody"), std::string::npos) << s.error_message();
  s = Act(&AdminStub::CacheEvict, "nomodel");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_NE(s.error_message().find("nomodel"), std::string::npos) << s.error_message();
  s = Act(&AdminStub::CachePrefetch, "a", nullptr, "acme", 7);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_NE(s.error_message().find("version 7"), std::string::npos) << s.error_message();
  s = Act(&AdminStub::CachePin, "a", nullptr, "acme", 0, "device");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_NE(s.error_message().find("device"), std::string::npos) << s.error_message();
  s = Act(&AdminStub::CachePin, "a", nullptr, "acme", 0, "gpu");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  v1::CacheListRequest bad;
  bad.set_tenant("nobody");
  s = Call(stubs_->admin.get(), &AdminStub::CacheList, admin_, bad, &out);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_NE(s.error_message().find("nobody"), std::string::npos) << s.error_message();
  // Unpin without a pin.
  EXPECT_EQ(Act(&AdminStub::CacheUnpin, "a").error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(Entry("a").state(), "resident");
  EXPECT_EQ(Entry("a").pins(), 0u);

  // By tenant id and explicit version / tier work too; another tenant's
  // list filter leaves acme's models out.
  EXPECT_TRUE(Act(&AdminStub::CachePin, "a", nullptr, tenant_id_, 1, "host").ok());
  EXPECT_EQ(Entry("a").operator_pins(), 1u);
  v1::CreateTenantResponse other;
  ASSERT_TRUE(testing::CreateTenant(stubs_->admin.get(), admin_, "other", &other).ok());
  EXPECT_EQ(List("other").entries_size(), 0);
  EXPECT_EQ(List("acme").entries_size(), 1);
}

}  // namespace
}  // namespace orrery
