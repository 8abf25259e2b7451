// The isolation matrix: tenant B on every tenant-facing RPC with tenant A's
// model names and versions gets NOT_FOUND, worded exactly as for a name that
// exists nowhere (no existence leak); a tenant key on every admin RPC gets
// PERMISSION_DENIED; a disabled, revoked or deleted tenant's key gets
// UNAUTHENTICATED everywhere.
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/tensor_proto.h"
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

NamedTensor MlpInput() {
  Result<NamedTensor> t = ParseTensorProto(ReadFileOrEmpty(ModelPath("mlp", "test_data_set_0/input_0.pb")));
  EXPECT_TRUE(t.ok());
  return t.ok() ? std::move(t).value() : NamedTensor{};
}

// One tenant-facing RPC on (model name, version; 0 = unpinned).
struct TenantRpc {
  std::string name;
  std::function<grpc::Status(Stubs&, const std::string& key, const std::string& model, uint64_t version)> call;
};

std::vector<TenantRpc> TenantRpcs() {
  const std::string mlp = ReadFileOrEmpty(ModelPath("mlp", "model.onnx"));
  auto vstr = [](uint64_t v) { return v == 0 ? std::string() : std::to_string(v); };
  return {
      {"DescribeModel",
       [](Stubs& s, const std::string& key, const std::string& model, uint64_t v) {
         v1::DescribeModelRequest req;
         req.set_name(model);
         req.set_version(v);
         v1::DescribeModelResponse resp;
         return Call(s.models.get(), &ModelStub::DescribeModel, key, req, &resp);
       }},
      {"ModelReady",
       [vstr](Stubs& s, const std::string& key, const std::string& model, uint64_t v) {
         inference::ModelReadyRequest req;
         req.set_name(model);
         req.set_version(vstr(v));
         inference::ModelReadyResponse resp;
         return Call(s.infer.get(), &InferStub::ModelReady, key, req, &resp);
       }},
      {"ModelMetadata",
       [vstr](Stubs& s, const std::string& key, const std::string& model, uint64_t v) {
         inference::ModelMetadataRequest req;
         req.set_name(model);
         req.set_version(vstr(v));
         inference::ModelMetadataResponse resp;
         return Call(s.infer.get(), &InferStub::ModelMetadata, key, req, &resp);
       }},
      {"ModelInfer",
       [vstr](Stubs& s, const std::string& key, const std::string& model, uint64_t v) {
         inference::ModelInferResponse resp;
         return Call(s.infer.get(), &InferStub::ModelInfer, key, InferRequest(model, vstr(v), MlpInput()), &resp);
       }},
      // Last: on success it would remove the model.
      {"DeleteModel",
       [](Stubs& s, const std::string& key, const std::string& model, uint64_t v) {
         v1::DeleteModelRequest req;
         req.set_name(model);
         req.set_version(v);
         v1::DeleteModelResponse resp;
         return Call(s.models.get(), &ModelStub::DeleteModel, key, req, &resp);
       }},
  };
}

// The message with the model name replaced, to compare "A's model" with
// "nobody's model" independently of the name.
std::string Normalised(std::string msg, const std::string& name) {
  for (size_t p = msg.find(name); p != std::string::npos; p = msg.find(name, p)) msg.replace(p, name.size(), "<m>");
  return msg;
}

class IsolationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(server_.Start());
    stubs_ = std::make_unique<Stubs>(server_.channel());
    admin_ = server_.admin_token();
    v1::CreateTenantResponse a, b;
    ASSERT_TRUE(orrery::testing::CreateTenant(stubs_->admin.get(), admin_, "tenant-a", &a).ok());
    ASSERT_TRUE(orrery::testing::CreateTenant(stubs_->admin.get(), admin_, "tenant-b", &b).ok());
    key_a_ = a.api_key();
    key_b_ = b.api_key();
    mlp_ = ReadFileOrEmpty(ModelPath("mlp", "model.onnx"));
    v1::UploadModelResponse up;
    ASSERT_TRUE(UploadModel(stubs_->models.get(), key_a_, "secret-model", mlp_, &up, "a-upload-1").ok());
    ASSERT_TRUE(UploadModel(stubs_->models.get(), key_a_, "secret-model", mlp_, &up).ok());
    ASSERT_EQ(up.model().version(), 2u);
  }

  OrrerydProcess server_;
  std::unique_ptr<Stubs> stubs_;
  std::string admin_, key_a_, key_b_, mlp_;
};

