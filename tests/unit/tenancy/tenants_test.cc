#include "tenancy/tenants.h"

#include <unistd.h>

#include <cstring>
#include <filesystem>

#include <gtest/gtest.h>

#include "tenancy/api_key.h"
#include "tests/unit/tenancy/tenants_fixture.h"
#include "tests/unit/tenancy/hex_match.h"

namespace orrery {
namespace {

class TenantsTest : public TenantsFixture {};

TEST(ValidateNameTest, AcceptsGoodNames) {
  for (const std::string& name : {std::string("a"), std::string("acme"), std::string("A-b_c.d"),
                                 std::string("0day"), std::string("x.."), std::string(128, 'x')}) {
    EXPECT_TRUE(ValidateName("tenant", name).ok()) << name;
  }
}

TEST(ValidateNameTest, RejectsBadNames) {
  for (const std::string& name :
       {std::string(""), std::string(".hidden"), std::string("."), std::string(".."), std::string("x y"),
        std::string("a/b"), std::string("a\\b"), std::string(129, 'x'), std::string("caf\xc3\xa9"),
        std::string("a\0b", 3), std::string("tab\t"), std::string("a:b")}) {
    Status st = ValidateName("tenant", name);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << name;
  }
  EXPECT_EQ(ValidateName("tenant", "x y").message(),
            "tenant name 'x y': must be 1-128 characters of [A-Za-z0-9._-], not starting with '.'");
  EXPECT_EQ(ValidateName("model", "").message().rfind("model name '':", 0), 0u);
  EXPECT_EQ(ValidateName("model name", "a b").message().rfind("model name 'a b':", 0), 0u);
}

TEST_F(TenantsTest, CreateReturnsKeyAndStoresDigest) {
  auto created = tenants_->Create("acme");
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  EXPECT_TRUE(IsPrefixedHex(created->tenant.id(), "t_", 16)) << created->tenant.id();
  EXPECT_EQ(created->tenant.name(), "acme");
  EXPECT_GT(created->tenant.created_unix_ms(), 0);
  EXPECT_FALSE(created->tenant.disabled());
  EXPECT_TRUE(IsPrefixedHex(created->api_key, "ork_", 64));

  auto key = catalog_->GetKey(Sha256(created->api_key));
  ASSERT_TRUE(key.ok()) << key.status().ToString();
  EXPECT_EQ(key->tenant_id(), created->tenant.id());
  EXPECT_TRUE(IsPrefixedHex(key->key_id(), "k_", 16)) << key->key_id();
  EXPECT_EQ(key->prefix(), created->api_key.substr(0, 12));
  // The plaintext key is not stored anywhere the catalog exposes.
  EXPECT_EQ(catalog_->GetKey(created->api_key).status().code(), StatusCode::kNotFound);
}

TEST_F(TenantsTest, CreateRejectsBadAndDuplicateNames) {
  EXPECT_EQ(tenants_->Create("bad name").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(tenants_->Create(".dot").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(tenants_->Create("").status().code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(tenants_->Create("acme").ok());
  auto dup = tenants_->Create("acme");
  EXPECT_EQ(dup.status().code(), StatusCode::kAlreadyExists) << dup.status().ToString();
  auto list = tenants_->List();
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(list->size(), 1u);
}

TEST_F(TenantsTest, ListIsSortedByName) {
  for (const char* name : {"zulu", "alpha", "Mike", "bravo"}) ASSERT_TRUE(tenants_->Create(name).ok());
  auto list = tenants_->List();
  ASSERT_TRUE(list.ok());
  std::vector<std::string> names;
  for (const auto& t : *list) names.push_back(t.name());
  EXPECT_EQ(names, (std::vector<std::string>{"Mike", "alpha", "bravo", "zulu"}));
}

TEST_F(TenantsTest, Authenticate) {
  auto a = tenants_->Create("acme");
  auto b = tenants_->Create("globex");
  ASSERT_TRUE(a.ok() && b.ok());

  auto who = tenants_->Authenticate(a->api_key);
  ASSERT_TRUE(who.ok()) << who.status().ToString();
  EXPECT_EQ(who->id(), a->tenant.id());
  EXPECT_EQ(tenants_->Authenticate(b->api_key)->name(), "globex");

  auto missing = tenants_->Authenticate("");
  EXPECT_EQ(missing.status().code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(missing.status().message(), "missing API key");

  std::string wrong = a->api_key;
  wrong.back() = wrong.back() == '0' ? '1' : '0';
  for (const std::string& bad : {wrong, GenerateApiKey(), std::string("garbage"), a->api_key + "x"}) {
    auto r = tenants_->Authenticate(bad);
    EXPECT_EQ(r.status().code(), StatusCode::kUnauthenticated) << bad;
    EXPECT_EQ(r.status().message(), "invalid API key");
  }

  // A disabled tenant gets exactly the same answer as an unknown key.
  ASSERT_TRUE(catalog_->SetTenantDisabled(a->tenant.id(), true).ok());
  auto disabled = tenants_->Authenticate(a->api_key);
  EXPECT_EQ(disabled.status().code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(disabled.status().message(), "invalid API key");
  EXPECT_TRUE(tenants_->Authenticate(b->api_key).ok());
}

TEST_F(TenantsTest, SurvivesReopen) {
  auto a = tenants_->Create("acme");
  ASSERT_TRUE(a.ok());
  tenants_.reset();
  catalog_.reset();
  auto c = Catalog::Open(dir_.db());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  catalog_ = std::move(c).value();
  tenants_ = std::make_unique<Tenants>(catalog_.get());
  auto who = tenants_->Authenticate(a->api_key);
  ASSERT_TRUE(who.ok());
  EXPECT_EQ(who->name(), "acme");
}

}  // namespace
}  // namespace orrery
