// The durable catalog: one RocksDB database per server holding tenants, API
// key digests, model records and the ONNX bytes of every model version.
//
// Column families: meta (schema version), tenants, keys, models, blobs,
// uploads (idempotent upload ids), cost_profiles (calibration of each model
// version, written after upload) and ledger (billing entries). README.md has the key
// layout.
// Every change that touches several keys is one WriteBatch; writes that are
// acknowledged to clients use sync=true (WAL fsync) so they survive kill -9
// and power loss (ledger appends with Options::ledger_sync_interval_ms > 0:
// kill -9 only, fsynced within the interval).
// All methods are thread-safe. Costs: reads are point lookups or prefix scans;
// PutModel writes the whole ONNX blob once (blob files keep it out of the LSM).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "storage/proto/catalog.pb.h"

namespace orrery {

using storage::ApiKeyRecord;
using storage::CostProfileRecord;
using storage::LedgerEntry;
using storage::LedgerTotals;
using storage::ModelRecord;
using storage::TenantRecord;

struct LedgerAppendOptions {
  // The caller made the request id up and it is unique (never stored
  // before): the lookup for an earlier entry with that id is skipped (a
  // RocksDB read, ~5% of a small inference's serving CPU). The id index is
  // still written.
  bool new_request_id = false;
};

class Catalog {
 public:
  // 1: tenants, keys, models, blobs. 2: + uploads, cost_profiles, ledger CFs
  // and the per-tenant key index (built from the keys CF by the migration).
  static constexpr uint32_t kSchemaVersion = 2;

  struct Options {
    bool sync_writes = true;  // fsync the WAL before acknowledging a write
    // Ledger appends only (with sync_writes): 0 = AppendLedger returns once
    // the WAL is fsynced (power-loss safe). > 0 = it returns once the batch
    // is written to the OS (write(2): survives kill -9 of this process, not
    // power loss), and a background thread fsyncs the WAL every this many
    // ms, so a power loss can lose the entries of about the last interval.
    int64_t ledger_sync_interval_ms = 0;
    // With ledger_sync_interval_ms > 0 (and sync_writes): > 0 = AppendLedger
    // stages an INFERENCE entry whose request id the caller made up in a
    // journal of this many bytes (storage/ledger_journal.h, a file in the
    // catalog's directory) and returns: a copy into a shared file mapping,
    // which survives kill -9 as the WAL write did, at a fraction of its
    // cost. The background thread moves staged entries into the ledger each
    // interval (one write for all) before its fsync, so power loss loses
    // about the last interval, as before; every ledger read moves them
    // first, so readers never miss one. 0 = off. Open recovers whatever a
    // killed process staged either way.
    size_t ledger_journal_bytes = 0;
    bool repair_on_open = true;  // run Fsck(repair=true) in Open (tests turn it off to inspect)
  };

  // Opens or creates the database in `dir` (created if missing). Fails with
  // FAILED_PRECONDITION if the stored schema version is newer than this build
  // or the directory is already open (in this or another process).
  static Result<std::unique_ptr<Catalog>> Open(const std::string& dir, Options options);
  static Result<std::unique_ptr<Catalog>> Open(const std::string& dir) { return Open(dir, Options{}); }
  ~Catalog();

  uint32_t schema_version() const;
  // Changes (grows) with every committed write other than a ledger append:
  // tenants, keys, models, cost profiles. A cache of catalog reads is
  // current while this is what it was before the reads (api/catalog_cache.h).
  // Cost: one atomic load.
  uint64_t write_generation() const;

  // ---- tenants and keys
  // Stores the tenant and its first key atomically. ALREADY_EXISTS if a
  // tenant with the same name exists. `key_digest` is the raw SHA-256 digest.
  Status CreateTenant(const TenantRecord& tenant, std::string_view key_digest,
                      const ApiKeyRecord& key);
  Result<TenantRecord> GetTenant(std::string_view tenant_id) const;   // NOT_FOUND
  Result<TenantRecord> GetTenantByName(std::string_view name) const;  // NOT_FOUND
  Result<std::vector<TenantRecord>> ListTenants() const;              // by name
  Result<ApiKeyRecord> GetKey(std::string_view key_digest) const;     // NOT_FOUND
  // Sets TenantRecord.disabled (disabled tenants fail authentication). NOT_FOUND.
  Status SetTenantDisabled(std::string_view tenant_id, bool disabled);
  // Replaces the stored record of tenant.id() (name and created time are kept
  // from the stored record; they are immutable). NOT_FOUND.
  Status UpdateTenant(const TenantRecord& tenant);
  // One batch: every model version, blob, upload id and key of the tenant and
  // its name index go; the record stays as a tombstone (deleted_unix_ms set),
  // invisible to GetTenant/GetTenantByName/ListTenants, visible to
  // GetTenantTombstone. Cost: one prefix scan per CF. NOT_FOUND.
  Status DeleteTenant(std::string_view tenant_id);
  Result<TenantRecord> GetTenantTombstone(std::string_view tenant_id) const;  // NOT_FOUND

