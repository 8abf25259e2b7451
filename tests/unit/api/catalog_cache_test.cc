// CatalogCache: the inference path's cached catalog reads see every catalog
// write at once (revoked keys, disabled tenants, deleted and new models).
#include "api/catalog_cache.h"

#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "tests/unit/tenancy/tenants_fixture.h"

namespace orrery {
namespace {

class CatalogCacheTest : public TenantsFixture {
 protected:
  void SetUp() override {
    TenantsFixture::SetUp();
    cache_ = std::make_unique<CatalogCache>(catalog_.get(), tenants_.get());
  }

  uint64_t PutModel(const std::string& tenant_id, const std::string& name) {
    ModelRecord m;
    m.set_tenant_id(tenant_id);
    m.set_name(name);
    m.set_sha256("00");
    Result<Catalog::PutResult> r = catalog_->PutModel(&m, "onnx", Catalog::ModelLimits{});
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return m.version();
  }

  std::unique_ptr<CatalogCache> cache_;
};

TEST_F(CatalogCacheTest, HitsUntilTheCatalogChanges) {
  auto acme = tenants_->Create("acme");
  ASSERT_TRUE(acme.ok());
  ASSERT_TRUE(cache_->Authenticate(acme->api_key).ok());
  ASSERT_TRUE(cache_->Authenticate(acme->api_key).ok());
  EXPECT_EQ(cache_->hits(), 1u);
  EXPECT_EQ(cache_->Authenticate("ork_unknown").status().code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(cache_->Authenticate("").status().code(), StatusCode::kUnauthenticated);
}

TEST_F(CatalogCacheTest, RevokedKeyIsRefusedAtOnce) {
  auto acme = tenants_->Create("acme");
  ASSERT_TRUE(acme.ok());
  auto second = tenants_->CreateKey(acme->tenant.id());
  ASSERT_TRUE(second.ok());
  ASSERT_TRUE(cache_->Authenticate(second->api_key).ok());
  ASSERT_TRUE(cache_->Authenticate(second->api_key).ok());  // now cached
  ASSERT_TRUE(tenants_->RevokeKey(acme->tenant.id(), second->key.key_id()).ok());
  EXPECT_EQ(cache_->Authenticate(second->api_key).status().code(), StatusCode::kUnauthenticated);
  EXPECT_TRUE(cache_->Authenticate(acme->api_key).ok());  // the other key still works
}

TEST_F(CatalogCacheTest, DisabledUpdatedAndDeletedTenantsTakeEffectAtOnce) {
  auto acme = tenants_->Create("acme");
  ASSERT_TRUE(acme.ok());
  const std::string id = acme->tenant.id();
  ASSERT_TRUE(cache_->Authenticate(acme->api_key).ok());
  ASSERT_TRUE(tenants_->SetDisabled(id, true).ok());
  EXPECT_EQ(cache_->Authenticate(acme->api_key).status().code(), StatusCode::kUnauthenticated);
  ASSERT_TRUE(tenants_->SetDisabled(id, false).ok());
  ASSERT_TRUE(cache_->Authenticate(acme->api_key).ok());
  Tenants::Settings heavier;
  heavier.weight = 7;
  ASSERT_TRUE(tenants_->Update(id, heavier).ok());
  auto t = cache_->Authenticate(acme->api_key);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->weight(), 7u);
  ASSERT_TRUE(tenants_->Delete(id).ok());
  EXPECT_EQ(cache_->Authenticate(acme->api_key).status().code(), StatusCode::kUnauthenticated);
}

TEST_F(CatalogCacheTest, DeletedAndNewModelVersionsAreSeenAtOnce) {
  auto acme = tenants_->Create("acme");
  ASSERT_TRUE(acme.ok());
  const std::string id = acme->tenant.id();
  ASSERT_EQ(PutModel(id, "mlp"), 1u);
  ASSERT_TRUE(cache_->GetModel(id, "mlp", 0).ok());
  auto latest = cache_->GetModel(id, "mlp", 0);  // cached
  ASSERT_TRUE(latest.ok());
  EXPECT_EQ(latest->version(), 1u);
  ASSERT_EQ(PutModel(id, "mlp"), 2u);
  latest = cache_->GetModel(id, "mlp", 0);
  ASSERT_TRUE(latest.ok());
  EXPECT_EQ(latest->version(), 2u);
  ASSERT_TRUE(cache_->GetModel(id, "mlp", 2).ok());
  ASSERT_TRUE(catalog_->DeleteModel(id, "mlp", 2).ok());
  EXPECT_EQ(cache_->GetModel(id, "mlp", 2).status().code(), StatusCode::kNotFound);
  latest = cache_->GetModel(id, "mlp", 0);
  ASSERT_TRUE(latest.ok());
  EXPECT_EQ(latest->version(), 1u);
  ASSERT_TRUE(catalog_->DeleteModel(id, "mlp", 0).ok());
  EXPECT_EQ(cache_->GetModel(id, "mlp", 0).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(cache_->GetModel(id, "mlp", 1).status().code(), StatusCode::kNotFound);
  // Other tenants never see it.
  auto other = tenants_->Create("other");
  ASSERT_TRUE(other.ok());
  PutModel(id, "mlp");
  ASSERT_TRUE(cache_->GetModel(id, "mlp", 0).ok());
  EXPECT_EQ(cache_->GetModel(other->tenant.id(), "mlp", 0).status().code(), StatusCode::kNotFound);
}

TEST_F(CatalogCacheTest, AFullCacheStartsOver) {
  CatalogCache small(catalog_.get(), tenants_.get(), 2);
  auto acme = tenants_->Create("acme");
  ASSERT_TRUE(acme.ok());
  const std::string id = acme->tenant.id();
  for (const char* name : {"a", "b", "c"}) PutModel(id, name);
  for (const char* name : {"a", "b", "c", "a", "b", "c", "c"}) {
    auto m = small.GetModel(id, name, 0);
    ASSERT_TRUE(m.ok()) << name;
    EXPECT_EQ(m->name(), name);
  }
  EXPECT_GE(small.hits(), 1u);  // the repeated "c"
}

}  // namespace
}  // namespace orrery
