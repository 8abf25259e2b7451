// Model lifecycle and tenant administration against the real orreryd:
// idempotent upload ids, SHA-256, versions, quotas, keys, tenant delete,
// delete while requests run, input limits.
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/tensor_proto.h"
#include "tenancy/api_key.h"
#include "tests/integration/orreryd_process.h"
#include "tests/integration/rpc_client.h"

namespace orrery {
namespace {

using orrery::testing::ModelPath;

using orrery::testing::Call;
using orrery::testing::InferRequest;
using orrery::testing::OrrerydProcess;
using orrery::testing::ReadFileOrEmpty;
using orrery::testing::Stubs;
using orrery::testing::UploadModel;
using AdminStub = v1::AdminService::Stub;
using ModelStub = v1::ModelService::Stub;
using InferStub = inference::GRPCInferenceService::Stub;

NamedTensor Load(const std::string& model, const std::string& file) {
  Result<NamedTensor> t = ParseTensorProto(ReadFileOrEmpty(ModelPath(model, "test_data_set_0/" + file)));
  EXPECT_TRUE(t.ok());
  return t.ok() ? std::move(t).value() : NamedTensor{};
}

bool OutputMatches(const inference::ModelInferResponse& resp, const NamedTensor& want) {
  if (resp.raw_output_contents_size() != 1) return false;
  const std::string& raw = resp.raw_output_contents(0);
  if (raw.size() != want.tensor.byte_size()) return false;
  const float* got = reinterpret_cast<const float*>(raw.data());
  for (int64_t i = 0; i < want.tensor.num_elements(); ++i) {
    if (std::abs(got[i] - want.tensor.data<float>()[i]) > 1e-4f) return false;
  }
  return true;
}

class TenancyTest : public ::testing::Test {
 protected:
  void Start(std::vector<std::string> args = {}) {
    server_ = std::make_unique<OrrerydProcess>(std::move(args));
    ASSERT_TRUE(server_->Start());
    stubs_ = std::make_unique<Stubs>(server_->channel());
    admin_ = server_->admin_token();
    mlp_ = ReadFileOrEmpty(ModelPath("mlp", "model.onnx"));
    ASSERT_FALSE(mlp_.empty());
  }
  std::string NewTenant(const std::string& name, const v1::Quotas* quotas = nullptr) {
    v1::CreateTenantResponse resp;
    grpc::Status s = orrery::testing::CreateTenant(stubs_->admin.get(), admin_, name, &resp, quotas);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return resp.api_key();
  }
  int CountVersions(const std::string& key) {
    v1::ListModelsResponse list;
    EXPECT_TRUE(Call(stubs_->models.get(), &ModelStub::ListModels, key, v1::ListModelsRequest(), &list).ok());
    return list.models_size();
  }

