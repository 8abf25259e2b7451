// FairScheduler: the predictable-cost, fair, deadline-aware scheduler.
//
//   Submit -> admission (in-flight limit, predicted completion vs deadline)
//          -> per-tenant queue in a weighted FairQueue
//          -> a lane dispatches by fair order (deadline-at-risk first; a
//             tenant well under its share before one over it)
//          -> runs it layer by layer with Execution::Step
//          -> measured lane time corrects the tenant's virtual time and the
//             cost model.
//
// Lanes are worker threads, one per core by default, each with its own
// runtime::LaneGroup of one thread (optionally pinned). Between two steps a
// lane checks the queue's most urgent request (the smallest latest start =
// deadline - predicted cost): if it would miss its deadline waiting for the
// rest of the current request and its deadline is earlier, the current
// Execution is parked on the lane and the urgent one runs first; the parked
// one resumes when it ends. So a short request waits at most about one layer
// of a long one. Queued requests that can no longer meet their deadline are
// dropped before they run (their callback gets DEADLINE_EXCEEDED).
//
// Predictions come from the CostModel (per model id and batch size). A model
// never measured has no prediction: its first request is admitted with cost
// 0 and its run seeds the model (Calibrate() seeds it explicitly).
//
// Thread-safe. Submit costs one lock and O(tenants + log queue); it never
// blocks on execution. Callbacks run on a lane thread (or, for drops, on the
// thread that noticed), never under the scheduler's lock.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <deque>
#include <vector>

#include "base/status.h"
#include "ops/parallel.h"
#include "base/clock.h"
#include "scheduler/admission.h"
#include "scheduler/calibration.h"
#include "scheduler/cost_model.h"
#include "scheduler/device_lanes.h"
#include "scheduler/fair_queue.h"
#include "scheduler/recent_speed.h"
#include "scheduler/request.h"
#include "base/windowed_quantile.h"
#include "cache/rate_estimator.h"

