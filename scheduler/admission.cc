#include "scheduler/admission.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace orrery {

std::string FormatDurationNs(int64_t ns) {
  char buf[64];
  const char* sign = ns < 0 ? "-" : "";
  const int64_t a = ns < 0 ? -ns : ns;
  const double v = static_cast<double>(a);
  if (a < 1'000) {
    std::snprintf(buf, sizeof(buf), "%s%lld ns", sign, static_cast<long long>(a));
  } else if (a < 1'000'000) {
    std::snprintf(buf, sizeof(buf), "%s%.1f us", sign, v / 1e3);
  } else if (a < 1'000'000'000) {
    std::snprintf(buf, sizeof(buf), "%s%.3f ms", sign, v / 1e6);
  } else {
    std::snprintf(buf, sizeof(buf), "%s%.3f s", sign, v / 1e9);
  }
  return buf;
}

AdmissionDecision Admit(const AdmissionInput& in, const std::string& what) {
  AdmissionDecision d;
  const int lanes = std::max(in.lanes, 1);
  // Capped so that a wrong estimate cannot stretch a wait without bound.
  const double free_share = 1.0 - std::clamp(in.interference, 0.0, kMaxInterference);
  d.predicted_wait_ns =
      std::llround(static_cast<double>((in.queued_ahead_ns + in.running_remaining_ns) / lanes) / free_share);
  const int64_t wait_ns =
      std::llround(static_cast<double>(d.predicted_wait_ns) * (1.0 + std::max(in.wait_slack, 0.0)));
  const int64_t load_ns = std::max<int64_t>(in.ready_ns - in.now_ns, 0);
  const int64_t own_ns = std::llround(static_cast<double>(in.own_cost_ns) * std::max(in.slowdown, 1.0));
  d.planned_ns = own_ns + std::max<int64_t>(in.response_ns, 0);
  d.predicted_completion_ns = in.now_ns + std::max(wait_ns, load_ns) + d.planned_ns;
  if (in.max_in_flight > 0 && in.in_flight >= in.max_in_flight) {
    d.status = Status::ResourceExhausted(what + ": " + std::to_string(in.in_flight) +
                                         " requests in flight, the tenant's in-flight limit is " +
                                         std::to_string(in.max_in_flight));
    return d;
  }
  if (in.deadline_ns != kNoDeadline && in.queue_horizon < 1.0 && wait_ns > 0) {
    const double left = static_cast<double>(std::max<int64_t>(in.deadline_ns - in.now_ns, 0));
    if (static_cast<double>(wait_ns) > std::max(in.queue_horizon, 0.0) * left) {
      d.status = Status::DeadlineExceeded(
          what + ": predicted completion in " + FormatDurationNs(d.predicted_completion_ns - in.now_ns) +
          ", but waiting " + FormatDurationNs(wait_ns) + " for queued and running work over " +
          std::to_string(lanes) + " lanes is more than " + std::to_string(std::llround(100 * in.queue_horizon)) +
          "% of the " + FormatDurationNs(in.deadline_ns - in.now_ns) +
          " left before the deadline (the queue is kept short so that a slow spell does not make admitted "
          "requests late)");
      return d;
    }
  }
  if (in.deadline_ns != kNoDeadline && d.predicted_completion_ns > in.deadline_ns) {
    d.status = Status::DeadlineExceeded(
        what + ": predicted completion in " + FormatDurationNs(d.predicted_completion_ns - in.now_ns) +
        " (waiting " + FormatDurationNs(wait_ns) + " for queued and running work over " + std::to_string(lanes) +
        " lanes" +
        (load_ns > 0 ? std::string(" and ").append(FormatDurationNs(load_ns)).append(" for the model's weights to load")
                     : std::string()) +
        ", then running " + FormatDurationNs(own_ns) +
        (own_ns != in.own_cost_ns
             ? " (" + FormatDurationNs(in.own_cost_ns) + " predicted, planned with this model's recent slowdown)"
             : "") +
        (in.response_ns > 0 ? " and answering " + FormatDurationNs(in.response_ns) : "") + ") is after the deadline, " +
        (in.deadline_ns >= in.now_ns ? "in " + FormatDurationNs(in.deadline_ns - in.now_ns)
                                     : FormatDurationNs(in.now_ns - in.deadline_ns) + " ago"));
  }
  return d;
}

}  // namespace orrery
