#include "scheduler/fair_queue.h"

#include <map>

#include <gtest/gtest.h>

#include "base/clock.h"

namespace orrery {
namespace {

// Backlogged tenants on one lane, simulated with a fake clock: each
// dispatched item runs for `measured(tenant)` of fake time. Returns lane
// time received per tenant.
class Sim {
 public:
  explicit Sim(FairQueue* q) : q_(q) {}
  void Fill(const std::string& tenant, int n, int64_t cost_ns) {
    for (int i = 0; i < n; ++i) q_->Push(tenant, FairQueue::Item{next_id_++, "m", cost_ns});
  }
  // Runs `n` dispatches; `scale` multiplies a tenant's predicted cost to get
  // its measured cost.
  void Run(int n, const std::map<std::string, double>& scale = {}) {
    for (int i = 0; i < n; ++i) {
      std::optional<FairQueue::Dispatch> d = q_->Pop();
      ASSERT_TRUE(d.has_value());
      double s = scale.count(d->tenant) ? scale.at(d->tenant) : 1.0;
      int64_t measured = static_cast<int64_t>(static_cast<double>(d->item.cost_ns) * s);
      clock_.AdvanceNs(measured);
      service_[d->tenant] += measured;
      q_->Complete(*d, measured);
    }
  }
  std::map<std::string, int64_t>& service() { return service_; }
  int64_t now() const { return clock_.NowNs(); }