namespace orrery {

struct FairSchedulerOptions {
  // 0 = one per lane_threads entries of lane_cpus, else one per
  // lane_threads cores.
  int lanes = 0;
  // Threads of each lane's group: a request's kernels split their work
  // across them (a lane group), so one request may use several cores.
  int lane_threads = 1;
  // Thread j of lane i runs pinned to lane_cpus[(i * lane_threads + j) %
  // size]; empty: lanes are not pinned.
  std::vector<int> lane_cpus = {};
  const Clock* clock = nullptr;  // null = SteadyClock
  TenantPolicy default_policy = {};  // tenants without SetTenantPolicy
  CostModelOptions cost = {};
  int max_parked = 4;            // preempted Executions a lane may hold
  bool start_paused = false;     // queue without dispatching until Resume()
  // A tenant is charged its measured lane time, kept within this factor of
  // the prediction (when there is one); < 1: the measured time as it is.
  double max_charge_factor = 2.0;
  // Largest batch a lane forms from queued requests of one tenant and model
  // version (see README.md, batching); 1 = never batch.
  int max_batch = 8;
  // A batch may not make any layer longer than this (or than the leader's
  // own layers, if those are longer), nor longer than the slack of the most
  // urgent queued request: a request waits at most one layer of a running
  // one, and batching must not stretch that layer past other deadlines.
  // 0 = no bound.
  int64_t max_batch_step_ns = 2'000'000;
  // Between two layers a lane also parks its request for another tenant's
  // that fair order puts no later (a tenant back from idle, or under its
  // share behind a heavy one): a tenant's request then waits one layer of
  // another's run, not the whole run (or batch).
  bool fair_preemption = true;
  // Light tenants go before heavy ones. A tenant is light against another
  // when its recent lane share (decayed over 1 s) is below this fraction of
  // its fair share against it (its weight / both weights) and the other's
  // is above its own fair share against it (it is heavy). A light tenant's
  // queued requests are dispatched before the heavy tenant's fair pick
  // and its at-risk requests, and preempt the heavy tenant's run between
  // layers (unless that would make the run late, as fair preemption); the
  // heavy tenant's at-risk requests do not preempt a light tenant's run,
  // nor does its cache-affinity run go before it.
  // The heavy tenant's requests that can then no longer start in time are
  // dropped before running (DEADLINE_EXCEEDED, its `dropped`). A tenant
  // over its share fills its queue up to its deadline horizon, so its
  // queued requests are always nearly at risk, and fair order alone
  // interleaves a light tenant's bursts with its runs: the light tenant of
  // the noisy-neighbour scenario waited 3-14 ms behind them. Bounded: a
  // light tenant stops being light above the fraction. Tenants at their
  // shares (backlogged alike, any weights) are neither. 0 = off, the
  // library default (orreryd: 0.75, with queue_horizon_fraction 0.5 so the
  // heavy tenant's queued requests have slack to wait; scheduler/README.md).
  double light_share_fraction = 0;
  // Cache affinity: when fair order picks another model than the lane just
  // ran, the lane may run a queued request of the model it just ran (its
  // weights still in the CPU caches) instead, if that tenant's virtual
  // start is at most this much lane time (/ its weight) after the fair
  // pick's, the fair pick's tenant is backlogged (a lone request keeps
  // strict order) and no queued deadline is put at risk. Fair shares then lag by
  // at most this much, and fewer runs pay for cold weights (an 8 MB MLP
  // alternating with another tenant's ran ~7% slower than back to back).
  // 0 = off.
  int64_t affinity_window_ns = 2'000'000;
  // A run is predicted warm (CacheState) when the lane's previous step was
  // of the same model and ended at most this long before it starts.
  int64_t warm_gap_ns = 1'000'000;
  // The lane's speed: an EWMA (this weight per run; a sample at most 2x off
  // the speed) of measured lane time / the cost model's estimate for the
  // run's cache state, over the lane's recent runs of any model. A lane predicts
  // each run as the model's estimate x this speed (the prediction the
  // error statistics and the RunReport show). Why: this VM runs in spells
  // (every layer 1.5-1.8x slower for tens of runs; consecutive runs'
  // measured / estimate correlate 0.77-0.84 in scenario 5), which a
  // per-model EWMA learns only from that model's own runs, after the spell
  // has moved on. Planning (admission, at-risk checks, charges) keeps the
  // model's estimate x its slowdown bound, which already covers spells.
  // 0 = off (the speed stays 1).
  double lane_speed_alpha = 0.3;
  // Admission plans the wait for the work ahead longer than predicted
  // (AdmissionInput::wait_slack): by the wait_slack_quantile of how much
  // longer than predicted recent queued requests waited (waits predicted at
  // least wait_slack_min_wait_ns; drops count with the wait they had),
  // within [admission_wait_slack, wait_slack_max]; admission_wait_slack
  // until wait_slack_min_samples were seen. Waits run long in bursts (this
  // machine slows down for a while; later arrivals that fair order puts
  // first), and a request admitted on the optimistic side of such a burst
  // misses its deadline after queueing instead of being told at once.
  double admission_wait_slack = 0.1;
  double wait_slack_quantile = 0.99;
  size_t wait_slack_window = 512;
  int64_t wait_slack_max_age_ns = 10'000'000'000;
  size_t wait_slack_min_samples = 20;
  int64_t wait_slack_min_wait_ns = 1'000'000;
  double wait_slack_max = 1.0;
  // The client's deadline also covers gRPC and the network both ways, which
  // the server cannot see (the deadline it receives starts when the request
  // arrived; the answer still has to travel back). Admission and drops
  // therefore plan to finish this fraction of the time left before the
  // deadline early, within [min, max]: in the 2x overload scenario the
  // answers admitted at the edge of a 50 ms deadline reached the client
  // 1-2 ms after the server finished and were late. Off by default here
  // (tests plan to the exact deadline); orreryd sets 5%, [0.5, 5] ms.
  double deadline_margin_fraction = 0;
  int64_t deadline_margin_min_ns = 0;
  int64_t deadline_margin_max_ns = 0;
  // Admission plans for the time after the lane (ObserveResponseNs): the
  // response_quantile of the last response_window observations.
  double response_quantile = 0.99;
  size_t response_window = 256;
  int64_t response_max_age_ns = 5'000'000'000;  // older observations are dropped
  // Host stall spells (scheduler/recent_speed.h): admission also plans the
  // request's own run and its wait for the work ahead with how much slower
  // than predicted the lanes ran over the last recent_speed_window_ns (sum
  // of measured / sum of predicted step times, trusted from
  // recent_speed_min_predicted_ns of predicted work on, within [1,
  // cost.slowdown_max]), when that is above the model's slowdown bound and
  // the wait slack; and a lane stretches its remainder by it when it checks
  // between steps whether a queued request is at risk. On this VM the CPU is
  // sometimes taken away for tens of ms and every run goes 1.5-2x slower:
  // the 10 ms requests of the deadline scenario admitted during such a
  // spell were the ones dropped or late. 0 = off (the library default;
  // orreryd too, until measured on a quiet machine; 20 ms was tried).
  int64_t recent_speed_window_ns = 0;
  int64_t recent_speed_min_predicted_ns = 2'000'000;
  // Between two steps a lane runs a queued request first when it would miss
  // its latest start waiting. With this on, the wait it checks is the rest
  // of the running request and of the parked ones the lane resumes before
  // anything queued, each x its model's slowdown bound (as admission
  // planned them), also when a parked one resumes, and a request that
  // became at risk since the last check (its wait ran long) is looked at
  // although the queue did not change. Off: the running request's
  // predicted remainder alone, checked when the queue changed. In the
  // deadline scenario the 10 ms requests dropped before running in quiet
  // minutes had waited behind a 200 ms tenant's request that fair order ran
  // between layers of a parked long run, then the parked run's next layer
  // (2.5 ms), or a layer that ran longer than predicted.
  bool at_risk_plans_stack = true;
  // A queued request is dropped before running once it could no longer
  // finish by its deadline even at its predicted cost (+ the response
  // margin), not already when it is past its latest start as planned
  // (predicted x the model's slowdown bound, as admission plans): that one
  // is at risk and runs first. Admission plans for the tail, but most runs
  // are near the mean: in scenario 5 (10 ms deadlines, `mlp` 2.5 ms at a
  // slowdown bound of ~2.8 in noisy minutes) requests admitted with ~0.1 ms
  // of start slack were dropped "planned completion in 7.7 ms if started
  // now, deadline in 7.6 ms", 13-75 a run, although they would have
  // finished in ~3. false: drop at the planned cost.
  bool drop_at_predicted_cost = true;
  // Admission keeps the committed queue short: a request whose planned wait
  // for queued and running work is more than this fraction of the time left
  // to its deadline is rejected at once (AdmissionInput::queue_horizon).
  // A tenant over its share otherwise fills the queue up to its deadlines,
  // so its queued requests are always nearly at risk: a lane slower than
  // planned for a moment (this VM's slow spells) then drops them after they
  // waited (scenario 4's late rejections), and a lighter tenant's requests
  // wait behind them. 1 = off (the library default; orreryd
  // --queue-horizon, default 0.5).
  double queue_horizon_fraction = 1.0;
  // Admission's way back from an over-estimate. A request admission would
  // refuse for its deadline is admitted anyway (a probe, counted in
  // TenantCounters::probes) when the lanes are idle (nothing queued,
  // running or parked), nothing of its model was admitted for this long,
  // its weights are ready and its predicted cost alone (no slowdown, no
  // response margin, no wait) still meets its deadline. Why: estimates only
  // move when requests run. After a slow spell (a build on the same disk
  // and cores) the `mlp` estimate x its slowdown bound (3) + the response
  // margin exceeded every deadline, so nothing was admitted, nothing ran
  // and nothing corrected the estimate: the service refused everything
  // for seconds with its lane idle. A probe runs on an idle lane, so it
  // delays no admitted request; an overloaded service (lanes busy) never
  // probes, so rejections there stay at admission. 0 = off (the library
  // default, so tests see admission alone; orreryd --admission-probe-ms).
  int64_t probe_interval_ns = 0;
  // A lane that finds its queue empty polls it for up to this long before
  // it sleeps on the condition variable. Why: a sleeping lane's CPU halts,
  // and in a VM waking it (futex wake, IPI, the host scheduling the vCPU)
  // took 0.05-0.08 ms of queue time (p5-p25) at half of mlp_short's
  // capacity, against 0.012 ms when a spinning lane took the request, while
  // the run itself is ~0.085 ms (api/README.md, lane spin). Costs that CPU
  // time while idle, so only for lanes on CPUs of their own (orreryd
  // --lane-spin-us). 0 = off.
  int64_t lane_spin_ns = 0;
  // Capacities of the resources besides lanes, for dominant-share charges
  // (fair_queue.h); 0 = not modelled. The lane capacity is the lane count.
  double devices = 0;
  double link_bytes_per_ns = 0;
  // A device tier (scheduler/device_lanes.h) requests may be placed on; null
  // = CPU lanes only. Must outlive the scheduler; Shutdown() drains it.
  // A request with a cache_key is placed at Submit: the device when it is
  // predicted to finish first (transfer and device queue included) and by
  // the deadline, else the CPU lanes as before.
  DeviceLanes* device = nullptr;
  DeviceExecutor device_executor = {};
  // Tests only (a sync point in RocksDB's sense): called on the lane after
  // each step of a run that has steps left, before the lane looks at the
  // queue, with the run's model id and the steps done. A request submitted
  // from here is seen at this very preemption point, which no thread racing
  // the run can promise. Empty = not called.
  std::function<void(const std::string& model_id, size_t steps_done)> after_step_for_test = {};
};

// What the scheduler counts per tenant; FairScheduler keeps one per tenant
// and Stats() copies it whole.
struct TenantCounters {
  int in_flight = 0;         // admitted, not finished (queued + running)
  uint64_t admitted = 0;
  uint64_t rejected_deadline = 0;   // at admission
  uint64_t rejected_in_flight = 0;  // at admission
  uint64_t dropped = 0;      // queued, then infeasible before running
  uint64_t completed = 0;    // ran (ok or with an error)
  uint64_t failed = 0;       // of which ended with an error
  int64_t service_ns = 0;    // measured lane time
  int64_t max_wait_ns = 0;   // admission to first step
  uint64_t batched = 0;      // completed as part of a batch of 2 or more
  // Calibration runs (calibration.h) are counted here only, not in
  // admitted / completed / failed; their lane time is in service_ns.
  uint64_t calibration_runs = 0;
  // Of completed: placed on the device, and the device time they held.
  uint64_t device_runs = 0;
  int64_t device_ns = 0;
  // Of admitted: probes (FairSchedulerOptions::probe_interval_ns),
  // admitted although admission alone would have refused them.
  uint64_t probes = 0;
};

struct TenantSchedulerStats : TenantCounters {
  std::string tenant;
  double weight = 1;
  double virtual_finish = 0;
  size_t queued = 0;
  int64_t queued_ns = 0;     // predicted
};

struct SchedulerStats {
  int lanes = 0;
  double virtual_time = 0;
  size_t queued = 0;
  uint64_t preemptions = 0;  // Executions parked for an urgent request
  uint64_t batches = 0;      // runs that carried 2 or more requests
  uint64_t affinity_dispatches = 0;  // runs taken out of fair order for warm weights
  std::vector<TenantSchedulerStats> tenants;
  std::vector<ModelCostStats> models;  // predicted vs measured
  // Lane utilisation over the last minute: busy lane-ns / (lanes x window).
  double lane_utilisation = 0;
  bool has_device = false;
  DeviceLanesStats device;  // when has_device
  // What admission currently plans with (see FairSchedulerOptions).
  double admission_wait_slack = 0;
  int64_t response_margin_ns = 0;
  // Measured / predicted lane time over the recent-speed window (1 when
  // off or the lanes were idle), as of the last step or admission.
  double recent_speed = 1;
  // Lane time outside execution: the completion callbacks lanes ran (the
  // API's answer: encoding, metering hand-off; drops the lane noticed),
  // since start, on the scheduler's clock. A lane in a callback runs
  // nothing, while the requests queued for it still count as work ahead
  // in admission, so a callback that blocks (on a disk, a lock) stalls
  // the lane and inflates every admission's wait.
  int64_t lane_callback_ns = 0;
  uint64_t lane_callbacks = 0;      // callback groups (one per run or drop batch)
  // Of lane_callback_ns, the lanes' own CPU time (thread CPU clock, not the
  // scheduler's): the rest they waited (a lock, the disk) or were
  // descheduled.
  int64_t lane_callback_cpu_ns = 0;
  int64_t lane_callback_max_ns = 0; // the longest single group
};

class FairScheduler {
 public:
  explicit FairScheduler(FairSchedulerOptions options = {});
  // Shutdown().
  ~FairScheduler();

