// The host cache's keep-alive and load-aware admission against the real
// orreryd:
// - a model called every 150 ms becomes predictable after 12 gaps: the
//   keep-alive tick unloads it right after each call (not expected for
//   ~130 ms) and pre-warms it before the next one, which then hits, and
//   unloads it for good once its keep-alive window passes without a call;
//   CacheList and the metrics count the expirations and pre-warms. With
//   `--keepalive off` the same calls leave it resident and count neither.
// - a request for a model that is only on disk, with a deadline shorter
//   than its predicted load, is rejected at admission with DEADLINE_EXCEEDED
//   naming the load, before anything runs; the load starts anyway (not as a
//   request: no miss), so that the same short deadline is met once it is
//   resident.
#include <chrono>
#include <string>
#include <thread>

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

class KeepAliveTest : public ::testing::Test {
 protected:
  void Start(std::vector<std::string> args) {
    args.insert(args.end(), {"--lanes", "1", "--calibrate-uploads", "false", "--storage-sample-seconds", "0"});
    server_ = std::make_unique<OrrerydProcess>(std::move(args));
    ASSERT_TRUE(server_->Start());
    stubs_ = std::make_unique<Stubs>(server_->channel());
    v1::CreateTenantResponse tenant;
    ASSERT_TRUE(testing::CreateTenant(stubs_->admin.get(), server_->admin_token(), "acme", &tenant).ok());
    key_ = tenant.api_key();
    tenant_id_ = tenant.tenant().id();
    Result<NamedTensor> input = ParseTensorProto(ReadFileOrEmpty(ModelPath("mlp", "test_data_set_0/input_0.pb")));
    ASSERT_TRUE(input.ok());
    input_ = std::move(input).value();
  }

  void Upload(const std::string& name) {
    v1::UploadModelResponse up;
    grpc::Status s =
        testing::UploadModel(stubs_->models.get(), key_, name, ReadFileOrEmpty(ModelPath("mlp", "model.onnx")), &up);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }

  // timeout_us 0: no deadline.
  grpc::Status Infer(const std::string& model, int64_t timeout_us = 0) {
    inference::ModelInferRequest req = testing::InferRequest(model, "", input_);
    if (timeout_us > 0) (*req.mutable_parameters())["timeout_us"].set_int64_param(timeout_us);
    inference::ModelInferResponse resp;
    return Call(stubs_->infer.get(), &InferStub::ModelInfer, key_, req, &resp);
  }

  v1::CacheListResponse List() {
    v1::CacheListResponse r;
    grpc::Status s = Call(stubs_->admin.get(), &AdminStub::CacheList, server_->admin_token(), v1::CacheListRequest(), &r);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return r;
  }

  std::string State(const std::string& model) {
    const v1::CacheListResponse list = List();
    for (const v1::CacheEntry& e : list.entries()) {
      if (e.model() == model) return e.state();
    }
    return "unknown";
  }

  double Event(const std::string& event) {
    return testing::MetricSample(server_->metrics_address(),
                                 "orrery_host_cache_events_total{event=\"" + event + "\"}");
  }

  // Calls model "p" every 150 ms, `n` times.
  void CallPeriodically(int n) {
    auto next = std::chrono::steady_clock::now();
    for (int i = 0; i < n; ++i) {
      std::this_thread::sleep_until(next);
      grpc::Status s = Infer("p");
      ASSERT_TRUE(s.ok()) << s.error_message();
      next += std::chrono::milliseconds(150);
    }
  }

  std::unique_ptr<OrrerydProcess> server_;
  std::unique_ptr<Stubs> stubs_;
  std::string key_, tenant_id_;
  NamedTensor input_;
};

