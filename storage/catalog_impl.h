// Internals of the catalog shared by its .cc files (not a public header).
// Key layout and locking are described at the top of catalog.cc.
#pragma once

#include <array>
#include <functional>
#include <memory>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include <rocksdb/cache.h>
#include <rocksdb/db.h>
#include <rocksdb/write_batch.h>
#include <spdlog/spdlog.h>

#include "storage/catalog.h"
#include "storage/ledger_journal.h"

namespace orrery {
namespace catalog_detail {


enum Cf : size_t { kMeta = 0, kTenants, kKeys, kModels, kBlobs, kUploads, kCostProfiles, kLedger, kNumCfs };
constexpr std::array<const char*, kNumCfs> kCfNames = {"meta",    "tenants", "keys",          "models",
                                                       "blobs",   "uploads", "cost_profiles", "ledger"};

constexpr char kSchemaVersionKey[] = "schema_version";
constexpr std::string_view kTenantIdPrefix = "id/";
constexpr std::string_view kTenantNamePrefix = "name/";
constexpr std::string_view kTenantKeyIndexPrefix = "key/";
constexpr size_t kDigestSize = 32;

// ---- status mapping

inline Status FromRocks(const rocksdb::Status& s, std::string_view context) {
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

inline std::string EncodeU32Le(uint32_t v) {
  std::string out(4, '\0');
  for (int i = 0; i < 4; ++i) out[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  return out;
}

inline std::optional<uint32_t> DecodeU32Le(std::string_view s) {
  if (s.size() != 4) return std::nullopt;
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(static_cast<unsigned char>(s[i])) << (8 * i);
  return v;
}

inline void AppendU64Be(std::string* out, uint64_t v) {
  for (int i = 7; i >= 0; --i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

inline std::string TenantIdKey(std::string_view id) {
  std::string k(kTenantIdPrefix);
  k += id;
  return k;
}

inline std::string TenantNameKey(std::string_view name) {
  std::string k(kTenantNamePrefix);
  k += name;
  return k;
}

inline std::string ModelTenantPrefix(std::string_view tenant_id) {
  std::string k(tenant_id);
  k.push_back('\0');
  return k;
}

inline std::string ModelNamePrefix(std::string_view tenant_id, std::string_view name) {
  std::string k = ModelTenantPrefix(tenant_id);
  k += name;
  k.push_back('\0');
  return k;
}

inline std::string ModelKey(std::string_view tenant_id, std::string_view name, uint64_t version) {
  std::string k = ModelNamePrefix(tenant_id, name);
  AppendU64Be(&k, version);
  return k;
}

// tenants CF: "key/" tenant_id \0 key_id -> raw key digest (per-tenant index
// of the keys CF, so that listing or revoking needs no full scan).
inline std::string KeyIndexPrefix(std::string_view tenant_id) {
  std::string k(kTenantKeyIndexPrefix);
  k += tenant_id;
  k.push_back('\0');
  return k;
}

inline std::string KeyIndexKey(std::string_view tenant_id, std::string_view key_id) {
  std::string k = KeyIndexPrefix(tenant_id);
  k += key_id;
  return k;
}

// uploads CF: tenant_id \0 upload_id -> models-CF key of the stored version.
inline std::string UploadKey(std::string_view tenant_id, std::string_view upload_id) {
  std::string k = ModelTenantPrefix(tenant_id);
  k += upload_id;
  return k;
}

// meta CF: "next_version/" tenant_id \0 name -> be64 next version. Versions
// are never reused, even after the latest (or every) version is deleted, so
// a client pinned to a version number never silently gets other bytes.
inline std::string NextVersionPrefix(std::string_view tenant_id) {
  std::string k = "next_version/";
  k += tenant_id;
  k.push_back('\0');
  return k;
}

inline std::string NextVersionKey(std::string_view tenant_id, std::string_view name) {
  std::string k = NextVersionPrefix(tenant_id);
  k += name;
  return k;
}

// Smallest key greater than every key starting with `prefix`. Our prefixes
// all end in '\0' or an ASCII char, so incrementing the last byte suffices;
// the general case (trailing 0xff) drops those bytes first.
inline std::string PrefixEnd(std::string prefix) {
  while (!prefix.empty() && static_cast<unsigned char>(prefix.back()) == 0xff) prefix.pop_back();
  if (!prefix.empty()) prefix.back() = static_cast<char>(static_cast<unsigned char>(prefix.back()) + 1);
  return prefix;
}

inline Status CheckIdPart(std::string_view what, std::string_view value) {
  if (value.empty()) return Status::InvalidArgument(std::string(what) + " must not be empty");
  if (value.find('\0') != std::string_view::npos) {
    return Status::InvalidArgument(std::string(what) + " must not contain NUL bytes");
  }
  return Status::Ok();
}

template <typename T>
inline Result<T> ParseRecord(std::string_view bytes, std::string_view what, std::string_view key) {
  T record;
  if (!record.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    std::string printable;
    for (char c : key) printable += (c == '\0') ? '/' : c;
    return Status::DataLoss("corrupt " + std::string(what) + " record at key '" + printable + "'");
  }
  return record;
}

inline int64_t NowUnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace catalog_detail

using namespace catalog_detail;  // NOLINT: internal header, catalog .cc files only

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
  // Serializes ledger appends (seq, request id index and totals are
  // read-modify-write); independent of write_mu, which they never touch.
  mutable std::mutex ledger_mu;
  // Under ledger_mu: the last seq and the totals of each tenant appended to,
  // as last written; read from the database on an append's first use and
  // updated after each successful write, so that an append reads neither
  // back (appends are their only writers).
  std::optional<uint64_t> ledger_seq;
  std::unordered_map<std::string, LedgerTotals> ledger_totals;
  // Group commit of ledger appends: one WAL fsync covers every write made
  // before it started, and callers whose write is already covered (or will be
  // by the fsync in progress... after it ends) do not issue one of their own.
  // RocksDB's SyncWAL alone serializes concurrent callers, one fsync each.
  std::mutex sync_mu;
  std::condition_variable sync_cv;
  bool syncing = false;                // an fsync is in progress (under sync_mu)
  rocksdb::SequenceNumber synced_seq = 0;  // every write up to it is durable
  std::atomic<uint64_t> wal_syncs{0};      // fsyncs issued by SyncWalThrough
  // Blocks until every write with sequence <= `seq` is in a synced WAL.
  Status SyncWalThrough(rocksdb::SequenceNumber seq);

  // Options::ledger_sync_interval_ms > 0: the thread that moves the
  // journal's entries into the ledger and fsyncs the WAL each interval
  // (catalog_ledger.cc). Stopped before the database closes.
  std::thread ledger_syncer;
  std::mutex syncer_mu;
  std::condition_variable syncer_cv;
  bool syncer_stop = false;       // under syncer_mu
  bool ingest_requested = false;  // under syncer_mu: the journal is half full
  std::atomic<bool> ingest_nudged{false};  // a request is out since the last ingest
  void StartLedgerSyncer();
  void StopLedgerSyncer();

  // Options::ledger_journal_bytes > 0: where AppendLedger stages entries
  // with server-made request ids (storage/ledger_journal.h); null = off.
  std::unique_ptr<LedgerJournal> journal;
  class LedgerBatch;  // one ledger write (catalog_ledger.cc)
  // One ingest at a time (taken before ledger_mu).
  std::mutex ingest_mu;
  std::atomic<uint64_t> journal_staged{0};
  std::atomic<uint64_t> journal_ingests{0};
  std::atomic<uint64_t> journal_full{0};
  // Recovers what a killed process staged (into the ledger, WAL synced),
  // then starts a fresh journal when enabled (Open).
  Status OpenLedgerJournal();
  // Moves every staged entry into the ledger in one unsynced write.
  Status IngestJournal();
  // Stages an INFERENCE entry with a server-made request id; false = the
  // journal stayed full after an ingest (the caller appends directly).
  Result<bool> StageInJournal(LedgerEntry* entry);
  // A be64 in the meta CF (0 when absent), e.g. the last ledger seq.
  Result<uint64_t> ReadMetaU64(std::string_view key, std::string_view context) const;
  // A tenant's stored ledger totals (zero if none), read from the database.
  Result<LedgerTotals> ReadLedgerTotals(std::string_view tenant_id) const;
  // The ledger entries of `records` (journal payloads) in one write, with
  // the last record's seq as the journal's applied mark.
  Status ApplyJournalRecords(const std::vector<LedgerJournal::Record>& records);

  ~Impl() {
    StopLedgerSyncer();
    if (!db) return;
    if (const Status s = IngestJournal(); !s.ok()) {
      spdlog::error("catalog {}: moving the ledger journal on close: {}", dir, s.ToString());
    }
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

  // Every write but ledger appends goes through here.
  Status Write(rocksdb::WriteBatch* batch, std::string_view context) {
    Status s = FromRocks(db->Write(WriteOpts(), batch), context);
    write_generation.fetch_add(1, std::memory_order_acq_rel);  // even on failure: cheap and safe
    return s;
  }
  std::atomic<uint64_t> write_generation{0};

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

  // The stored result of (tenant, upload id), or nullopt.
  Result<std::optional<ModelRecord>> FindUpload(std::string_view tenant_id, std::string_view upload_id) const {
    ORRERY_ASSIGN_OR_RETURN(std::optional<std::string> model_key,
                            Get(kUploads, UploadKey(tenant_id, upload_id), "get upload"));
    if (!model_key) return std::optional<ModelRecord>();
    ORRERY_ASSIGN_OR_RETURN(std::optional<std::string> raw, Get(kModels, *model_key, "get model"));
    if (!raw) return std::optional<ModelRecord>();
    ORRERY_ASSIGN_OR_RETURN(ModelRecord rec, ParseRecord<ModelRecord>(*raw, "model", *model_key));
    return std::optional<ModelRecord>(std::move(rec));
  }

  Result<Catalog::Usage> TenantUsage(std::string_view tenant_id) const {
    Catalog::Usage usage;
    std::string last_name;
    ORRERY_RETURN_IF_ERROR(Scan(kModels, ModelTenantPrefix(tenant_id),
                                [&](std::string_view key, std::string_view value, bool*) -> Status {
                                  ORRERY_ASSIGN_OR_RETURN(ModelRecord rec,
                                                          ParseRecord<ModelRecord>(value, "model", key));
                                  if (usage.versions == 0 || rec.name() != last_name) ++usage.models;
                                  last_name = rec.name();
                                  ++usage.versions;
                                  usage.total_bytes += rec.size_bytes();
                                  return Status::Ok();
                                }));
    return usage;
  }

  // The live tenant (tombstones count as absent unless `with_tombstones`).
  Result<std::optional<TenantRecord>> FindTenant(std::string_view tenant_id, bool with_tombstones = false) const {
    const std::string key = TenantIdKey(tenant_id);
    ORRERY_ASSIGN_OR_RETURN(std::optional<std::string> raw, Get(kTenants, key, "get tenant"));
    if (!raw) return std::optional<TenantRecord>();
    ORRERY_ASSIGN_OR_RETURN(TenantRecord rec, ParseRecord<TenantRecord>(*raw, "tenant", key));
    if (rec.deleted_unix_ms() != 0 && !with_tombstones) return std::optional<TenantRecord>();
    return std::optional<TenantRecord>(std::move(rec));
  }

  Status InitSchema();  // catalog.cc
};

}  // namespace orrery
