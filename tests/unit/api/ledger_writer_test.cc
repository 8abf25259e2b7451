// The ledger writer (api/ledger_writer.h): appends on its own thread, in
// groups, never blocking the caller, and runs each continuation only once
// its entry is stored, so what was answered is billed after a reopen.
#include "api/ledger_writer.h"

#include <atomic>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "tests/common/ledger_entries.h"
#include "tests/common/temp_dir.h"

namespace orrery {
namespace {

// Built by appending: GCC 12 warns falsely (-Wrestrict) on "lit" + std::string.
std::string Id(const char* prefix, int a, int b = -1) {
  std::string id = prefix;
  id += std::to_string(a);
  if (b >= 0) {
    id += '-';
    id += std::to_string(b);
  }
  return id;
}

LedgerEntry Inference(const std::string& tenant, const std::string& rid, int64_t cost) {
  return orrery::testing::InferenceEntry(tenant, rid, 5'000'000, cost);
}

std::unique_ptr<Catalog> MustOpen(const std::string& dir, int64_t sync_ms) {
  auto r = Catalog::Open(dir, Catalog::Options{.ledger_sync_interval_ms = sync_ms});
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? std::move(r).value() : nullptr;
}

// Each continuation sees its entry stored (the answer goes out after the
// write); after the writer and the catalog close, a reopened catalog has
// every entry that was answered, and the totals add up. For both durability
// modes (fsync each group; written to the OS, fsynced in the background).
TEST(LedgerWriterTest, AnsweredEntriesAreStoredAndSurviveAReopen) {
  for (int64_t sync_ms : {0, 100}) {
    orrery::testing::TempDir dir;
    constexpr int kThreads = 4, kEach = 50;
    std::atomic<int> stored_when_answered{0}, written{0};
    {
      std::unique_ptr<Catalog> catalog = MustOpen(dir.db(), sync_ms);
      ASSERT_NE(catalog, nullptr);
      {
        LedgerWriter writer(catalog.get());
        std::vector<std::thread> threads;
        for (int t = 0; t < kThreads; ++t) {
          threads.emplace_back([&, t] {
            for (int i = 0; i < kEach; ++i) {
              const std::string rid = Id("r", t, i);
              writer.Append(Inference("t_a", rid, 3), LedgerAppendOptions{}, [&, rid](Result<bool> billed) {
                if (billed.ok() && *billed) ++written;
                if (catalog->GetLedgerEntry("t_a", rid).ok()) ++stored_when_answered;
              });
            }
          });
        }
        for (std::thread& t : threads) t.join();
      }  // the writer drains: every continuation has run
      EXPECT_EQ(written.load(), kThreads * kEach) << "sync_ms " << sync_ms;
      EXPECT_EQ(stored_when_answered.load(), kThreads * kEach) << "sync_ms " << sync_ms;
    }
    std::unique_ptr<Catalog> reopened = MustOpen(dir.db(), sync_ms);
    ASSERT_NE(reopened, nullptr);
    Result<std::vector<LedgerEntry>> entries = reopened->ListLedger("t_a", 0, 0);
    ASSERT_TRUE(entries.ok()) << entries.status().ToString();
    EXPECT_EQ(entries->size(), static_cast<size_t>(kThreads * kEach));
    Result<LedgerTotals> totals = reopened->GetLedgerTotals("t_a");
    ASSERT_TRUE(totals.ok());
    EXPECT_EQ(totals->entries(), static_cast<uint64_t>(kThreads * kEach));
    EXPECT_EQ(totals->cost_micros(), 3 * kThreads * kEach);
  }
}

// Append never waits for the write: while the writer's thread is held (here
// in a continuation, standing in for a write stuck on a busy disk) the
// caller queues more; they are then written as one group, with one fsync.
// A retry of an id in the same group is billed once.
TEST(LedgerWriterTest, AppendDoesNotWaitAndQueuedEntriesShareOneGroup) {
  orrery::testing::TempDir dir;
  std::unique_ptr<Catalog> catalog = MustOpen(dir.db(), 0);
  ASSERT_NE(catalog, nullptr);
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::promise<void> holding;
  std::atomic<int> done{0}, written{0};
  {
    LedgerWriter writer(catalog.get());
    writer.Append(Inference("t_a", "first", 1), {}, [&](Result<bool>) {
      holding.set_value();
      released.wait();
      ++done;
    });
    holding.get_future().wait();  // the writer's thread is held now
    for (int i = 0; i < 100; ++i) {
      writer.Append(Inference("t_a", Id("q", i % 99), 1), {}, [&](Result<bool> billed) {
        EXPECT_TRUE(billed.ok()) << billed.status().ToString();
        if (billed.ok() && *billed) ++written;
        ++done;
      });
    }
    EXPECT_EQ(done.load(), 0) << "nothing completes while the writer is held";
    EXPECT_EQ(writer.stats().groups, 1u);
    release.set_value();
  }  // destruction drains
  EXPECT_EQ(done.load(), 101);
  EXPECT_EQ(written.load(), 99) << "q0 was sent twice and is billed once";
  Result<LedgerTotals> totals = catalog->GetLedgerTotals("t_a");
  ASSERT_TRUE(totals.ok());
  EXPECT_EQ(totals->entries(), 100u);  // first + q0..q98
  EXPECT_EQ(catalog->ledger_wal_syncs(), 2u) << "one fsync for the first group, one for the 100 queued";
}

}  // namespace
}  // namespace orrery