TEST_F(KeepAliveTest, PeriodicModelIsExpiredAfterEachCallAndPrewarmedBeforeTheNext) {
  Start({"--keepalive", "on", "--keepalive-tick-ms", "10"});
  Upload("p");
  CallPeriodically(16);
  // Once its keep-alive window (~150-180 ms after the last call) has passed
  // without a call, it is unloaded (and not pre-warmed again).
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  EXPECT_EQ(State("p"), "absent");
  const v1::CacheListResponse list = List();
  ASSERT_EQ(list.tiers_size(), 1);
  const v1::CacheTierInfo& host = list.tiers(0);
  EXPECT_GE(host.expirations(), 2u);
  EXPECT_GE(host.prewarms(), 1u);
  EXPECT_GT(host.idle_byte_seconds(), 0);
  // Pre-warmed before the calls that followed: those hit.
  EXPECT_GE(host.hits(), 1u);
  EXPECT_EQ(Event("prewarm"), static_cast<double>(host.prewarms()));
  EXPECT_GE(Event("expiration"), static_cast<double>(host.expirations()));
  EXPECT_EQ(host.loads_failed(), 0u);
}

TEST_F(KeepAliveTest, WithKeepAliveOffTheSameCallsExpireAndPrewarmNothing) {
  Start({"--keepalive", "off"});
  Upload("p");
  CallPeriodically(8);
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  EXPECT_EQ(State("p"), "resident");
  const v1::CacheListResponse list = List();
  ASSERT_EQ(list.tiers_size(), 1);
  const v1::CacheTierInfo& host = list.tiers(0);
  EXPECT_EQ(host.expirations(), 0u);
  EXPECT_EQ(host.prewarms(), 0u);
  EXPECT_EQ(host.misses(), 0u);  // resident since the upload
  EXPECT_EQ(Event("prewarm"), 0);
  EXPECT_EQ(Event("expiration"), 0);
}

TEST(KeepAliveFlagsTest, ATickNotShorterThanThePrewarmMarginIsRefusedAtStart) {
  // A pre-warm due between two ticks would start late.
  OrrerydProcess server({"--keepalive-tick-ms", "60", "--prewarm-margin-ms", "50"});
  EXPECT_FALSE(server.Start());
  OrrerydProcess lru({"--host-eviction", "lru", "--keepalive-tick-ms", "10"});
  EXPECT_TRUE(lru.Start());
}

TEST_F(KeepAliveTest, ColdModelWithATinyDeadlineIsRejectedAtAdmissionAndItsLoadStarts) {
  Start({"--host-cache-bytes", "60000"});
  Upload("cold");
  v1::CacheModelRequest evict;
  evict.set_tenant("acme");
  evict.set_model("cold");
  v1::CacheModelResponse evicted;
  ASSERT_TRUE(Call(stubs_->admin.get(), &AdminStub::CacheEvict, server_->admin_token(), evict, &evicted).ok());
  ASSERT_EQ(State("cold"), "absent");
  const v1::CacheListResponse before = List();
  const uint64_t loads = before.tiers(0).loads();
  // The load alone is predicted at >= 200 us (the disk latency prior).
  grpc::Status s = Infer("cold", 150);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << s.error_message();
  EXPECT_NE(s.error_message().find("predicted completion in"), std::string::npos) << s.error_message();
  EXPECT_NE(s.error_message().find("for the model's weights to load"), std::string::npos) << s.error_message();
  EXPECT_NE(s.error_message().find("the load has started"), std::string::npos) << s.error_message();
  EXPECT_EQ(testing::MetricSample(server_->metrics_address(),
                                  "orrery_tenant_rejected_total{tenant=\"" + tenant_id_ + "\",reason=\"deadline\"}"),
            1);
  // Not a request: no miss; but one load, and then the model is resident.
  std::string state;
  for (int i = 0; i < 500 && (state = State("cold")) != "resident"; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(state, "resident");
  const v1::CacheListResponse after = List();
  EXPECT_EQ(after.tiers(0).loads(), loads + 1);
  EXPECT_EQ(after.tiers(0).misses(), 0u);
  // Resident now: a deadline that fits the run alone is met. (Generous for
  // a shared machine; the tiny model runs in microseconds.)
  s = Infer("cold", 200'000);
  EXPECT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(List().tiers(0).misses(), 0u);
}

}  // namespace
}  // namespace orrery
