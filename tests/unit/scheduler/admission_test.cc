#include "scheduler/admission.h"

#include <cmath>

#include <gtest/gtest.h>

#include "base/clock.h"

namespace orrery {
namespace {

constexpr int64_t kMs = 1'000'000;

TEST(AdmissionTest, AdmitsWhenPredictedCompletionMeetsTheDeadline) {
  FakeClock clock;
  AdmissionInput in{.now_ns = clock.NowNs(), .deadline_ns = clock.NowNs() + 10 * kMs, .own_cost_ns = 2 * kMs,
                    .queued_ahead_ns = 8 * kMs, .running_remaining_ns = 4 * kMs, .lanes = 2};
  AdmissionDecision d = Admit(in, "model 'm'");
  EXPECT_TRUE(d.status.ok()) << d.status.ToString();
  EXPECT_EQ(d.predicted_completion_ns, clock.NowNs() + 6 * kMs + 2 * kMs);  // (8 + 4) / 2 + 2
}

// Other tenants' arrivals that go ahead in fair order take `interference`
// of the lanes during the wait: W = ahead + interference x W.
TEST(AdmissionTest, TheWaitIncludesWhatOtherTenantsArrivalsTakeAheadOfIt) {
  AdmissionInput in{.now_ns = 0, .deadline_ns = 15 * kMs, .own_cost_ns = 1 * kMs, .queued_ahead_ns = 10 * kMs};
  AdmissionDecision d = Admit(in, "m");
  EXPECT_TRUE(d.status.ok()) << d.status.ToString();
  EXPECT_EQ(d.predicted_completion_ns, 11 * kMs);
  in.interference = 0.5;  // half the lane goes to others: 10 ms of own queue take 20 ms
  d = Admit(in, "m");
  EXPECT_EQ(d.status.code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(d.predicted_wait_ns, 20 * kMs);
  EXPECT_EQ(d.predicted_completion_ns, 21 * kMs);
  EXPECT_NE(d.status.message().find("waiting 20.000 ms for queued and running work"), std::string::npos)
      << d.status.message();
  in.interference = 5.0;  // nonsense is capped: at most 10x
  EXPECT_EQ(Admit(in, "m").predicted_wait_ns, std::llround(10 * kMs / (1 - kMaxInterference)));
  in.interference = -1.0;
  EXPECT_EQ(Admit(in, "m").predicted_wait_ns, 10 * kMs);
}

TEST(AdmissionTest, RejectsAtOnceNamingThePredictedCompletion) {
  FakeClock clock;
  AdmissionInput in{.now_ns = clock.NowNs(), .deadline_ns = clock.NowNs() + 5 * kMs, .own_cost_ns = 2 * kMs,
                    .queued_ahead_ns = 8 * kMs, .lanes = 2};
  AdmissionDecision d = Admit(in, "model 'm' of tenant 't'");
  EXPECT_EQ(d.status.code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(d.predicted_completion_ns, clock.NowNs() + 6 * kMs);
  EXPECT_NE(d.status.message().find("predicted completion in 6.000 ms"), std::string::npos) << d.status.message();
  EXPECT_NE(d.status.message().find("after the deadline, in 5.000 ms"), std::string::npos) << d.status.message();
  EXPECT_NE(d.status.message().find("model 'm' of tenant 't'"), std::string::npos);
}

TEST(AdmissionTest, OwnCostIsPlannedWithTheSlowdownAndTheResponseTime) {
  AdmissionInput in{.now_ns = 0, .deadline_ns = 10 * kMs, .own_cost_ns = 2 * kMs, .slowdown = 1.5,
                    .response_ns = kMs / 2, .queued_ahead_ns = 6 * kMs};
  AdmissionDecision d = Admit(in, "m");
  EXPECT_TRUE(d.status.ok()) << d.status.ToString();
  EXPECT_EQ(d.planned_ns, 3 * kMs + kMs / 2);  // 2 ms x 1.5 + 0.5 ms
  EXPECT_EQ(d.predicted_completion_ns, 6 * kMs + 3 * kMs + kMs / 2);
  in.deadline_ns = 9 * kMs;  // enough for the prediction alone, not for the plan
  d = Admit(in, "m");
  EXPECT_EQ(d.status.code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(d.status.message().find("running 3.000 ms (2.000 ms predicted, planned with this model's recent slowdown)"
                                    " and answering 500.0 us"),
            std::string::npos)
      << d.status.message();
  in.slowdown = 0.5;  // never below the prediction
  in.response_ns = -1;
  EXPECT_EQ(Admit(in, "m").planned_ns, 2 * kMs);
}

TEST(AdmissionTest, ALoadingModelStartsWhenItsWeightsAreReadyNotBefore) {
  // Lanes free in 6 ms, weights ready in 9 ms: the run starts at 9 ms.
  AdmissionInput in{.now_ns = 100 * kMs, .deadline_ns = 110 * kMs, .own_cost_ns = 2 * kMs,
                    .queued_ahead_ns = 12 * kMs, .ready_ns = 109 * kMs, .lanes = 2};
  AdmissionDecision d = Admit(in, "model 'cold' of tenant 't'");
  EXPECT_EQ(d.status.code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(d.predicted_completion_ns, 111 * kMs);
  EXPECT_NE(d.status.message().find("predicted completion in 11.000 ms"), std::string::npos) << d.status.message();
  EXPECT_NE(d.status.message().find("9.000 ms for the model's weights to load"), std::string::npos)
      << d.status.message();
  // The load hides behind the queue when the lanes are busy for longer.
  in.queued_ahead_ns = 20 * kMs;  // lanes free in 10 ms
  in.deadline_ns = 112 * kMs;
  d = Admit(in, "m");
  EXPECT_TRUE(d.status.ok()) << d.status.ToString();
  EXPECT_EQ(d.predicted_completion_ns, 112 * kMs);
  // Weights already resident (ready in the past): no load in the prediction.
  in.ready_ns = 50 * kMs;
  in.queued_ahead_ns = 0;
  EXPECT_EQ(Admit(in, "m").predicted_completion_ns, 102 * kMs);
}

TEST(AdmissionTest, TheWaitIsPlannedWithSlack) {
  AdmissionInput in{.now_ns = 0, .deadline_ns = 12 * kMs, .own_cost_ns = 1 * kMs, .queued_ahead_ns = 10 * kMs,
                    .wait_slack = 0.1};
  AdmissionDecision d = Admit(in, "m");
  EXPECT_EQ(d.predicted_completion_ns, 12 * kMs);  // 10 ms x 1.1 + 1 ms
  EXPECT_TRUE(d.status.ok()) << d.status.ToString();
  in.deadline_ns = 11 * kMs + kMs / 2;  // met by the bare prediction (11 ms), not by the plan
  EXPECT_EQ(Admit(in, "m").status.code(), StatusCode::kDeadlineExceeded);
  in.wait_slack = -1;  // never shorter than predicted
  EXPECT_EQ(Admit(in, "m").predicted_completion_ns, 11 * kMs);
}

// The queue horizon bounds the committed wait to a share of the time left,
// however loose the deadline: the wait can then run ~1 / horizon times
// longer than planned before an admitted request misses.
TEST(AdmissionTest, TheQueueHorizonRefusesWaitsLongerThanItsShareOfTheTimeLeft) {
  AdmissionInput in{.now_ns = 0, .deadline_ns = 50 * kMs, .own_cost_ns = 2 * kMs, .queued_ahead_ns = 30 * kMs};
  EXPECT_TRUE(Admit(in, "m").status.ok());  // completes at 32 ms, before 50
  in.queue_horizon = 0.5;                   // a wait of at most 25 ms
  AdmissionDecision d = Admit(in, "m");
  EXPECT_EQ(d.status.code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(d.status.message().find("waiting 30.000 ms for queued and running work over 1 lanes is more than 50% "
                                    "of the 50.000 ms left"),
            std::string::npos)
      << d.status.message();
  in.queued_ahead_ns = 25 * kMs;
  EXPECT_TRUE(Admit(in, "m").status.ok());
  in.wait_slack = 0.1;  // the planned wait, slack included, is what is bounded
  EXPECT_EQ(Admit(in, "m").status.code(), StatusCode::kDeadlineExceeded);
  // Nothing ahead: a tight deadline is decided by the deadline alone.
  AdmissionInput tight{.now_ns = 0, .deadline_ns = 3 * kMs, .own_cost_ns = 2 * kMs, .queue_horizon = 0.5};
  EXPECT_TRUE(Admit(tight, "m").status.ok());
  AdmissionInput none{.now_ns = 0, .own_cost_ns = 2 * kMs, .queued_ahead_ns = 500 * kMs, .queue_horizon = 0.5};
  EXPECT_TRUE(Admit(none, "m").status.ok());  // no deadline, no horizon
}

TEST(AdmissionTest, PassedDeadlineReadsAsAgo) {
  AdmissionInput in{.now_ns = 10 * kMs, .deadline_ns = 9 * kMs, .own_cost_ns = 1};
  AdmissionDecision d = Admit(in, "x");
  EXPECT_EQ(d.status.code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(d.status.message().find("after the deadline, 1.000 ms ago"), std::string::npos) << d.status.message();
}

TEST(AdmissionTest, NoDeadlineIsAlwaysFeasible) {
  AdmissionInput in{.now_ns = 5, .deadline_ns = kNoDeadline, .own_cost_ns = 1'000'000 * kMs};
  EXPECT_TRUE(Admit(in, "x").status.ok());
  EXPECT_FALSE(Infeasible(5, kNoDeadline, 1'000'000 * kMs));
  EXPECT_EQ(LatestStartNs(kNoDeadline, 7), kNoDeadline);
}

TEST(AdmissionTest, InFlightLimitIsResourceExhaustedNamingTheLimit) {
  AdmissionInput in{.now_ns = 0, .in_flight = 4, .max_in_flight = 4};
  AdmissionDecision d = Admit(in, "tenant 't'");
  EXPECT_EQ(d.status.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(d.status.message().find("in-flight limit is 4"), std::string::npos) << d.status.message();
  in.in_flight = 3;
  EXPECT_TRUE(Admit(in, "tenant 't'").status.ok());
  in.max_in_flight = 0;  // unlimited
  in.in_flight = 1'000'000;
  EXPECT_TRUE(Admit(in, "tenant 't'").status.ok());
}

TEST(AdmissionTest, QueuedRequestBecomesInfeasibleAsTimePasses) {
  FakeClock clock;
  const int64_t deadline = clock.NowNs() + 10 * kMs;
  const int64_t cost = 3 * kMs;
  EXPECT_FALSE(Infeasible(clock.NowNs(), deadline, cost));
  EXPECT_EQ(LatestStartNs(deadline, cost), clock.NowNs() + 7 * kMs);
  clock.AdvanceNs(7 * kMs);
  EXPECT_FALSE(Infeasible(clock.NowNs(), deadline, cost));  // exactly on time
  clock.AdvanceNs(1);
  EXPECT_TRUE(Infeasible(clock.NowNs(), deadline, cost));
}

TEST(AdmissionTest, FormatsDurations) {
  EXPECT_EQ(FormatDurationNs(999), "999 ns");
  EXPECT_EQ(FormatDurationNs(1'500), "1.5 us");
  EXPECT_EQ(FormatDurationNs(2'500'000), "2.500 ms");
  EXPECT_EQ(FormatDurationNs(3'000'000'000), "3.000 s");
  EXPECT_EQ(FormatDurationNs(-1'500), "-1.5 us");
}

}  // namespace
}  // namespace orrery
