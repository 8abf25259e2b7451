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
#include <array>
#include <chrono>
#include <filesystem>
#include <functional>
#include <mutex>
#include <optional>
#include <utility>

#include <rocksdb/cache.h>
#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <rocksdb/table.h>
#include <rocksdb/write_batch.h>
#include <spdlog/spdlog.h>

namespace orrery {
namespace {

enum Cf : size_t { kMeta = 0, kTenants, kKeys, kModels, kBlobs, kNumCfs };
constexpr std::array<const char*, kNumCfs> kCfNames = {"meta", "tenants", "keys", "models", "blobs"};

constexpr char kSchemaVersionKey[] = "schema_version";
constexpr std::string_view kTenantIdPrefix = "id/";
constexpr std::string_view kTenantNamePrefix = "name/";
constexpr size_t kDigestSize = 32;

// ---- status mapping

Status FromRocks(const rocksdb::Status& s, std::string_view context) {
  if (s.ok()) return Status::Ok();
  std::string msg(context);
  msg += ": ";
  msg += s.ToString();
  if (s.IsNotFound()) return Status::NotFound(std::move(msg));
  if (s.IsCorruption()) return Status::DataLoss(std::move(msg));
  if (s.IsNoSpace()) return Status::ResourceExhausted(std::move(msg));
  if (s.IsIOError() || s.IsBusy() || s.IsTimedOut() || s.IsTryAgain() || s.IsIncomplete()) {
    return Status::Unavailable(std::move(msg));
  }
  return Status::Internal(std::move(msg));
}

// ---- encodings

std::string EncodeU32Le(uint32_t v) {
  std::string out(4, '\0');
  for (int i = 0; i < 4; ++i) out[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  return out;
}

std::optional<uint32_t> DecodeU32Le(std::string_view s) {
  if (s.size() != 4) return std::nullopt;
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(static_cast<unsigned char>(s[i])) << (8 * i);
  return v;
}

void AppendU64Be(std::string* out, uint64_t v) {
  for (int i = 7; i >= 0; --i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

std::string TenantIdKey(std::string_view id) {
  std::string k(kTenantIdPrefix);
  k += id;
  return k;
}

std::string TenantNameKey(std::string_view name) {
  std::string k(kTenantNamePrefix);
  k += name;
  return k;
}

std::string ModelTenantPrefix(std::string_view tenant_id) {
  std::string k(tenant_id);
  k.push_back('\0');
  return k;
}

std::string ModelNamePrefix(std::string_view tenant_id, std::string_view name) {
  std::string k = ModelTenantPrefix(tenant_id);
  k += name;
  k.push_back('\0');
  return k;
}

std::string ModelKey(std::string_view tenant_id, std::string_view name, uint64_t version) {
  std::string k = ModelNamePrefix(tenant_id, name);
  AppendU64Be(&k, version);
  return k;
}

// Smallest key greater than every key starting with `prefix`. Our prefixes
// all end in '\0' or an ASCII char, so incrementing the last byte suffices;
// the general case (trailing 0xff) drops those bytes first.
std::string PrefixEnd(std::string prefix) {
  while (!prefix.empty() && static_cast<unsigned char>(prefix.back()) == 0xff) prefix.pop_back();
  if (!prefix.empty()) prefix.back() = static_cast<char>(static_cast<unsigned char>(prefix.back()) + 1);
  return prefix;
}

Status CheckIdPart(std::string_view what, std::string_view value) {
  if (value.empty()) return Status::InvalidArgument(std::string(what) + " must not be empty");
  if (value.find('\0') != std::string_view::npos) {
    return Status::InvalidArgument(std::string(what) + " must not contain NUL bytes");
  }
  return Status::Ok();
}

template <typename T>
Result<T> ParseRecord(std::string_view bytes, std::string_view what, std::string_view key) {
  T record;
  if (!record.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    std::string printable;
    for (char c : key) printable += (c == '\0') ? '/' : c;
    return Status::DataLoss("corrupt " + std::string(what) + " record at key '" + printable + "'");
  }
  return record;
}

int64_t NowUnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// ---- schema migrations
//
// kMigrations[v] upgrades a database at schema version v to v + 1: it adds its
// changes to `batch`, which is committed together with the new version number.
// Index 0 is unused (no database is ever at version 0). To change the schema:
// bump Catalog::kSchemaVersion and append the function for the old version.
using MigrationFn = Status (*)(rocksdb::DB* db, const std::array<rocksdb::ColumnFamilyHandle*, kNumCfs>& cfs,
                               rocksdb::WriteBatch* batch);
constexpr std::array<MigrationFn, Catalog::kSchemaVersion> kMigrations = {
    nullptr,  // 0 -> 1: not a real version
};

}  // namespace

struct Catalog::Impl {
  Options options;
  std::string dir;
  std::shared_ptr<rocksdb::Cache> block_cache;
  std::unique_ptr<rocksdb::DB> db;
  std::vector<rocksdb::ColumnFamilyHandle*> handles;  // every opened CF, owned
  std::array<rocksdb::ColumnFamilyHandle*, kNumCfs> cf{};
  uint32_t schema_version = 0;
  // Serializes read-modify-write operations (see the top of this file).
  mutable std::mutex write_mu;

  ~Impl() {
    if (!db) return;
    rocksdb::Status s = db->FlushWAL(/*sync=*/true);
    if (!s.ok()) spdlog::warn("catalog {}: FlushWAL on close: {}", dir, s.ToString());
    for (rocksdb::ColumnFamilyHandle* h : handles) {
      s = db->DestroyColumnFamilyHandle(h);
      if (!s.ok()) spdlog::warn("catalog {}: closing column family: {}", dir, s.ToString());
    }
    handles.clear();
    s = db->Close();
    if (!s.ok()) spdlog::warn("catalog {}: close: {}", dir, s.ToString());
    db.reset();
  }

  rocksdb::WriteOptions WriteOpts() const {
    rocksdb::WriteOptions wo;
    wo.sync = options.sync_writes;
    return wo;
  }

  Status Write(rocksdb::WriteBatch* batch, std::string_view context) {
    return FromRocks(db->Write(WriteOpts(), batch), context);
  }

  // Point lookup; nullopt when absent.
  Result<std::optional<std::string>> Get(Cf which, std::string_view key, std::string_view context) const {
    rocksdb::PinnableSlice value;
    rocksdb::Status s = db->Get(rocksdb::ReadOptions(), cf[which], rocksdb::Slice(key.data(), key.size()), &value);
    if (s.IsNotFound()) return std::optional<std::string>();
    if (!s.ok()) return FromRocks(s, context);
    return std::optional<std::string>(value.ToString());
  }

  // Calls fn(key, value) for every key starting with `prefix`, in order.
  // fn returns false to stop early.
  Status Scan(Cf which, const std::string& prefix,
              const std::function<Status(std::string_view, std::string_view, bool*)>& fn) const {
    const std::string upper = PrefixEnd(prefix);
    rocksdb::Slice lower_slice(prefix);
    rocksdb::Slice upper_slice(upper);
    rocksdb::ReadOptions ro;
    ro.iterate_lower_bound = &lower_slice;
    if (!upper.empty()) ro.iterate_upper_bound = &upper_slice;
    std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(ro, cf[which]));
    for (it->Seek(lower_slice); it->Valid(); it->Next()) {
      bool more = true;
      ORRERY_RETURN_IF_ERROR(fn(std::string_view(it->key().data(), it->key().size()),
                                std::string_view(it->value().data(), it->value().size()), &more));
      if (!more) break;
    }
    return FromRocks(it->status(), "catalog scan");
  }

  // Latest version of (tenant, name), or nullopt.
  Result<std::optional<ModelRecord>> LatestModel(std::string_view tenant_id, std::string_view name) const {
    const std::string prefix = ModelNamePrefix(tenant_id, name);
    const std::string upper = PrefixEnd(prefix);
    rocksdb::Slice lower_slice(prefix);
    rocksdb::Slice upper_slice(upper);
    rocksdb::ReadOptions ro;
    ro.iterate_lower_bound = &lower_slice;
    ro.iterate_upper_bound = &upper_slice;
    std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(ro, cf[kModels]));
    it->SeekToLast();
    if (!it->Valid()) {
      ORRERY_RETURN_IF_ERROR(FromRocks(it->status(), "catalog scan"));
      return std::optional<ModelRecord>();
    }
    const std::string_view key(it->key().data(), it->key().size());
    ORRERY_ASSIGN_OR_RETURN(ModelRecord rec,
                            ParseRecord<ModelRecord>(std::string_view(it->value().data(), it->value().size()),
                                                     "model", key));
    return std::optional<ModelRecord>(std::move(rec));
  }

  Result<std::optional<TenantRecord>> FindTenant(std::string_view tenant_id) const {
    const std::string key = TenantIdKey(tenant_id);
    ORRERY_ASSIGN_OR_RETURN(std::optional<std::string> raw, Get(kTenants, key, "get tenant"));
    if (!raw) return std::optional<TenantRecord>();
    ORRERY_ASSIGN_OR_RETURN(TenantRecord rec, ParseRecord<TenantRecord>(*raw, "tenant", key));
    return std::optional<TenantRecord>(std::move(rec));
  }

  Status InitSchema() {
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
};

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
  return std::unique_ptr<Catalog>(new Catalog(std::move(impl)));
}

uint32_t Catalog::schema_version() const { return impl_->schema_version; }

// ---- tenants and keys

Status Catalog::CreateTenant(const TenantRecord& tenant, std::string_view key_digest, const ApiKeyRecord& key) {
  ORRERY_RETURN_IF_ERROR(CheckIdPart("tenant id", tenant.id()));
  ORRERY_RETURN_IF_ERROR(CheckIdPart("tenant name", tenant.name()));
  if (key_digest.size() != kDigestSize) {
    return Status::InvalidArgument("API key digest must be " + std::to_string(kDigestSize) + " bytes");
  }
  if (key.tenant_id() != tenant.id()) {
    return Status::InvalidArgument("API key record belongs to tenant '" + key.tenant_id() + "', not '" +
                                   tenant.id() + "'");
  }
  const std::string name_key = TenantNameKey(tenant.name());
  const std::string id_key = TenantIdKey(tenant.id());

  std::lock_guard<std::mutex> lock(impl_->write_mu);
  ORRERY_ASSIGN_OR_RETURN(std::optional<std::string> by_name, impl_->Get(kTenants, name_key, "get tenant"));
  if (by_name) return Status::AlreadyExists("tenant '" + tenant.name() + "' already exists");
  ORRERY_ASSIGN_OR_RETURN(std::optional<std::string> by_id, impl_->Get(kTenants, id_key, "get tenant"));
  if (by_id) return Status::AlreadyExists("tenant id '" + tenant.id() + "' already exists");
  ORRERY_ASSIGN_OR_RETURN(std::optional<std::string> existing_key, impl_->Get(kKeys, key_digest, "get key"));
  if (existing_key) return Status::AlreadyExists("API key already exists");

  rocksdb::WriteBatch batch;
  batch.Put(impl_->cf[kTenants], id_key, tenant.SerializeAsString());
  batch.Put(impl_->cf[kTenants], name_key, tenant.id());
  batch.Put(impl_->cf[kKeys], rocksdb::Slice(key_digest.data(), key_digest.size()), key.SerializeAsString());
  return impl_->Write(&batch, "create tenant");
}

Result<TenantRecord> Catalog::GetTenant(std::string_view tenant_id) const {
  ORRERY_ASSIGN_OR_RETURN(std::optional<TenantRecord> rec, impl_->FindTenant(tenant_id));
  if (!rec) return Status::NotFound("tenant '" + std::string(tenant_id) + "' not found");
  return std::move(*rec);
}

Result<TenantRecord> Catalog::GetTenantByName(std::string_view name) const {
  const std::string name_key = TenantNameKey(name);
  ORRERY_ASSIGN_OR_RETURN(std::optional<std::string> id, impl_->Get(kTenants, name_key, "get tenant"));
  if (!id) return Status::NotFound("tenant '" + std::string(name) + "' not found");
  ORRERY_ASSIGN_OR_RETURN(std::optional<TenantRecord> rec, impl_->FindTenant(*id));
  if (!rec) return Status::DataLoss("tenant name index points at missing tenant '" + *id + "'");
  return std::move(*rec);
}

Result<std::vector<TenantRecord>> Catalog::ListTenants() const {
  std::vector<TenantRecord> out;
  ORRERY_RETURN_IF_ERROR(impl_->Scan(
      kTenants, std::string(kTenantNamePrefix), [&](std::string_view key, std::string_view id, bool*) -> Status {
        ORRERY_ASSIGN_OR_RETURN(std::optional<TenantRecord> rec, impl_->FindTenant(id));
        if (!rec) {
          return Status::DataLoss("tenant name index '" + std::string(key) + "' points at missing tenant '" +
                                  std::string(id) + "'");
        }
        out.push_back(std::move(*rec));
        return Status::Ok();
      }));
  return out;
}

Status Catalog::SetTenantDisabled(std::string_view tenant_id, bool disabled) {
  std::lock_guard<std::mutex> lock(impl_->write_mu);
  ORRERY_ASSIGN_OR_RETURN(std::optional<TenantRecord> rec, impl_->FindTenant(tenant_id));
  if (!rec) return Status::NotFound("tenant '" + std::string(tenant_id) + "' not found");
  rec->set_disabled(disabled);
  rocksdb::WriteBatch batch;
  batch.Put(impl_->cf[kTenants], TenantIdKey(tenant_id), rec->SerializeAsString());
  return impl_->Write(&batch, "update tenant");
}

Result<ApiKeyRecord> Catalog::GetKey(std::string_view key_digest) const {
  ORRERY_ASSIGN_OR_RETURN(std::optional<std::string> raw, impl_->Get(kKeys, key_digest, "get key"));
  if (!raw) return Status::NotFound("API key not found");
  return ParseRecord<ApiKeyRecord>(*raw, "API key", "<digest>");
}

// ---- models

Status Catalog::PutModel(ModelRecord* record, std::string_view onnx_bytes) {
  if (record == nullptr) return Status::InvalidArgument("PutModel: null record");
  ORRERY_RETURN_IF_ERROR(CheckIdPart("tenant id", record->tenant_id()));
  ORRERY_RETURN_IF_ERROR(CheckIdPart("model name", record->name()));

  std::lock_guard<std::mutex> lock(impl_->write_mu);
  ORRERY_ASSIGN_OR_RETURN(std::optional<TenantRecord> tenant, impl_->FindTenant(record->tenant_id()));
  if (!tenant) return Status::NotFound("tenant '" + record->tenant_id() + "' not found");
  ORRERY_ASSIGN_OR_RETURN(std::optional<ModelRecord> latest, impl_->LatestModel(record->tenant_id(), record->name()));

  ModelRecord rec = *record;
  rec.set_version(latest ? latest->version() + 1 : 1);
  rec.set_size_bytes(onnx_bytes.size());
  if (rec.created_unix_ms() == 0) rec.set_created_unix_ms(NowUnixMs());
  const std::string key = ModelKey(rec.tenant_id(), rec.name(), rec.version());

  rocksdb::WriteBatch batch;
  batch.Put(impl_->cf[kModels], key, rec.SerializeAsString());
  batch.Put(impl_->cf[kBlobs], key, rocksdb::Slice(onnx_bytes.data(), onnx_bytes.size()));
  ORRERY_RETURN_IF_ERROR(impl_->Write(&batch, "put model"));
  *record = std::move(rec);
  return Status::Ok();
}

Result<ModelRecord> Catalog::GetModel(std::string_view tenant_id, std::string_view name, uint64_t version) const {
  ORRERY_RETURN_IF_ERROR(CheckIdPart("tenant id", tenant_id));
  ORRERY_RETURN_IF_ERROR(CheckIdPart("model name", name));
  if (version == 0) {
    ORRERY_ASSIGN_OR_RETURN(std::optional<ModelRecord> latest, impl_->LatestModel(tenant_id, name));
    if (!latest) return Status::NotFound("model '" + std::string(name) + "' not found");
    return std::move(*latest);
  }
  const std::string key = ModelKey(tenant_id, name, version);
  ORRERY_ASSIGN_OR_RETURN(std::optional<std::string> raw, impl_->Get(kModels, key, "get model"));
  if (!raw) {
    return Status::NotFound("model '" + std::string(name) + "' version " + std::to_string(version) + " not found");
  }
  return ParseRecord<ModelRecord>(*raw, "model", key);
}

Result<std::vector<ModelRecord>> Catalog::ListModels(std::string_view tenant_id) const {
  ORRERY_RETURN_IF_ERROR(CheckIdPart("tenant id", tenant_id));
  std::vector<ModelRecord> out;
  ORRERY_RETURN_IF_ERROR(impl_->Scan(kModels, ModelTenantPrefix(tenant_id),
                                     [&](std::string_view key, std::string_view value, bool*) -> Status {
                                       ORRERY_ASSIGN_OR_RETURN(ModelRecord rec,
                                                               ParseRecord<ModelRecord>(value, "model", key));
                                       out.push_back(std::move(rec));
                                       return Status::Ok();
                                     }));
  return out;
}

Result<std::string> Catalog::GetModelBlob(std::string_view tenant_id, std::string_view name,
                                          uint64_t version) const {
  ORRERY_RETURN_IF_ERROR(CheckIdPart("tenant id", tenant_id));
  ORRERY_RETURN_IF_ERROR(CheckIdPart("model name", name));
  if (version == 0) {
    ORRERY_ASSIGN_OR_RETURN(ModelRecord latest, GetModel(tenant_id, name, 0));
    version = latest.version();
  }
  const std::string key = ModelKey(tenant_id, name, version);
  ORRERY_ASSIGN_OR_RETURN(std::optional<std::string> raw, impl_->Get(kBlobs, key, "get model blob"));
  if (!raw) {
    return Status::NotFound("model '" + std::string(name) + "' version " + std::to_string(version) + " not found");
  }
  return std::move(*raw);
}

Status Catalog::DeleteModel(std::string_view tenant_id, std::string_view name, uint64_t version) {
  ORRERY_RETURN_IF_ERROR(CheckIdPart("tenant id", tenant_id));
  ORRERY_RETURN_IF_ERROR(CheckIdPart("model name", name));
  std::lock_guard<std::mutex> lock(impl_->write_mu);
  std::vector<std::string> keys;
  if (version != 0) {
    std::string key = ModelKey(tenant_id, name, version);
    ORRERY_ASSIGN_OR_RETURN(std::optional<std::string> raw, impl_->Get(kModels, key, "get model"));
    if (raw) keys.push_back(std::move(key));
  } else {
    ORRERY_RETURN_IF_ERROR(impl_->Scan(kModels, ModelNamePrefix(tenant_id, name),
                                       [&](std::string_view key, std::string_view, bool*) -> Status {
                                         keys.emplace_back(key);
                                         return Status::Ok();
                                       }));
  }
  if (keys.empty()) {
    std::string what = "model '" + std::string(name) + "'";
    if (version != 0) what += " version " + std::to_string(version);
    return Status::NotFound(what + " not found");
  }
  rocksdb::WriteBatch batch;
  for (const std::string& key : keys) {
    batch.Delete(impl_->cf[kModels], key);
    batch.Delete(impl_->cf[kBlobs], key);
  }
  return impl_->Write(&batch, "delete model");
}

}  // namespace orrery
