// Admission against deadlines and per-tenant in-flight limits: pure logic,
// no clock of its own (the scheduler passes `now`).
//
// Completion is predicted as
//   max(now + (queued work ahead under fair sharing + remaining work of
//              running requests) / lanes / (1 - interference)
//              x (1 + wait_slack),
//       the model's weights ready (host cache load's predicted end))
//   + own predicted cost x slowdown + response time,
// interference being the share of the lanes that other tenants' arrivals
// will take ahead of this request in fair order while it waits (tenants
// below their share: their new requests start before it in virtual time),
// the slowdown being how much slower than predicted this model's runs have
// recently been (CostModel::SlowdownBound, a high quantile) and the response
// time what the server needs after the lane (metering, the reply; measured).
// A request that cannot meet its deadline is rejected at once with
// DEADLINE_EXCEEDED naming the predicted completion, before it consumes any
// resource. A queued request whose deadline can no longer be met even if it
// started now (now + cost > deadline) is infeasible and is dropped before
// it runs.
#pragma once

#include <cstdint>
#include <limits>
#include <string>

#include "base/status.h"

namespace orrery {

inline constexpr int64_t kNoDeadline = std::numeric_limits<int64_t>::max();
// AdmissionInput::interference is capped here (the wait at most 10x).
inline constexpr double kMaxInterference = 0.9;

// Per-tenant scheduling parameters; updatable at run time.
struct TenantPolicy {
  double weight = 1.0;             // fair share, relative to other tenants (> 0)
  int max_in_flight = 0;           // admitted and not yet finished; 0 = unlimited
  int64_t default_timeout_ns = 0;  // when a request has no deadline; 0 = none
};

struct AdmissionInput {
  int64_t now_ns = 0;
  int64_t deadline_ns = kNoDeadline;  // absolute
  int64_t own_cost_ns = 0;            // predicted
  double slowdown = 1.0;              // >= 1: own cost is planned as own_cost_ns x slowdown
  int64_t response_ns = 0;            // after the lane, before the client has the answer
  int64_t queued_ahead_ns = 0;        // FairQueue::WorkAheadNs
  int64_t running_remaining_ns = 0;   // predicted remainder of running requests
  int64_t ready_ns = 0;               // absolute: the model's weights resident; <= now = already
  int lanes = 1;
  // Share of the lanes, in [0, 1), that other tenants' requests arriving
  // during the wait take ahead of this one (their recent lane time per ns
  // per lane, within what fair sharing lets them take). The wait is W = ahead
  // + interference x W: without it, a tenant over its share fills its queue
  // to its deadlines and then either its requests are dropped or an
  // under-share tenant's requests wait behind them.
  double interference = 0.0;
  // The wait for queued and running work is planned this much longer than
  // predicted: it sums dozens of predictions whose errors do not all cancel,
  // and a request admitted right at the edge of its deadline is answered
  // after it once the reply has crossed the network.
  double wait_slack = 0.0;
  // The wait (after wait_slack) may take at most this fraction of the time
  // left before the deadline; 1 = no bound besides the deadline. Why: the
  // wait is the committed queue, and a queue filled up to the deadline
  // turns any slow spell of the lanes into late drops (scenario 4: the lane
  // ran 17% slower for a second, 135 admitted requests were dropped) and
  // keeps the over-share tenant's queued requests always at risk. With 0.5
  // the queue ahead can run up to ~2x slower than planned and still make it.
  double queue_horizon = 1.0;
  int in_flight = 0;  // the tenant's admitted, unfinished requests
  int max_in_flight = 0;
};

struct AdmissionDecision {
  Status status;  // OK, DEADLINE_EXCEEDED or RESOURCE_EXHAUSTED
  int64_t predicted_completion_ns = 0;
  // own cost x slowdown + response time: what the request needs from its
  // start to its answer, for its latest start (LatestStartNs).
  int64_t planned_ns = 0;
  // The wait for queued and running work as predicted (interference
  // included), before wait_slack (what the scheduler later compares the
  // real wait with).
  int64_t predicted_wait_ns = 0;
};

// `what` names the request in messages, e.g. "model 'mlp' of tenant 't_1'".
AdmissionDecision Admit(const AdmissionInput& in, const std::string& what);

// Cannot finish by its deadline even if started now.
inline bool Infeasible(int64_t now_ns, int64_t deadline_ns, int64_t cost_ns) {
  return deadline_ns != kNoDeadline && now_ns + cost_ns > deadline_ns;
}
// The latest time a request can start and still meet its deadline.
inline int64_t LatestStartNs(int64_t deadline_ns, int64_t cost_ns) {
  return deadline_ns == kNoDeadline ? kNoDeadline : deadline_ns - cost_ns;
}

// "1.234 ms" style, for messages.
std::string FormatDurationNs(int64_t ns);

}  // namespace orrery
