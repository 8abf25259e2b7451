// RocksDB-backed catalog. See catalog.h and README.md.
//
// Key layout (all column families use the default bytewise comparator):
//   meta     "schema_version"                 -> uint32, 4 bytes little-endian
//   tenants  "id/"   + tenant_id              -> TenantRecord
//            "name/" + tenant_name            -> tenant_id (secondary index;
//                                                written in the same batch)
//   keys     raw 32-byte SHA-256 of the key   -> ApiKeyRecord
//   models   tenant_id \0 name \0 be64(ver)   -> ModelRecord
//   blobs    same key as models               -> ONNX bytes (blob files)
//
// Tenant ids and model names never contain '\0' (checked here), so the prefix
// `tenant_id \0` selects exactly one tenant's models (a tenant id that is a
// prefix of another cannot match), and the big-endian version makes a prefix
// scan return (name, version) order.
//
// Writers that read-then-write (CreateTenant, PutModel, DeleteModel, ...) are
// serialized by one mutex, so name uniqueness and version assignment are
// race-free. Readers never take it.
#include "storage/catalog.h"

#include <algorithm>
#include <filesystem>
#include <utility>

#include <rocksdb/options.h>
#include <rocksdb/table.h>

#include "storage/catalog_impl.h"

namespace orrery {
namespace {

// ---- schema migrations
//
// kMigrations[v] upgrades a database at schema version v to v + 1: it adds its
// changes to `batch`, which is committed together with the new version number.
// Index 0 is unused (no database is ever at version 0). To change the schema:
// bump Catalog::kSchemaVersion and append the function for the old version.
using MigrationFn = Status (*)(rocksdb::DB* db, const std::array<rocksdb::ColumnFamilyHandle*, kNumCfs>& cfs,
                               rocksdb::WriteBatch* batch);

// 1 -> 2: the uploads, cost_profiles and ledger CFs appear by themselves
// (create_missing_column_families); what needs writing is the per-tenant key
// index ("key/" tenant_id \0 key_id -> digest in the tenants CF), built from
// every record in the keys CF.
Status MigrateAddKeyIndex(rocksdb::DB* db, const std::array<rocksdb::ColumnFamilyHandle*, kNumCfs>& cfs,
                          rocksdb::WriteBatch* batch) {
  std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(rocksdb::ReadOptions(), cfs[kKeys]));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    const std::string_view digest(it->key().data(), it->key().size());
    ORRERY_ASSIGN_OR_RETURN(ApiKeyRecord key,
                            ParseRecord<ApiKeyRecord>(std::string_view(it->value().data(), it->value().size()),
                                                      "API key", "<digest>"));
    batch->Put(cfs[kTenants], KeyIndexKey(key.tenant_id(), key.key_id()),
               rocksdb::Slice(digest.data(), digest.size()));
  }
  return FromRocks(it->status(), "scan keys");
}

constexpr std::array<MigrationFn, Catalog::kSchemaVersion> kMigrations = {
    nullptr,             // 0 -> 1: not a real version
    MigrateAddKeyIndex,  // 1 -> 2
};

}  // namespace

Status Catalog::Impl::InitSchema() {
  ORRERY_ASSIGN_OR_RETURN(std::optional<std::string> raw, Get(kMeta, kSchemaVersionKey, "read schema version"));
  if (!raw) {
    rocksdb::WriteBatch batch;
    batch.Put(cf[kMeta], kSchemaVersionKey, EncodeU32Le(kSchemaVersion));
    ORRERY_RETURN_IF_ERROR(Write(&batch, "write schema version"));
    schema_version = kSchemaVersion;
    return Status::Ok();
  }
  std::optional<uint32_t> stored = DecodeU32Le(*raw);
  if (!stored || *stored == 0) {
    return Status::DataLoss("catalog at " + dir + ": invalid schema version record");
  }
  if (*stored > kSchemaVersion) {
    return Status::FailedPrecondition("catalog at " + dir + " has schema version " + std::to_string(*stored) +
                                      ", newer than this build supports (" + std::to_string(kSchemaVersion) +
                                      "); upgrade Orrery or restore an older data directory");
  }
  for (uint32_t v = *stored; v < kSchemaVersion; ++v) {
    MigrationFn fn = kMigrations[v];
    if (fn == nullptr) {
      return Status::Internal("catalog at " + dir + ": no migration from schema version " + std::to_string(v));
    }
    rocksdb::WriteBatch batch;
    ORRERY_RETURN_IF_ERROR(fn(db.get(), cf, &batch).WithPrefix("migrate schema " + std::to_string(v)));
    batch.Put(cf[kMeta], kSchemaVersionKey, EncodeU32Le(v + 1));
    ORRERY_RETURN_IF_ERROR(Write(&batch, "migrate schema"));
    spdlog::info("catalog {}: migrated schema {} -> {}", dir, v, v + 1);
  }
  schema_version = kSchemaVersion;
  return Status::Ok();
}

