// Tenants: settings, update, disable, delete, several keys per tenant.
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include <gtest/gtest.h>

#include "tenancy/api_key.h"
#include "tests/unit/tenancy/tenants_fixture.h"
#include "tenancy/quotas.h"
#include "tenancy/tenants.h"

namespace orrery {
namespace {

class TenantAdminTest : public TenantsFixture {};

TEST_F(TenantAdminTest, CreateWithSettingsAndUpdate) {
  Tenants::Settings s;
  s.display_name = "Acme Corp";
  s.weight = 4;
  s.quotas.set_max_models(5);
  auto created = tenants_->Create("acme", s);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  EXPECT_EQ(created->tenant.display_name(), "Acme Corp");
  EXPECT_EQ(created->tenant.weight(), 4u);

  Tenants::Settings u;
  u.quotas.set_max_total_bytes(1234);
  auto updated = tenants_->Update(created->tenant.id(), u);
  ASSERT_TRUE(updated.ok());
  EXPECT_EQ(updated->display_name(), "Acme Corp");  // untouched
  EXPECT_EQ(updated->quotas().max_models(), 5u);
  EXPECT_EQ(updated->quotas().max_total_bytes(), 1234u);
  EXPECT_EQ(EffectiveQuotas(*updated).max_inflight_requests(), QuotaDefaults::kMaxInflightRequests);

  Tenants::Settings bad;
  bad.weight = 0;
  EXPECT_EQ(tenants_->Update(created->tenant.id(), bad).status().code(), StatusCode::kInvalidArgument);
  bad.weight = 5000;
  EXPECT_EQ(tenants_->Create("other", bad).status().code(), StatusCode::kInvalidArgument);
  Tenants::Settings ctrl;
  ctrl.display_name = std::string("a\nb");
  EXPECT_EQ(tenants_->Update(created->tenant.id(), ctrl).status().code(), StatusCode::kInvalidArgument);
  // Failed updates changed nothing.
  EXPECT_EQ(tenants_->Find("acme")->weight(), 4u);
  EXPECT_EQ(tenants_->Update("t_nobody", u).status().code(), StatusCode::kNotFound);
}

TEST_F(TenantAdminTest, FindByNameOrId) {
  auto created = tenants_->Create("acme");
  ASSERT_TRUE(created.ok());
  EXPECT_EQ(tenants_->Find("acme")->id(), created->tenant.id());
  EXPECT_EQ(tenants_->Find(created->tenant.id())->name(), "acme");
  EXPECT_EQ(tenants_->Find("nobody").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(tenants_->Find("").status().code(), StatusCode::kInvalidArgument);
}

TEST_F(TenantAdminTest, SeveralKeysCreateListRevoke) {
  auto created = tenants_->Create("acme");
  ASSERT_TRUE(created.ok());
  const std::string id = created->tenant.id();
  auto second = tenants_->CreateKey(id);
  ASSERT_TRUE(second.ok());
  EXPECT_NE(second->api_key, created->api_key);
  EXPECT_EQ(second->api_key.size(), 68u);
  EXPECT_EQ(tenants_->Authenticate(second->api_key)->id(), id);
  EXPECT_EQ(tenants_->Authenticate(created->api_key)->id(), id);

  auto keys = tenants_->ListKeys(id);
  ASSERT_TRUE(keys.ok());
  ASSERT_EQ(keys->size(), 2u);
  for (const ApiKeyRecord& k : *keys) {
    EXPECT_EQ(k.prefix().size(), 12u);
    // The record holds no secret: neither key appears in it.
    const std::string bytes = k.SerializeAsString();
    EXPECT_EQ(bytes.find(created->api_key), std::string::npos);
    EXPECT_EQ(bytes.find(second->api_key), std::string::npos);
  }
  ASSERT_TRUE(tenants_->RevokeKey(id, second->key.key_id()).ok());
  EXPECT_EQ(tenants_->Authenticate(second->api_key).status().code(), StatusCode::kUnauthenticated);
  EXPECT_TRUE(tenants_->Authenticate(created->api_key).ok());
  EXPECT_EQ(tenants_->CreateKey("t_nobody").status().code(), StatusCode::kNotFound);
}

TEST_F(TenantAdminTest, DisabledAndDeletedTenantsCannotAuthenticate) {
  auto a = tenants_->Create("acme");
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(tenants_->SetDisabled(a->tenant.id(), true).ok());
  EXPECT_EQ(tenants_->Authenticate(a->api_key).status().code(), StatusCode::kUnauthenticated);
  ASSERT_TRUE(tenants_->SetDisabled(a->tenant.id(), false).ok());
  EXPECT_TRUE(tenants_->Authenticate(a->api_key).ok());
  ASSERT_TRUE(tenants_->Delete(a->tenant.id()).ok());
  EXPECT_EQ(tenants_->Authenticate(a->api_key).status().code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(tenants_->Find("acme").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(catalog_->GetTenantTombstone(a->tenant.id())->name(), "acme");
}

}  // namespace
}  // namespace orrery
