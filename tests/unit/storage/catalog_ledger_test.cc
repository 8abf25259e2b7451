// The billing ledger in the catalog: appends, exactly-once by request id,
// running totals, time ranges, persistence across reopen.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <thread>

#include <gtest/gtest.h>

#include "storage/catalog.h"
#include "tests/common/ledger_entries.h"
#include "tests/common/temp_dir.h"

namespace orrery {
namespace {

using LedgerDir = orrery::testing::TempDir;

std::unique_ptr<Catalog> MustOpen(const std::string& dir) {
  auto r = Catalog::Open(dir);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (!r.ok()) return nullptr;
  return std::move(r).value();
}

std::string Rid(int i) {
  std::string s = "r";
  s += std::to_string(i);
  return s;
}

using orrery::testing::InferenceEntry;

// A catalog with a 64 KiB ledger journal whose background move is an hour
// away: only readers, full rings and the close move staged entries.
std::unique_ptr<Catalog> OpenWithJournal(const std::string& dir) {
  auto r = Catalog::Open(dir, Catalog::Options{.ledger_sync_interval_ms = 3'600'000, .ledger_journal_bytes = 64 << 10});
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (!r.ok()) return nullptr;
  return std::move(r).value();
}

TEST(CatalogLedgerTest, AppendsOncePerRequestIdAndKeepsTotals) {
  LedgerDir dir;
  auto c = MustOpen(dir.db());
  ASSERT_NE(c, nullptr);
  LedgerEntry a = InferenceEntry("t_a", "r1", 5'000'000, 7);
  Result<bool> first = c->AppendLedger(&a);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_TRUE(*first);
  EXPECT_EQ(a.unix_ms(), 5000);
  EXPECT_GT(a.seq(), 0u);

  // Same (tenant, request id): not written again; the stored entry comes back.
  LedgerEntry retry = InferenceEntry("t_a", "r1", 9'000'000, 100);
  Result<bool> second = c->AppendLedger(&retry);
  ASSERT_TRUE(second.ok());
  EXPECT_FALSE(*second);
  EXPECT_EQ(retry.cost_micros(), 7);
  EXPECT_EQ(retry.seq(), a.seq());

  // The same request id in another tenant is another request.
  LedgerEntry b = InferenceEntry("t_b", "r1", 6'000'000, 11);
  ASSERT_TRUE(c->AppendLedger(&b).ok());
  LedgerEntry a2 = InferenceEntry("t_a", "r2", 8'000'000, 5);
  ASSERT_TRUE(c->AppendLedger(&a2).ok());

  Result<LedgerTotals> ta = c->GetLedgerTotals("t_a");
  ASSERT_TRUE(ta.ok());
  EXPECT_EQ(ta->entries(), 2u);
  EXPECT_EQ(ta->cost_micros(), 12);
  EXPECT_EQ(ta->lane_ns(), 120);
  Result<std::vector<LedgerEntry>> la = c->ListLedger("t_a", 0, 0);
  ASSERT_TRUE(la.ok());
  ASSERT_EQ(la->size(), 2u);
  EXPECT_EQ((*la)[0].request_id(), "r1");
  EXPECT_EQ((*la)[1].request_id(), "r2");
  // Time range: [from, to).
  la = c->ListLedger("t_a", 5001, 8000);
  ASSERT_TRUE(la.ok());
  EXPECT_TRUE(la->empty());
  la = c->ListLedger("t_a", 5000, 8001);
  ASSERT_TRUE(la.ok());
  EXPECT_EQ(la->size(), 2u);
  Result<std::vector<std::string>> tenants = c->LedgerTenants();
  ASSERT_TRUE(tenants.ok());
  EXPECT_EQ(*tenants, (std::vector<std::string>{"t_a", "t_b"}));
  Result<LedgerEntry> got = c->GetLedgerEntry("t_b", "r1");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->cost_micros(), 11);
  EXPECT_EQ(c->GetLedgerEntry("t_b", "r2").status().code(), StatusCode::kNotFound);