Catalog::Catalog(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Catalog::~Catalog() = default;

Result<std::unique_ptr<Catalog>> Catalog::Open(const std::string& dir, Options options) {
  if (dir.empty()) return Status::InvalidArgument("catalog directory must not be empty");
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Status::Unavailable("create catalog directory " + dir + ": " + ec.message());

  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->dir = dir;

  // Small-footprint tuning: the catalog holds little besides model blobs, so
  // cap memtables and share one small block cache across column families.
  rocksdb::DBOptions db_opts;
  db_opts.create_if_missing = true;
  db_opts.create_missing_column_families = true;
  db_opts.db_write_buffer_size = 64 << 20;  // all memtables together
  db_opts.max_total_wal_size = 64 << 20;    // flush idle CFs so old WALs can go
  db_opts.max_background_jobs = 2;
  db_opts.keep_log_file_num = 3;
  db_opts.max_log_file_size = 4 << 20;
  db_opts.info_log_level = rocksdb::InfoLogLevel::WARN_LEVEL;

  impl->block_cache = rocksdb::NewLRUCache(8 << 20);
  rocksdb::BlockBasedTableOptions table_opts;
  table_opts.block_cache = impl->block_cache;
  rocksdb::ColumnFamilyOptions base_cf;
  base_cf.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table_opts));
  base_cf.write_buffer_size = 4 << 20;
  base_cf.max_write_buffer_number = 2;

  rocksdb::ColumnFamilyOptions blob_cf = base_cf;
  blob_cf.write_buffer_size = 32 << 20;  // a model upload lands here before flush
  blob_cf.enable_blob_files = true;
  blob_cf.min_blob_size = 4096;
  blob_cf.blob_file_size = 256 << 20;
  blob_cf.blob_compression_type = rocksdb::kNoCompression;  // ONNX weights barely compress
  blob_cf.enable_blob_garbage_collection = true;             // reclaim deleted models

  // Open every CF that exists on disk (a newer build may have added some, and
  // RocksDB refuses to open a DB without all of them) plus ours.
  std::vector<std::string> names = {rocksdb::kDefaultColumnFamilyName};
  std::vector<std::string> existing;
  if (rocksdb::DB::ListColumnFamilies(db_opts, dir, &existing).ok()) {
    for (const std::string& n : existing) {
      if (std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
    }
  }
  for (const char* n : kCfNames) {
    if (std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
  }
  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
  for (const std::string& n : names) {
    descriptors.emplace_back(n, n == kCfNames[kBlobs] ? blob_cf : base_cf);
  }

  rocksdb::DB* raw_db = nullptr;
  rocksdb::Status s = rocksdb::DB::Open(db_opts, dir, descriptors, &impl->handles, &raw_db);
  if (!s.ok()) {
    const std::string text = s.ToString();
    if (s.IsIOError() && (text.find("lock") != std::string::npos || text.find("LOCK") != std::string::npos)) {
      return Status::FailedPrecondition("catalog at " + dir +
                                        " is locked (is another orrery server using this data directory?): " +
                                        text);
    }
    return FromRocks(s, "open catalog at " + dir);
  }
  impl->db.reset(raw_db);
  for (size_t i = 0; i < names.size(); ++i) {
    for (size_t c = 0; c < kNumCfs; ++c) {
      if (names[i] == kCfNames[c]) impl->cf[c] = impl->handles[i];
    }
  }
  ORRERY_RETURN_IF_ERROR(impl->InitSchema());
  ORRERY_RETURN_IF_ERROR(impl->OpenLedgerJournal());
  if (options.sync_writes && options.ledger_sync_interval_ms > 0) impl->StartLedgerSyncer();
  auto catalog = std::unique_ptr<Catalog>(new Catalog(std::move(impl)));
  if (!options.repair_on_open) return catalog;
  // Start-up recovery. Every multi-key change is one WriteBatch, so this
  // should find nothing; it is cheap (keys only) and makes the promise
  // checkable (the crash test asserts a clean report).
  ORRERY_ASSIGN_OR_RETURN(FsckReport report, catalog->Fsck(/*repair=*/true));
  if (!report.clean()) {
    spdlog::warn("catalog {}: recovery removed {} orphan blobs, {} records without blob, {} dangling upload ids, "
                 "{} dangling key index entries",
                 dir, report.orphan_blobs, report.records_without_blob, report.dangling_uploads,
                 report.dangling_key_index);
  }
  return catalog;
}

uint32_t Catalog::schema_version() const { return impl_->schema_version; }

uint64_t Catalog::write_generation() const { return impl_->write_generation.load(std::memory_order_acquire); }

}  // namespace orrery