  // Adds another key for an existing tenant (record + per-tenant index, one
  // batch). NOT_FOUND for an unknown tenant, ALREADY_EXISTS for a known digest.
  Status AddKey(std::string_view key_digest, const ApiKeyRecord& key);
  // The tenant's keys by key id (records only; digests are never returned).
  Result<std::vector<ApiKeyRecord>> ListKeys(std::string_view tenant_id) const;
  // Removes the key (record and index, one batch). NOT_FOUND if the tenant has
  // no such key id.
  Status RevokeKey(std::string_view tenant_id, std::string_view key_id);

  // ---- models
  // Limits checked by PutModel under the write lock, so concurrent uploads
  // cannot together pass them. 0 = unlimited.
  struct ModelLimits {
    uint64_t max_models = 0;       // distinct names; a new version of a stored name does not count
    uint64_t max_total_bytes = 0;  // sum of size_bytes over every stored version
  };
  struct PutResult {
    bool replayed = false;  // record->upload_id was already stored: *record is that earlier result
  };
  // Assigns the next version for (tenant_id, name) into record->version and
  // stores record, blob and (if record->upload_id() is set) the upload id in
  // one batch. Also sets record->size_bytes to the blob size and
  // created_unix_ms to now if it is 0. If the tenant already stored an upload
  // with the same upload id and name, nothing is written and *record becomes
  // the stored record (replayed); the same id for another name is
  // ALREADY_EXISTS. RESOURCE_EXHAUSTED naming the limit ("max_models",
  // "max_total_bytes") when over one. NOT_FOUND if the tenant does not exist;
  // INVALID_ARGUMENT for an empty tenant id / name or one with NUL.
  Result<PutResult> PutModel(ModelRecord* record, std::string_view onnx_bytes, const ModelLimits& limits);
  Status PutModel(ModelRecord* record, std::string_view onnx_bytes) {
    return PutModel(record, onnx_bytes, ModelLimits{}).status();
  }
  // The stored result of an earlier upload with this id. NOT_FOUND if none
  // (or its version has since been deleted).
  Result<ModelRecord> GetUpload(std::string_view tenant_id, std::string_view upload_id) const;

  struct Usage {
    uint64_t models = 0;       // distinct names
    uint64_t versions = 0;
    uint64_t total_bytes = 0;  // sum of size_bytes
  };
  // Cost: one prefix scan over the tenant's model records.
  Result<Usage> TenantUsage(std::string_view tenant_id) const;
  // version 0 = latest. NOT_FOUND if absent.
  Result<ModelRecord> GetModel(std::string_view tenant_id, std::string_view name,
                               uint64_t version = 0) const;
  // Every version of every model of the tenant, by (name, version).
  Result<std::vector<ModelRecord>> ListModels(std::string_view tenant_id) const;
  // version 0 = latest. NOT_FOUND if absent.
  Result<std::string> GetModelBlob(std::string_view tenant_id, std::string_view name,
                                   uint64_t version) const;
  // version 0 = all versions. Records, blobs and upload ids go in one batch.
  // Returns the deleted versions. NOT_FOUND if nothing matched.
  Result<std::vector<uint64_t>> DeleteModelVersions(std::string_view tenant_id, std::string_view name,
                                                    uint64_t version = 0);
  Status DeleteModel(std::string_view tenant_id, std::string_view name, uint64_t version = 0) {
    return DeleteModelVersions(tenant_id, name, version).status();
  }

  // ---- cost profiles (calibration; key = the model version's key)
  // Stores the profile of (tenant_id, name, version) from the record's
  // fields, replacing an earlier one. NOT_FOUND when that model version is
  // not stored (checked under the model write lock, so a profile never
  // outlives its model's deletion).
  Status PutCostProfile(const CostProfileRecord& profile);
  // NOT_FOUND if the version has none (not calibrated yet, or deleted).
  Result<CostProfileRecord> GetCostProfile(std::string_view tenant_id, std::string_view name, uint64_t version) const;
  // Every stored profile, for loading the cost model at start-up. Cost: one
  // scan of the CF.
  Result<std::vector<CostProfileRecord>> ListCostProfiles() const;

