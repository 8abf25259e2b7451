#include "cache/model_cache.h"

#include <chrono>
#include <utility>

namespace orrery {

Result<ModelCache::ModelPtr> ModelCache::Get(const ModelRecord& record) {
  Key key{record.tenant_id(), record.name(), record.version()};
  std::promise<Result<ModelPtr>> promise;
  Entry entry;
  bool owner = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.find(key);
    if (it != entries_.end()) {
      entry = it->second;
    } else {
      entry = promise.get_future().share();
      entries_.emplace(key, entry);
      owner = true;
    }
  }
  if (!owner) return entry.get();

  // This thread compiles; concurrent callers wait on the shared future.
  Result<ModelPtr> result = [&]() -> Result<ModelPtr> {
    ORRERY_ASSIGN_OR_RETURN(std::unique_ptr<CompiledModel> model, loader_.Load(record));
    return ModelPtr(std::move(model));
  }();
  promise.set_value(result);
  if (!result.ok()) {
    // Do not cache failures: a later request may succeed (e.g. transient I/O).
    std::lock_guard<std::mutex> lock(mu_);
    entries_.erase(key);
  }
  return result;
}

void ModelCache::Put(const ModelRecord& record, ModelPtr model) {
  std::promise<Result<ModelPtr>> promise;
  promise.set_value(std::move(model));
  std::lock_guard<std::mutex> lock(mu_);
  entries_[Key{record.tenant_id(), record.name(), record.version()}] = promise.get_future().share();
}

void ModelCache::Erase(const std::string& tenant_id, const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.lower_bound(Key{tenant_id, name, 0});
  while (it != entries_.end() && std::get<0>(it->first) == tenant_id &&
         std::get<1>(it->first) == name) {
    it = entries_.erase(it);
  }
}

void ModelCache::EraseVersion(const std::string& tenant_id, const std::string& name, uint64_t version) {
  std::lock_guard<std::mutex> lock(mu_);
  entries_.erase(Key{tenant_id, name, version});
}

ModelCache::ModelPtr ModelCache::Peek(const ModelRecord& record) const {
  Entry entry;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.find(Key{record.tenant_id(), record.name(), record.version()});
    if (it == entries_.end()) return nullptr;
    entry = it->second;
  }
  if (entry.wait_for(std::chrono::seconds(0)) != std::future_status::ready) return nullptr;
  const Result<ModelPtr>& r = entry.get();
  return r.ok() ? *r : nullptr;
}

size_t ModelCache::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.size();
}

}  // namespace orrery
