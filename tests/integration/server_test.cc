// End-to-end tests against the real orreryd binary over gRPC on loopback.
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <fstream>

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

NamedTensor LoadTensor(const std::string& model, const std::string& file) {
  Result<NamedTensor> t = ParseTensorProto(ReadFileOrEmpty(ModelPath(model, "test_data_set_0/" + file)));
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return t.ok() ? std::move(t).value() : NamedTensor{};
}

class Client {
 public:
  explicit Client(std::shared_ptr<grpc::Channel> channel)
      : admin_(v1::AdminService::NewStub(channel)),
        models_(v1::ModelService::NewStub(channel)),
        infer_(inference::GRPCInferenceService::NewStub(channel)) {}

  grpc::Status CreateTenant(const std::string& admin_token, const std::string& name, std::string* key) {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer " + admin_token);
    v1::CreateTenantRequest req;
    req.set_name(name);
    v1::CreateTenantResponse resp;
    grpc::Status s = admin_->CreateTenant(&ctx, req, &resp);
    if (key) *key = resp.api_key();
    return s;
  }

  grpc::Status ListTenants(const std::string& token, v1::ListTenantsResponse* resp) {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer " + token);
    return admin_->ListTenants(&ctx, v1::ListTenantsRequest(), resp);
  }

  grpc::Status Upload(const std::string& key, const std::string& name, const std::string& bytes,
                      v1::UploadModelResponse* resp, size_t chunk = 1000) {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer " + key);
    auto writer = models_->UploadModel(&ctx, resp);
    v1::UploadModelRequest msg;
    msg.mutable_header()->set_name(name);
    size_t off = 0;
    do {
      msg.set_chunk(bytes.substr(off, chunk));
      off += chunk;
      if (!writer->Write(msg)) break;
      msg.clear_header();
    } while (off < bytes.size());
    writer->WritesDone();
    return writer->Finish();
  }

  grpc::Status List(const std::string& key, v1::ListModelsResponse* resp) {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer " + key);
    return models_->ListModels(&ctx, v1::ListModelsRequest(), resp);
  }

  grpc::Status Describe(const std::string& key, const std::string& name, v1::DescribeModelResponse* resp) {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer " + key);
    v1::DescribeModelRequest req;
    req.set_name(name);
    return models_->DescribeModel(&ctx, req, resp);
  }

  grpc::Status Delete(const std::string& key, const std::string& name) {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer " + key);
    v1::DeleteModelRequest req;
    req.set_name(name);
    v1::DeleteModelResponse resp;
    return models_->DeleteModel(&ctx, req, &resp);
  }

  grpc::Status Metadata(const std::string& key, const std::string& name, inference::ModelMetadataResponse* resp) {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer " + key);
    inference::ModelMetadataRequest req;
    req.set_name(name);
    return infer_->ModelMetadata(&ctx, req, resp);
  }

  grpc::Status Ready(const std::string& key, const std::string& name, bool* ready) {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer " + key);
    inference::ModelReadyRequest req;
    req.set_name(name);
    inference::ModelReadyResponse resp;
    grpc::Status s = infer_->ModelReady(&ctx, req, &resp);
    *ready = resp.ready();
    return s;
  }

  grpc::Status Infer(const std::string& key, const inference::ModelInferRequest& req,
                     inference::ModelInferResponse* resp) {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer " + key);
    return infer_->ModelInfer(&ctx, req, resp);
  }

  inference::GRPCInferenceService::Stub* infer_stub() { return infer_.get(); }

 private:
  std::unique_ptr<v1::AdminService::Stub> admin_;
  std::unique_ptr<v1::ModelService::Stub> models_;
  std::unique_ptr<inference::GRPCInferenceService::Stub> infer_;
};

inference::ModelInferRequest RawRequest(const std::string& model, const NamedTensor& input) {
  inference::ModelInferRequest req;
  req.set_model_name(model);
  req.set_id("req-1");
  auto* in = req.add_inputs();
  in->set_name(input.name);
  in->set_datatype(std::string(DTypeToOipName(input.tensor.dtype())));
  for (int64_t d : input.tensor.shape()) in->add_shape(d);
  req.add_raw_input_contents(std::string(input.tensor.bytes()));
  return req;
}