  // ---- ledger (billing); README.md has the key layout
  // Appends `entry` for entry->tenant_id() with a fresh seq and key time
  // entry->end_unix_us() / 1000 (now if 0), and adds it to the tenant's
  // LedgerTotals, in one synced batch. An INFERENCE entry whose
  // (tenant, request_id) is already in the ledger is not written again:
  // *entry becomes the stored one and the result is false (true = written).
  // INVALID_ARGUMENT for an empty tenant id, or an INFERENCE entry without a
  // request id. Returns once the WAL is fsynced (also when nothing was
  // written), or with Options::ledger_sync_interval_ms > 0 once it is
  // written to the OS (the background fsync follows within the interval),
  // or with the journal (Options::ledger_journal_bytes) and
  // options.new_request_id once it is staged there: *entry then has its
  // unix_ms but no seq yet (0; it gets one when moved into the ledger).
  // Appends are serialized among themselves, not with model or tenant
  // writes; concurrent appends share fsyncs (group commit).
  Result<bool> AppendLedger(LedgerEntry* entry, LedgerAppendOptions options = {});
  // AppendLedger for each of `entries` (with options[i]; results in order),
  // then one WAL fsync through all of them where AppendLedger would fsync:
  // for a single writer that queues appends and commits them in groups
  // (api/ledger_writer.h). A failed fsync fails every entry of the group.
  std::vector<Result<bool>> AppendLedgerGroup(const std::vector<LedgerEntry*>& entries,
                                              const std::vector<LedgerAppendOptions>& options);
  // Fsyncs the WAL through every write made so far (what the background
  // syncer does each interval); returns at once when nothing is unsynced.
  Status SyncLedger();
  // WAL fsyncs issued by ledger appends since Open (fewer than the appends
  // when they overlap: group commit).
  uint64_t ledger_wal_syncs() const;
  // The ledger journal (Options::ledger_journal_bytes): entries staged,
  // moved into the ledger in how many ingests, and appends that found it
  // full after an ingest (written directly).
  struct LedgerJournalStats {
    bool enabled = false;
    uint64_t staged = 0;
    uint64_t ingests = 0;
    uint64_t full = 0;
    size_t used_bytes = 0;
    size_t capacity_bytes = 0;
  };
  LedgerJournalStats ledger_journal_stats() const;
  // The stored entry of (tenant, request id). NOT_FOUND.
  Result<LedgerEntry> GetLedgerEntry(std::string_view tenant_id, std::string_view request_id) const;
  // The tenant's entries with from_ms <= unix_ms < to_ms (to_ms 0 = no upper
  // bound), in time order. Cost: one prefix scan over that range.
  Result<std::vector<LedgerEntry>> ListLedger(std::string_view tenant_id, int64_t from_ms, int64_t to_ms) const;
  // Every tenant id that has ledger entries (also deleted tenants).
  Result<std::vector<std::string>> LedgerTenants() const;
  // The running totals of every entry ever appended for the tenant (zero if none).
  Result<LedgerTotals> GetLedgerTotals(std::string_view tenant_id) const;

  // ---- consistency
  struct FsckReport {
    uint64_t orphan_blobs = 0;         // blob without a model record
    uint64_t records_without_blob = 0;
    uint64_t dangling_uploads = 0;     // upload id pointing at no model record
    uint64_t dangling_key_index = 0;   // key index entry without its key (or the reverse)
    bool clean() const {
      return orphan_blobs == 0 && records_without_blob == 0 && dangling_uploads == 0 && dangling_key_index == 0;
    }
  };
  // Scans models, blobs, uploads and keys for entries that a multi-key batch
  // should never leave behind; with `repair`, deletes the orphans (one batch)
  // and drops records whose blob is gone. Open() runs it with repair=true and
  // logs anything found. Cost: a full scan of the keys of those CFs (blob
  // values are not read).
  Result<FsckReport> Fsck(bool repair);

  Catalog(const Catalog&) = delete;
  Catalog& operator=(const Catalog&) = delete;

 private:
  struct Impl;
  explicit Catalog(std::unique_ptr<Impl> impl);
  // AppendLedger without the WAL sync (the ids checked, then written).
  Result<bool> AppendLedgerUnsynced(LedgerEntry* entry, LedgerAppendOptions options);
  // Whether every ledger append is fsynced before it returns
  // (ledger_sync_interval_ms <= 0 with sync_writes).
  bool SyncsEachLedgerAppend() const;

  std::unique_ptr<Impl> impl_;
};

}  // namespace orrery
