#include "api/catalog_cache.h"

#include "tenancy/api_key.h"

namespace orrery {
namespace {

std::string ModelCacheKey(const std::string& tenant_id, const std::string& name, uint64_t version) {
  std::string k = tenant_id;
  k.push_back('\0');
  k += name;
  k.push_back('\0');
  k += std::to_string(version);
  return k;
}

// Looks `key` up in `map` if the cache is current; counts a hit.
template <typename Map>
const typename Map::mapped_type* Find(const Map& map, const std::string& key) {
  auto it = map.find(key);
  return it == map.end() ? nullptr : &it->second;
}

}  // namespace

bool CatalogCache::CurrentLocked(uint64_t generation) {
  if (generation < generation_) return false;
  if (generation > generation_) {
    by_key_.clear();
    models_.clear();
    generation_ = generation;
  }
  return true;
}

uint64_t CatalogCache::hits() const {
  std::lock_guard<std::mutex> lock(mu_);
  return hits_;
}

Result<TenantRecord> CatalogCache::Authenticate(std::string_view api_key) {
  if (api_key.empty()) return tenants_->Authenticate(api_key);
  // Read before the catalog: a write after it makes the entry stale, and
  // then the generation has moved on (see write_generation()).
  const uint64_t generation = catalog_->write_generation();
  const std::string digest = Sha256(api_key);  // no plaintext key kept in memory
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (CurrentLocked(generation)) {
      if (const TenantRecord* t = Find(by_key_, digest)) {
        ++hits_;
        return *t;
      }
    }
  }
  Result<TenantRecord> tenant = tenants_->Authenticate(api_key);
  if (!tenant.ok()) return tenant;
  std::lock_guard<std::mutex> lock(mu_);
  if (CurrentLocked(generation) && generation == generation_) {
    if (by_key_.size() >= max_entries_) by_key_.clear();
    by_key_.emplace(digest, *tenant);
  }
  return tenant;
}

Result<ModelRecord> CatalogCache::GetModel(const std::string& tenant_id, const std::string& name, uint64_t version) {
  const uint64_t generation = catalog_->write_generation();
  const std::string key = ModelCacheKey(tenant_id, name, version);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (CurrentLocked(generation)) {
      if (const ModelRecord* m = Find(models_, key)) {
        ++hits_;
        return *m;
      }
    }
  }
  Result<ModelRecord> record = catalog_->GetModel(tenant_id, name, version);
  if (!record.ok()) return record;
  std::lock_guard<std::mutex> lock(mu_);
  if (CurrentLocked(generation) && generation == generation_) {
    if (models_.size() >= max_entries_) models_.clear();
    models_.emplace(key, *record);
  }
  return record;
}

}  // namespace orrery