  // Admits and queues the request; `done` later gets the outputs or the
  // error (also DEADLINE_EXCEEDED when dropped before running). An error
  // here means `done` is not called: UNAVAILABLE once Shutdown() began,
  // RESOURCE_EXHAUSTED over the tenant's in-flight limit, DEADLINE_EXCEEDED
  // when the predicted completion is after the deadline.
  Status Submit(InferenceRequest request, InferenceCallback done);
  // Admission alone, for a request that cannot be queued yet because its
  // model is still loading (request.ready_ns, in the future; request.model
  // may be null, request.model_id is then required): the same prediction
  // and rejections as Submit, counted the same way, but nothing is queued.
  // OK means it would be admitted now; the caller submits it once the model
  // is resident (admission runs again then), so it never reaches a lane
  // before its weights are ready.
  Status CheckAdmission(const InferenceRequest& request);

  // Weight, in-flight limit and default timeout of a tenant; effective for
  // the next admission and charge.
  void SetTenantPolicy(const std::string& tenant, const TenantPolicy& policy);
  // Seeds the cost model with a calibration measurement.
  void Calibrate(const std::string& model_id, int batch, int64_t ns);
  // Seeds the cost model with a calibration profile (each batch size's total
  // and the step count); replaces earlier estimates of those batch sizes.
  void LoadProfile(const CostProfile& profile);
  // True once the cost model has anything for the model (a profile, a run).
  bool KnowsModel(const std::string& model_id) const;
  // Forgets a model's costs (deleted, or its id reused).
  void ForgetModel(const std::string& model_id);

