// Deadlines end to end: the real orreryd, a request parameter `timeout_us`
// too small for the model is rejected at admission with DEADLINE_EXCEEDED
// naming the predicted completion (before its payload is decoded); a
// generous one is served.
#include <cstdio>
#include <string>

#include <gtest/gtest.h>
#include <grpcpp/grpcpp.h>

#include "api/proto/grpc_predict_v2.grpc.pb.h"
#include "api/proto/orrery.grpc.pb.h"
#include "runtime/tensor_proto.h"
#include "tests/integration/orreryd_process.h"

namespace orrery {
namespace {

using orrery::testing::ModelPath;

using orrery::testing::OrrerydProcess;
using orrery::testing::ReadFileOrEmpty;

class DeadlineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(server_.Start()) << "orreryd did not start";
    admin_ = v1::AdminService::NewStub(server_.channel());
    models_ = v1::ModelService::NewStub(server_.channel());
    infer_ = inference::GRPCInferenceService::NewStub(server_.channel());

    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer " + server_.admin_token());
    v1::CreateTenantRequest req;
    req.set_name("acme");
    v1::CreateTenantResponse resp;
    ASSERT_TRUE(admin_->CreateTenant(&ctx, req, &resp).ok());
    key_ = resp.api_key();

    grpc::ClientContext up_ctx;
    up_ctx.AddMetadata("authorization", "Bearer " + key_);
    v1::UploadModelResponse up_resp;
    auto writer = models_->UploadModel(&up_ctx, &up_resp);
    v1::UploadModelRequest msg;
    msg.mutable_header()->set_name("mlp");
    msg.set_chunk(ReadFileOrEmpty(ModelPath("mlp", "model.onnx")));
    ASSERT_TRUE(writer->Write(msg));
    writer->WritesDone();
    grpc::Status s = writer->Finish();
    ASSERT_TRUE(s.ok()) << s.error_message();

    Result<NamedTensor> x = ParseTensorProto(ReadFileOrEmpty(ModelPath("mlp", "test_data_set_0/input_0.pb")));
    ASSERT_TRUE(x.ok()) << x.status().ToString();
    request_.set_model_name("mlp");
    auto* in = request_.add_inputs();
    in->set_name(x->name);
    in->set_datatype(std::string(DTypeToOipName(x->tensor.dtype())));
    for (int64_t d : x->tensor.shape()) in->add_shape(d);
    request_.add_raw_input_contents(std::string(x->tensor.bytes()));
  }

  grpc::Status Infer(const inference::ModelInferRequest& req, inference::ModelInferResponse* resp) {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer " + key_);
    return infer_->ModelInfer(&ctx, req, resp);
  }

  OrrerydProcess server_;
  std::unique_ptr<v1::AdminService::Stub> admin_;
  std::unique_ptr<v1::ModelService::Stub> models_;
  std::unique_ptr<inference::GRPCInferenceService::Stub> infer_;
  std::string key_;
  inference::ModelInferRequest request_;
};

TEST_F(DeadlineTest, OneMicrosecondTimeoutIsRejectedNamingThePredictedCompletion) {
  inference::ModelInferResponse resp;
  // A first request without a deadline: the scheduler measures the model.
  grpc::Status s = Infer(request_, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();

  inference::ModelInferRequest tight = request_;
  (*tight.mutable_parameters())["timeout_us"].set_int64_param(1);
  s = Infer(tight, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << s.error_message();
  EXPECT_NE(s.error_message().find("predicted completion in"), std::string::npos) << s.error_message();
  EXPECT_NE(s.error_message().find("mlp"), std::string::npos) << s.error_message();
  std::printf("1 us timeout: %s\n", s.error_message().c_str());

  inference::ModelInferRequest loose = request_;
  (*loose.mutable_parameters())["timeout_us"].set_int64_param(10'000'000);
  s = Infer(loose, &resp);
  EXPECT_TRUE(s.ok()) << s.error_message();
}

// Admission runs before the payload is decoded, so that a flood of requests
// it refuses costs little: a request too tight to meet its deadline is
// refused for that even when its payload would not decode.
TEST_F(DeadlineTest, AdmissionRefusesBeforeDecodingThePayload) {
  inference::ModelInferResponse resp;
  grpc::Status s = Infer(request_, &resp);  // the scheduler measures the model
  ASSERT_TRUE(s.ok()) << s.error_message();
  inference::ModelInferRequest truncated = request_;
  truncated.mutable_raw_input_contents(0)->resize(request_.raw_input_contents(0).size() / 2);
  (*truncated.mutable_parameters())["timeout_us"].set_int64_param(1);
  s = Infer(truncated, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << s.error_message();
  EXPECT_NE(s.error_message().find("predicted completion in"), std::string::npos) << s.error_message();
  // With time to run, the same payload is refused for what it is.
  (*truncated.mutable_parameters())["timeout_us"].set_int64_param(10'000'000);
  EXPECT_EQ(Infer(truncated, &resp).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(DeadlineTest, BadTimeoutParameterIsInvalidArgument) {
  inference::ModelInferResponse resp;
  inference::ModelInferRequest bad = request_;
  (*bad.mutable_parameters())["timeout_us"].set_string_param("soon");
  grpc::Status s = Infer(bad, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("timeout_us"), std::string::npos) << s.error_message();
  (*bad.mutable_parameters())["timeout_us"].set_int64_param(-5);
  EXPECT_EQ(Infer(bad, &resp).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(DeadlineTest, GenerousGrpcDeadlineIsServed) {
  grpc::ClientContext ctx;
  ctx.AddMetadata("authorization", "Bearer " + key_);
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  inference::ModelInferResponse resp;
  grpc::Status s = infer_->ModelInfer(&ctx, request_, &resp);
  EXPECT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(resp.outputs_size(), 1);
}

}  // namespace
}  // namespace orrery
