#include "api/ledger_writer.h"

#include <pthread.h>

#include <algorithm>
#include <chrono>
#include <utility>

#include <spdlog/spdlog.h>

#include "base/cpu_set.h"

namespace orrery {

LedgerWriter::LedgerWriter(Catalog* catalog, std::vector<int> cpus)
    : catalog_(catalog), cpus_(std::move(cpus)), thread_([this] { Loop(); }) {}

LedgerWriter::~LedgerWriter() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void LedgerWriter::Append(LedgerEntry entry, LedgerAppendOptions options, Done done) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queued_.push_back(Pending{std::move(entry), options, std::move(done)});
    stats_.max_queued = std::max(stats_.max_queued, queued_.size());
  }
  cv_.notify_one();
}

LedgerWriter::Stats LedgerWriter::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void LedgerWriter::Loop() {
  (void)pthread_setname_np(pthread_self(), "orrery-ledger");
  if (!cpus_.empty()) {
    if (Status s = PinThisThread(cpus_); !s.ok()) spdlog::warn("ledger writer: {}", s.ToString());
  }
  std::vector<Pending> group;
  std::vector<LedgerEntry*> entries;
  std::vector<LedgerAppendOptions> options;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stopping_ || !queued_.empty(); });
      if (queued_.empty()) return;  // stopping, drained
      group.swap(queued_);
    }
    // Group commit: what queued while the last group was written goes in
    // together (one fsync when the catalog fsyncs each append).
    entries.clear();
    options.clear();
    for (Pending& p : group) {
      entries.push_back(&p.entry);
      options.push_back(p.options);
    }
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<Result<bool>> billed = catalog_->AppendLedgerGroup(entries, options);
    const int64_t ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count();
    {
      std::lock_guard<std::mutex> lock(mu_);
      stats_.appends += group.size();
      ++stats_.groups;
      stats_.write_ns += ns;
      stats_.max_write_ns = std::max(stats_.max_write_ns, ns);
    }
    for (size_t i = 0; i < group.size(); ++i) group[i].done(std::move(billed[i]));
    group.clear();
  }
}

}  // namespace orrery
