// The billing ledger. Key layout (see README.md / docs/storage.md):
//   ledger  tenant_id \0 be64(unix_ms) \0 be64(seq)   -> LedgerEntry
//   meta    "ledger_seq"                              -> be64 last seq used
//           "ledger_rid/" tenant_id \0 request_id     -> the entry's ledger key
//           "ledger_total/" tenant_id                 -> LedgerTotals
// An append writes all four in one batch, so the request id index and the
// totals can never disagree with the entries, even after kill -9.
//
// Group commit: appends are serialized (seq, totals and the id check are
// read-modify-write) but the fsync is not: the batch is written to the WAL
// under the mutex without sync, and the WAL is synced after the mutex is
// released by Impl::SyncWalThrough, which lets one fsync cover every append
// written before it began: while it runs, new appends wait for it and then
// share the next one, so N concurrent appends cost about two fsyncs, not N
// (measured: tests/unit/storage/catalog_ledger_test.cc). AppendLedger
// returns only after the sync either way, unless
// Options::ledger_sync_interval_ms > 0: then it returns once the batch is
// written to the WAL file (RocksDB hands every write to the OS before
// Write() returns, as manual_wal_flush is off), which survives kill -9, and
// a background thread fsyncs the WAL each interval for power loss. An fsync
// costs ~60 us on an idle disk and milliseconds on a busy one, and every
// response waited for it.
#include <algorithm>
#include <chrono>

#include "storage/catalog_impl.h"

namespace orrery {
namespace {

constexpr char kLedgerSeqKey[] = "ledger_seq";

std::string LedgerRidKey(std::string_view tenant_id, std::string_view request_id) {
  std::string k = "ledger_rid/";
  k += tenant_id;
  k.push_back('\0');
  k += request_id;
  return k;
}

std::string LedgerTotalKey(std::string_view tenant_id) {
  std::string k = "ledger_total/";
  k += tenant_id;
  return k;
}

std::string LedgerKey(std::string_view tenant_id, int64_t unix_ms, uint64_t seq) {
  std::string k = ModelTenantPrefix(tenant_id);
  AppendU64Be(&k, static_cast<uint64_t>(std::max<int64_t>(unix_ms, 0)));
  k.push_back('\0');
  AppendU64Be(&k, seq);
  return k;
}

uint64_t DecodeU64Be(std::string_view s) {
  uint64_t v = 0;
  for (char c : s) v = (v << 8) | static_cast<unsigned char>(c);
  return v;
}

// The time an entry is keyed by when nothing set it: its end, else now.
int64_t KeyTimeMs(const LedgerEntry& e) { return e.end_unix_us() > 0 ? e.end_unix_us() / 1000 : NowUnixMs(); }

// The last journal seq whose entry is in the ledger (written in the same
// batch as the entries, so a replay after kill -9 skips exactly those).
constexpr char kJournalAppliedKey[] = "ledger_journal_applied";
constexpr char kJournalFile[] = "ledger.journal";

}  // namespace

// One ledger write of one or more entries, under ledger_mu: each gets the
// next seq, its key and request id index; the seq and each touched
// tenant's totals are written once, and the catalog's caches of them
// follow only once the write succeeded.
class Catalog::Impl::LedgerBatch {
 public:
  explicit LedgerBatch(Catalog::Impl* impl) : impl_(impl) {}

