// The durable catalog: one RocksDB database per server holding tenants, API
// key digests, model records and the ONNX bytes of every model version.
//
// Column families: meta (schema version), tenants, keys, models, blobs.
// Every change that touches several keys is one WriteBatch; writes that are
// acknowledged to clients use sync=true (WAL fsync) so they survive kill -9.
// All methods are thread-safe. Costs: reads are point lookups or prefix scans;
// PutModel writes the whole ONNX blob once (blob files keep it out of the LSM).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "storage/proto/catalog.pb.h"

namespace orrery {

using storage::ApiKeyRecord;
using storage::ModelRecord;
using storage::TenantRecord;

class Catalog {
 public:
  static constexpr uint32_t kSchemaVersion = 1;

  struct Options {
    bool sync_writes = true;  // fsync the WAL before acknowledging a write
  };

  // Opens or creates the database in `dir` (created if missing). Fails with
  // FAILED_PRECONDITION if the stored schema version is newer than this build
  // or the directory is already open (in this or another process).
  static Result<std::unique_ptr<Catalog>> Open(const std::string& dir, Options options);
  static Result<std::unique_ptr<Catalog>> Open(const std::string& dir) { return Open(dir, Options{}); }
  ~Catalog();

  uint32_t schema_version() const;

  // ---- tenants and keys
  // Stores the tenant and its first key atomically. ALREADY_EXISTS if a
  // tenant with the same name exists. `key_digest` is the raw SHA-256 digest.
  Status CreateTenant(const TenantRecord& tenant, std::string_view key_digest,
                      const ApiKeyRecord& key);
  Result<TenantRecord> GetTenant(std::string_view tenant_id) const;   // NOT_FOUND
  Result<TenantRecord> GetTenantByName(std::string_view name) const;  // NOT_FOUND
  Result<std::vector<TenantRecord>> ListTenants() const;              // by name
  Result<ApiKeyRecord> GetKey(std::string_view key_digest) const;     // NOT_FOUND
  // Sets TenantRecord.disabled (disabled tenants fail authentication). NOT_FOUND.
  Status SetTenantDisabled(std::string_view tenant_id, bool disabled);

  // ---- models
  // Assigns the next version for (tenant_id, name) into record->version and
  // stores record and blob atomically. Also sets record->size_bytes to the blob
  // size and created_unix_ms to now if it is 0. NOT_FOUND if the tenant does
  // not exist; INVALID_ARGUMENT for an empty tenant id / name or one with NUL.
  Status PutModel(ModelRecord* record, std::string_view onnx_bytes);
  // version 0 = latest. NOT_FOUND if absent.
  Result<ModelRecord> GetModel(std::string_view tenant_id, std::string_view name,
                               uint64_t version = 0) const;
  // Every version of every model of the tenant, by (name, version).
  Result<std::vector<ModelRecord>> ListModels(std::string_view tenant_id) const;
  // version 0 = latest. NOT_FOUND if absent.
  Result<std::string> GetModelBlob(std::string_view tenant_id, std::string_view name,
                                   uint64_t version) const;
  // version 0 = all versions. NOT_FOUND if nothing matched.
  Status DeleteModel(std::string_view tenant_id, std::string_view name, uint64_t version = 0);

  Catalog(const Catalog&) = delete;
  Catalog& operator=(const Catalog&) = delete;

 private:
  struct Impl;
  explicit Catalog(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace orrery
