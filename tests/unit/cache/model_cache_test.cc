#include "cache/model_cache.h"

#include <filesystem>
#include <thread>

#include <gtest/gtest.h>

#include "tests/unit/common/tiny_models.h"

namespace orrery {
namespace {

class ModelCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("model-cache-test-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    Result<std::unique_ptr<Catalog>> c = Catalog::Open(dir_.string());
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    catalog_ = std::move(c).value();
    TenantRecord tenant;
    tenant.set_id("t_1");
    tenant.set_name("cache-test");
    ApiKeyRecord key;
    key.set_key_id("k_1");
    key.set_tenant_id("t_1");
    ASSERT_TRUE(catalog_->CreateTenant(tenant, std::string(32, 'k'), key).ok());
  }
  void TearDown() override {
    catalog_.reset();
    std::filesystem::remove_all(dir_);
  }
  ModelRecord Store(const std::string& name, const std::string& bytes) {
    ModelRecord r;
    r.set_tenant_id("t_1");
    r.set_name(name);
    EXPECT_TRUE(catalog_->PutModel(&r, bytes).ok());
    return r;
  }

  std::filesystem::path dir_;
  std::unique_ptr<Catalog> catalog_;
};

TEST_F(ModelCacheTest, CompilesOnMissAndSharesTheResult) {
  ModelCache cache(catalog_.get());
  ModelRecord r = Store("relu", testing::ReluModelBytes());
  std::vector<ModelCache::ModelPtr> got(8);
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] {
      Result<ModelCache::ModelPtr> m = cache.Get(r);
      if (m.ok()) got[i] = *m;
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& m : got) {
    ASSERT_NE(m, nullptr);
    EXPECT_EQ(m.get(), got[0].get());  // compiled once, shared
  }
  EXPECT_EQ(cache.size(), 1u);
}

TEST_F(ModelCacheTest, FailuresAreNotCached) {
  ModelCache cache(catalog_.get());
  ModelRecord r = Store("junk", "not an onnx model");
  EXPECT_FALSE(cache.Get(r).ok());
  EXPECT_EQ(cache.size(), 0u);
}

TEST_F(ModelCacheTest, EraseDropsEveryVersionButRunningUsersKeepTheirs) {
  ModelCache cache(catalog_.get());
  ModelRecord v1 = Store("relu", testing::ReluModelBytes());
  ModelRecord v2 = Store("relu", testing::ReluModelBytes());
  ModelRecord other = Store("relu2", testing::ReluModelBytes());
  Result<ModelCache::ModelPtr> held = cache.Get(v1);
  ASSERT_TRUE(held.ok());
  ASSERT_TRUE(cache.Get(v2).ok());
  ASSERT_TRUE(cache.Get(other).ok());
  EXPECT_EQ(cache.size(), 3u);
  cache.Erase("t_1", "relu");
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_EQ((*held)->signature().inputs.size(), 1u);  // still usable
}

}  // namespace
}  // namespace orrery
