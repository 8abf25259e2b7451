// The ledger journal: a memory-mapped ring file where a lane stages a
// billing entry in well under a microsecond, instead of a RocksDB write
// (~13 us warm, ~38 us after a run has evicted RocksDB from the caches:
// 6% of a lane's time at half of a one-layer model's capacity, and time
// every queued request waits for). The catalog moves staged entries into
// RocksDB in groups (Catalog::Options::ledger_journal_bytes).
//
// Why it is as durable as the unsynced WAL write it replaces: stores into a
// MAP_SHARED file mapping are in the page cache at once, so an entry
// appended before the answer survives kill -9 of the process (the kernel
// writes the pages back); power loss is covered as before, by the catalog
// moving entries into RocksDB and fsyncing its WAL each sync interval.
//
// Layout: a 4 KiB header (magic, capacity, where the consumed records end)
// then `capacity` bytes of records, each 16-byte aligned: u32 length, u32
// crc32c (of the seq's 8 bytes and the payload), u64 seq, payload. Seqs
// rise by one per record across the file's life; a record that would
// cross the end leaves a wrap marker (length 0xffffffff, the next seq, crc
// of the seq) and starts at the beginning. Recovery reads from the
// consumed end while each record's length and crc hold and its seq follows
// the one before, so a torn write or a record of an earlier lap ends it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "storage/file_util.h"

namespace orrery {

class LedgerJournal {
 public:
  struct Record {
    uint64_t seq = 0;
    std::string payload;
  };

  // The records of the journal at `path` with seq > `after_seq`, in order
  // (what a killed process staged and its catalog had not yet applied).
  // No file: none. A file whose header is not a journal's (a crash while
  // it was being created): none, with a warning. Reads only (pread).
  static Result<std::vector<Record>> Recover(const std::string& path, uint64_t after_seq);

  // Replaces the file at `path` with an empty journal of `capacity` bytes of
  // records (rounded up to 4 KiB, at least 64 KiB) whose first record gets
  // seq `first_seq`, and maps it. The caller applied everything Recover
  // returned first (and made it durable).
  static Result<std::unique_ptr<LedgerJournal>> Create(const std::string& path, size_t capacity, uint64_t first_seq);
  // Removes the file at `path` (none there: OK), as a catalog with the
  // journal off does once it applied what Recover returned.
  static Status Remove(const std::string& path);

  ~LedgerJournal();

  // Stages one record: a copy into the mapping, O(payload). Returns its seq
  // and the bytes now staged (used_bytes()), RESOURCE_EXHAUSTED when the
  // unconsumed records leave no room (nothing written: consume, then
  // retry), INVALID_ARGUMENT for an empty payload or one over a quarter of
  // the capacity. Thread-safe (one short mutex).
  struct Staged {
    uint64_t seq = 0;
    size_t used_bytes = 0;
  };
  Result<Staged> Append(std::string_view payload);

  // The staged records not yet consumed, in order (copies), and the position
  // just past the last of them for Consume. Thread-safe with Append.
  struct Pending {
    std::vector<Record> records;
    uint64_t end_pos = 0;
  };
  Pending Take() const;
  // Marks everything before `end_pos` (from Take) consumed: its space is
  // reused and a recovery starts after it.
  void Consume(uint64_t end_pos);

  size_t capacity() const { return capacity_; }
  // Bytes staged and not yet consumed (wrap markers' waste included).
  size_t used_bytes() const;

  LedgerJournal(const LedgerJournal&) = delete;
  LedgerJournal& operator=(const LedgerJournal&) = delete;

 private:
  LedgerJournal(UniqueFd fd, std::byte* map, size_t capacity, uint64_t next_seq);

  const UniqueFd fd_;  // kept open with the mapping
  std::byte* const map_;  // header page + capacity_ bytes
  const size_t capacity_;
  mutable std::mutex mu_;
  uint64_t head_ = 0;  // monotonic position where the next record goes
  uint64_t tail_ = 0;  // monotonic position of the first unconsumed record
  uint64_t next_seq_;
};

}  // namespace orrery