  // The time a finished request still needed before its answer left the
  // server (metering, the reply), as the API measured it; admission adds a
  // high quantile of these to every predicted completion. O(1) amortised.
  void ObserveResponseNs(int64_t ns);

  // While paused, lanes finish what they run but dispatch nothing new.
  void Pause();
  void Resume();
  // Stops admitting, runs (or drops, if infeasible) everything queued, joins
  // the lanes. Idempotent.
  void Shutdown();

  int64_t NowNs() const { return clock_->NowNs(); }
  int lanes() const { return num_lanes_; }
  // Requests queued (not yet dispatched), as of the last queue change.
  // Lock-free: an atomic load.
  size_t queue_depth() const;
  uint64_t completed() const;
  SchedulerStats Stats() const;

  FairScheduler(const FairScheduler&) = delete;
  FairScheduler& operator=(const FairScheduler&) = delete;

 private:
  struct Job;
  struct TenantState : TenantCounters {
    TenantPolicy policy;
    // Lane time it recently received (charged, as the fair queue charges
    // it): its share of the lanes, for the interference other tenants plan
    // with (InterferenceLocked).
    RateEstimator lane_rate{kLaneRateTauNs};
  };
  static constexpr int64_t kLaneRateTauNs = 1'000'000'000;
  using Dropped = std::vector<std::unique_ptr<Job>>;

