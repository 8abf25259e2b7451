// The inference ledger's writer: appends billing entries on a thread of its
// own, in groups, and runs each entry's continuation (the request's answer)
// once its group is written. So no lane or gRPC thread ever waits on the
// disk, and an answered request is still billed: its answer leaves only
// after its entry is in the WAL (written to the OS, which survives kill -9;
// fsynced first with Catalog ledger_sync_interval_ms 0).
//
// Why: a lane used to append the entry itself before answering. An append
// is a RocksDB write under the catalog's ledger mutex; under disk load (a
// build writing object files to the same disk) a write(2) to the WAL can
// block for milliseconds to seconds (dirty-page throttling), and meanwhile
// the lane ran nothing while its queued requests still counted as work
// ahead in admission (scheduler/README.md, the collapse spell).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "base/status.h"
#include "storage/catalog.h"

namespace orrery {

class LedgerWriter {
 public:
  // The append's outcome (Catalog::AppendLedger: true = written, false = a
  // retry's id already billed). Runs on the writer thread: keep it short
  // (it delays the next group), never call Append from it.
  using Done = std::function<void(Result<bool> billed)>;

  struct Stats {
    uint64_t appends = 0;
    uint64_t groups = 0;        // catalog group writes (one fsync each when fsyncing)
    int64_t write_ns = 0;       // summed time in those writes
    int64_t max_write_ns = 0;   // the longest one
    size_t max_queued = 0;      // most entries waiting at once
  };

  // `catalog` must outlive the writer. Starts the thread, pinned to `cpus`
  // when given (else it keeps the creating thread's mask).
  explicit LedgerWriter(Catalog* catalog, std::vector<int> cpus = {});
  // Writes and completes everything queued, then joins.
  ~LedgerWriter();

  // Queues `entry`; `done` runs after its group is written. O(1) plus a
  // move; never blocks on the disk. Not after the destructor began (the
  // owner stops every caller first).
  void Append(LedgerEntry entry, LedgerAppendOptions options, Done done);

  Stats stats() const;

  LedgerWriter(const LedgerWriter&) = delete;
  LedgerWriter& operator=(const LedgerWriter&) = delete;

 private:
  struct Pending {
    LedgerEntry entry;
    LedgerAppendOptions options;
    Done done;
  };
  void Loop();

  Catalog* const catalog_;
  const std::vector<int> cpus_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Pending> queued_;
  bool stopping_ = false;
  Stats stats_;
  std::thread thread_;  // last: started once the rest is initialised
};

}  // namespace orrery