  // Survives a reopen, and the seq keeps growing.
  c.reset();
  c = MustOpen(dir.db());
  ASSERT_NE(c, nullptr);
  ta = c->GetLedgerTotals("t_a");
  ASSERT_TRUE(ta.ok());
  EXPECT_EQ(ta->entries(), 2u);
  LedgerEntry a3 = InferenceEntry("t_a", "r3", 9'000'000, 1);
  ASSERT_TRUE(c->AppendLedger(&a3).ok());
  EXPECT_GT(a3.seq(), a2.seq());
  // Appends keep the seq and totals in memory: after the reopen they start
  // from the stored ones, and each append adds to what the last wrote.
  LedgerEntry b2 = InferenceEntry("t_b", "r2", 9'500'000, 4);
  ASSERT_TRUE(c->AppendLedger(&b2).ok());
  EXPECT_EQ(b2.seq(), a3.seq() + 1);
  LedgerEntry a4 = InferenceEntry("t_a", "r4", 9'600'000, 2);
  ASSERT_TRUE(c->AppendLedger(&a4).ok());
  EXPECT_EQ(a4.seq(), b2.seq() + 1);
  ta = c->GetLedgerTotals("t_a");
  ASSERT_TRUE(ta.ok());
  EXPECT_EQ(ta->entries(), 4u);
  EXPECT_EQ(ta->cost_micros(), 15);
  Result<LedgerTotals> tb = c->GetLedgerTotals("t_b");
  ASSERT_TRUE(tb.ok());
  EXPECT_EQ(tb->entries(), 2u);
  EXPECT_EQ(tb->cost_micros(), 15);
  Result<Catalog::FsckReport> fsck = c->Fsck(false);
  ASSERT_TRUE(fsck.ok());
  EXPECT_TRUE(fsck->clean());
}

// A request id the caller made up skips the lookup for an earlier entry,
// but the entry is indexed by it like any other: a later retry with that id
// (without the option) is recognised.
TEST(CatalogLedgerTest, NewRequestIdIsIndexedWithoutALookup) {
  LedgerDir dir;
  auto c = MustOpen(dir.db());
  ASSERT_NE(c, nullptr);
  LedgerEntry a = InferenceEntry("t_a", "made-up-1", 5'000'000, 7);
  Result<bool> first = c->AppendLedger(&a, LedgerAppendOptions{.new_request_id = true});
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_TRUE(*first);
  Result<LedgerEntry> got = c->GetLedgerEntry("t_a", "made-up-1");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->seq(), a.seq());
  LedgerEntry retry = InferenceEntry("t_a", "made-up-1", 6'000'000, 100);
  Result<bool> second = c->AppendLedger(&retry);
  ASSERT_TRUE(second.ok());
  EXPECT_FALSE(*second);
  EXPECT_EQ(retry.cost_micros(), 7);
  Result<LedgerTotals> totals = c->GetLedgerTotals("t_a");
  ASSERT_TRUE(totals.ok());
  EXPECT_EQ(totals->entries(), 1u);
}

TEST(CatalogLedgerTest, RejectsMissingIdsAndAllowsStorageWithoutRequestId) {
  LedgerDir dir;
  auto c = MustOpen(dir.db());
  ASSERT_NE(c, nullptr);
  LedgerEntry no_tenant = InferenceEntry("", "r1", 1000, 1);
  EXPECT_EQ(c->AppendLedger(&no_tenant).status().code(), StatusCode::kInvalidArgument);
  LedgerEntry no_id = InferenceEntry("t_a", "", 1000, 1);
  EXPECT_EQ(c->AppendLedger(&no_id).status().code(), StatusCode::kInvalidArgument);
  LedgerEntry storage;
  storage.set_kind(LedgerEntry::STORAGE);
  storage.set_tenant_id("t_a");
  storage.set_stored_bytes(100);
  storage.set_cost_micros(3);
  ASSERT_TRUE(c->AppendLedger(&storage).ok());
  LedgerEntry storage2 = storage;
  Result<bool> again = c->AppendLedger(&storage2);  // samples are not deduplicated
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(*again);
  Result<LedgerTotals> t = c->GetLedgerTotals("t_a");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->entries(), 2u);
  EXPECT_EQ(t->cost_micros(), 6);
}

