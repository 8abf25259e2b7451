// The catalog reads of every inference, cached in memory: the caller's
// tenant from its API key (SHA-256, then two point reads) and the model
// record (a seek for the latest version). Every catalog write other than a
// ledger append changes Catalog::write_generation(), and a lookup that sees
// a new generation empties the cache first, so a revoked key, a disabled,
// updated or deleted tenant, and an uploaded or deleted model take effect
// for the next request, as without the cache.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "base/status.h"
#include "storage/catalog.h"
#include "tenancy/tenants.h"

namespace orrery {

class CatalogCache {
 public:
  // At most `max_entries` of each kind; a full cache is emptied (the working
  // set of one server is far smaller).
  CatalogCache(const Catalog* catalog, const Tenants* tenants, size_t max_entries = 4096)
      : catalog_(catalog), tenants_(tenants), max_entries_(max_entries) {}

  // Tenants::Authenticate. A hit costs a SHA-256 of the key and a map lookup;
  // refusals are not cached.
  Result<TenantRecord> Authenticate(std::string_view api_key);
  // Catalog::GetModel (version 0 = the latest); NOT_FOUND is not cached.
  Result<ModelRecord> GetModel(const std::string& tenant_id, const std::string& name, uint64_t version);

  // Lookups answered from memory, for tests.
  uint64_t hits() const;

 private:
  // Empties the maps if the catalog changed since they were filled; false
  // when `generation` is older than what they hold (a lookup that raced a
  // write: it neither reads nor fills them).
  bool CurrentLocked(uint64_t generation);
  // `map`[key] if current, else load() (cached when OK and still current).
  template <typename T, typename Load>
  Result<T> Lookup(std::unordered_map<std::string, T>& map, const std::string& key, uint64_t generation, Load load);

  const Catalog* catalog_;
  const Tenants* tenants_;
  const size_t max_entries_;
  mutable std::mutex mu_;
  uint64_t generation_ = 0;                                   // of the entries below
  std::unordered_map<std::string, TenantRecord> by_key_;      // key digest -> tenant
  std::unordered_map<std::string, ModelRecord> models_;       // tenant \0 name \0 version
  uint64_t hits_ = 0;
};

}  // namespace orrery