  TenantState& TenantLocked(const std::string& tenant);
  // Fills the job's deadline (the request's, else the tenant's default),
  // predicted and planned cost, and decides admission; `lane_free_ns` (if
  // given) gets when the lanes are predicted free for it. Counts nothing.
  AdmissionDecision AdmitLocked(Job& job, TenantState& tenant, int64_t now, int64_t* lane_free_ns = nullptr);
  void CountRejectionLocked(TenantState& tenant, const Status& status);
  // Removes queued jobs that can no longer meet their deadline into `dropped`.
  void DropInfeasibleLocked(int64_t now, Dropped* dropped);
  // What a lane ran last, for the cache state of its next run.
  struct LaneCache {
    std::string model_id;
    std::string tenant;
    int64_t ended_ns = 0;
    double speed = 1.0;  // measured / estimate of recent runs (lane_speed_alpha)
  };
  // The next job by fair order (or a light tenant's, LightPickLocked), or an
  // earlier-deadline one at risk of missing it if it waited for that pick,
  // or (affinity_window_ns) one of the model the lane just ran. Null when
  // nothing is queued.
  std::unique_ptr<Job> PickLocked(int64_t now, const LaneCache& cache);
  // A queued job of the lane's last model, if cache affinity allows it
  // instead of `fair` (never a heavy tenant's before a light one's); null
  // otherwise.
  std::unique_ptr<Job> TakeWarmLocked(const FairQueue::Dispatch& fair, const LaneCache& cache, int64_t now);
  // The fair pick, if it belongs to another tenant, fair order puts it no
  // later than the running job (the top of `stack`; virtual start <=, i.e. a
  // tenant back from idle or under its share) and the running job's tenant
  // is not light against it, or else a light tenant's next request
  // (LightPickLocked), if every job on the lane's stack still meets its
  // deadline after it (StackCanWaitLocked); null otherwise. Dispatched (and
  // batched).
  std::unique_ptr<Job> TakeFairlyEarlierLocked(const std::vector<std::unique_ptr<Job>>& stack, int64_t now);
  // Whether the lane's stack (running job on top, parked ones below) still
  // finishes every job by its deadline if `first_ns` of other work runs
  // first: the jobs finish top down, each after its predicted remainder x
  // its model's slowdown bound, plus the response margin.
  bool StackCanWaitLocked(const std::vector<std::unique_ptr<Job>>& stack, int64_t now, int64_t first_ns);
  // How long the lane stays busy with `stack` (running job on top, parked
  // ones below) before a queued request could start: see
  // at_risk_plans_stack. Lock-free (the jobs' atomics).
  int64_t StackBusyNs(const std::vector<std::unique_ptr<Job>>& stack) const;
  // An urgent queued job that would miss its deadline waiting `busy_ns` for
  // a job of `tenant` and whose deadline is before `deadline_ns`; null if
  // none. A heavy tenant's jobs do not go before a light tenant's
  // (YieldsToLocked).
  std::unique_ptr<Job> TakeAtRiskLocked(int64_t now, int64_t busy_ns, int64_t deadline_ns,
                                        const std::string& tenant);
  // Whether `heavy`'s requests (at risk, warm or fair) wait for `light`'s:
  // `light`'s recent lane share is below light_share_fraction of its fair
  // share against `heavy` and `heavy`'s above its own (pairwise, by weight).
  // O(log tenants).
  bool YieldsToLocked(const std::string& heavy, const std::string& light, int64_t now) const;
  // The next queued request of a tenant `heavy` yields to (the smallest
  // virtual start among them); nullopt if none. O(tenants).
  std::optional<FairQueue::Dispatch> LightPickLocked(const std::string& heavy, int64_t now) const;
  std::unique_ptr<Job> DispatchLocked(const FairQueue::Dispatch& d, int64_t now);
  void PublishUrgentLocked();
  // Runs the dropped jobs' callbacks; `on_lane`: the caller is a lane (its
  // callback time is counted, NoteLaneCallback).
  void FinishDropped(Dropped dropped, bool on_lane = false);
  // A lane spent `ns` in completion callbacks, `cpu_ns` of it on the CPU
  // (SchedulerStats). Lock-free.
  void NoteLaneCallback(int64_t ns, int64_t cpu_ns);
  // Whether a request admission refused for its deadline goes in as a probe
  // (probe_interval_ns); sets its planned cost to its predicted cost.
  bool ProbeLocked(Job& job, int64_t now) const;
  // Predicted lane time of running requests in the way of a new request
  // with this deadline.
  int64_t RunningRemainingLocked(int64_t deadline_ns) const;
  int64_t ChargedNs(int64_t predicted_ns, int64_t measured_ns) const;
  // The response margin admission adds (observations older than
  // response_max_age_ns expire).
  int64_t ResponseMarginLocked(int64_t now);
  // The wait slack admission plans with now; ObserveWaitLocked records how
  // long a job waited from admission to `now` against its prediction.
  double WaitSlackLocked(int64_t now);
  // AdmissionInput::interference for a request of `tenant_id`: the recent
  // lane share of the other tenants whose new requests would go ahead of it
  // in fair order (FairQueue::ArrivalGoesAhead), at most what fair sharing
  // gives them against it (1 - its weight / the weights of it and them).
  // O(tenants).
  double InterferenceLocked(const std::string& tenant_id, const TenantState& tenant, int64_t now) const;
  double WaitSlackNowLocked() const;  // without expiring samples (stats)
  void ObserveWaitLocked(const Job& job, int64_t now);