TEST(CatalogLedgerTest, ConcurrentRetriesBillOnce) {
  LedgerDir dir;
  auto c = MustOpen(dir.db());
  ASSERT_NE(c, nullptr);
  std::atomic<int> written{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&] {
      for (int r = 0; r < 20; ++r) {
        LedgerEntry e = InferenceEntry("t_a", Rid(r), 1'000'000 + r, 1);
        Result<bool> w = c->AppendLedger(&e);
        if (w.ok() && *w) written.fetch_add(1);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(written.load(), 20);
  Result<LedgerTotals> t = c->GetLedgerTotals("t_a");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->entries(), 20u);
  Result<std::vector<LedgerEntry>> all = c->ListLedger("t_a", 0, 0);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), 20u);
}

}  // namespace
}  // namespace orrery

namespace orrery {
namespace {

// Group commit: appends that overlap share WAL fsyncs, and each still
// returns only once its entry is durable (every one is readable afterwards).
TEST(CatalogLedgerTest, ConcurrentAppendsShareFsyncs) {
  LedgerDir dir;
  auto c = MustOpen(dir.db());
  ASSERT_NE(c, nullptr);
  constexpr int kWriters = 8, kEach = 40;
  std::vector<std::thread> threads;
  for (int w = 0; w < kWriters; ++w) {
    threads.emplace_back([&, w] {
      for (int i = 0; i < kEach; ++i) {
        LedgerEntry e = InferenceEntry("t_a", Rid(w * kEach + i), 1'000'000 + i, 1);
        EXPECT_TRUE(c->AppendLedger(&e).ok());
      }
    });
  }
  for (std::thread& t : threads) t.join();
  const uint64_t syncs = c->ledger_wal_syncs();
  EXPECT_GT(syncs, 0u);
  EXPECT_LT(syncs, uint64_t{kWriters * kEach}) << "every append issued its own fsync";
  auto totals = c->GetLedgerTotals("t_a");
  ASSERT_TRUE(totals.ok());
  EXPECT_EQ(totals->entries(), uint64_t{kWriters * kEach});
  std::printf("%d concurrent appends, %llu WAL fsyncs\n", kWriters * kEach, static_cast<unsigned long long>(syncs));
}

// With a sync interval, appends return without an fsync and the background
// thread issues them: one per interval at most, none when idle.
TEST(CatalogLedgerTest, DeferredSyncFsyncsInTheBackground) {
  LedgerDir dir;
  auto opened = Catalog::Open(dir.db(), Catalog::Options{.ledger_sync_interval_ms = 20});
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  std::unique_ptr<Catalog> c = std::move(opened).value();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const uint64_t idle = c->ledger_wal_syncs();
  EXPECT_LE(idle, 1u) << "an idle catalog kept fsyncing";  // at most the writes of Open
  for (int i = 0; i < 50; ++i) {
    LedgerEntry e = InferenceEntry("t_a", Rid(i), 1'000'000 + i, 1);
    ASSERT_TRUE(c->AppendLedger(&e).ok());
  }
  // The background fsync comes within a few intervals.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (c->ledger_wal_syncs() == idle && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_GT(c->ledger_wal_syncs(), idle) << "no background fsync after the appends";
  EXPECT_LT(c->ledger_wal_syncs(), idle + 50) << "appends waited for their own fsyncs";
  // SyncLedger with nothing new to sync issues none.
  ASSERT_TRUE(c->SyncLedger().ok());
  const uint64_t synced = c->ledger_wal_syncs();
  ASSERT_TRUE(c->SyncLedger().ok());
  EXPECT_EQ(c->ledger_wal_syncs(), synced);
  auto totals = c->GetLedgerTotals("t_a");
  ASSERT_TRUE(totals.ok());
  EXPECT_EQ(totals->entries(), 50u);
}

// The journal (Options::ledger_journal_bytes): an append with a made-up id
// is staged, not written; every reader moves the staged entries first.
TEST(CatalogLedgerTest, JournalStagesEntriesThatEveryReaderSees) {
  LedgerDir dir;
  std::unique_ptr<Catalog> c = OpenWithJournal(dir.db());
  ASSERT_NE(c, nullptr);
  for (int i = 0; i < 50; ++i) {
    LedgerEntry e = InferenceEntry(i % 2 ? "t_a" : "t_b", Rid(i), 1'000'000'000 + i * 1000, 3);
    Result<bool> r = c->AppendLedger(&e, {.new_request_id = true});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_TRUE(*r);
    EXPECT_EQ(e.seq(), 0u) << "staged entries get their seq when moved";
    EXPECT_EQ(e.unix_ms(), 1'000'000 + i);
  }
  Catalog::LedgerJournalStats s = c->ledger_journal_stats();
  EXPECT_TRUE(s.enabled);
  EXPECT_EQ(s.staged, 50u);
  EXPECT_EQ(s.ingests, 0u);
  EXPECT_GT(s.used_bytes, 0u);
  EXPECT_EQ(c->ledger_wal_syncs(), 0u);

  auto totals = c->GetLedgerTotals("t_a");
  ASSERT_TRUE(totals.ok()) << totals.status().ToString();
  EXPECT_EQ(totals->entries(), 25u);
  EXPECT_EQ(totals->cost_micros(), 75);
  EXPECT_EQ(c->ledger_journal_stats().ingests, 1u);
  EXPECT_EQ(c->ledger_journal_stats().used_bytes, 0u);

  // Another staged entry: the id lookup, the listing and the tenant list
  // each see it without anything else moving it.
  LedgerEntry late = InferenceEntry("t_c", "late", 2'000'000'000, 5);
  ASSERT_TRUE(c->AppendLedger(&late, {.new_request_id = true}).ok());
  auto got = c->GetLedgerEntry("t_c", "late");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->cost_micros(), 5);
  EXPECT_EQ(got->seq(), 51u);
  auto tenants = c->LedgerTenants();
  ASSERT_TRUE(tenants.ok());
  EXPECT_EQ(tenants->size(), 3u);
  auto listed = c->ListLedger("t_b", 0, 0);
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 25u);
  for (size_t i = 1; i < listed->size(); ++i) EXPECT_LT((*listed)[i - 1].unix_ms(), (*listed)[i].unix_ms());

  // A retry carrying a staged entry's id (the caller's id now) is not billed
  // twice: the direct append moves the staged ones before its lookup.
  LedgerEntry staged = InferenceEntry("t_a", "client-id", 3'000'000'000, 7);
  ASSERT_TRUE(c->AppendLedger(&staged, {.new_request_id = true}).ok());
  LedgerEntry retry = InferenceEntry("t_a", "client-id", 3'000'000'001, 7);
  Result<bool> again = c->AppendLedger(&retry);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(*again);
  totals = c->GetLedgerTotals("t_a");
  ASSERT_TRUE(totals.ok());
  EXPECT_EQ(totals->entries(), 26u);
}

TEST(CatalogLedgerTest, AFullJournalIsMovedAndNothingIsLost) {
  LedgerDir dir;
  {
    std::unique_ptr<Catalog> c = OpenWithJournal(dir.db());
    ASSERT_NE(c, nullptr);
    // 64 bytes an entry in the ring: 3000 fill the 64 KiB ring almost three
    // times, so it was moved at least twice, by the background thread
    // (nudged at half full) or by an append that found it full.
    for (int i = 0; i < 3000; ++i) {
      LedgerEntry e = InferenceEntry("t_a", Rid(i), 1'000'000'000 + i, 1);
      Result<bool> r = c->AppendLedger(&e, {.new_request_id = true});
      ASSERT_TRUE(r.ok()) << i << ": " << r.status().ToString();
    }
    const Catalog::LedgerJournalStats s = c->ledger_journal_stats();
    EXPECT_EQ(s.staged + s.full, 3000u);
    EXPECT_GE(s.ingests, 2u);
    // Closed with entries still staged: the close moves them.
  }
  auto c = MustOpen(dir.db());  // no journal now
  ASSERT_NE(c, nullptr);
  EXPECT_FALSE(c->ledger_journal_stats().enabled);
  EXPECT_FALSE(std::filesystem::exists(dir.db() + "/ledger.journal"));
  auto totals = c->GetLedgerTotals("t_a");
  ASSERT_TRUE(totals.ok());
  EXPECT_EQ(totals->entries(), 3000u);
  auto listed = c->ListLedger("t_a", 0, 0);
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 3000u);
  for (int i = 0; i < 3000; ++i) EXPECT_EQ((*listed)[i].seq(), static_cast<uint64_t>(i + 1));
}

// Not a correctness test: prints what one synced append costs, alone and
// with 4 concurrent writers (they share fsyncs). Run with
// --gtest_also_run_disabled_tests --gtest_filter='*MeasureAppend*'.
TEST(CatalogLedgerTest, DISABLED_MeasureAppendLatency) {
  LedgerDir dir;
  auto c = MustOpen(dir.db());
  ASSERT_NE(c, nullptr);
  constexpr int kN = 400;
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < kN; ++i) {
    LedgerEntry e = InferenceEntry("t_a", Rid(i), 1'000'000 + i, 1);
    ASSERT_TRUE(c->AppendLedger(&e).ok());
  }
  const double one = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / kN;
  t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int w = 0; w < 4; ++w) {
    threads.emplace_back([&, w] {
      for (int i = 0; i < kN / 4; ++i) {
        LedgerEntry e = InferenceEntry("t_b", Rid(w * kN + i), 1'000'000 + i, 1);
        EXPECT_TRUE(c->AppendLedger(&e).ok());
      }
    });
  }
  for (std::thread& t : threads) t.join();
  const double four = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / kN;
  auto deferred = Catalog::Open(dir.path() + "/deferred", Catalog::Options{.ledger_sync_interval_ms = 100});
  ASSERT_TRUE(deferred.ok());
  t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < kN; ++i) {
    LedgerEntry e = InferenceEntry("t_a", Rid(i), 1'000'000 + i, 1);
    ASSERT_TRUE((*deferred)->AppendLedger(&e).ok());
  }
  const double unsynced =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / kN;
  auto journaled = Catalog::Open(dir.path() + "/journaled",
                                 Catalog::Options{.ledger_sync_interval_ms = 100, .ledger_journal_bytes = 8 << 20});
  ASSERT_TRUE(journaled.ok());
  t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < kN; ++i) {
    LedgerEntry e = InferenceEntry("t_a", Rid(i), 1'000'000 + i, 1);
    ASSERT_TRUE((*journaled)->AppendLedger(&e, {.new_request_id = true}).ok());
  }
  const double staged =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / kN;
  std::printf("synced ledger append: %.1f us each sequentially, %.1f us per append with 4 writers; "
              "with --ledger-sync-ms 100 (fsync in the background): %.1f us; staged in the journal: %.2f us\n",
              one, four, unsynced, staged);
  EXPECT_GT(one, 0);
}

}  // namespace
}  // namespace orrery
