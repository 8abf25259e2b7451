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

template <typename T, typename Load>
Result<T> CatalogCache::Lookup(std::unordered_map<std::string, T>& map, const std::string& key, uint64_t generation,
                               Load load) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (CurrentLocked(generation)) {
      if (auto it = map.find(key); it != map.end()) {
        ++hits_;
        return it->second;
      }
    }
  }
  Result<T> loaded = load();
  if (!loaded.ok()) return loaded;
  std::lock_guard<std::mutex> lock(mu_);
  if (CurrentLocked(generation) && generation == generation_) {
    if (map.size() >= max_entries_) map.clear();
    map.emplace(key, *loaded);
  }
  return loaded;
}

Result<TenantRecord> CatalogCache::Authenticate(std::string_view api_key) {
  if (api_key.empty()) return tenants_->Authenticate(api_key);
  // Read before the catalog: a write after it makes the entry stale, and
  // then the generation has moved on (see write_generation()).
  const uint64_t generation = catalog_->write_generation();
  // Keyed by the digest: no plaintext key is kept in memory.
  return Lookup(by_key_, Sha256(api_key), generation, [&] { return tenants_->Authenticate(api_key); });
}

Result<ModelRecord> CatalogCache::GetModel(const std::string& tenant_id, const std::string& name, uint64_t version) {
  const uint64_t generation = catalog_->write_generation();
  return Lookup(models_, ModelCacheKey(tenant_id, name, version), generation,
                [&] { return catalog_->GetModel(tenant_id, name, version); });
}

}  // namespace orrery