TEST_F(IsolationTest, OtherTenantsModelsAreNotFoundExactlyLikeMissingOnes) {
  int checked = 0;
  for (const TenantRpc& rpc : TenantRpcs()) {
    for (uint64_t version : {0, 1, 2, 3}) {
      grpc::Status theirs = rpc.call(*stubs_, key_b_, "secret-model", version);
      grpc::Status missing = rpc.call(*stubs_, key_b_, "no-such-model", version);
      EXPECT_EQ(theirs.error_code(), grpc::StatusCode::NOT_FOUND)
          << rpc.name << " v" << version << ": " << theirs.error_message();
      EXPECT_EQ(missing.error_code(), grpc::StatusCode::NOT_FOUND) << rpc.name;
      EXPECT_EQ(Normalised(theirs.error_message(), "secret-model"),
                Normalised(missing.error_message(), "no-such-model"))
          << rpc.name << " v" << version;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 20);

  // B's list does not show A's model; B's upload under the same name and
  // with A's upload id is B's own version 1 (no shared numbering, no replay).
  v1::ListModelsResponse list;
  ASSERT_TRUE(Call(stubs_->models.get(), &ModelStub::ListModels, key_b_, v1::ListModelsRequest(), &list).ok());
  EXPECT_EQ(list.models_size(), 0);
  v1::UploadModelResponse up;
  ASSERT_TRUE(UploadModel(stubs_->models.get(), key_b_, "secret-model", mlp_, &up, "a-upload-1").ok());
  EXPECT_EQ(up.model().version(), 1u);
  EXPECT_FALSE(up.replayed());
  v1::DeleteModelRequest del;
  del.set_name("secret-model");
  v1::DeleteModelResponse del_resp;
  ASSERT_TRUE(Call(stubs_->models.get(), &ModelStub::DeleteModel, key_b_, del, &del_resp).ok());

  // A's versions are untouched by all of the above.
  for (uint64_t version : {1, 2}) {
    for (const TenantRpc& rpc : TenantRpcs()) {
      if (rpc.name == "DeleteModel") continue;
      grpc::Status s = rpc.call(*stubs_, key_a_, "secret-model", version);
      EXPECT_TRUE(s.ok()) << rpc.name << " v" << version << ": " << s.error_message();
    }
  }
}

TEST_F(IsolationTest, TenantKeysGetPermissionDeniedOnEveryAdminRpc) {
  AdminStub* s = stubs_->admin.get();
  std::vector<std::pair<std::string, std::function<grpc::Status(const std::string&)>>> rpcs = {
      {"CreateTenant",
       [&](const std::string& k) {
         v1::CreateTenantRequest req;
         req.set_name("intruder");
         v1::CreateTenantResponse resp;
         return Call(s, &AdminStub::CreateTenant, k, req, &resp);
       }},
      {"ListTenants",
       [&](const std::string& k) {
         v1::ListTenantsResponse resp;
         return Call(s, &AdminStub::ListTenants, k, v1::ListTenantsRequest(), &resp);
       }},
      {"GetTenant",
       [&](const std::string& k) {
         v1::GetTenantRequest req;
         req.set_tenant("tenant-a");
         v1::GetTenantResponse resp;
         return Call(s, &AdminStub::GetTenant, k, req, &resp);
       }},
      {"UpdateTenant",
       [&](const std::string& k) {
         v1::UpdateTenantRequest req;
         req.set_tenant("tenant-b");
         req.mutable_quotas()->set_max_models(100000);
         v1::UpdateTenantResponse resp;
         return Call(s, &AdminStub::UpdateTenant, k, req, &resp);
       }},
      {"SetTenantDisabled",
       [&](const std::string& k) {
         v1::SetTenantDisabledRequest req;
         req.set_tenant("tenant-a");
         req.set_disabled(true);
         v1::SetTenantDisabledResponse resp;
         return Call(s, &AdminStub::SetTenantDisabled, k, req, &resp);
       }},
      {"DeleteTenant",
       [&](const std::string& k) {
         v1::DeleteTenantRequest req;
         req.set_tenant("tenant-a");
         v1::DeleteTenantResponse resp;
         return Call(s, &AdminStub::DeleteTenant, k, req, &resp);
       }},
      {"CreateKey",
       [&](const std::string& k) {
         v1::CreateKeyRequest req;
         req.set_tenant("tenant-a");
         v1::CreateKeyResponse resp;
         return Call(s, &AdminStub::CreateKey, k, req, &resp);
       }},
      {"ListKeys",
       [&](const std::string& k) {
         v1::ListKeysRequest req;
         req.set_tenant("tenant-b");
         v1::ListKeysResponse resp;
         return Call(s, &AdminStub::ListKeys, k, req, &resp);
       }},
      {"RevokeKey",
       [&](const std::string& k) {
         v1::RevokeKeyRequest req;
         req.set_tenant("tenant-a");
         req.set_key_id("k_0000000000000000");
         v1::RevokeKeyResponse resp;
         return Call(s, &AdminStub::RevokeKey, k, req, &resp);
       }},
  };
  for (const auto& [name, call] : rpcs) {
    EXPECT_EQ(call(key_a_).error_code(), grpc::StatusCode::PERMISSION_DENIED) << name;
    EXPECT_EQ(call(key_b_).error_code(), grpc::StatusCode::PERMISSION_DENIED) << name;
    EXPECT_EQ(call("ork_not-a-key").error_code(), grpc::StatusCode::UNAUTHENTICATED) << name;
    EXPECT_EQ(call("").error_code(), grpc::StatusCode::UNAUTHENTICATED) << name;
  }
  // Nothing changed: both tenants active, still two of them, A's model there.
  v1::ListTenantsResponse tenants;
  ASSERT_TRUE(Call(s, &AdminStub::ListTenants, admin_, v1::ListTenantsRequest(), &tenants).ok());
  ASSERT_EQ(tenants.tenants_size(), 2);
  for (const auto& t : tenants.tenants()) EXPECT_FALSE(t.disabled()) << t.name();
  EXPECT_TRUE(TenantRpcs()[0].call(*stubs_, key_a_, "secret-model", 0).ok());
}

// Every tenant-facing RPC, including upload and list, with `key`.
std::vector<grpc::Status> AllTenantRpcs(Stubs& s, const std::string& key, const std::string& mlp) {
  std::vector<grpc::Status> out;
  for (const TenantRpc& rpc : TenantRpcs()) {
    if (rpc.name != "DeleteModel") out.push_back(rpc.call(s, key, "secret-model", 0));
  }
  v1::ListModelsResponse list;
  out.push_back(Call(s.models.get(), &ModelStub::ListModels, key, v1::ListModelsRequest(), &list));
  v1::UploadModelResponse up;
  out.push_back(UploadModel(s.models.get(), key, "another", mlp, &up));
  out.push_back(TenantRpcs().back().call(s, key, "secret-model", 1));
  return out;
}

TEST_F(IsolationTest, DisabledRevokedAndDeletedKeysAreUnauthenticated) {
  AdminStub* s = stubs_->admin.get();
  v1::SetTenantDisabledRequest dis;
  dis.set_tenant("tenant-a");
  dis.set_disabled(true);
  v1::SetTenantDisabledResponse dis_resp;
  ASSERT_TRUE(Call(s, &AdminStub::SetTenantDisabled, admin_, dis, &dis_resp).ok());
  for (const grpc::Status& st : AllTenantRpcs(*stubs_, key_a_, mlp_)) {
    EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAUTHENTICATED) << st.error_message();
  }
  // Re-enabled: the model is still there (disable changed nothing else).
  dis.set_disabled(false);
  ASSERT_TRUE(Call(s, &AdminStub::SetTenantDisabled, admin_, dis, &dis_resp).ok());
  EXPECT_TRUE(TenantRpcs()[0].call(*stubs_, key_a_, "secret-model", 2).ok());

  // A second key, revoked.
  v1::CreateKeyRequest ck;
  ck.set_tenant("tenant-a");
  v1::CreateKeyResponse ck_resp;
  ASSERT_TRUE(Call(s, &AdminStub::CreateKey, admin_, ck, &ck_resp).ok());
  EXPECT_TRUE(TenantRpcs()[0].call(*stubs_, ck_resp.api_key(), "secret-model", 0).ok());
  v1::RevokeKeyRequest rk;
  rk.set_tenant("tenant-a");
  rk.set_key_id(ck_resp.key().key_id());
  v1::RevokeKeyResponse rk_resp;
  ASSERT_TRUE(Call(s, &AdminStub::RevokeKey, admin_, rk, &rk_resp).ok());
  for (const grpc::Status& st : AllTenantRpcs(*stubs_, ck_resp.api_key(), mlp_)) {
    EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAUTHENTICATED) << st.error_message();
  }
  EXPECT_TRUE(TenantRpcs()[0].call(*stubs_, key_a_, "secret-model", 0).ok());

  // Deleted tenant.
  v1::DeleteTenantRequest dt;
  dt.set_tenant("tenant-a");
  v1::DeleteTenantResponse dt_resp;
  ASSERT_TRUE(Call(s, &AdminStub::DeleteTenant, admin_, dt, &dt_resp).ok());
  for (const grpc::Status& st : AllTenantRpcs(*stubs_, key_a_, mlp_)) {
    EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAUTHENTICATED) << st.error_message();
  }
  // B is unaffected.
  v1::ListModelsResponse list;
  EXPECT_TRUE(Call(stubs_->models.get(), &ModelStub::ListModels, key_b_, v1::ListModelsRequest(), &list).ok());
}

}  // namespace
}  // namespace orrery