  // `entry` keyed at `unix_ms` (its unix_ms from now on), with the next seq.
  Status Add(LedgerEntry* entry, int64_t unix_ms) {
    if (!seq_) {
      if (!impl_->ledger_seq) {
        ORRERY_ASSIGN_OR_RETURN(impl_->ledger_seq, impl_->ReadMetaU64(kLedgerSeqKey, "get ledger seq"));
      }
      seq_ = *impl_->ledger_seq;
    }
    auto totals = totals_.find(entry->tenant_id());
    if (totals == totals_.end()) {
      auto cached = impl_->ledger_totals.find(entry->tenant_id());
      LedgerTotals start;
      if (cached != impl_->ledger_totals.end()) {
        start = cached->second;
      } else {
        ORRERY_ASSIGN_OR_RETURN(start, impl_->ReadLedgerTotals(entry->tenant_id()));
      }
      totals = totals_.emplace(entry->tenant_id(), std::move(start)).first;
    }
    const uint64_t seq = ++*seq_;
    entry->set_seq(seq);
    entry->set_unix_ms(unix_ms);
    LedgerTotals& t = totals->second;
    t.set_entries(t.entries() + 1);
    t.set_cost_micros(t.cost_micros() + entry->cost_micros());
    t.set_lane_ns(t.lane_ns() + entry->lane_ns());
    const std::string key = LedgerKey(entry->tenant_id(), unix_ms, seq);
    batch_.Put(impl_->cf[kLedger], key, entry->SerializeAsString());
    if (entry->kind() == LedgerEntry::INFERENCE) {
      batch_.Put(impl_->cf[kMeta], LedgerRidKey(entry->tenant_id(), entry->request_id()), key);
    }
    return Status::Ok();
  }

  void MarkJournalApplied(uint64_t journal_seq) { journal_applied_ = journal_seq; }

  Status Commit() {
    if (seq_) {
      std::string seq_bytes;
      AppendU64Be(&seq_bytes, *seq_);
      batch_.Put(impl_->cf[kMeta], kLedgerSeqKey, seq_bytes);
    }
    for (const auto& [tenant, totals] : totals_) {
      batch_.Put(impl_->cf[kMeta], LedgerTotalKey(tenant), totals.SerializeAsString());
    }
    if (journal_applied_) {
      std::string applied;
      AppendU64Be(&applied, *journal_applied_);
      batch_.Put(impl_->cf[kMeta], kJournalAppliedKey, applied);
    }
    if (batch_.Count() == 0) return Status::Ok();
    rocksdb::WriteOptions unsynced;  // the callers sync the WAL after the lock
    ORRERY_RETURN_IF_ERROR(FromRocks(impl_->db->Write(unsynced, &batch_), "append ledger entry"));
    if (seq_) impl_->ledger_seq = *seq_;
    for (auto& [tenant, totals] : totals_) impl_->ledger_totals[tenant] = std::move(totals);
    return Status::Ok();
  }

