// A Tenants service over a fresh catalog in a temp dir, for the tenancy tests.
#pragma once

#include <memory>

#include <gtest/gtest.h>

#include "storage/catalog.h"
#include "tenancy/tenants.h"
#include "tests/common/temp_dir.h"

namespace orrery {

class TenantsFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    auto c = Catalog::Open(dir_.db(), Catalog::Options{.sync_writes = false});
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    catalog_ = std::move(c).value();
    tenants_ = std::make_unique<Tenants>(catalog_.get());
  }
  void TearDown() override {
    tenants_.reset();
    catalog_.reset();
  }

  orrery::testing::TempDir dir_{"orrery_tenants_"};
  std::unique_ptr<Catalog> catalog_;
  std::unique_ptr<Tenants> tenants_;
};

}  // namespace orrery
