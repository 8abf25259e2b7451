// Shared helpers of the catalog unit tests: temp dirs, records, raw RocksDB access.
#pragma once

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <rocksdb/db.h>

#include "storage/catalog.h"
#include "tests/common/temp_dir.h"

namespace orrery {
namespace {

// ---- helpers

using orrery::testing::TempDir;

inline std::unique_ptr<Catalog> MustOpen(const std::string& dir, Catalog::Options options = {}) {
  auto r = Catalog::Open(dir, options);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (!r.ok()) return nullptr;
  return std::move(r).value();
}

TenantRecord MakeTenant(const std::string& id, const std::string& name) {
  TenantRecord t;
  t.set_id(id);
  t.set_name(name);
  t.set_created_unix_ms(1234);
  return t;
}

ApiKeyRecord MakeKey(const std::string& key_id, const std::string& tenant_id) {
  ApiKeyRecord k;
  k.set_key_id(key_id);
  k.set_tenant_id(tenant_id);
  k.set_prefix("ork_abcdefgh");
  k.set_created_unix_ms(1234);
  return k;
}

// A distinct 32-byte "digest" per seed.
std::string Digest(int seed) {
  std::string d(32, '\0');
  for (int i = 0; i < 32; ++i) d[i] = static_cast<char>((seed * 131 + i * 7) & 0xff);
  d[0] = static_cast<char>(seed & 0xff);
  d[1] = static_cast<char>((seed >> 8) & 0xff);
  return d;
}

Status AddTenant(Catalog* c, const std::string& id, const std::string& name, int seed) {
  return c->CreateTenant(MakeTenant(id, name), Digest(seed), MakeKey("k_" + id, id));
}

ModelRecord MakeModel(const std::string& tenant_id, const std::string& name) {
  ModelRecord m;
  m.set_tenant_id(tenant_id);
  m.set_name(name);
  m.set_sha256("00");
  m.set_opset(17);
  auto* in = m.add_inputs();
  in->set_name("x");
  in->set_dtype(1);
  in->add_shape(-1);
  in->add_shape(4);
  return m;
}

Result<uint64_t> Put(Catalog* c, const std::string& tenant_id, const std::string& name, std::string_view bytes) {
  ModelRecord m = MakeModel(tenant_id, name);
  ORRERY_RETURN_IF_ERROR(c->PutModel(&m, bytes));
  return m.version();
}

// Opens the catalog directory with plain RocksDB (every CF) to poke at it.
class RawDb {
 public:
  explicit RawDb(const std::string& dir) {
    std::vector<std::string> names;
    rocksdb::DBOptions opts;
    EXPECT_TRUE(rocksdb::DB::ListColumnFamilies(opts, dir, &names).ok());
    std::vector<rocksdb::ColumnFamilyDescriptor> descs;
    for (const auto& n : names) descs.emplace_back(n, rocksdb::ColumnFamilyOptions());
    rocksdb::DB* db = nullptr;
    rocksdb::Status s = rocksdb::DB::Open(opts, dir, descs, &handles_, &db);
    EXPECT_TRUE(s.ok()) << s.ToString();
    db_.reset(db);
    names_ = names;
  }
  ~RawDb() {
    for (auto* h : handles_) (void)db_->DestroyColumnFamilyHandle(h);
    (void)db_->Close();
  }
  rocksdb::ColumnFamilyHandle* cf(const std::string& name) {
    for (size_t i = 0; i < names_.size(); ++i) {
      if (names_[i] == name) return handles_[i];
    }
    ADD_FAILURE() << "no column family " << name;
    return nullptr;
  }
  void Put(const std::string& cf_name, const std::string& key, const std::string& value) {
    rocksdb::WriteOptions wo;
    wo.sync = true;
    ASSERT_TRUE(db_->Put(wo, cf(cf_name), key, value).ok());
  }
  std::string Get(const std::string& cf_name, const std::string& key) {
    std::string v;
    rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), cf(cf_name), key, &v);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return v;
  }
  const std::vector<std::string>& names() const { return names_; }
  rocksdb::DB* db() { return db_.get(); }

 private:
  std::unique_ptr<rocksdb::DB> db_;
  std::vector<rocksdb::ColumnFamilyHandle*> handles_;
  std::vector<std::string> names_;
};

std::string ModelKey(const std::string& tenant, const std::string& name, uint64_t version) {
  std::string k = tenant + std::string(1, '\0') + name + std::string(1, '\0');
  for (int i = 7; i >= 0; --i) k.push_back(static_cast<char>((version >> (8 * i)) & 0xff));
  return k;
}

}  // namespace
}  // namespace orrery
