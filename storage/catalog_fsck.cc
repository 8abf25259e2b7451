// Catalog consistency check and start-up recovery. See Catalog::Fsck.
#include <mutex>
#include <optional>
#include <set>

#include "storage/catalog_impl.h"

namespace orrery {
namespace {

// Every key of one CF (values are not read, so blob files stay untouched).
Result<std::vector<std::string>> AllKeys(rocksdb::DB* db, rocksdb::ColumnFamilyHandle* cf) {
  std::vector<std::string> keys;
  std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(rocksdb::ReadOptions(), cf));
  for (it->SeekToFirst(); it->Valid(); it->Next()) keys.emplace_back(it->key().data(), it->key().size());
  ORRERY_RETURN_IF_ERROR(FromRocks(it->status(), "fsck scan"));
  return keys;
}

}  // namespace

Result<Catalog::FsckReport> Catalog::Fsck(bool repair) {
  // Held so that no writer adds a record between the scans below.
  std::lock_guard<std::mutex> lock(impl_->write_mu);
  rocksdb::DB* db = impl_->db.get();
  const auto& cf = impl_->cf;
  FsckReport report;
  rocksdb::WriteBatch batch;

  // models <-> blobs: both sorted by the same key, so a merge finds the
  // differences.
  ORRERY_ASSIGN_OR_RETURN(std::vector<std::string> models, AllKeys(db, cf[kModels]));
  ORRERY_ASSIGN_OR_RETURN(std::vector<std::string> blobs, AllKeys(db, cf[kBlobs]));
  std::set<std::string> dropped_models;
  size_t m = 0, b = 0;
  while (m < models.size() || b < blobs.size()) {
    if (b == blobs.size() || (m < models.size() && models[m] < blobs[b])) {
      ++report.records_without_blob;
      batch.Delete(cf[kModels], models[m]);
      dropped_models.insert(models[m]);
      ++m;
    } else if (m == models.size() || blobs[b] < models[m]) {
      ++report.orphan_blobs;
      batch.Delete(cf[kBlobs], blobs[b]);
      ++b;
    } else {
      ++m;
      ++b;
    }
  }

  // uploads -> models
  {
    std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(rocksdb::ReadOptions(), cf[kUploads]));
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      const std::string target = it->value().ToString();
      ORRERY_ASSIGN_OR_RETURN(std::optional<std::string> rec, impl_->Get(kModels, target, "fsck get model"));
      if (!rec || dropped_models.count(target)) {
        ++report.dangling_uploads;
        batch.Delete(cf[kUploads], it->key());
      }
    }
    ORRERY_RETURN_IF_ERROR(FromRocks(it->status(), "fsck scan uploads"));
  }

  // key index <-> keys
  std::set<std::string> indexed_digests;
  ORRERY_RETURN_IF_ERROR(impl_->Scan(kTenants, std::string(kTenantKeyIndexPrefix),
                                     [&](std::string_view key, std::string_view digest, bool*) -> Status {
                                       ORRERY_ASSIGN_OR_RETURN(std::optional<std::string> rec,
                                                               impl_->Get(kKeys, digest, "fsck get key"));
                                       if (!rec) {
                                         ++report.dangling_key_index;
                                         batch.Delete(cf[kTenants], rocksdb::Slice(key.data(), key.size()));
                                       } else {
                                         indexed_digests.emplace(digest);
                                       }
                                       return Status::Ok();
                                     }));
  {
    std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(rocksdb::ReadOptions(), cf[kKeys]));
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      const std::string digest = it->key().ToString();
      if (indexed_digests.count(digest)) continue;
      ++report.dangling_key_index;
      ORRERY_ASSIGN_OR_RETURN(ApiKeyRecord key,
                              ParseRecord<ApiKeyRecord>(it->value().ToString(), "API key", "<digest>"));
      batch.Put(cf[kTenants], KeyIndexKey(key.tenant_id(), key.key_id()), digest);
    }
    ORRERY_RETURN_IF_ERROR(FromRocks(it->status(), "fsck scan keys"));
  }

  if (repair && batch.Count() > 0) ORRERY_RETURN_IF_ERROR(impl_->Write(&batch, "fsck repair"));
  return report;
}

}  // namespace orrery