  std::unique_ptr<OrrerydProcess> server_;
  std::unique_ptr<Stubs> stubs_;
  std::string admin_, mlp_;
};

TEST_F(TenancyTest, UploadIdMakesRetriesIdempotentAndShaIsReturned) {
  Start();
  const std::string key = NewTenant("acme");
  v1::UploadModelResponse first, retry;
  ASSERT_TRUE(UploadModel(stubs_->models.get(), key, "mlp", mlp_, &first, "upload-123").ok());
  EXPECT_FALSE(first.replayed());
  EXPECT_EQ(first.model().sha256(), Sha256Hex(mlp_));
  EXPECT_EQ(first.model().upload_id(), "upload-123");
  ASSERT_TRUE(UploadModel(stubs_->models.get(), key, "mlp", mlp_, &retry, "upload-123").ok());
  EXPECT_TRUE(retry.replayed());
  EXPECT_EQ(retry.model().version(), first.model().version());
  EXPECT_EQ(retry.model().sha256(), first.model().sha256());
  EXPECT_EQ(retry.model().created_unix_ms(), first.model().created_unix_ms());
  EXPECT_EQ(CountVersions(key), 1);
  // The same id for another name is refused; a bad id too.
  v1::UploadModelResponse other;
  EXPECT_EQ(UploadModel(stubs_->models.get(), key, "other", mlp_, &other, "upload-123").error_code(),
            grpc::StatusCode::ALREADY_EXISTS);
  EXPECT_EQ(UploadModel(stubs_->models.get(), key, "other", mlp_, &other, "bad id/../x").error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  // Without an id a retry is a new version.
  ASSERT_TRUE(UploadModel(stubs_->models.get(), key, "mlp", mlp_, &other).ok());
  EXPECT_EQ(other.model().version(), 2u);
  EXPECT_EQ(CountVersions(key), 2);
}

TEST_F(TenancyTest, VersionsLatestPinnedAndDeleteOne) {
  Start();
  const std::string key = NewTenant("acme");
  v1::UploadModelResponse up;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(UploadModel(stubs_->models.get(), key, "mlp", mlp_, &up).ok());
  ASSERT_EQ(up.model().version(), 3u);
  const NamedTensor x = Load("mlp", "input_0.pb");
  const NamedTensor want = Load("mlp", "output_0.pb");
  auto infer = [&](const std::string& version, inference::ModelInferResponse* resp) {
    return Call(stubs_->infer.get(), &InferStub::ModelInfer, key, InferRequest("mlp", version, x), resp);
  };
  inference::ModelInferResponse resp;
  ASSERT_TRUE(infer("", &resp).ok());
  EXPECT_EQ(resp.model_version(), "3");
  EXPECT_TRUE(OutputMatches(resp, want));
  ASSERT_TRUE(infer("1", &resp).ok());
  EXPECT_EQ(resp.model_version(), "1");
  EXPECT_EQ(infer("4", &resp).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(infer("x", &resp).error_code(), grpc::StatusCode::INVALID_ARGUMENT);

  v1::DeleteModelRequest del;
  del.set_name("mlp");
  del.set_version(3);
  v1::DeleteModelResponse del_resp;
  ASSERT_TRUE(Call(stubs_->models.get(), &ModelStub::DeleteModel, key, del, &del_resp).ok());
  ASSERT_EQ(del_resp.deleted_versions_size(), 1);
  EXPECT_EQ(del_resp.deleted_versions(0), 3u);
  ASSERT_TRUE(infer("", &resp).ok());
  EXPECT_EQ(resp.model_version(), "2");
  EXPECT_EQ(infer("3", &resp).error_code(), grpc::StatusCode::NOT_FOUND);
  // A new upload does not reuse the deleted number.
  ASSERT_TRUE(UploadModel(stubs_->models.get(), key, "mlp", mlp_, &up).ok());
  EXPECT_EQ(up.model().version(), 4u);
  v1::DescribeModelRequest d;
  d.set_name("mlp");
  d.set_version(1);
  v1::DescribeModelResponse d_resp;
  ASSERT_TRUE(Call(stubs_->models.get(), &ModelStub::DescribeModel, key, d, &d_resp).ok());
  EXPECT_EQ(d_resp.model().version(), 1u);
  del.set_version(0);
  ASSERT_TRUE(Call(stubs_->models.get(), &ModelStub::DeleteModel, key, del, &del_resp).ok());
  EXPECT_EQ(del_resp.deleted_versions_size(), 3);
  EXPECT_EQ(CountVersions(key), 0);
}

TEST_F(TenancyTest, StorageQuotasAreEnforcedAndChangeNothing) {
  Start();
  v1::Quotas q;
  q.set_max_models(1);
  q.set_max_total_bytes(mlp_.size() * 2 + mlp_.size() / 2);
  const std::string key = NewTenant("small", &q);
  v1::UploadModelResponse up;
  ASSERT_TRUE(UploadModel(stubs_->models.get(), key, "one", mlp_, &up).ok());
  grpc::Status s = UploadModel(stubs_->models.get(), key, "two", mlp_, &up);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(s.error_message().find("max_models"), std::string::npos) << s.error_message();
  ASSERT_TRUE(UploadModel(stubs_->models.get(), key, "one", mlp_, &up).ok());  // a version is not a model
  s = UploadModel(stubs_->models.get(), key, "one", mlp_, &up);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(s.error_message().find("max_total_bytes"), std::string::npos) << s.error_message();
  EXPECT_EQ(CountVersions(key), 2);

  // Per-model bytes, lowered by an update.
  v1::UpdateTenantRequest upd;
  upd.set_tenant("small");
  upd.mutable_quotas()->set_max_model_bytes(1000);
  upd.mutable_quotas()->set_max_total_bytes(1u << 30);
  v1::UpdateTenantResponse upd_resp;
  ASSERT_TRUE(Call(stubs_->admin.get(), &AdminStub::UpdateTenant, admin_, upd, &upd_resp).ok());
  EXPECT_EQ(upd_resp.tenant().quotas().max_model_bytes(), 1000u);
  EXPECT_EQ(upd_resp.tenant().quotas().max_models(), 1u);  // kept
  s = UploadModel(stubs_->models.get(), key, "one", mlp_, &up, "", 300);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(s.error_message().find("max_model_bytes (1000)"), std::string::npos) << s.error_message();
  EXPECT_EQ(CountVersions(key), 2);

  v1::GetTenantRequest get;
  get.set_tenant("small");
  v1::GetTenantResponse info;
  ASSERT_TRUE(Call(stubs_->admin.get(), &AdminStub::GetTenant, admin_, get, &info).ok());
  EXPECT_EQ(info.models(), 1u);
  EXPECT_EQ(info.versions(), 2u);
  EXPECT_EQ(info.stored_bytes(), 2 * mlp_.size());
  EXPECT_EQ(info.keys(), 1u);
}

TEST_F(TenancyTest, RequestRateQuota) {
  Start();
  v1::Quotas q;
  q.set_requests_per_second(1);
  q.set_burst_requests(2);
  const std::string key = NewTenant("slow", &q);
  v1::UploadModelResponse up;
  ASSERT_TRUE(UploadModel(stubs_->models.get(), key, "mlp", mlp_, &up).ok());
  const auto req = InferRequest("mlp", "", Load("mlp", "input_0.pb"));
  const auto start = std::chrono::steady_clock::now();
  int ok = 0, refused = 0;
  std::string message;
  for (int i = 0; i < 6; ++i) {
    inference::ModelInferResponse resp;
    grpc::Status s = Call(stubs_->infer.get(), &InferStub::ModelInfer, key, req, &resp);
    if (s.ok()) {
      ++ok;
    } else {
      EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
      message = s.error_message();
      ++refused;
    }
  }
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // Burst 2 plus one token per second elapsed, whatever the machine's speed.
  EXPECT_LE(ok, 2 + static_cast<int>(elapsed) + 1);
  if (elapsed < 3.0) {
    EXPECT_GE(refused, 1);
    EXPECT_NE(message.find("requests_per_second"), std::string::npos) << message;
  }
  // Another tenant is not throttled by this one.
  const std::string other = NewTenant("other");
  ASSERT_TRUE(UploadModel(stubs_->models.get(), other, "mlp", mlp_, &up).ok());
  inference::ModelInferResponse resp;
  EXPECT_TRUE(Call(stubs_->infer.get(), &InferStub::ModelInfer, other, req, &resp).ok());
}

TEST_F(TenancyTest, KeysAndTenantDelete) {
  Start();
  const std::string key = NewTenant("acme");
  v1::UploadModelResponse up;
  ASSERT_TRUE(UploadModel(stubs_->models.get(), key, "mlp", mlp_, &up).ok());
  v1::CreateKeyRequest ck;
  ck.set_tenant("acme");
  v1::CreateKeyResponse second;
  ASSERT_TRUE(Call(stubs_->admin.get(), &AdminStub::CreateKey, admin_, ck, &second).ok());
  EXPECT_EQ(CountVersions(second.api_key()), 1);  // same tenant, same models
  v1::ListKeysRequest lk;
  lk.set_tenant("acme");
  v1::ListKeysResponse keys;
  ASSERT_TRUE(Call(stubs_->admin.get(), &AdminStub::ListKeys, admin_, lk, &keys).ok());
  ASSERT_EQ(keys.keys_size(), 2);
  const std::string listed = keys.SerializeAsString();
  EXPECT_EQ(listed.find(key), std::string::npos);
  EXPECT_EQ(listed.find(second.api_key()), std::string::npos);
  EXPECT_EQ(key.substr(0, 12) == keys.keys(0).prefix() || key.substr(0, 12) == keys.keys(1).prefix(), true);

  v1::DeleteTenantRequest dt;
  dt.set_tenant("acme");
  v1::DeleteTenantResponse dt_resp;
  ASSERT_TRUE(Call(stubs_->admin.get(), &AdminStub::DeleteTenant, admin_, dt, &dt_resp).ok());
  EXPECT_EQ(Call(stubs_->admin.get(), &AdminStub::DeleteTenant, admin_, dt, &dt_resp).error_code(),
            grpc::StatusCode::NOT_FOUND);
  // The name is free again and the new tenant starts empty.
  const std::string fresh = NewTenant("acme");
  EXPECT_EQ(CountVersions(fresh), 0);
  v1::ListKeysResponse fresh_keys;
  ASSERT_TRUE(Call(stubs_->admin.get(), &AdminStub::ListKeys, admin_, lk, &fresh_keys).ok());
  EXPECT_EQ(fresh_keys.keys_size(), 1);
}

TEST_F(TenancyTest, DeleteWhileRequestsRunLetsThemFinish) {
  Start({"--lanes", "2"});
  const std::string key = NewTenant("busy");
  v1::UploadModelResponse up;
  ASSERT_TRUE(UploadModel(stubs_->models.get(), key, "mlp", mlp_, &up).ok());
  const auto req = InferRequest("mlp", "", Load("mlp", "input_0.pb"));
  const NamedTensor want = Load("mlp", "output_0.pb");
  std::atomic<int> ok{0}, not_found{0}, other{0}, wrong{0};
  std::atomic<bool> deleted{false};
  std::vector<std::thread> clients;
  for (int t = 0; t < 4; ++t) {
    clients.emplace_back([&] {
      Stubs stubs(server_->channel());
      for (int i = 0; i < 200 && not_found.load() < 20; ++i) {
        inference::ModelInferResponse resp;
        grpc::Status s = Call(stubs.infer.get(), &InferStub::ModelInfer, key, req, &resp);
        if (s.ok()) {
          ++ok;
          if (!OutputMatches(resp, want)) ++wrong;
        } else if (s.error_code() == grpc::StatusCode::NOT_FOUND && deleted.load()) {
          ++not_found;
        } else {
          ++other;
        }
      }
    });
  }
  while (ok.load() < 20) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  v1::DeleteModelRequest del;
  del.set_name("mlp");
  v1::DeleteModelResponse del_resp;
  deleted.store(true);
  ASSERT_TRUE(Call(stubs_->models.get(), &ModelStub::DeleteModel, key, del, &del_resp).ok());
  for (auto& c : clients) c.join();
  EXPECT_GE(ok.load(), 20);
  EXPECT_GE(not_found.load(), 1);
  EXPECT_EQ(other.load(), 0);
  EXPECT_EQ(wrong.load(), 0);
}

TEST_F(TenancyTest, InputsOverTheLimitOrMismatchedAreRejectedBeforeQueueing) {
  Start({"--max-input-bytes", "16"});
  const std::string key = NewTenant("acme");
  v1::UploadModelResponse up;
  ASSERT_TRUE(UploadModel(stubs_->models.get(), key, "mlp", mlp_, &up).ok());
  const NamedTensor x = Load("mlp", "input_0.pb");
  ASSERT_GT(x.tensor.byte_size(), 16u);
  inference::ModelInferResponse resp;
  grpc::Status s = Call(stubs_->infer.get(), &InferStub::ModelInfer, key, InferRequest("mlp", "", x), &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(s.error_message().find("max-input-bytes"), std::string::npos) << s.error_message();
  // A small tensor with the wrong name: INVALID_ARGUMENT naming it.
  NamedTensor small{"nope", Tensor(DType::kFloat32, Shape{1, 2})};
  s = Call(stubs_->infer.get(), &InferStub::ModelInfer, key, InferRequest("mlp", "", small), &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("nope"), std::string::npos) << s.error_message();
}

}  // namespace
}  // namespace orrery
