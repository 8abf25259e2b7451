// TierCache's operator actions (AdminService cache endpoints): List, an
// operator pin that holds a model against eviction and only OperatorUnpin
// undoes, a prefetch Load that pins nothing, none of them counted as a
// request.
#include <string>

#include <gtest/gtest.h>

#include "cache/host_cache.h"

namespace orrery {
namespace {

HostCacheOptions Opts(int64_t budget) {
  HostCacheOptions o;
  o.budget_bytes = budget;
  o.load_concurrency = 1;
  o.disk = {.initial_bytes_per_sec = 1e9, .latency_ns = 100, .ewma_alpha = 0.25};
  o.keepalive = false;
  return o;
}

ModelKey K(const std::string& model) { return ModelKey{"t", model, 1}; }

class OperatorActionsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto c = HostCache::Create(Opts(1000), &clock_);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    cache_ = std::move(c).value();
    for (const char* m : {"a", "b", "c"}) ASSERT_TRUE(cache_->Register(K(m), 400).ok());
  }
  // Completes `acq`'s move, if it started one, at its predicted end.
  void Finish(const Acquisition& acq) {
    if (!acq.action.has_value()) return;
    clock_.AdvanceTo(acq.action->predicted.end_ns);
    ASSERT_TRUE(cache_->FinishMove(acq.action->id, acq.action->predicted.start_ns, Status::Ok()).ok());
  }
  // A request: acquire, load if needed, release.
  void Use(const ModelKey& k) {
    Result<Acquisition> a = cache_->Acquire(k);
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    Finish(*a);
    ASSERT_TRUE(cache_->Release(k).ok());
  }
  FakeClock clock_{1'000'000};
  std::unique_ptr<HostCache> cache_;
};

TEST_F(OperatorActionsTest, ListShowsEveryEntryWithStatePinsAndLastUse) {
  const int64_t used_at = clock_.NowNs();  // the request's arrival, not the load's end
  Use(K("a"));
  clock_.AdvanceNs(50);
  Result<Acquisition> b = cache_->OperatorPin(K("b"));
  ASSERT_TRUE(b.ok());
  std::vector<TierEntryInfo> list = cache_->List();
  ASSERT_EQ(list.size(), 3u);
  EXPECT_EQ(list[0].key, K("a"));
  EXPECT_EQ(list[0].state, Residency::kResident);
  EXPECT_EQ(list[0].pins, 0);
  EXPECT_TRUE(list[0].used);
  EXPECT_EQ(list[0].last_use_ns, used_at);
  EXPECT_EQ(list[0].bytes, 400);
  EXPECT_EQ(list[1].state, Residency::kMoving);
  EXPECT_EQ(list[1].pins, 1);
  EXPECT_EQ(list[1].operator_pins, 1);
  EXPECT_FALSE(list[1].used);  // an operator pin is not a request
  EXPECT_EQ(list[2].state, Residency::kAbsent);
  Finish(*b);
  EXPECT_EQ(cache_->Info(K("b"))->state, Residency::kResident);
  const TierStats s = cache_->Stats();
  EXPECT_EQ(s.misses, 1u);  // a's request only
  EXPECT_EQ(s.hits, 0u);
  EXPECT_EQ(s.moves_started, 2u);
  EXPECT_EQ(s.bytes_moved, 800);
  EXPECT_GT(s.move_ns, 0);
}

TEST_F(OperatorActionsTest, OperatorPinSurvivesPressureUntilUnpinned) {
  Result<Acquisition> a = cache_->OperatorPin(K("a"));
  ASSERT_TRUE(a.ok());
  Finish(*a);
  // b and c compete for the remaining 600 bytes: they evict each other, never a.
  for (int i = 0; i < 3; ++i) {
    Use(K("b"));
    Use(K("c"));
    EXPECT_EQ(cache_->state(K("a")), Residency::kResident);
  }
  EXPECT_GE(cache_->Stats().evictions, 5u);
  EXPECT_EQ(cache_->Evict(K("a")).code(), StatusCode::kFailedPrecondition);
  // A request's Release does not undo an operator pin...
  EXPECT_EQ(cache_->Release(K("a")).code(), StatusCode::kFailedPrecondition);
  ASSERT_TRUE(cache_->OperatorUnpin(K("a")).ok());
  // ...and an unpin without an operator pin is refused.
  EXPECT_EQ(cache_->OperatorUnpin(K("a")).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(cache_->OperatorUnpin(K("zzz")).code(), StatusCode::kNotFound);
  ASSERT_TRUE(cache_->Evict(K("a")).ok());
  EXPECT_EQ(cache_->state(K("a")), Residency::kAbsent);
}

TEST_F(OperatorActionsTest, OperatorPinAndRequestPinAreCountedApart) {
  Result<Acquisition> r = cache_->Acquire(K("a"));
  ASSERT_TRUE(r.ok());
  Finish(*r);
  ASSERT_TRUE(cache_->OperatorPin(K("a")).ok());
  EXPECT_EQ(cache_->Info(K("a"))->pins, 2);
  ASSERT_TRUE(cache_->Release(K("a")).ok());
  EXPECT_EQ(cache_->Release(K("a")).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(cache_->Info(K("a"))->pins, 1);
  EXPECT_EQ(cache_->Stats().pinned_bytes, 400);
  ASSERT_TRUE(cache_->OperatorUnpin(K("a")).ok());
  EXPECT_EQ(cache_->Stats().pinned_bytes, 0);
}

TEST_F(OperatorActionsTest, LoadPrefetchesWithoutPinningOrCountingARequest) {
  Result<Acquisition> a = cache_->Load(K("a"));
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(a->action.has_value());
  EXPECT_EQ(cache_->Info(K("a"))->pins, 0);
  Finish(*a);
  // Already resident: nothing to do.
  Result<Acquisition> again = cache_->Load(K("a"));
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->action.has_value());
  Use(K("a"));
  const TierStats s = cache_->Stats();
  EXPECT_EQ(s.hits, 1u);
  EXPECT_EQ(s.misses, 0u);
  EXPECT_EQ(cache_->Load(K("zzz")).status().code(), StatusCode::kNotFound);
}

TEST_F(OperatorActionsTest, NoRoomWhenOperatorPinsHoldItChangesNothing) {
  for (const char* m : {"a", "b"}) {
    Result<Acquisition> p = cache_->OperatorPin(K(m));
    ASSERT_TRUE(p.ok());
    Finish(*p);
  }
  const TierStats before = cache_->Stats();
  EXPECT_EQ(cache_->Load(K("c")).status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(cache_->OperatorPin(K("c")).status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(cache_->Acquire(K("c")).status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(cache_->Info(K("c"))->pins, 0);
  EXPECT_EQ(cache_->Stats().moves_started, before.moves_started);
}

TEST_F(OperatorActionsTest, UnregisterDropsOperatorPins) {
  Result<Acquisition> p = cache_->OperatorPin(K("a"));
  ASSERT_TRUE(p.ok());
  Finish(*p);
  ASSERT_TRUE(cache_->Unregister(K("a")).ok());
  EXPECT_FALSE(cache_->Info(K("a")).has_value());
  const TierStats s = cache_->Stats();
  EXPECT_EQ(s.used_bytes, 0);
  EXPECT_EQ(s.pinned_bytes, 0);
}

}  // namespace
}  // namespace orrery