// Max abs difference between a float32 response output and the expected tensor.
void ExpectOutputNear(const inference::ModelInferResponse& resp, const NamedTensor& expected, float tol) {
  ASSERT_EQ(resp.outputs_size(), 1);
  ASSERT_EQ(resp.raw_output_contents_size(), 1);
  EXPECT_EQ(resp.outputs(0).name(), expected.name);
  EXPECT_EQ(resp.outputs(0).datatype(), "FP32");
  ASSERT_EQ(Shape(resp.outputs(0).shape().begin(), resp.outputs(0).shape().end()), expected.tensor.shape());
  const std::string& raw = resp.raw_output_contents(0);
  ASSERT_EQ(raw.size(), expected.tensor.byte_size());
  const float* got = reinterpret_cast<const float*>(raw.data());
  const float* want = expected.tensor.data<float>();
  for (int64_t i = 0; i < expected.tensor.num_elements(); ++i) {
    EXPECT_NEAR(got[i], want[i], tol) << "element " << i;
  }
}

class ServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(server_.Start()) << "orreryd did not start";
    client_ = std::make_unique<Client>(server_.channel());
    admin_ = server_.admin_token();
    ASSERT_FALSE(admin_.empty());
  }
  void Reconnect() { client_ = std::make_unique<Client>(server_.channel()); }

  OrrerydProcess server_;
  std::unique_ptr<Client> client_;
  std::string admin_;
};

