// Host cache of compiled models, keyed by (tenant id, model name, version).
//
// v0: unbounded; a miss reads the ONNX bytes from the catalog and compiles
// them (cost: one blob read + CompiledModel::Compile). Concurrent misses on
// the same key compile once; the others wait for that result. Entries are
// shared_ptrs, so a model evicted or deleted while a request runs stays alive
// until the request finishes. Thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <future>
#include <string>
#include <tuple>

#include "base/status.h"
#include "runtime/model.h"
#include "storage/catalog.h"

namespace orrery {

class ModelCache {
 public:
  using ModelPtr = std::shared_ptr<const CompiledModel>;

  explicit ModelCache(const Catalog* catalog) : catalog_(catalog) {}

  // Returns the compiled model for `record`, compiling it on a miss.
  Result<ModelPtr> Get(const ModelRecord& record);
  // Inserts an already compiled model (e.g. right after an upload).
  void Put(const ModelRecord& record, ModelPtr model);
  // Drops every cached version of (tenant_id, name).
  void Erase(const std::string& tenant_id, const std::string& name);

  size_t size() const;

 private:
  using Key = std::tuple<std::string, std::string, uint64_t>;
  using Entry = std::shared_future<Result<ModelPtr>>;

  const Catalog* catalog_;
  mutable std::mutex mu_;
  std::map<Key, Entry> entries_;
};

}  // namespace orrery
