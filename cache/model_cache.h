// Host cache of compiled models, keyed by (tenant id, model name, version).
//
// v0: unbounded; a miss loads the model through ModelLoader (cache/
// model_loader.h: the ONNX from the catalog, packed weights from the
// version's segment when it has one; cost: one blob read, one segment read
// and CompiledModel::Compile). Concurrent misses on
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
#include "cache/model_loader.h"
#include "runtime/model.h"
#include "storage/catalog.h"

namespace orrery {

class ModelCache {
 public:
  using ModelPtr = std::shared_ptr<const CompiledModel>;

  // `segments` may be null (every miss compiles from the ONNX).
  // `packed_only_images`: ModelLoader's.
  explicit ModelCache(const Catalog* catalog, SegmentStore* segments = nullptr, bool packed_only_images = true)
      : loader_(catalog, segments, packed_only_images) {}

  // Returns the compiled model for `record`, compiling it on a miss.
  Result<ModelPtr> Get(const ModelRecord& record);
  // Inserts an already compiled model (e.g. right after an upload).
  void Put(const ModelRecord& record, ModelPtr model);
  // Drops every cached version of (tenant_id, name).
  void Erase(const std::string& tenant_id, const std::string& name);
  // Drops one cached version (evicted from the host tier).
  void EraseVersion(const std::string& tenant_id, const std::string& name, uint64_t version);
  // The cached model, or nullptr when absent or still loading. Never loads.
  ModelPtr Peek(const ModelRecord& record) const;

  size_t size() const;
  ModelLoader& loader() { return loader_; }
  const ModelLoader& loader() const { return loader_; }

 private:
  using Key = std::tuple<std::string, std::string, uint64_t>;
  using Entry = std::shared_future<Result<ModelPtr>>;

  ModelLoader loader_;
  mutable std::mutex mu_;
  std::map<Key, Entry> entries_;
};

}  // namespace orrery
