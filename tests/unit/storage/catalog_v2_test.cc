// Schema 2 of the catalog: the 1 -> 2 migration, keys per tenant, tenant
// tombstones, idempotent upload ids, storage limits, version numbering and
// start-up recovery.
#include <algorithm>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "storage/catalog.h"
#include "tests/unit/storage/catalog_test_util.h"

namespace orrery {
namespace {

std::string IndexKey(const std::string& tenant, const std::string& key_id) {
  return "key/" + tenant + std::string(1, '\0') + key_id;
}

TEST(CatalogV2Test, MigrationFromV1BuildsTheKeyIndex) {
  TempDir tmp;
  {
    auto c = MustOpen(tmp.db());
    ASSERT_NE(c, nullptr);
    ASSERT_TRUE(AddTenant(c.get(), "t_a", "alpha", 1).ok());
    ASSERT_TRUE(AddTenant(c.get(), "t_b", "beta", 2).ok());
  }
  {
    // Turn it back into a version-1 database: no key index, version 1.
    RawDb raw(tmp.db());
    rocksdb::WriteOptions wo;
    wo.sync = true;
    ASSERT_TRUE(raw.db()->Delete(wo, raw.cf("tenants"), IndexKey("t_a", "k_t_a")).ok());
    ASSERT_TRUE(raw.db()->Delete(wo, raw.cf("tenants"), IndexKey("t_b", "k_t_b")).ok());
    raw.Put("meta", "schema_version", std::string("\x01\x00\x00\x00", 4));
  }
  auto c = MustOpen(tmp.db());
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->schema_version(), 2u);
  auto keys = c->ListKeys("t_a");
  ASSERT_TRUE(keys.ok()) << keys.status().ToString();
  ASSERT_EQ(keys->size(), 1u);
  EXPECT_EQ((*keys)[0].key_id(), "k_t_a");
  auto report = c->Fsck(/*repair=*/false);
  ASSERT_TRUE(report.ok());
  EXPECT_TRUE(report->clean());
}

TEST(CatalogV2Test, KeysAddListRevoke) {
  TempDir tmp;
  auto c = MustOpen(tmp.db());
  ASSERT_TRUE(AddTenant(c.get(), "t_a", "alpha", 1).ok());
  ASSERT_TRUE(AddTenant(c.get(), "t_b", "beta", 2).ok());
  ASSERT_TRUE(c->AddKey(Digest(3), MakeKey("k_second", "t_a")).ok());
  EXPECT_EQ(c->AddKey(Digest(3), MakeKey("k_third", "t_a")).code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(c->AddKey(Digest(4), MakeKey("k_second", "t_a")).code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(c->AddKey(Digest(5), MakeKey("k_x", "t_nobody")).code(), StatusCode::kNotFound);
  EXPECT_EQ(c->AddKey("short", MakeKey("k_y", "t_a")).code(), StatusCode::kInvalidArgument);

  auto keys = c->ListKeys("t_a");
  ASSERT_TRUE(keys.ok());
  ASSERT_EQ(keys->size(), 2u);
  EXPECT_EQ((*keys)[0].key_id(), "k_second");
  EXPECT_EQ((*keys)[1].key_id(), "k_t_a");
  ASSERT_EQ(c->ListKeys("t_b")->size(), 1u);

  // Another tenant cannot revoke it; the owner can, and then it is gone.
  EXPECT_EQ(c->RevokeKey("t_b", "k_second").code(), StatusCode::kNotFound);
  ASSERT_TRUE(c->RevokeKey("t_a", "k_second").ok());
  EXPECT_EQ(c->GetKey(Digest(3)).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(c->RevokeKey("t_a", "k_second").code(), StatusCode::kNotFound);
  EXPECT_EQ(c->ListKeys("t_a")->size(), 1u);
  EXPECT_TRUE(c->GetKey(Digest(1)).ok());
}

TEST(CatalogV2Test, DeleteTenantLeavesOnlyATombstone) {
  TempDir tmp;
  auto c = MustOpen(tmp.db());
  ASSERT_TRUE(AddTenant(c.get(), "t_a", "alpha", 1).ok());
  ASSERT_TRUE(AddTenant(c.get(), "t_b", "beta", 2).ok());
  ASSERT_TRUE(c->AddKey(Digest(3), MakeKey("k_second", "t_a")).ok());
  ASSERT_TRUE(Put(c.get(), "t_a", "m", "bytes-1").ok());
  ASSERT_TRUE(Put(c.get(), "t_a", "m", "bytes-2").ok());
  ASSERT_TRUE(Put(c.get(), "t_b", "m", "bytes-b").ok());

  ASSERT_TRUE(c->DeleteTenant("t_a").ok());
  EXPECT_EQ(c->DeleteTenant("t_a").code(), StatusCode::kNotFound);
  EXPECT_EQ(c->GetTenant("t_a").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(c->GetTenantByName("alpha").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(c->GetKey(Digest(1)).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(c->GetKey(Digest(3)).status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(c->ListModels("t_a")->empty());
  EXPECT_EQ(c->GetModelBlob("t_a", "m", 1).status().code(), StatusCode::kNotFound);
  auto tomb = c->GetTenantTombstone("t_a");
  ASSERT_TRUE(tomb.ok());
  EXPECT_EQ(tomb->name(), "alpha");
  EXPECT_NE(tomb->deleted_unix_ms(), 0);
  ASSERT_EQ(c->ListTenants()->size(), 1u);
  // The other tenant is untouched, and the name can be taken again.
  EXPECT_EQ(c->GetModelBlob("t_b", "m", 1).value(), "bytes-b");
  EXPECT_TRUE(c->GetKey(Digest(2)).ok());
  EXPECT_TRUE(AddTenant(c.get(), "t_c", "alpha", 4).ok());
  // Models cannot be stored for the tombstone.
  EXPECT_EQ(Put(c.get(), "t_a", "m", "x").status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(c->Fsck(false)->clean());
}

TEST(CatalogV2Test, UpdateTenantKeepsNameAndCreationTime) {
  TempDir tmp;
  auto c = MustOpen(tmp.db());
  ASSERT_TRUE(AddTenant(c.get(), "t_a", "alpha", 1).ok());
  TenantRecord t = MakeTenant("t_a", "renamed");
  t.set_created_unix_ms(99);
  t.set_display_name("Alpha Inc.");
  t.set_weight(3);
  t.mutable_quotas()->set_max_models(7);
  ASSERT_TRUE(c->UpdateTenant(t).ok());
  auto got = c->GetTenant("t_a");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->name(), "alpha");
  EXPECT_EQ(got->created_unix_ms(), 1234);
  EXPECT_EQ(got->display_name(), "Alpha Inc.");
  EXPECT_EQ(got->weight(), 3u);
  EXPECT_EQ(got->quotas().max_models(), 7u);
  EXPECT_EQ(c->UpdateTenant(MakeTenant("t_nobody", "x")).code(), StatusCode::kNotFound);
}

TEST(CatalogV2Test, UploadIdReplaysTheFirstResult) {
  TempDir tmp;
  auto c = MustOpen(tmp.db());
  ASSERT_TRUE(AddTenant(c.get(), "t_a", "alpha", 1).ok());
  ASSERT_TRUE(AddTenant(c.get(), "t_b", "beta", 2).ok());
  ModelRecord first = MakeModel("t_a", "m");
  first.set_upload_id("u1");
  auto r1 = c->PutModel(&first, "bytes-1", {});
  ASSERT_TRUE(r1.ok());
  EXPECT_FALSE(r1->replayed);
  EXPECT_EQ(first.version(), 1u);

  ModelRecord retry = MakeModel("t_a", "m");
  retry.set_upload_id("u1");
  auto r2 = c->PutModel(&retry, "bytes-1", {});
  ASSERT_TRUE(r2.ok());
  EXPECT_TRUE(r2->replayed);
  EXPECT_EQ(retry.version(), 1u);
  EXPECT_EQ(retry.created_unix_ms(), first.created_unix_ms());
  EXPECT_EQ(c->ListModels("t_a")->size(), 1u);
  EXPECT_EQ(c->GetUpload("t_a", "u1")->version(), 1u);

  // Same id for another name: refused, nothing written.
  ModelRecord other = MakeModel("t_a", "other");
  other.set_upload_id("u1");
  EXPECT_EQ(c->PutModel(&other, "x", {}).status().code(), StatusCode::kAlreadyExists);
  // Upload ids are per tenant.
  ModelRecord b = MakeModel("t_b", "m");
  b.set_upload_id("u1");
  auto rb = c->PutModel(&b, "bytes-b", {});
  ASSERT_TRUE(rb.ok());
  EXPECT_FALSE(rb->replayed);
  EXPECT_EQ(c->GetUpload("t_b", "u1")->tenant_id(), "t_b");

  // Deleting the version forgets the id.
  ASSERT_TRUE(c->DeleteModel("t_a", "m", 1).ok());
  EXPECT_EQ(c->GetUpload("t_a", "u1").status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(c->Fsck(false)->clean());
}

TEST(CatalogV2Test, LimitsAreCheckedAndChangeNothing) {
  TempDir tmp;
  auto c = MustOpen(tmp.db());
  ASSERT_TRUE(AddTenant(c.get(), "t_a", "alpha", 1).ok());
  Catalog::ModelLimits limits;
  limits.max_models = 2;
  limits.max_total_bytes = 100;
  ModelRecord m1 = MakeModel("t_a", "one");
  ASSERT_TRUE(c->PutModel(&m1, std::string(40, 'a'), limits).ok());
  ModelRecord m2 = MakeModel("t_a", "two");
  ASSERT_TRUE(c->PutModel(&m2, std::string(40, 'b'), limits).ok());
  // A third name: max_models.
  ModelRecord m3 = MakeModel("t_a", "three");
  auto r3 = c->PutModel(&m3, "c", limits);
  ASSERT_EQ(r3.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(r3.status().message().find("max_models"), std::string::npos) << r3.status().message();
  // A new version of a stored name is not a new model, but bytes count.
  ModelRecord v2 = MakeModel("t_a", "one");
  auto rv = c->PutModel(&v2, std::string(21, 'd'), limits);
  ASSERT_EQ(rv.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(rv.status().message().find("max_total_bytes"), std::string::npos) << rv.status().message();
  ModelRecord v2b = MakeModel("t_a", "one");
  ASSERT_TRUE(c->PutModel(&v2b, std::string(20, 'd'), limits).ok());
  EXPECT_EQ(v2b.version(), 2u);
  auto usage = c->TenantUsage("t_a");
  ASSERT_TRUE(usage.ok());
  EXPECT_EQ(usage->models, 2u);
  EXPECT_EQ(usage->versions, 3u);
  EXPECT_EQ(usage->total_bytes, 100u);
}

TEST(CatalogV2Test, VersionNumbersAreNeverReused) {
  TempDir tmp;
  auto c = MustOpen(tmp.db());
  ASSERT_TRUE(AddTenant(c.get(), "t_a", "alpha", 1).ok());
  ASSERT_EQ(Put(c.get(), "t_a", "m", "1").value(), 1u);
  ASSERT_EQ(Put(c.get(), "t_a", "m", "2").value(), 2u);
  auto deleted = c->DeleteModelVersions("t_a", "m", 2);
  ASSERT_TRUE(deleted.ok());
  EXPECT_EQ(*deleted, std::vector<uint64_t>{2});
  EXPECT_EQ(Put(c.get(), "t_a", "m", "3").value(), 3u);
  auto all = c->DeleteModelVersions("t_a", "m");
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(*all, (std::vector<uint64_t>{1, 3}));
  EXPECT_EQ(Put(c.get(), "t_a", "m", "4").value(), 4u);
}

TEST(CatalogV2Test, OpenRepairsOrphans) {
  TempDir tmp;
  {
    auto c = MustOpen(tmp.db());
    ASSERT_TRUE(AddTenant(c.get(), "t_a", "alpha", 1).ok());
    ASSERT_TRUE(Put(c.get(), "t_a", "m", "kept").ok());
  }
  {
    RawDb raw(tmp.db());
    raw.Put("blobs", ModelKey("t_a", "ghost", 1), "orphan bytes");
    raw.Put("models", ModelKey("t_a", "noblob", 1), MakeModel("t_a", "noblob").SerializeAsString());
    raw.Put("uploads", "t_a" + std::string(1, '\0') + "u-dangling", ModelKey("t_a", "gone", 1));
    raw.Put("tenants", IndexKey("t_a", "k_gone"), Digest(77));
  }
  auto c = MustOpen(tmp.db());
  ASSERT_NE(c, nullptr);
  auto report = c->Fsck(/*repair=*/false);
  ASSERT_TRUE(report.ok());
  EXPECT_TRUE(report->clean());
  EXPECT_EQ(c->GetModelBlob("t_a", "ghost", 1).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(c->GetModel("t_a", "noblob").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(c->GetModelBlob("t_a", "m", 1).value(), "kept");
  EXPECT_EQ(c->ListKeys("t_a")->size(), 1u);
}

// ---- cost profiles

CostProfileRecord Profile(const std::string& tenant, const std::string& name, uint64_t version, int64_t ns) {
  CostProfileRecord p;
  p.set_tenant_id(tenant);
  p.set_name(name);
  p.set_version(version);
  storage::BatchCostRecord* b = p.add_batches();
  b->set_batch(1);
  b->set_total_ns(ns);
  b->add_step_ns(ns / 2);
  b->add_step_ns(ns / 2);
  p.set_runs(2);
  return p;
}

TEST(CatalogCostProfileTest, StoredPerModelVersionListedAndDeletedWithTheVersion) {
  TempDir tmp;
  {
    auto c = MustOpen(tmp.db());
    ASSERT_NE(c, nullptr);
    ASSERT_TRUE(AddTenant(c.get(), "t_1", "acme", 1).ok());
    ASSERT_TRUE(Put(c.get(), "t_1", "m", "v1").ok());
    ASSERT_TRUE(Put(c.get(), "t_1", "m", "v2").ok());
    EXPECT_EQ(c->GetCostProfile("t_1", "m", 1).status().code(), StatusCode::kNotFound);
    ASSERT_TRUE(c->PutCostProfile(Profile("t_1", "m", 1, 1000)).ok());
    ASSERT_TRUE(c->PutCostProfile(Profile("t_1", "m", 2, 2000)).ok());
    ASSERT_TRUE(c->PutCostProfile(Profile("t_1", "m", 2, 3000)).ok());  // replaces
    // No profile for a version that is not stored.
    EXPECT_EQ(c->PutCostProfile(Profile("t_1", "m", 3, 1)).code(), StatusCode::kNotFound);
    EXPECT_EQ(c->PutCostProfile(Profile("t_1", "", 1, 1)).code(), StatusCode::kInvalidArgument);
  }
  auto c = MustOpen(tmp.db());  // durable
  ASSERT_NE(c, nullptr);
  Result<CostProfileRecord> p2 = c->GetCostProfile("t_1", "m", 2);
  ASSERT_TRUE(p2.ok()) << p2.status().ToString();
  ASSERT_EQ(p2->batches_size(), 1);
  EXPECT_EQ(p2->batches(0).total_ns(), 3000);
  EXPECT_EQ(p2->batches(0).step_ns_size(), 2);
  Result<std::vector<CostProfileRecord>> all = c->ListCostProfiles();
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), 2u);

  ASSERT_TRUE(c->DeleteModel("t_1", "m", 1).ok());
  EXPECT_EQ(c->GetCostProfile("t_1", "m", 1).status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(c->GetCostProfile("t_1", "m", 2).ok());
  ASSERT_TRUE(c->DeleteTenant("t_1").ok());
  EXPECT_EQ(c->ListCostProfiles()->size(), 0u);
}

}  // namespace
}  // namespace orrery