  // Adds same-model queued requests of the leader's tenant to it when a
  // batch is predicted cheaper per request and keeps every deadline.
  void FormBatchLocked(Job& leader, int64_t now);
  // Accounting, RunReports and callbacks of a finished run (all its
  // requests, when batched). Takes the lock.
  void Finish(std::unique_ptr<Job> leader, Result<std::vector<NamedTensor>> outputs);

  // A request placed on the device: its counters, RunReport and callback.
  void FinishOnDevice(Job& job, Result<std::vector<NamedTensor>> outputs, const DeviceRunInfo& info);
  // Queues an admitted job on the device (Place reserved `ticket`);
  // UNAVAILABLE when the device is draining (`done` is then never called).
  Status StartOnDeviceLocked(std::unique_ptr<Job> job, uint64_t ticket);
  // A run that ended at `end_ns` after `busy_ns` of lane time (utilisation;
  // the last minute is kept).
  void RecordLaneBusyLocked(int64_t end_ns, int64_t busy_ns);

  void LaneLoop(int lane);
  // Returns once the queue has work (or the scheduler stops), or after
  // options_.lane_spin_ns; polls without sleeping (lane_spin_ns).
  void SpinForWork();
  // What wakes an idle lane: work queued (and not paused), or a stop.
  bool LaneHasWorkLocked() const;
  void RunOnLane(std::unique_ptr<Job> job, ops::ThreadGroup* group, LaneCache* cache);
  // At a run's first step: its prediction for the lane's cache state, and
  // that x the lane's speed (what is reported and compared).
  void PredictOnLane(Job& job, const LaneCache& cache, int64_t now);
  // After a run: moves the lane's speed towards its measured / estimate.
  void LearnLaneSpeed(const Job& job, LaneCache* cache) const;

