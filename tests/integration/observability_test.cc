// Observability end to end against the real orreryd: the Prometheus
// endpoint's counters match the requests sent, gRPC health checking says
// SERVING (NOT_SERVING while draining), and server reflection lists
// Orrery's services.
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "api/proto/health.grpc.pb.h"
#include "runtime/tensor_proto.h"
#include "tests/common/http_client.h"
#include "tests/integration/orreryd_process.h"
#include "tests/integration/rpc_client.h"

namespace orrery {
namespace {

using orrery::testing::ModelPath;

using testing::OrrerydProcess;
using testing::ReadFileOrEmpty;

// GET `path` over plain HTTP; returns the body ("" on failure).
std::string HttpGet(const std::string& address, const std::string& path) {
  const std::string out = testing::HttpExchange(address, "GET " + path + " HTTP/1.1\r\nHost: test\r\n\r\n");
  const size_t body = out.find("\r\n\r\n");
  return body == std::string::npos ? "" : out.substr(body + 4);
}

// One unary call through the generic stub with a hand-serialised request.
grpc::Status GenericUnary(grpc::Channel* channel, const std::string& method, const std::string& request,
                          std::string* response) {
  grpc::GenericStub stub(channel->shared_from_this());
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  grpc::Slice slice(request);
  grpc::ByteBuffer req(&slice, 1), resp;
  grpc::CompletionQueue cq;
  auto call = stub.PrepareUnaryCall(&ctx, method, req, &cq);
  call->StartCall();
  grpc::Status status;
  call->Finish(&resp, &status, reinterpret_cast<void*>(1));
  void* tag = nullptr;
  bool ok = false;
  EXPECT_TRUE(cq.Next(&tag, &ok));
  std::vector<grpc::Slice> slices;
  if (status.ok()) {
    (void)resp.Dump(&slices);
    for (const grpc::Slice& s : slices) response->append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  return status;
}

TEST(ObservabilityTest, MetricsCountRequestsHealthAndReflectionWork) {
  OrrerydProcess server;
  ASSERT_TRUE(server.Start()) << "orreryd did not start";
  ASSERT_FALSE(server.metrics_address().empty());
  testing::Stubs stubs(server.channel());
  v1::CreateTenantResponse tenant;
  ASSERT_TRUE(testing::CreateTenant(stubs.admin.get(), server.admin_token(), "acme", &tenant).ok());
  v1::UploadModelResponse up;
  ASSERT_TRUE(testing::UploadModel(stubs.models.get(), tenant.api_key(), "mlp",
                                   ReadFileOrEmpty(ModelPath("mlp", "model.onnx")), &up)
                  .ok());
  Result<NamedTensor> x = ParseTensorProto(ReadFileOrEmpty(ModelPath("mlp", "test_data_set_0/input_0.pb")));
  ASSERT_TRUE(x.ok());
  const inference::ModelInferRequest good = testing::InferRequest("mlp", "", *x);
  inference::ModelInferRequest bad = good;
  bad.mutable_inputs(0)->set_name("not_an_input");
  inference::ModelInferResponse resp;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(testing::Call(stubs.infer.get(), &inference::GRPCInferenceService::Stub::ModelInfer,
                              tenant.api_key(), good, &resp)
                    .ok());
  }
  EXPECT_EQ(testing::Call(stubs.infer.get(), &inference::GRPCInferenceService::Stub::ModelInfer,
                          tenant.api_key(), bad, &resp)
                .error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(testing::Call(stubs.infer.get(), &inference::GRPCInferenceService::Stub::ModelInfer,
                          std::string("wrong-key"), good, &resp)
                .error_code(),
            grpc::StatusCode::UNAUTHENTICATED);

  // The server answers before it counts (metrics are not the client's wait),
  // so the last requests' counts may land a moment after their answers:
  // scrape until every expected line is there, for at most 10 s.
  const std::string id = tenant.tenant().id();
  const std::vector<std::string> expected = {
      "orrery_inference_requests_total{tenant=\"" + id + "\",model=\"mlp\",code=\"OK\"} 3\n",
      "orrery_inference_requests_total{tenant=\"" + id + "\",model=\"mlp\",code=\"INVALID_ARGUMENT\"} 1\n",
      "orrery_inference_requests_total{tenant=\"\",model=\"\",code=\"UNAUTHENTICATED\"} 1\n",
      "orrery_inference_latency_seconds_count{tenant=\"" + id + "\",model=\"mlp\"} 3\n",
      "orrery_tenant_completed_total{tenant=\"" + id + "\"} 3\n",
      "orrery_kernel_scratch_shortfalls_total 0\n",
      // The three answered requests' ledger entries (server-made ids) went
      // through the journal (the default --ledger-journal-kib).
      "orrery_ledger_journal_staged_total 3\n",
      "orrery_ledger_journal_full_total 0\n",
  };
  const auto has_all = [&expected](const std::string& text) {
    for (const std::string& line : expected) {
      if (text.find(line) == std::string::npos) return false;
    }
    return true;
  };
  std::string text = HttpGet(server.metrics_address(), "/metrics");
  for (int tries = 0; tries < 1000 && !has_all(text); ++tries) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    text = HttpGet(server.metrics_address(), "/metrics");
  }
  for (const std::string& line : expected) EXPECT_NE(text.find(line), std::string::npos) << line << "\n" << text;
  EXPECT_EQ(HttpGet(server.metrics_address(), "/healthz"), "ok\n");

  // grpc.health.v1.Health/Check for the whole server: HealthCheckResponse
  // {status: SERVING (1)} is the two bytes 08 01.
  std::string health;
  grpc::Status hs = GenericUnary(server.channel().get(), "/grpc.health.v1.Health/Check", "", &health);
  ASSERT_TRUE(hs.ok()) << hs.error_message();
  EXPECT_EQ(health, std::string("\x08\x01", 2));
}

// grpc.health.v1 follows the server's draining (not only its shutdown), for
// the whole server and each service by name, and refuses unknown names;
// a Watch sees the change as it happens.
TEST(ObservabilityTest, HealthFollowsDrainAndResume) {
  using grpc::health::v1::Health;
  using grpc::health::v1::HealthCheckRequest;
  using grpc::health::v1::HealthCheckResponse;
  OrrerydProcess server;
  ASSERT_TRUE(server.Start()) << "orreryd did not start";
  testing::Stubs stubs(server.channel());
  std::unique_ptr<Health::Stub> health = Health::NewStub(server.channel());
  auto check = [&](const std::string& service, HealthCheckResponse::ServingStatus* status) {
    HealthCheckRequest req;
    req.set_service(service);
    HealthCheckResponse resp;
    grpc::Status s = testing::Call(health.get(), &Health::Stub::Check, "", req, &resp);
    *status = resp.status();
    return s;
  };
  HealthCheckResponse::ServingStatus status = HealthCheckResponse::UNKNOWN;
  ASSERT_TRUE(check("", &status).ok());
  EXPECT_EQ(status, HealthCheckResponse::SERVING);
  ASSERT_TRUE(check("inference.GRPCInferenceService", &status).ok());
  EXPECT_EQ(status, HealthCheckResponse::SERVING);
  grpc::Status unknown = check("no.such.Service", &status);
  EXPECT_EQ(unknown.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_NE(unknown.error_message().find("no.such.Service"), std::string::npos);

  grpc::ClientContext watch_ctx;
  watch_ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  HealthCheckRequest all;
  std::unique_ptr<grpc::ClientReader<HealthCheckResponse>> watch = health->Watch(&watch_ctx, all);
  HealthCheckResponse seen;
  ASSERT_TRUE(watch->Read(&seen));
  EXPECT_EQ(seen.status(), HealthCheckResponse::SERVING);

  v1::DrainRequest drain;
  drain.set_timeout_ms(10'000);
  v1::DrainResponse drained;
  ASSERT_TRUE(testing::Call(stubs.admin.get(), &v1::AdminService::Stub::Drain, server.admin_token(), drain, &drained)
                  .ok());
  ASSERT_TRUE(check("orrery.v1.ModelService", &status).ok());
  EXPECT_EQ(status, HealthCheckResponse::NOT_SERVING);
  ASSERT_TRUE(watch->Read(&seen));
  EXPECT_EQ(seen.status(), HealthCheckResponse::NOT_SERVING);
  v1::ResumeResponse resumed;
  ASSERT_TRUE(testing::Call(stubs.admin.get(), &v1::AdminService::Stub::Resume, server.admin_token(),
                            v1::ResumeRequest(), &resumed)
                  .ok());
  ASSERT_TRUE(check("", &status).ok());
  EXPECT_EQ(status, HealthCheckResponse::SERVING);
  ASSERT_TRUE(watch->Read(&seen));
  EXPECT_EQ(seen.status(), HealthCheckResponse::SERVING);
  watch_ctx.TryCancel();
  (void)watch->Finish();
}

TEST(ObservabilityTest, ReflectionListsOrrerysServices) {
  OrrerydProcess server;
  ASSERT_TRUE(server.Start()) << "orreryd did not start";
  grpc::GenericStub stub(server.channel());
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  grpc::CompletionQueue cq;
  auto call = stub.PrepareCall(&ctx, "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", &cq);
  void* tag = nullptr;
  bool ok = false;
  call->StartCall(reinterpret_cast<void*>(1));
  ASSERT_TRUE(cq.Next(&tag, &ok) && ok);
  // ServerReflectionRequest {list_services: "*"}: field 7, length-delimited.
  const std::string req("\x3a\x01*", 3);
  grpc::Slice slice(req);
  grpc::ByteBuffer buf(&slice, 1);
  call->Write(buf, reinterpret_cast<void*>(2));
  ASSERT_TRUE(cq.Next(&tag, &ok) && ok);
  grpc::ByteBuffer reply;
  call->Read(&reply, reinterpret_cast<void*>(3));
  ASSERT_TRUE(cq.Next(&tag, &ok) && ok);
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(reply.Dump(&slices).ok());
  std::string bytes;
  for (const grpc::Slice& s : slices) bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  for (const char* service : {"inference.GRPCInferenceService", "orrery.v1.ModelService", "orrery.v1.AdminService",
                              "grpc.health.v1.Health"}) {
    EXPECT_NE(bytes.find(service), std::string::npos) << service;
  }
  call->WritesDone(reinterpret_cast<void*>(4));
  cq.Next(&tag, &ok);
  grpc::Status status;
  call->Finish(&status, reinterpret_cast<void*>(5));
  cq.Next(&tag, &ok);
}

}  // namespace
}  // namespace orrery
