#include "cache/host_cache.h"

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace orrery {
namespace {

// 1 byte/ns disk with 100 ns latency: a load of N bytes is predicted 100 + N ns.
HostCacheOptions Opts(int64_t budget, int concurrency = 1) {
  HostCacheOptions o;
  o.budget_bytes = budget;
  o.load_concurrency = concurrency;
  o.disk = {.initial_bytes_per_sec = 1e9, .latency_ns = 100, .ewma_alpha = 0.25};
  o.prewarm_margin_ns = 0;
  return o;
}

ModelKey K(const std::string& tenant, const std::string& model) { return ModelKey{tenant, model, 1}; }

class HostCacheTest : public ::testing::Test {
 protected:
  std::unique_ptr<HostCache> Make(const HostCacheOptions& o) {
    auto c = HostCache::Create(o, &clock_);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return std::move(c).value();
  }
  // Acquire + finish the load at its predicted end + release: a request that
  // misses, loads and completes.
  void Use(HostCache* c, const ModelKey& k) {
    Result<Acquisition> a = c->Acquire(k);
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    if (a->action.has_value()) {
      clock_.AdvanceTo(a->action->predicted.end_ns);
      ASSERT_TRUE(c->FinishMove(a->action->id, a->action->predicted.start_ns, Status::Ok()).ok());
    }
    ASSERT_TRUE(c->Release(k).ok());
  }
  FakeClock clock_{1'000'000};
};

TEST_F(HostCacheTest, InvalidOptionsAreRefused) {
  HostCacheOptions o = Opts(0);
  Result<std::unique_ptr<HostCache>> c = HostCache::Create(o, &clock_);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(c.status().message().find("capacity"), std::string::npos);
  o = Opts(100, 0);
  EXPECT_EQ(HostCache::Create(o, &clock_).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(HostCacheTest, ModelThatCanNeverFitIsRefusedNamingTheSizes) {
  auto c = Make(Opts(1000));
  Status s = c->Register(K("t", "huge"), 1001);
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(s.message().find("t/huge@1"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("1001"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("1000"), std::string::npos) << s.message();
  EXPECT_EQ(c->Register(K("t", "zero"), 0).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(c->Stats().entries, 0u);
  EXPECT_EQ(c->Acquire(K("t", "huge")).status().code(), StatusCode::kNotFound);
}

TEST_F(HostCacheTest, MissLoadsWithPredictedTimesThenHits) {
  auto c = Make(Opts(1000));
  const ModelKey k = K("t", "m");
  ASSERT_TRUE(c->Register(k, 500).ok());
  const int64_t t0 = clock_.NowNs();
  EXPECT_EQ(*c->PredictReadyNs(k), t0 + 600);
  Result<Acquisition> a = c->Acquire(k);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->state_before, Residency::kAbsent);
  ASSERT_TRUE(a->action.has_value());
  EXPECT_EQ(a->action->bytes, 500);
  EXPECT_EQ(a->action->predicted.start_ns, t0);
  EXPECT_EQ(a->action->predicted.end_ns, t0 + 600);
  EXPECT_EQ(a->ready_ns, t0 + 600);
  EXPECT_EQ(c->state(k), Residency::kMoving);

  // A second request joins the load in flight.
  clock_.AdvanceNs(100);
  Result<Acquisition> b = c->Acquire(k);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->state_before, Residency::kMoving);
  EXPECT_FALSE(b->action.has_value());
  EXPECT_EQ(b->ready_ns, t0 + 600);

  clock_.AdvanceTo(t0 + 600);
  ASSERT_TRUE(c->FinishMove(a->action->id, t0, Status::Ok()).ok());
  EXPECT_EQ(c->state(k), Residency::kResident);
  EXPECT_EQ(c->FinishMove(a->action->id, t0, Status::Ok()).code(), StatusCode::kNotFound);
  Result<Acquisition> h = c->Acquire(k);
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->state_before, Residency::kResident);
  EXPECT_EQ(h->ready_ns, clock_.NowNs());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(c->Release(k).ok());
  EXPECT_EQ(c->Release(k).code(), StatusCode::kFailedPrecondition);

  TierStats s = c->Stats();
  EXPECT_EQ(s.misses, 1u);
  EXPECT_EQ(s.joins, 1u);
  EXPECT_EQ(s.hits, 1u);
  EXPECT_EQ(s.resident_bytes, 500);
  EXPECT_EQ(s.bytes_moved, 500);
}

TEST_F(HostCacheTest, LoadsRunUpToTheConcurrencyAndTheRestQueue) {
  auto c = Make(Opts(10'000, 2));
  for (const char* m : {"a", "b", "c"}) ASSERT_TRUE(c->Register(K("t", m), 1000).ok());
  const int64_t t0 = clock_.NowNs();
  Result<Acquisition> a = c->Acquire(K("t", "a"));
  Result<Acquisition> b = c->Acquire(K("t", "b"));
  Result<Acquisition> d = c->Acquire(K("t", "c"));
  ASSERT_TRUE(a.ok() && b.ok() && d.ok());
  EXPECT_EQ(a->action->predicted.start_ns, t0);
  EXPECT_EQ(b->action->predicted.start_ns, t0);
  EXPECT_EQ(d->action->predicted.start_ns, t0 + 1100);  // after the first slot frees
  EXPECT_EQ(d->ready_ns, t0 + 2200);
  // The first load finishes early: the queued one's prediction moves up.
  clock_.AdvanceTo(t0 + 600);
  ASSERT_TRUE(c->FinishMove(a->action->id, t0, Status::Ok()).ok());
  EXPECT_EQ(*c->PredictReadyNs(K("t", "c")), t0 + 600 + 1100);
  // Measured 1000 bytes in 500 ns after the latency: 2 bytes/ns learned.
  EXPECT_DOUBLE_EQ(c->Stats().bytes_per_sec, 2e9);
  EXPECT_EQ(c->PredictMoveNs(1000), 600);
}

// Loads that end later than predicted (queued behind others, or slowed by
// the CPU they share with the lanes) stretch the predicted wait of the next
// load, so that admission does not let in requests that would miss after it.
TEST_F(HostCacheTest, LoadsEndingLateStretchThePredictedWaitBySlack) {
  auto c = Make(Opts(int64_t{1} << 40));
  constexpr int64_t kBytes = 2'000'000;
  const int64_t predicted = 100 + kBytes;  // 2 ms at 1 byte/ns: long enough to be a sample
  // Each load runs as long as predicted (the bandwidth stays 1 byte/ns) but
  // ends `late` x its predicted wait after it was asked for.
  auto load = [&](const std::string& m, double late) {
    const ModelKey k = K("t", m);
    ASSERT_TRUE(c->Register(k, kBytes).ok());
    const int64_t asked = clock_.NowNs();
    Result<Acquisition> a = c->Acquire(k);
    ASSERT_TRUE(a.ok() && a->action.has_value());
    const int64_t end = asked + static_cast<int64_t>(late * static_cast<double>(predicted));
    clock_.AdvanceTo(end);
    ASSERT_TRUE(c->FinishMove(a->action->id, end - predicted, Status::Ok()).ok());
    ASSERT_TRUE(c->Release(k).ok());
  };
  ASSERT_TRUE(c->Register(K("t", "next"), kBytes).ok());
  for (int i = 0; i < 19; ++i) load(std::string("m").append(std::to_string(i)), 1.5);
  // Fewer than min_samples (20): no slack yet.
  EXPECT_EQ(*c->PredictReadyNs(K("t", "next")) - clock_.NowNs(), predicted);
  EXPECT_EQ(c->Stats().move_slack, 0);
  load("m19", 1.5);
  EXPECT_DOUBLE_EQ(c->Stats().move_slack, 0.5);
  EXPECT_NEAR(static_cast<double>(*c->PredictReadyNs(K("t", "next")) - clock_.NowNs()), 1.5 * predicted, 2);
  Result<Readiness> r = c->PredictReady(K("t", "next"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->state, Residency::kAbsent);
  // Much later than predicted: the slack stops at load_slack_max (1: twice the wait).
  for (int i = 20; i < 40; ++i) load(std::string("m").append(std::to_string(i)), 4.0);
  EXPECT_DOUBLE_EQ(c->Stats().move_slack, 1.0);
  EXPECT_NEAR(static_cast<double>(*c->PredictReadyNs(K("t", "next")) - clock_.NowNs()), 2.0 * predicted, 2);
  // The samples expire (10 s): back to the bare prediction.
  clock_.AdvanceNs(11 * kNsPerSec);
  EXPECT_EQ(*c->PredictReadyNs(K("t", "next")) - clock_.NowNs(), predicted);
}

TEST_F(HostCacheTest, NoLoadSlackWhenTurnedOff) {
  HostCacheOptions o = Opts(int64_t{1} << 40);
  o.load_slack_max = 0;
  auto c = Make(o);
  constexpr int64_t kBytes = 2'000'000;
  for (int i = 0; i < 30; ++i) {
    const ModelKey k = K("t", std::string("m").append(std::to_string(i)));
    ASSERT_TRUE(c->Register(k, kBytes).ok());
    Result<Acquisition> a = c->Acquire(k);
    ASSERT_TRUE(a.ok() && a->action.has_value());
    clock_.AdvanceNs(3 * (100 + kBytes));
    ASSERT_TRUE(c->FinishMove(a->action->id, clock_.NowNs() - (100 + kBytes), Status::Ok()).ok());
    ASSERT_TRUE(c->Release(k).ok());
  }
  ASSERT_TRUE(c->Register(K("t", "next"), kBytes).ok());
  EXPECT_EQ(*c->PredictReadyNs(K("t", "next")) - clock_.NowNs(), 100 + kBytes);
  EXPECT_EQ(c->Stats().move_slack, 0);
}

TEST_F(HostCacheTest, PinnedModelsAreNeverEvicted) {
  auto c = Make(Opts(1000));
  ASSERT_TRUE(c->Register(K("t", "a"), 600).ok());
  ASSERT_TRUE(c->Register(K("t", "b"), 600).ok());
  Result<Acquisition> a = c->Acquire(K("t", "a"));
  ASSERT_TRUE(a.ok());
  clock_.AdvanceTo(a->action->predicted.end_ns);
  ASSERT_TRUE(c->FinishMove(a->action->id, a->action->predicted.start_ns, Status::Ok()).ok());
  // a is pinned: b cannot get room, and nothing changes.
  Result<Acquisition> b = c->Acquire(K("t", "b"));
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(c->state(K("t", "a")), Residency::kResident);
  EXPECT_EQ(c->state(K("t", "b")), Residency::kAbsent);
  EXPECT_EQ(c->Evict(K("t", "a")).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(c->Unregister(K("t", "a")).code(), StatusCode::kFailedPrecondition);
  ASSERT_TRUE(c->Release(K("t", "a")).ok());
  b = c->Acquire(K("t", "b"));
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  ASSERT_EQ(b->evicted.size(), 1u);
  EXPECT_EQ(b->evicted[0], K("t", "a"));
  EXPECT_EQ(c->state(K("t", "a")), Residency::kAbsent);
  // A moving entry is not evicted either.
  EXPECT_EQ(c->Evict(K("t", "b")).code(), StatusCode::kFailedPrecondition);
}

TEST_F(HostCacheTest, EvictsByExpectedMissCostNotRecency) {
  HostCacheOptions o = Opts(1000);
  o.keepalive = false;
  auto c = Make(o);
  ASSERT_TRUE(c->Register(K("t", "hot"), 400).ok());
  ASSERT_TRUE(c->Register(K("t", "cold"), 400).ok());
  ASSERT_TRUE(c->Register(K("t", "new"), 400).ok());
  for (int i = 0; i < 10; ++i) {
    Use(c.get(), K("t", "hot"));
    clock_.AdvanceNs(10'000'000);
  }
  Use(c.get(), K("t", "cold"));  // used once, but more recently than hot
  clock_.AdvanceNs(10'000'000);
  Result<Acquisition> n = c->Acquire(K("t", "new"));
  ASSERT_TRUE(n.ok());
  ASSERT_EQ(n->evicted.size(), 1u);
  EXPECT_EQ(n->evicted[0], K("t", "cold"));

  // The same sequence under plain LRU evicts the hot model.
  HostCacheOptions l = o;
  l.policy = EvictionPolicy::kLru;
  auto lru = Make(l);
  for (const char* m : {"hot", "cold", "new"}) ASSERT_TRUE(lru->Register(K("t", m), 400).ok());
  for (int i = 0; i < 10; ++i) {
    Use(lru.get(), K("t", "hot"));
    clock_.AdvanceNs(10'000'000);
  }
  Use(lru.get(), K("t", "cold"));
  Result<Acquisition> m = lru->Acquire(K("t", "new"));
  ASSERT_TRUE(m.ok());
  ASSERT_EQ(m->evicted.size(), 1u);
  EXPECT_EQ(m->evicted[0], K("t", "hot"));
}

TEST_F(HostCacheTest, AtEqualRateTheModelCheaperToReloadPerByteGoesFirst) {
  HostCacheOptions o = Opts(10'000);
  o.keepalive = false;
  o.disk.latency_ns = 100'000;  // latency dominates: reloading a small model costs nearly as much
  auto c = Make(o);
  ASSERT_TRUE(c->Register(K("t", "small"), 1000).ok());
  ASSERT_TRUE(c->Register(K("t", "big"), 8000).ok());
  ASSERT_TRUE(c->Register(K("t", "new"), 2000).ok());
  Use(c.get(), K("t", "big"));
  Use(c.get(), K("t", "small"));  // most recent, same rate
  Result<Acquisition> n = c->Acquire(K("t", "new"));
  ASSERT_TRUE(n.ok());
  ASSERT_EQ(n->evicted.size(), 1u);
  EXPECT_EQ(n->evicted[0], K("t", "big"));
}

TEST_F(HostCacheTest, TenantOverItsFairShareIsEvictedFirst) {
  HostCacheOptions o = Opts(1200);
  o.keepalive = false;
  auto c = Make(o);
  for (const char* m : {"a1", "a2", "a3", "a4"}) ASSERT_TRUE(c->Register(K("a", m), 300).ok());
  for (const char* m : {"b1", "b2"}) ASSERT_TRUE(c->Register(K("b", m), 300).ok());
  // Tenant a alone may fill the idle memory.
  for (const char* m : {"a1", "a2", "a3", "a4"}) Use(c.get(), K("a", m));
  // Make a's models the most valuable by rate: fairness must still win.
  for (int i = 0; i < 5; ++i) Use(c.get(), K("a", "a4"));
  EXPECT_EQ(c->Stats().resident_bytes, 1200);
  Use(c.get(), K("b", "b1"));
  Use(c.get(), K("b", "b2"));
  // Equal weights: share 600 each; b's two models displaced two of a's.
  EXPECT_EQ(c->state(K("b", "b1")), Residency::kResident);
  EXPECT_EQ(c->state(K("b", "b2")), Residency::kResident);
  int a_resident = 0;
  for (const char* m : {"a1", "a2", "a3", "a4"}) a_resident += c->state(K("a", m)) == Residency::kResident;
  EXPECT_EQ(a_resident, 2);
  EXPECT_EQ(c->state(K("a", "a4")), Residency::kResident);  // a's most valuable one stays
}

TEST_F(HostCacheTest, RequesterOverItsShareEvictsItsOwnModels) {
  HostCacheOptions o = Opts(1200);
  o.keepalive = false;
  auto c = Make(o);
  ASSERT_TRUE(c->SetTenantWeight("a", 3).ok());  // a: 900, b: 300
  EXPECT_EQ(c->SetTenantWeight("b", 0).code(), StatusCode::kInvalidArgument);
  for (const char* m : {"a1", "a2", "a3"}) ASSERT_TRUE(c->Register(K("a", m), 300).ok());
  for (const char* m : {"b1", "b2", "b3"}) ASSERT_TRUE(c->Register(K("b", m), 300).ok());
  for (const char* m : {"a1", "a2", "a3"}) Use(c.get(), K("a", m));
  Use(c.get(), K("b", "b1"));  // fills the free 300
  Use(c.get(), K("b", "b2"));  // b would hold 600 > 300: evicts its own b1, not a's
  EXPECT_EQ(c->state(K("b", "b1")), Residency::kAbsent);
  EXPECT_EQ(c->state(K("b", "b2")), Residency::kResident);
  for (const char* m : {"a1", "a2", "a3"}) EXPECT_EQ(c->state(K("a", m)), Residency::kResident) << m;
}

TEST_F(HostCacheTest, FailedLoadLeavesTheModelAbsentAndFreesItsBytes) {
  auto c = Make(Opts(1000));
  ASSERT_TRUE(c->Register(K("t", "m"), 500).ok());
  Result<Acquisition> a = c->Acquire(K("t", "m"));
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(c->Stats().used_bytes, 500);
  ASSERT_TRUE(c->FinishMove(a->action->id, a->action->predicted.start_ns, Status::DataLoss("bad crc")).ok());
  EXPECT_EQ(c->state(K("t", "m")), Residency::kAbsent);
  EXPECT_EQ(c->Stats().used_bytes, 0);
  EXPECT_EQ(c->Stats().moves_failed, 1u);
  ASSERT_TRUE(c->Release(K("t", "m")).ok());
  ASSERT_TRUE(c->Unregister(K("t", "m")).ok());
  EXPECT_EQ(c->Stats().entries, 0u);
}

TEST_F(HostCacheTest, IdleResidentBytesAreIntegratedOverTime) {
  auto c = Make(Opts(1000));
  ASSERT_TRUE(c->Register(K("t", "m"), 100).ok());
  Use(c.get(), K("t", "m"));
  const double before = c->Stats().idle_byte_ns;
  clock_.AdvanceNs(1000);
  EXPECT_DOUBLE_EQ(c->Stats().idle_byte_ns - before, 100.0 * 1000);
  ASSERT_TRUE(c->Acquire(K("t", "m")).ok());  // pinned: not idle
  const double pinned_at = c->Stats().idle_byte_ns;
  clock_.AdvanceNs(1000);
  EXPECT_DOUBLE_EQ(c->Stats().idle_byte_ns, pinned_at);
}

// Requests every second: the next one is expected ~1 s after the last.
TEST_F(HostCacheTest, PeriodicModelIsUnloadedBetweenCallsAndPrewarmedBeforeTheNext) {
  auto c = Make(Opts(1'000'000));
  const ModelKey k = K("t", "periodic");
  ASSERT_TRUE(c->Register(k, 1000).ok());
  for (int i = 0; i < 12; ++i) {
    Use(c.get(), k);
    clock_.AdvanceNs(kNsPerSec);
  }
  Use(c.get(), k);
  const int64_t last = c->Info(k)->last_use_ns;
  KeepAliveWindows w = c->Info(k)->windows;
  ASSERT_TRUE(w.valid);
  EXPECT_GT(w.prewarm_ns, 800 * kNsPerMs);
  EXPECT_LE(w.prewarm_ns, kNsPerSec);
  EXPECT_GT(w.keepalive_ns, kNsPerSec);

  // Right after the call it is not expected for ~0.8 s: keeping it only idles memory.
  clock_.AdvanceTo(last + 100 * kNsPerMs);
  std::vector<ModelKey> expired = c->ExpireIdle();
  ASSERT_EQ(expired.size(), 1u);
  EXPECT_EQ(c->state(k), Residency::kAbsent);
  EXPECT_FALSE(c->ShouldPrewarm(k, last + 100 * kNsPerMs));
  EXPECT_TRUE(c->ShouldPrewarm(k, last + w.prewarm_ns));
  EXPECT_FALSE(c->ShouldPrewarm(k, last + w.keepalive_ns + 1));
  EXPECT_EQ(c->PrewarmDue(last + w.prewarm_ns), std::vector<ModelKey>{k});

  clock_.AdvanceTo(last + w.prewarm_ns);
  Result<std::optional<TierAction>> p = c->Prewarm(k);
  ASSERT_TRUE(p.ok());
  ASSERT_TRUE(p->has_value());
  EXPECT_TRUE((*p)->prewarm);
  clock_.AdvanceTo((*p)->predicted.end_ns);
  ASSERT_TRUE(c->FinishMove((*p)->id, (*p)->predicted.start_ns, Status::Ok()).ok());
  // Inside the window it is protected: not expired, and the request hits.
  EXPECT_TRUE(c->ExpireIdle().empty());
  clock_.AdvanceTo(last + kNsPerSec);
  Result<Acquisition> a = c->Acquire(k);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->state_before, Residency::kResident);
  ASSERT_TRUE(c->Release(k).ok());
  EXPECT_EQ(c->Stats().prewarms, 1u);
  EXPECT_EQ(c->Stats().expirations, 1u);
}

// Irregular gaps of 1-40 ms (a busy model): its keep-alive window is ~40 ms,
// but outliving it at that rate is no sign the model went cold.
TEST_F(HostCacheTest, BusyUnpredictableModelIsNotExpiredBeforeMinIdle) {
  auto c = Make(Opts(1'000'000));
  const ModelKey k = K("t", "busy");
  ASSERT_TRUE(c->Register(k, 1000).ok());
  for (int i = 0; i < 40; ++i) {
    Use(c.get(), k);
    clock_.AdvanceNs((1 + (i * 7) % 40) * kNsPerMs);
  }
  Use(c.get(), k);
  const int64_t last = c->Info(k)->last_use_ns;
  const KeepAliveWindows w = c->Info(k)->windows;
  ASSERT_TRUE(w.valid);
  ASSERT_FALSE(w.predictable);
  ASSERT_LT(w.keepalive_ns, 100 * kNsPerMs);
  const int64_t min_idle = KeepAliveOptions{}.min_idle_ns;
  clock_.AdvanceTo(last + 100 * kNsPerMs);  // past the window, well before min_idle
  EXPECT_TRUE(c->ExpireIdle().empty());
  EXPECT_EQ(c->state(k), Residency::kResident);
  clock_.AdvanceTo(last + min_idle);
  EXPECT_EQ(c->ExpireIdle(), std::vector<ModelKey>{k});
  EXPECT_EQ(c->state(k), Residency::kAbsent);
}

// Regular 3 ms gaps (a model under steady load; gaps under 1 ms share the
// first bucket and never look predictable) make the model "predictable" with
// a window of a few ms, but its reload takes 20 ms: no pre-warm could
// act on that window, so a stall of its callers must not unload it (the next
// request would pay the reload; seen as a collapse in scenario 2).
TEST_F(HostCacheTest, BusyModelWhoseReloadOutlastsItsGapsIsNotExpiredBeforeMinIdle) {
  auto c = Make(Opts(100'000'000));
  const ModelKey k = K("t", "busy");
  ASSERT_TRUE(c->Register(k, 20'000'000).ok());
  // The first gap includes the first load (23 ms): 200 gaps keep it out of the p99.
  for (int i = 0; i < 200; ++i) {
    Use(c.get(), k);
    clock_.AdvanceNs(3 * kNsPerMs);
  }
  Use(c.get(), k);
  const int64_t last = c->Info(k)->last_use_ns;
  const KeepAliveWindows w = c->Info(k)->windows;
  ASSERT_TRUE(w.predictable);
  ASSERT_LT(w.keepalive_ns, 10 * kNsPerMs);
  clock_.AdvanceTo(last + 50 * kNsPerMs);  // well past the window
  EXPECT_TRUE(c->ExpireIdle().empty());
  EXPECT_EQ(c->state(k), Residency::kResident);
  clock_.AdvanceTo(last + KeepAliveOptions{}.min_idle_ns);
  EXPECT_EQ(c->ExpireIdle(), std::vector<ModelKey>{k});
}

TEST_F(HostCacheTest, PrewarmReportsTheEntriesItEvictsForItsRoom) {
  // The caller (HostTier::Maintain) must drop what a pre-warm evicted.
  auto c = Make(Opts(1000));
  const ModelKey p = K("t", "periodic");
  for (const ModelKey& k : {p, K("t", "a"), K("t", "b")}) ASSERT_TRUE(c->Register(k, 400).ok());
  for (int i = 0; i < 13; ++i) {
    Use(c.get(), p);
    if (i < 12) clock_.AdvanceNs(kNsPerSec);
  }
  const int64_t last = c->Info(p)->last_use_ns;
  const KeepAliveWindows w = c->Info(p)->windows;
  ASSERT_TRUE(w.predictable);
  clock_.AdvanceTo(last + 100 * kNsPerMs);
  ASSERT_EQ(c->ExpireIdle(), std::vector<ModelKey>{p});
  Use(c.get(), K("t", "a"));  // 800 of 1000 bytes: the pre-warm needs one of them out
  Use(c.get(), K("t", "b"));
  clock_.AdvanceTo(last + w.prewarm_ns);
  ASSERT_EQ(c->PrewarmDue(clock_.NowNs()), std::vector<ModelKey>{p});
  std::vector<ModelKey> evicted;
  Result<std::optional<TierAction>> started = c->Prewarm(p, &evicted);
  ASSERT_TRUE(started.ok());
  ASSERT_TRUE(started->has_value());
  ASSERT_EQ(evicted.size(), 1u);
  EXPECT_EQ(evicted[0], K("t", "a"));  // used before b: the lower decayed rate
  EXPECT_EQ(c->state(K("t", "a")), Residency::kAbsent);
  EXPECT_EQ(c->state(p), Residency::kMoving);
  EXPECT_EQ(c->Stats().evictions, 1u);
}

TEST_F(HostCacheTest, ModelExpectedSoonIsKeptOverAColderOne) {
  // other: 30 calls 5 ms apart, then silent; bursty: 13 calls 20 ms apart.
  // other's recent rate is higher, but its keep-alive window (~6 ms) has long
  // passed while bursty is inside its window: keep-alive keeps bursty, plain
  // miss-cost eviction (keep-alive off) keeps other.
  for (bool keepalive : {true, false}) {
    HostCacheOptions o = Opts(1000);
    o.keepalive = keepalive;
    auto c = Make(o);
    const ModelKey bursty = K("t", "bursty");
    const ModelKey other = K("t", "other");
    for (const ModelKey& k : {bursty, other, K("t", "new")}) ASSERT_TRUE(c->Register(k, 400).ok());
    for (int i = 0; i < 30; ++i) {
      Use(c.get(), other);
      clock_.AdvanceNs(5 * kNsPerMs);
    }
    for (int i = 0; i < 13; ++i) {
      Use(c.get(), bursty);
      clock_.AdvanceNs(20 * kNsPerMs);
    }
    Result<Acquisition> n = c->Acquire(K("t", "new"));
    ASSERT_TRUE(n.ok());
    ASSERT_EQ(n->evicted.size(), 1u);
    EXPECT_EQ(n->evicted[0], keepalive ? other : bursty) << "keepalive=" << keepalive;
  }
}

}  // namespace
}  // namespace orrery

namespace orrery {
namespace {

// Many threads acquiring, loading and releasing: the accounting stays within
// the budget and balances at the end (run under ASan/UBSan too).
TEST(HostCacheConcurrencyTest, AccountingHoldsUnderConcurrentUse) {
  FakeClock clock(0);
  HostCacheOptions o = Opts(4000, 2);
  auto cache = std::move(HostCache::Create(o, &clock)).value();
  // Fixed names: "t" + std::to_string(...) trips g++ 12's false -Wrestrict at -O3.
  static const char* const kTenants[] = {"t0", "t1", "t2"};
  static const char* const kModels[] = {"m0", "m1", "m2", "m3", "m4", "m5", "m6", "m7"};
  auto key = [&](int m) { return K(kTenants[m % 3], kModels[m]); };
  for (int m = 0; m < 8; ++m) ASSERT_TRUE(cache->Register(key(m), 1000).ok());
  std::atomic<int> unavailable{0};
  std::atomic<bool> over_budget{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 300; ++i) {
        const int m = (i * 7 + t * 3) % 8;
        const ModelKey k = key(m);
        clock.AdvanceNs(1000);
        Result<Acquisition> a = cache->Acquire(k);
        if (!a.ok()) {
          ++unavailable;
          continue;
        }
        if (a->action.has_value()) {
          (void)cache->FinishMove(a->action->id, a->action->predicted.start_ns, Status::Ok());
        }
        if (cache->Stats().used_bytes > 4000) over_budget = true;
        (void)cache->Release(k);
      }
    });
  }
  for (std::thread& th : threads) th.join();
  TierStats s = cache->Stats();
  EXPECT_FALSE(over_budget.load());
  EXPECT_LE(s.used_bytes, 4000);
  EXPECT_EQ(s.pinned_bytes, 0);
  EXPECT_EQ(s.used_bytes, s.resident_bytes);  // nothing left moving
  EXPECT_EQ(s.hits + s.joins + s.misses + static_cast<uint64_t>(unavailable.load()), 4u * 300u);
}

}  // namespace
}  // namespace orrery