  const Clock* clock_;
  FairSchedulerOptions options_;
  int num_lanes_ = 1;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  bool paused_ = false;
  uint64_t next_id_ = 1;
  uint64_t completed_ = 0;
  uint64_t preemptions_ = 0;
  uint64_t batches_ = 0;
  uint64_t affinity_dispatches_ = 0;
  FairQueue queue_;
  CostModel costs_;
  std::map<std::string, TenantState> tenants_;
  std::unordered_map<uint64_t, std::unique_ptr<Job>> queued_;
  std::set<std::pair<int64_t, uint64_t>> by_latest_start_;  // queued jobs
  std::set<Job*> running_;  // dispatched, parked or running
  WindowedQuantile response_;    // ObserveResponseNs
  WindowedQuantile wait_error_;  // (waited - predicted wait) / predicted wait
  RecentSpeed recent_speed_;     // lane steps of the last few ms (own lock)
  // (end, lane ns) of the runs of the last minute (utilisation).
  std::deque<std::pair<int64_t, int64_t>> lane_busy_;
  // When a request of each model was last admitted (probes).
  std::unordered_map<std::string, int64_t> last_admitted_ns_;
  std::atomic<int64_t> lane_callback_ns_{0};
  std::atomic<uint64_t> lane_callbacks_{0};
  std::atomic<int64_t> lane_callback_cpu_ns_{0};
  std::atomic<int64_t> lane_callback_max_ns_{0};

  // Smallest latest start among queued jobs (kNoDeadline if none) and a
  // counter bumped on every queue change (and on Resume, Shutdown): lanes
  // read them between steps and while spinning, without the lock.
  std::atomic<int64_t> urgent_latest_start_{kNoDeadline};
  std::atomic<size_t> queued_count_{0};  // queue_.size() as of the last change (queue_depth)
  std::atomic<uint64_t> queue_generation_{0};

  std::vector<std::thread> workers_;
};

}  // namespace orrery