 private:
  Catalog::Impl* const impl_;
  rocksdb::WriteBatch batch_;
  std::optional<uint64_t> seq_;  // the last seq given out
  std::unordered_map<std::string, LedgerTotals> totals_;
  std::optional<uint64_t> journal_applied_;
};

Result<uint64_t> Catalog::Impl::ReadMetaU64(std::string_view key, std::string_view context) const {
  ORRERY_ASSIGN_OR_RETURN(std::optional<std::string> raw, Get(kMeta, key, context));
  return raw && raw->size() == 8 ? DecodeU64Be(*raw) : 0;
}

Result<LedgerTotals> Catalog::Impl::ReadLedgerTotals(std::string_view tenant_id) const {
  const std::string key = LedgerTotalKey(tenant_id);
  ORRERY_ASSIGN_OR_RETURN(std::optional<std::string> raw, Get(kMeta, key, "get ledger totals"));
  if (!raw) return LedgerTotals();
  return ParseRecord<LedgerTotals>(*raw, "ledger totals", key);
}

Status Catalog::Impl::OpenLedgerJournal() {
  const std::string path = dir + "/" + kJournalFile;
  ORRERY_ASSIGN_OR_RETURN(uint64_t applied, ReadMetaU64(kJournalAppliedKey, "get ledger journal mark"));
  ORRERY_ASSIGN_OR_RETURN(std::vector<LedgerJournal::Record> pending, LedgerJournal::Recover(path, applied));
  if (!pending.empty()) {
    ORRERY_RETURN_IF_ERROR(ApplyJournalRecords(pending));
    // Durable before the file that held them is replaced.
    ORRERY_RETURN_IF_ERROR(FromRocks(db->SyncWAL(), "sync recovered ledger entries"));
    applied = pending.back().seq;
    spdlog::info("catalog {}: moved {} ledger entries staged before a restart into the ledger", dir, pending.size());
  }
  if (options.ledger_journal_bytes > 0 && options.sync_writes && options.ledger_sync_interval_ms > 0) {
    ORRERY_ASSIGN_OR_RETURN(journal, LedgerJournal::Create(path, options.ledger_journal_bytes, applied + 1));
    return Status::Ok();
  }
  return LedgerJournal::Remove(path);
}

Status Catalog::Impl::ApplyJournalRecords(const std::vector<LedgerJournal::Record>& records) {
  std::lock_guard<std::mutex> lock(ledger_mu);
  LedgerBatch batch(this);
  for (const LedgerJournal::Record& r : records) {
    LedgerEntry entry;
    if (!entry.ParseFromString(r.payload) || entry.tenant_id().empty()) {
      // A record passed its crc, so this is a bug, not a torn write: the
      // rest must not wait behind it forever.
      spdlog::error("catalog {}: ledger journal record {} does not parse as a ledger entry; skipped", dir, r.seq);
      continue;
    }
    // Keyed at the time it was staged with (StageInJournal sets it).
    ORRERY_RETURN_IF_ERROR(batch.Add(&entry, entry.unix_ms() > 0 ? entry.unix_ms() : KeyTimeMs(entry)));
  }
  batch.MarkJournalApplied(records.back().seq);
  return batch.Commit();
}

Status Catalog::Impl::IngestJournal() {
  if (journal == nullptr) return Status::Ok();
  std::lock_guard<std::mutex> ingest(ingest_mu);
  LedgerJournal::Pending pending = journal->Take();
  ingest_nudged.store(false, std::memory_order_relaxed);
  if (pending.records.empty()) return Status::Ok();
  ORRERY_RETURN_IF_ERROR(ApplyJournalRecords(pending.records));
  journal->Consume(pending.end_pos);
  journal_ingests.fetch_add(1, std::memory_order_relaxed);
  return Status::Ok();
}

Result<bool> Catalog::Impl::StageInJournal(LedgerEntry* entry) {
  ORRERY_RETURN_IF_ERROR(CheckIdPart("tenant id", entry->tenant_id()));
  ORRERY_RETURN_IF_ERROR(CheckIdPart("request id", entry->request_id()));
  entry->set_seq(0);
  entry->set_unix_ms(KeyTimeMs(*entry));
  const std::string payload = entry->SerializeAsString();
  for (int attempt = 0; attempt < 2; ++attempt) {
    Result<LedgerJournal::Staged> staged = journal->Append(payload);
    if (staged.ok()) {
      journal_staged.fetch_add(1, std::memory_order_relaxed);
      // Half full: the background thread moves it now, not at its interval.
      if (staged->used_bytes > journal->capacity() / 2 && !ingest_nudged.exchange(true)) {
        {
          std::lock_guard<std::mutex> lock(syncer_mu);
          ingest_requested = true;
        }
        syncer_cv.notify_all();
      }
      return true;
    }
    if (staged.status().code() != StatusCode::kResourceExhausted) return staged.status();
    if (attempt == 0) ORRERY_RETURN_IF_ERROR(IngestJournal());
  }
  journal_full.fetch_add(1, std::memory_order_relaxed);
  return false;
}

Catalog::LedgerJournalStats Catalog::ledger_journal_stats() const {
  LedgerJournalStats s;
  if (impl_->journal == nullptr) return s;
  s.enabled = true;
  s.staged = impl_->journal_staged.load(std::memory_order_relaxed);
  s.ingests = impl_->journal_ingests.load(std::memory_order_relaxed);
  s.full = impl_->journal_full.load(std::memory_order_relaxed);
  s.used_bytes = impl_->journal->used_bytes();
  s.capacity_bytes = impl_->journal->capacity();
  return s;
}

Result<bool> Catalog::AppendLedger(LedgerEntry* entry, LedgerAppendOptions options) {
  if (impl_->journal != nullptr && options.new_request_id && entry->kind() == LedgerEntry::INFERENCE) {
    ORRERY_ASSIGN_OR_RETURN(bool staged, impl_->StageInJournal(entry));
    if (staged) return true;
  }
  // Staged entries go first, so the id check and the order see them.
  ORRERY_RETURN_IF_ERROR(impl_->IngestJournal());
  ORRERY_ASSIGN_OR_RETURN(bool written, AppendLedgerUnsynced(entry, options));
  // The stored entry a replay returns may itself still be unsynced (written
  // by a concurrent append), so both paths sync through everything written
  // so far before answering.
  if (SyncsEachLedgerAppend()) ORRERY_RETURN_IF_ERROR(SyncLedger());
  return written;
}

std::vector<Result<bool>> Catalog::AppendLedgerGroup(const std::vector<LedgerEntry*>& entries,
                                                      const std::vector<LedgerAppendOptions>& options) {
  std::vector<Result<bool>> out;
  out.reserve(entries.size());
  if (const Status ingested = impl_->IngestJournal(); !ingested.ok()) {
    out.assign(entries.size(), ingested);
    return out;
  }
  for (size_t i = 0; i < entries.size(); ++i) {
    out.push_back(AppendLedgerUnsynced(entries[i], i < options.size() ? options[i] : LedgerAppendOptions{}));
  }
  if (SyncsEachLedgerAppend()) {
    const Status synced = SyncLedger();
    if (!synced.ok()) {
      for (Result<bool>& r : out) {
        if (r.ok()) r = synced;
      }
    }
  }
  return out;
}

bool Catalog::SyncsEachLedgerAppend() const {
  return impl_->options.sync_writes && impl_->options.ledger_sync_interval_ms <= 0;
}

Status Catalog::SyncLedger() { return impl_->SyncWalThrough(impl_->db->GetLatestSequenceNumber()); }

void Catalog::Impl::StartLedgerSyncer() {
  ledger_syncer = std::thread([this] {
    const auto interval = std::chrono::milliseconds(options.ledger_sync_interval_ms);
    std::unique_lock<std::mutex> lock(syncer_mu);
    while (true) {
      syncer_cv.wait_for(lock, interval, [this] { return syncer_stop || ingest_requested; });
      if (syncer_stop) break;
      ingest_requested = false;
      lock.unlock();
      if (const Status s = IngestJournal(); !s.ok()) {
        spdlog::error("catalog {}: moving the ledger journal into the ledger: {}", dir, s.ToString());
      }
      // SyncWalThrough returns at once when nothing was written since the
      // last fsync, so an idle server issues none.
      const Status s = SyncWalThrough(db->GetLatestSequenceNumber());
      if (!s.ok()) spdlog::error("catalog {}: background ledger fsync: {}", dir, s.ToString());
      lock.lock();
    }
  });
}

void Catalog::Impl::StopLedgerSyncer() {
  if (!ledger_syncer.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(syncer_mu);
    syncer_stop = true;
  }
  syncer_cv.notify_all();
  ledger_syncer.join();
}

Status Catalog::Impl::SyncWalThrough(rocksdb::SequenceNumber seq) {
  std::unique_lock<std::mutex> lock(sync_mu);
  while (synced_seq < seq && syncing) sync_cv.wait(lock);
  if (synced_seq >= seq) return Status::Ok();
  syncing = true;
  // Every write up to here is already in the WAL file (unsynced writes go
  // straight to it), so this fsync makes all of them durable.
  const rocksdb::SequenceNumber covers = db->GetLatestSequenceNumber();
  lock.unlock();
  wal_syncs.fetch_add(1, std::memory_order_relaxed);
  const rocksdb::Status s = db->SyncWAL();
  lock.lock();
  syncing = false;
  if (s.ok()) synced_seq = std::max(synced_seq, covers);
  sync_cv.notify_all();
  return FromRocks(s, "sync ledger");
}

Result<bool> Catalog::AppendLedgerUnsynced(LedgerEntry* entry, LedgerAppendOptions options) {
  ORRERY_RETURN_IF_ERROR(CheckIdPart("tenant id", entry->tenant_id()));
  const bool inference = entry->kind() == LedgerEntry::INFERENCE;
  if (inference) ORRERY_RETURN_IF_ERROR(CheckIdPart("request id", entry->request_id()));
  std::lock_guard<std::mutex> lock(impl_->ledger_mu);
  if (inference && !options.new_request_id) {
    ORRERY_ASSIGN_OR_RETURN(std::optional<std::string> existing,
                            impl_->Get(kMeta, LedgerRidKey(entry->tenant_id(), entry->request_id()), "get ledger id"));
    if (existing) {
      ORRERY_ASSIGN_OR_RETURN(std::optional<std::string> raw, impl_->Get(kLedger, *existing, "get ledger entry"));
      if (!raw) return Status::DataLoss("ledger request id index points at a missing entry");
      ORRERY_ASSIGN_OR_RETURN(*entry, ParseRecord<LedgerEntry>(*raw, "ledger", *existing));
      return false;
    }
  }
  Impl::LedgerBatch batch(impl_.get());
  ORRERY_RETURN_IF_ERROR(batch.Add(entry, KeyTimeMs(*entry)));
  ORRERY_RETURN_IF_ERROR(batch.Commit());
  return true;
}

uint64_t Catalog::ledger_wal_syncs() const { return impl_->wal_syncs.load(std::memory_order_relaxed); }

Result<LedgerEntry> Catalog::GetLedgerEntry(std::string_view tenant_id, std::string_view request_id) const {
  ORRERY_RETURN_IF_ERROR(impl_->IngestJournal());  // staged entries are part of the ledger
  ORRERY_ASSIGN_OR_RETURN(std::optional<std::string> key,
                          impl_->Get(kMeta, LedgerRidKey(tenant_id, request_id), "get ledger id"));
  if (!key) return Status::NotFound("no ledger entry for request id '" + std::string(request_id) + "'");
  ORRERY_ASSIGN_OR_RETURN(std::optional<std::string> raw, impl_->Get(kLedger, *key, "get ledger entry"));
  if (!raw) return Status::DataLoss("ledger request id index points at a missing entry");
  return ParseRecord<LedgerEntry>(*raw, "ledger", *key);
}

Result<std::vector<LedgerEntry>> Catalog::ListLedger(std::string_view tenant_id, int64_t from_ms,
                                                     int64_t to_ms) const {
  ORRERY_RETURN_IF_ERROR(impl_->IngestJournal());  // staged entries are part of the ledger
  ORRERY_RETURN_IF_ERROR(CheckIdPart("tenant id", tenant_id));
  std::vector<LedgerEntry> out;
  ORRERY_RETURN_IF_ERROR(impl_->Scan(
      kLedger, ModelTenantPrefix(tenant_id), [&](std::string_view key, std::string_view value, bool* more) -> Status {
        ORRERY_ASSIGN_OR_RETURN(LedgerEntry e, ParseRecord<LedgerEntry>(value, "ledger", key));
        if (to_ms > 0 && e.unix_ms() >= to_ms) {
          *more = false;  // keys are in time order
          return Status::Ok();
        }
        if (e.unix_ms() >= from_ms) out.push_back(std::move(e));
        return Status::Ok();
      }));
  return out;
}

Result<std::vector<std::string>> Catalog::LedgerTenants() const {
  ORRERY_RETURN_IF_ERROR(impl_->IngestJournal());  // staged entries are part of the ledger
  std::vector<std::string> out;
  std::unique_ptr<rocksdb::Iterator> it(impl_->db->NewIterator(rocksdb::ReadOptions(), impl_->cf[kLedger]));
  for (it->SeekToFirst(); it->Valid();) {
    const std::string_view key(it->key().data(), it->key().size());
    const size_t nul = key.find('\0');
    if (nul == std::string_view::npos) return Status::DataLoss("malformed ledger key");
    out.emplace_back(key.substr(0, nul));
    it->Seek(PrefixEnd(ModelTenantPrefix(out.back())));  // skip to the next tenant
  }
  ORRERY_RETURN_IF_ERROR(FromRocks(it->status(), "scan ledger"));
  return out;
}

Result<LedgerTotals> Catalog::GetLedgerTotals(std::string_view tenant_id) const {
  ORRERY_RETURN_IF_ERROR(impl_->IngestJournal());  // staged entries are part of the ledger
  return impl_->ReadLedgerTotals(tenant_id);
}

}  // namespace orrery