TEST_F(ServerTest, AdminTokenFileIsPrivate) {
  struct stat st {};
  ASSERT_EQ(stat((server_.data_dir() + "/admin.token").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600);
}

TEST_F(ServerTest, EndToEndTwoTenantsIsolationAndRestart) {
  std::string key_a, key_b;
  ASSERT_TRUE(client_->CreateTenant(admin_, "tenant-a", &key_a).ok());
  ASSERT_TRUE(client_->CreateTenant(admin_, "tenant-b", &key_b).ok());
  EXPECT_NE(key_a, key_b);
  EXPECT_EQ(client_->CreateTenant(admin_, "tenant-a", nullptr).error_code(), grpc::StatusCode::ALREADY_EXISTS);

  v1::UploadModelResponse up;
  grpc::Status s = client_->Upload(key_a, "mlp", ReadFileOrEmpty(ModelPath("mlp", "model.onnx")), &up);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(up.model().name(), "mlp");
  EXPECT_EQ(up.model().version(), 1u);
  EXPECT_EQ(up.model().sha256().size(), 64u);
  ASSERT_EQ(up.model().inputs_size(), 1);
  EXPECT_EQ(up.model().inputs(0).datatype(), "FP32");
  EXPECT_EQ(up.model().inputs(0).shape(0), -1);  // dynamic batch
  EXPECT_EQ(up.model().inputs(0).shape(1), 16);

  NamedTensor x = LoadTensor("mlp", "input_0.pb");
  NamedTensor y = LoadTensor("mlp", "output_0.pb");
  inference::ModelInferResponse resp;
  s = client_->Infer(key_a, RawRequest("mlp", x), &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(resp.id(), "req-1");
  EXPECT_EQ(resp.model_version(), "1");
  ExpectOutputNear(resp, y, 1e-5f);

  // Tenant B cannot see, describe, query or delete tenant A's model.
  inference::ModelInferResponse resp_b;
  EXPECT_EQ(client_->Infer(key_b, RawRequest("mlp", x), &resp_b).error_code(), grpc::StatusCode::NOT_FOUND);
  inference::ModelMetadataResponse md;
  EXPECT_EQ(client_->Metadata(key_b, "mlp", &md).error_code(), grpc::StatusCode::NOT_FOUND);
  v1::DescribeModelResponse desc;
  EXPECT_EQ(client_->Describe(key_b, "mlp", &desc).error_code(), grpc::StatusCode::NOT_FOUND);
  bool ready = false;
  EXPECT_EQ(client_->Ready(key_b, "mlp", &ready).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(client_->Delete(key_b, "mlp").error_code(), grpc::StatusCode::NOT_FOUND);
  v1::ListModelsResponse list_b;
  ASSERT_TRUE(client_->List(key_b, &list_b).ok());
  EXPECT_EQ(list_b.models_size(), 0);

  // Tenant A sees it.
  ASSERT_TRUE(client_->Metadata(key_a, "mlp", &md).ok());
  EXPECT_EQ(md.platform(), "onnx");
  ASSERT_EQ(md.inputs_size(), 1);
  EXPECT_EQ(md.inputs(0).name(), "x");
  ASSERT_TRUE(client_->Ready(key_a, "mlp", &ready).ok());
  EXPECT_TRUE(ready);

  // A bad key is refused everywhere.
  EXPECT_EQ(client_->Infer("ork_bogus", RawRequest("mlp", x), &resp_b).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  v1::ListModelsResponse list;
  EXPECT_EQ(client_->List("", &list).error_code(), grpc::StatusCode::UNAUTHENTICATED);

  // Graceful restart: the model is still listed and served. The idle client
  // goes first: gRPC clients notice the server's GOAWAY only when they poll.
  client_.reset();
  EXPECT_EQ(server_.Stop(), 0);
  ASSERT_TRUE(server_.Start());
  Reconnect();
  list.Clear();
  ASSERT_TRUE(client_->List(key_a, &list).ok());
  ASSERT_EQ(list.models_size(), 1);
  EXPECT_EQ(list.models(0).name(), "mlp");
  resp.Clear();
  ASSERT_TRUE(client_->Infer(key_a, RawRequest("mlp", x), &resp).ok());
  ExpectOutputNear(resp, y, 1e-5f);

  // kill -9 right after an acknowledged upload: it survives.
  ASSERT_TRUE(client_->Upload(key_a, "mlp2", ReadFileOrEmpty(ModelPath("mlp", "model.onnx")), &up).ok());
  server_.Kill();
  ASSERT_TRUE(server_.Start());
  Reconnect();
  resp.Clear();
  ASSERT_TRUE(client_->Infer(key_a, RawRequest("mlp2", x), &resp).ok());
  ExpectOutputNear(resp, y, 1e-5f);
}

TEST_F(ServerTest, WrongShapeAndDtypeAreInvalidArgument) {
  std::string key;
  ASSERT_TRUE(client_->CreateTenant(admin_, "shapes", &key).ok());
  v1::UploadModelResponse up;
  ASSERT_TRUE(client_->Upload(key, "mlp", ReadFileOrEmpty(ModelPath("mlp", "model.onnx")), &up).ok());
  NamedTensor x = LoadTensor("mlp", "input_0.pb");
  inference::ModelInferResponse resp;

  // Wrong feature dimension (the model wants [N, 16]).
  NamedTensor wide{"x", Tensor(DType::kFloat32, {2, 17})};
  grpc::Status s = client_->Infer(key, RawRequest("mlp", wide), &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("'x'"), std::string::npos) << s.error_message();

  // Wrong dtype.
  NamedTensor ints{"x", Tensor(DType::kInt64, {2, 16})};
  s = client_->Infer(key, RawRequest("mlp", ints), &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("'x'"), std::string::npos) << s.error_message();

  // Raw bytes that do not match the declared shape.
  inference::ModelInferRequest req = RawRequest("mlp", x);
  req.mutable_raw_input_contents(0)->resize(10);
  EXPECT_EQ(client_->Infer(key, req, &resp).error_code(), grpc::StatusCode::INVALID_ARGUMENT);

  // Unknown input name, and unknown datatype.
  req = RawRequest("mlp", x);
  req.mutable_inputs(0)->set_name("nope");
  EXPECT_EQ(client_->Infer(key, req, &resp).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  req = RawRequest("mlp", x);
  req.mutable_inputs(0)->set_datatype("COMPLEX");
  EXPECT_EQ(client_->Infer(key, req, &resp).error_code(), grpc::StatusCode::INVALID_ARGUMENT);

  // Unknown model.
  EXPECT_EQ(client_->Infer(key, RawRequest("missing", x), &resp).error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(ServerTest, TypedContentsAreAccepted) {
  std::string key;
  ASSERT_TRUE(client_->CreateTenant(admin_, "typed", &key).ok());
  v1::UploadModelResponse up;
  ASSERT_TRUE(client_->Upload(key, "mlp", ReadFileOrEmpty(ModelPath("mlp", "model.onnx")), &up).ok());
  NamedTensor x = LoadTensor("mlp", "input_0.pb");
  NamedTensor y = LoadTensor("mlp", "output_0.pb");
  inference::ModelInferRequest req;
  req.set_model_name("mlp");
  auto* in = req.add_inputs();
  in->set_name("x");
  in->set_datatype("FP32");
  for (int64_t d : x.tensor.shape()) in->add_shape(d);
  for (int64_t i = 0; i < x.tensor.num_elements(); ++i) in->mutable_contents()->add_fp32_contents(x.tensor.data<float>()[i]);
  inference::ModelInferResponse resp;
  grpc::Status s = client_->Infer(key, req, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ExpectOutputNear(resp, y, 1e-5f);
}

// A request four times the first block of a call's arena (8 KiB,
// api/inference_service.cc) and a 16 KiB answer: 512 rows each way, every
// row the model's answer for that row alone.
TEST_F(ServerTest, LargeRequestsAndAnswersRoundTrip) {
  std::string key;
  ASSERT_TRUE(client_->CreateTenant(admin_, "large", &key).ok());
  v1::UploadModelResponse up;
  ASSERT_TRUE(client_->Upload(key, "mlp", ReadFileOrEmpty(ModelPath("mlp", "model.onnx")), &up).ok());
  const NamedTensor x = LoadTensor("mlp", "input_0.pb");
  const NamedTensor y = LoadTensor("mlp", "output_0.pb");
  ASSERT_EQ(x.tensor.shape()[0], 2);
  constexpr int64_t kRows = 512;
  const int64_t in_cols = x.tensor.shape()[1], out_cols = y.tensor.shape()[1];
  Result<Tensor> allocated_x = Tensor::Allocate(DType::kFloat32, Shape{kRows, in_cols});
  Result<Tensor> allocated_y = Tensor::Allocate(DType::kFloat32, Shape{kRows, out_cols});
  ASSERT_TRUE(allocated_x.ok() && allocated_y.ok());
  Tensor big_x = std::move(allocated_x).value();
  Tensor big_y = std::move(allocated_y).value();
  for (int64_t r = 0; r < kRows; ++r) {
    std::copy_n(x.tensor.data<float>() + (r % 2) * in_cols, in_cols, big_x.data<float>() + r * in_cols);
    std::copy_n(y.tensor.data<float>() + (r % 2) * out_cols, out_cols, big_y.data<float>() + r * out_cols);
  }
  inference::ModelInferResponse resp;
  grpc::Status s = client_->Infer(key, RawRequest("mlp", {x.name, std::move(big_x)}), &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(resp.id(), "req-1");
  EXPECT_EQ(resp.model_name(), "mlp");
  ExpectOutputNear(resp, {y.name, std::move(big_y)}, 1e-5f);
}

TEST_F(ServerTest, AllV0OpsModelMatchesNumpy) {
  std::string key;
  ASSERT_TRUE(client_->CreateTenant(admin_, "ops", &key).ok());
  v1::UploadModelResponse up;
  grpc::Status s = client_->Upload(key, "ops", ReadFileOrEmpty(ModelPath("mlp_ops", "model.onnx")), &up);
  ASSERT_TRUE(s.ok()) << s.error_message();
  inference::ModelInferResponse resp;
  s = client_->Infer(key, RawRequest("ops", LoadTensor("mlp_ops", "input_0.pb")), &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ExpectOutputNear(resp, LoadTensor("mlp_ops", "output_0.pb"), 1e-5f);
}

TEST_F(ServerTest, BadUploadsAreRejectedAndNothingIsStored) {
  std::string key;
  ASSERT_TRUE(client_->CreateTenant(admin_, "uploader", &key).ok());
  v1::UploadModelResponse up;

  grpc::Status s = client_->Upload(key, "det", ReadFileOrEmpty(ModelPath("unsupported", "model.onnx")), &up);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("Det"), std::string::npos) << s.error_message();
  EXPECT_NE(s.error_message().find("determinant"), std::string::npos) << s.error_message();

  s = client_->Upload(key, "junk", std::string(4096, '\x07'), &up);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);

  s = client_->Upload(key, "bad name!", ReadFileOrEmpty(ModelPath("mlp", "model.onnx")), &up);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);

  v1::ListModelsResponse list;
  ASSERT_TRUE(client_->List(key, &list).ok());
  EXPECT_EQ(list.models_size(), 0);
}

TEST_F(ServerTest, AdminRpcsNeedTheAdminToken) {
  std::string key;
  ASSERT_TRUE(client_->CreateTenant(admin_, "someone", &key).ok());
  v1::ListTenantsResponse tenants;
  EXPECT_EQ(client_->ListTenants(key, &tenants).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(client_->ListTenants("wrong", &tenants).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(client_->CreateTenant(key, "intruder", nullptr).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  ASSERT_TRUE(client_->ListTenants(admin_, &tenants).ok());
  ASSERT_EQ(tenants.tenants_size(), 1);
  EXPECT_EQ(tenants.tenants(0).name(), "someone");
}

TEST_F(ServerTest, DeleteRemovesTheModel) {
  std::string key;
  ASSERT_TRUE(client_->CreateTenant(admin_, "deleter", &key).ok());
  v1::UploadModelResponse up;
  ASSERT_TRUE(client_->Upload(key, "mlp", ReadFileOrEmpty(ModelPath("mlp", "model.onnx")), &up).ok());
  ASSERT_TRUE(client_->Upload(key, "mlp", ReadFileOrEmpty(ModelPath("mlp", "model.onnx")), &up).ok());
  EXPECT_EQ(up.model().version(), 2u);
  ASSERT_TRUE(client_->Delete(key, "mlp").ok());
  inference::ModelInferResponse resp;
  EXPECT_EQ(client_->Infer(key, RawRequest("mlp", LoadTensor("mlp", "input_0.pb")), &resp).error_code(),
            grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(client_->Delete(key, "mlp").error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(ServerTest, HealthRpcsAnswerWithoutKey) {
  grpc::ClientContext ctx;
  inference::ServerLiveResponse live;
  ASSERT_TRUE(client_->infer_stub()->ServerLive(&ctx, inference::ServerLiveRequest(), &live).ok());
  EXPECT_TRUE(live.live());
  grpc::ClientContext ctx2;
  inference::ServerMetadataResponse meta;
  ASSERT_TRUE(client_->infer_stub()->ServerMetadata(&ctx2, inference::ServerMetadataRequest(), &meta).ok());
  EXPECT_EQ(meta.name(), "orrery");
}

TEST(ServerLimitsTest, OversizeUploadIsResourceExhausted) {
  OrrerydProcess server({"--max-model-bytes", "2000"});
  ASSERT_TRUE(server.Start());
  Client client(server.channel());
  std::string key;
  ASSERT_TRUE(client.CreateTenant(server.admin_token(), "big", &key).ok());
  std::string bytes = ReadFileOrEmpty(ModelPath("mlp", "model.onnx"));
  ASSERT_GT(bytes.size(), 2000u);
  v1::UploadModelResponse up;
  grpc::Status s = client.Upload(key, "mlp", bytes, &up, 500);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(s.error_message().find("2000"), std::string::npos) << s.error_message();
  v1::ListModelsResponse list;
  ASSERT_TRUE(client.List(key, &list).ok());
  EXPECT_EQ(list.models_size(), 0);
}

TEST(ServerStartTest, SecondServerOnSameDataDirFailsCleanly) {
  OrrerydProcess first;
  ASSERT_TRUE(first.Start());
  // A second orreryd on the same catalog must refuse to start (RocksDB lock).
  std::string cmd = std::string(ORRERYD_PATH) + " --data-dir " + first.data_dir() +
                    " --listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0 --log-level error > /dev/null 2>&1";
  int rc = std::system(cmd.c_str());
  EXPECT_NE(rc, 0);
}

}  // namespace
}  // namespace orrery