 private:
  FairQueue* q_;
  FakeClock clock_;
  uint64_t next_id_ = 1;
  std::map<std::string, int64_t> service_;
};

void ExpectShares(const std::map<std::string, int64_t>& service, const std::map<std::string, double>& weights) {
  double total_service = 0, total_weight = 0;
  for (const auto& [t, w] : weights) {
    total_service += static_cast<double>(service.count(t) ? service.at(t) : 0);
    total_weight += w;
  }
  for (const auto& [t, w] : weights) {
    double share = static_cast<double>(service.count(t) ? service.at(t) : 0) / total_service;
    double want = w / total_weight;
    EXPECT_NEAR(share / want, 1.0, 0.05) << t << ": share " << share << ", want " << want;
  }
}

TEST(FairQueueTest, BackloggedTenantsGetServiceInProportionToWeights) {
  FairQueue q;
  q.SetWeight("a", 1);
  q.SetWeight("b", 2);
  q.SetWeight("c", 4);
  Sim sim(&q);
  sim.Fill("a", 1000, 1'000'000);
  sim.Fill("b", 1000, 1'000'000);
  sim.Fill("c", 1000, 1'000'000);
  sim.Run(700);
  ExpectShares(sim.service(), {{"a", 1}, {"b", 2}, {"c", 4}});
}

TEST(FairQueueTest, UnequalCostsAndMisPredictionsAreCorrectedByMeasuredCost) {
  FairQueue q;
  q.SetWeight("a", 1);
  q.SetWeight("b", 2);
  q.SetWeight("c", 4);
  Sim sim(&q);
  sim.Fill("a", 2000, 3'000'000);  // big requests
  sim.Fill("b", 2000, 1'000'000);
  sim.Fill("c", 4000, 250'000);    // small requests
  // a's requests really take twice what was predicted, c's half.
  sim.Run(3000, {{"a", 2.0}, {"c", 0.5}});
  ExpectShares(sim.service(), {{"a", 1}, {"b", 2}, {"c", 4}});
}

TEST(FairQueueTest, WorkConservingAnIdleTenantsShareGoesToOthers) {
  FairQueue q;
  q.SetWeight("a", 1);
  q.SetWeight("b", 4);
  Sim sim(&q);
  sim.Fill("a", 100, 1000);  // b has nothing queued
  sim.Run(100);
  EXPECT_EQ(sim.service()["a"], 100 * 1000);
  EXPECT_TRUE(q.empty());
}

TEST(FairQueueTest, IdleTenantDoesNotBankCredit) {
  FairQueue q;
  Sim sim(&q);
  sim.Fill("a", 1000, 1000);
  sim.Run(500);  // b idle all this time
  sim.Fill("b", 1000, 1000);
  sim.service().clear();
  sim.Run(200);
  // Equal weights: b returns at the current virtual time and shares 1:1
  // instead of catching up on the 500 it missed.
  ExpectShares(sim.service(), {{"a", 1}, {"b", 1}});
  EXPECT_GT(sim.service()["a"], 0);
}

TEST(FairQueueTest, WeightChangeTakesEffect) {
  FairQueue q;
  Sim sim(&q);
  sim.Fill("a", 2000, 1000);
  sim.Fill("b", 2000, 1000);
  sim.Run(200);
  ExpectShares(sim.service(), {{"a", 1}, {"b", 1}});
  q.SetWeight("b", 3);
  EXPECT_EQ(q.weight("b"), 3.0);
  sim.Run(2);  // b's next charge uses the new weight
  sim.service().clear();
  sim.Run(800);
  ExpectShares(sim.service(), {{"a", 1}, {"b", 3}});
}

TEST(FairQueueTest, FifoPerTenantAcrossModels) {
  FairQueue q;
  q.Push("a", {1, "m1", 10});
  q.Push("a", {2, "m2", 10});
  q.Push("a", {3, "m1", 10});
  EXPECT_EQ(q.Peek()->item.id, 1u);
  EXPECT_EQ(q.Pop()->item.id, 1u);
  EXPECT_EQ(q.Pop()->item.id, 2u);
  EXPECT_EQ(q.Pop()->item.id, 3u);
  EXPECT_FALSE(q.Pop().has_value());
}

TEST(FairQueueTest, TakeChargesAndRemoveDoesNot) {
  FairQueue q;
  q.Push("a", {1, "m", 100});
  q.Push("a", {2, "m", 100});
  q.Push("a", {3, "m", 100});
  std::optional<FairQueue::Dispatch> d = q.Take(3);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->tenant, "a");
  EXPECT_EQ(q.Tenants()[0].virtual_finish, 100.0);
  ASSERT_TRUE(q.Remove(2).has_value());
  EXPECT_EQ(q.Tenants()[0].virtual_finish, 100.0);
  EXPECT_FALSE(q.Remove(2).has_value());
  EXPECT_FALSE(q.Take(42).has_value());
  EXPECT_EQ(q.size(), 1u);
  EXPECT_EQ(q.queued("a"), 1u);
  EXPECT_EQ(q.Pop()->item.id, 1u);
}

// Out of fair order (a deadline at risk, warm weights) the tenant is charged
// as usual, but the virtual time stays at what fair order would have served:
// the tenant passed over keeps its place instead of being lifted past it.
TEST(FairQueueTest, TakeOutOfOrderDoesNotMoveVirtualTimePastTheFairPick) {
  FairQueue q;
  q.Push("a", {1, "m", 100});
  q.Push("a", {2, "m", 100});
  q.Push("a", {3, "m", 100});
  q.Push("b", {4, "m", 100});
  EXPECT_EQ(q.Pop()->tenant, "a");  // ties by name; a's start is now 100
  EXPECT_EQ(q.VirtualStartOf("a"), 100.0);
  EXPECT_EQ(q.VirtualStartOf("b"), 0.0);
  ASSERT_TRUE(q.Take(2).has_value());  // a again, out of order
  ASSERT_TRUE(q.Take(3).has_value());
  EXPECT_EQ(q.virtual_time(), 0.0);     // b (start 0) is still the fair pick
  EXPECT_EQ(q.VirtualStartOf("b"), 0.0);
  EXPECT_EQ(q.Peek()->tenant, "b");
  EXPECT_FALSE(q.VirtualStartOf("c").has_value());
}

TEST(FairQueueTest, WorkAheadFollowsWeightedShares) {
  FairQueue q;
  q.SetWeight("a", 1);
  q.SetWeight("b", 1);
  q.SetWeight("c", 3);
  for (uint64_t i = 0; i < 10; ++i) q.Push("a", {i + 1, "m", 1000});  // 10 us queued
  EXPECT_EQ(q.WorkAheadNs("a"), 10'000);  // its own queue
  // b (same weight) would be served alongside a: a's first 0 us of virtual
  // span lie before b's first request.
  EXPECT_EQ(q.WorkAheadNs("b"), 0);
  for (uint64_t i = 0; i < 4; ++i) q.Push("b", {100 + i, "m", 1000});
  // b's next request starts after its own 4 us; by then a got 4 us too.
  EXPECT_EQ(q.WorkAheadNs("b"), 8'000);
  // c (weight 3) starts at once: nothing ahead.
  EXPECT_EQ(q.WorkAheadNs("c"), 0);
  for (uint64_t i = 0; i < 3; ++i) q.Push("c", {200 + i, "m", 1000});
  // c's next starts at virtual 1 us: a and b got 1 us each before it.
  EXPECT_EQ(q.WorkAheadNs("c"), 3'000 + 1'000 + 1'000);
}

// A tenant below its share (nothing queued) gets its next request started
// before a backlogged tenant's newest one, not the other way round; between
// two backlogged tenants, the one with less queued (weighted) goes first.
TEST(FairQueueTest, ArrivalsOfATenantBelowItsShareGoAheadOfABackloggedOnes) {
  FairQueue q;
  q.SetWeight("a", 1);
  q.SetWeight("b", 1);
  for (uint64_t i = 0; i < 10; ++i) q.Push("a", {i + 1, "m", 1000});
  EXPECT_TRUE(q.ArrivalGoesAhead("b", "a"));
  EXPECT_FALSE(q.ArrivalGoesAhead("a", "b"));
  EXPECT_TRUE(q.ArrivalGoesAhead("never-seen", "a"));
  for (uint64_t i = 0; i < 9; ++i) q.Push("b", {100 + i, "m", 1000});
  EXPECT_TRUE(q.ArrivalGoesAhead("b", "a"));  // 9 us queued against a's 10
  q.Push("b", {200, "m", 1000});
  EXPECT_FALSE(q.ArrivalGoesAhead("b", "a"));  // a tie: neither goes first
  EXPECT_FALSE(q.ArrivalGoesAhead("a", "b"));
  q.Push("b", {201, "m", 1000});
  EXPECT_TRUE(q.ArrivalGoesAhead("a", "b"));
}

}  // namespace
}  // namespace orrery
