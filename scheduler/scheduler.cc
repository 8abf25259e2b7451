#include "scheduler/scheduler.h"

#include <pthread.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <optional>

#include "base/cpu_relax.h"
#include "runtime/execution.h"
#include "runtime/lane_group.h"
#include "scheduler/batching.h"

namespace orrery {

struct FairScheduler::Job {
  uint64_t id = 0;
  InferenceRequest request;
  InferenceCallback done;
  std::string model_id;
  int batch = 1;
  int64_t rows = 0;  // common dim 0 of the inputs; 0 = cannot batch
  int64_t predicted_ns = 0;  // of this request alone
  // predicted x the model's slowdown bound + the response margin, at
  // admission: what the latest start keeps free before the deadline.
  int64_t planned_ns = 0;
  // What it needs from its start if it runs as predicted (predicted +
  // response margin; at most planned_ns): once past deadline - this it
  // cannot make it and is dropped (drop_at_predicted_cost; else planned_ns).
  int64_t drop_cost_ns = 0;
  int64_t predicted_wait_ns = 0;  // admission's wait for the work ahead, before slack
  size_t predicted_steps = 0;  // 0 = unknown
  int64_t deadline_ns = kNoDeadline;
  int64_t admitted_ns = 0;
  FairQueue::Dispatch dispatch;
  Status drop_status;  // set when dropped before running
  // Predicted lane time left; written by the lane after each step, read
  // under the lock by admission.
  std::atomic<int64_t> remaining_ns{0};
  std::atomic<int64_t> step_ns{0};  // predicted lane time of one layer
  // The model's slowdown bound at dispatch: how much longer than predicted
  // the rest of its run may take (the lanes' at-risk check, lock-free).
  double slowdown = 1.0;
  // Lane-local once dispatched.
  std::optional<Execution> exec;
  int64_t exec_ns = 0;  // measured lane time (steps only; parked time excluded)
  int64_t started_ns = 0;  // first step
  std::vector<int64_t> step_times;  // calibration runs only
  // Batching: a leader runs its members with it as one Execution over
  // batch_inputs (every request's rows, leader first) predicted to take
  // batch_predicted_ns. Members are out of the queue and not in running_.
  std::vector<std::unique_ptr<Job>> members;
  std::vector<NamedTensor> batch_inputs;
  int64_t batch_predicted_ns = 0;
  // Bytes of a device transfer its placement started (billed to it).
  int64_t bytes_transferred = 0;
  // Dispatched out of fair order for its warm weights (cache affinity).
  bool affinity = false;
  // Admitted as a probe past admission's refusal (probe_interval_ns): its
  // run corrects the estimate with CostModelOptions::correction_alpha.
  bool probe = false;

  // Predicted on the lane at the first step for the lane's cache state
  // (PredictOnLane); 0 until then. What the cost model's error compares.
  int64_t lane_predicted_ns = 0;
  CacheState cache_state = CacheState::kUnknown;
  // lane_predicted_ns x the lane's speed then (lane_speed_alpha): the
  // prediction reported and compared with the measured time. Scheduling
  // keeps lane_predicted_ns, which its slowdown bounds are measured against.
  int64_t reported_predicted_ns = 0;

  int64_t run_predicted_ns() const {
    if (lane_predicted_ns > 0) return lane_predicted_ns;
    return members.empty() ? predicted_ns : batch_predicted_ns;
  }

  // What was predicted for the run as it started (with the lane's speed).
  int64_t reported_ns() const { return reported_predicted_ns > 0 ? reported_predicted_ns : run_predicted_ns(); }

  int64_t latest_start() const { return LatestStartNs(deadline_ns, planned_ns); }
  std::string What() const {
    return "request " + std::to_string(request.request_id) + " for model '" + model_id + "' of tenant '" +
           request.tenant_id + "'";
  }
};

namespace {

// This thread's CPU time: a lane's callback time minus this is time it
// waited (a lock, the disk) or was descheduled.
int64_t ThreadCpuNs() {
  timespec ts{};
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return 0;
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// Lane and device utilisation are reported over the last minute.
constexpr int64_t kUtilisationWindowNs = 60 * kNsPerSec;

int BatchOf(const std::vector<NamedTensor>& inputs) {
  if (inputs.empty() || inputs[0].tensor.shape().empty()) return 1;
  return static_cast<int>(std::clamp<int64_t>(inputs[0].tensor.shape()[0], 1, 1 << 20));
}

}  // namespace

int64_t FairScheduler::ChargedNs(int64_t predicted_ns, int64_t measured_ns) const {
  // A run far off its prediction is mostly interference (the OS, a noisy
  // neighbour on the core), not the tenant's doing: the charge stays within
  // a factor of the prediction; the cost model still learns the full value.
  const double f = options_.max_charge_factor;
  if (predicted_ns <= 0 || f < 1) return measured_ns;
  const double p = static_cast<double>(predicted_ns);
  return static_cast<int64_t>(std::clamp(static_cast<double>(measured_ns), p / f, p * f));
}

namespace {

std::string AddressId(const void* p) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "model@%p", p);
  return buf;
}

}  // namespace

FairScheduler::FairScheduler(FairSchedulerOptions options)
    : clock_(options.clock != nullptr ? options.clock : SteadyClock::Get()),
      options_(std::move(options)),
      queue_(options_.default_policy.weight),
      costs_(options_.cost),
      response_(options_.response_quantile, options_.response_window, options_.response_max_age_ns),
      wait_error_(options_.wait_slack_quantile, options_.wait_slack_window, options_.wait_slack_max_age_ns),
      recent_speed_(options_.recent_speed_window_ns, options_.recent_speed_min_predicted_ns,
                    options_.cost.slowdown_max) {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  options_.lane_threads = std::max(options_.lane_threads, 1);
  const int lane_cpus = options_.lane_cpus.empty() ? cores : static_cast<int>(options_.lane_cpus.size());
  num_lanes_ = options_.lanes > 0 ? options_.lanes : std::max(lane_cpus / options_.lane_threads, 1);
  paused_ = options_.start_paused;
  queue_.SetCapacity(FairQueue::Capacity{.lanes = static_cast<double>(num_lanes_),
                                         .devices = options_.devices,
                                         .link_bytes_per_ns = options_.link_bytes_per_ns});
  workers_.reserve(num_lanes_);
  for (int i = 0; i < num_lanes_; ++i) workers_.emplace_back([this, i] { LaneLoop(i); });
}

FairScheduler::~FairScheduler() { Shutdown(); }

FairScheduler::TenantState& FairScheduler::TenantLocked(const std::string& tenant) {
  auto [it, inserted] = tenants_.try_emplace(tenant);
  if (inserted) {
    it->second.policy = options_.default_policy;
    queue_.SetWeight(tenant, it->second.policy.weight);
  }
  return it->second;
}

void FairScheduler::SetTenantPolicy(const std::string& tenant, const TenantPolicy& policy) {
  std::lock_guard<std::mutex> lock(mu_);
  TenantLocked(tenant).policy = policy;
  queue_.SetWeight(tenant, policy.weight);
}

void FairScheduler::Calibrate(const std::string& model_id, int batch, int64_t ns) {
  std::lock_guard<std::mutex> lock(mu_);
  costs_.Calibrate(model_id, batch, ns);
}

void FairScheduler::LoadProfile(const CostProfile& profile) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const BatchProfile& b : profile.batches) {
    costs_.Calibrate(profile.model_id, b.batch, b.total_ns);
    if (!b.step_ns.empty()) costs_.SetSteps(profile.model_id, b.step_ns.size());
  }
}

bool FairScheduler::KnowsModel(const std::string& model_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  return costs_.Knows(model_id);
}

void FairScheduler::ForgetModel(const std::string& model_id) {
  std::lock_guard<std::mutex> lock(mu_);
  costs_.Erase(model_id);
  last_admitted_ns_.erase(model_id);
}

AdmissionDecision FairScheduler::AdmitLocked(Job& job, TenantState& tenant, int64_t now, int64_t* lane_free_ns) {
  if (job.request.deadline_ns > 0) {
    job.deadline_ns = job.request.deadline_ns;
  } else if (tenant.policy.default_timeout_ns > 0) {
    job.deadline_ns = now + tenant.policy.default_timeout_ns;
  }
  if (job.deadline_ns != kNoDeadline) {
    // The scheduler's own target: the client's deadline minus the margin
    // for the way to the client (deadline_margin_fraction).
    const int64_t left = std::max<int64_t>(job.deadline_ns - now, 0);
    job.deadline_ns -= std::clamp(static_cast<int64_t>(options_.deadline_margin_fraction * static_cast<double>(left)),
                                  options_.deadline_margin_min_ns,
                                  std::max(options_.deadline_margin_min_ns, options_.deadline_margin_max_ns));
  }
  const CostPrediction cost = costs_.Predict(job.model_id, job.batch);
  job.predicted_ns = cost.ns;
  job.predicted_steps = cost.steps;
  // In a stall spell the lanes run slower than every long-run estimate:
  // the request's own run and the work ahead of it both stretch.
  const double speed = recent_speed_.Factor(now);
  AdmissionInput in{.now_ns = now,
                    .deadline_ns = job.deadline_ns,
                    .own_cost_ns = job.predicted_ns,
                    .slowdown = std::max(costs_.SlowdownBound(job.model_id), speed),
                    .response_ns = ResponseMarginLocked(now),
                    .queued_ahead_ns = queue_.WorkAheadNs(job.request.tenant_id),
                    .running_remaining_ns = RunningRemainingLocked(job.deadline_ns),
                    .ready_ns = job.request.ready_ns,
                    .lanes = num_lanes_,
                    .interference = InterferenceLocked(job.request.tenant_id, tenant, now),
                    .wait_slack = std::max(WaitSlackLocked(now), speed - 1.0),
                    .queue_horizon = options_.queue_horizon_fraction,
                    .in_flight = tenant.in_flight,
                    .max_in_flight = tenant.policy.max_in_flight};
  if (lane_free_ns != nullptr) {
    *lane_free_ns = now + (in.queued_ahead_ns + in.running_remaining_ns) / std::max(num_lanes_, 1);
  }
  AdmissionDecision decision = Admit(in, job.What());
  job.planned_ns = decision.planned_ns;
  job.drop_cost_ns = options_.drop_at_predicted_cost
                         ? std::min(decision.planned_ns, job.predicted_ns + std::max<int64_t>(in.response_ns, 0))
                         : decision.planned_ns;
  job.predicted_wait_ns = decision.predicted_wait_ns;
  return decision;
}

double FairScheduler::InterferenceLocked(const std::string& tenant_id, const TenantState& tenant,
                                        int64_t now) const {
  double share = 0;
  double weights = tenant.policy.weight;
  for (const auto& [name, other] : tenants_) {
    if (&other == &tenant || !queue_.ArrivalGoesAhead(name, tenant_id)) continue;
    const double rate = other.lane_rate.PerNs(now) / std::max(num_lanes_, 1);
    if (rate <= 0) continue;
    share += rate;
    weights += other.policy.weight;
  }
  return share <= 0 ? 0.0 : std::min(share, 1.0 - tenant.policy.weight / weights);
}

void FairScheduler::CountRejectionLocked(TenantState& tenant, const Status& status) {
  if (status.code() == StatusCode::kDeadlineExceeded) {
    ++tenant.rejected_deadline;
  } else if (status.code() == StatusCode::kResourceExhausted) {
    ++tenant.rejected_in_flight;
  }
}

Status FairScheduler::CheckAdmission(const InferenceRequest& request) {
  Job job;
  job.model_id = request.model_id.empty() ? AddressId(request.model.get()) : request.model_id;
  job.batch = BatchOf(request.inputs);
  job.request.tenant_id = request.tenant_id;
  job.request.deadline_ns = request.deadline_ns;
  job.request.ready_ns = request.ready_ns;
  job.request.request_id = request.request_id;
  Dropped dropped;
  Status status;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return Status::Unavailable("server is shutting down");
    if (job.request.request_id == 0) job.request.request_id = next_id_++;
    const int64_t now = clock_->NowNs();
    DropInfeasibleLocked(now, &dropped);
    TenantState& tenant = TenantLocked(request.tenant_id);
    status = AdmitLocked(job, tenant, now).status;
    if (status.code() == StatusCode::kDeadlineExceeded && ProbeLocked(job, now)) status = Status::Ok();
    CountRejectionLocked(tenant, status);
  }
  FinishDropped(std::move(dropped));
  return status;
}

Status FairScheduler::Submit(InferenceRequest request, InferenceCallback done) {
  auto job = std::make_unique<Job>();
  job->model_id = request.model_id.empty() ? AddressId(request.model.get()) : request.model_id;
  job->batch = BatchOf(request.inputs);
  job->rows = BatchRows(request.inputs);
  job->request = std::move(request);
  job->done = std::move(done);
  Dropped dropped;
  Status status;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return Status::Unavailable("server is shutting down");
    job->id = next_id_++;
    if (job->request.request_id == 0) job->request.request_id = job->id;
    TenantState& tenant = TenantLocked(job->request.tenant_id);
    if (job->request.weight > 0 && job->request.weight != tenant.policy.weight) {
      tenant.policy.weight = job->request.weight;
      queue_.SetWeight(job->request.tenant_id, job->request.weight);
    }
    const int64_t now = clock_->NowNs();
    DropInfeasibleLocked(now, &dropped);  // so that dead work is not counted ahead
    int64_t lane_free = now;
    status = AdmitLocked(*job, tenant, now, &lane_free).status;
    DevicePlacement placed;
    if (options_.device != nullptr && !job->request.calibration && !job->request.cache_key.tenant.empty() &&
        status.code() != StatusCode::kResourceExhausted &&
        (!options_.device_executor.supports || options_.device_executor.supports(job->request))) {
      // The lanes could start it once the work ahead and in the way is
      // done, as admission predicts; the handler holds the host pin, so
      // the weights are in RAM now.
      placed = options_.device->Place(job->request.cache_key, job->predicted_ns, lane_free, now, job->deadline_ns,
                                      tenant.policy.weight);
      job->bytes_transferred = placed.bytes_transferred;
      if (placed.on_device) status = Status::Ok();
    }
    if (placed.on_device) {
      ++tenant.admitted;
      ++tenant.in_flight;
      job->admitted_ns = now;
      status = StartOnDeviceLocked(std::move(job), placed.ticket);
      if (!status.ok()) {
        --tenant.admitted;
        --tenant.in_flight;
      }
    } else if (!status.ok() && !(status.code() == StatusCode::kDeadlineExceeded && ProbeLocked(*job, now))) {
      CountRejectionLocked(tenant, status);
    } else {
      if (!status.ok()) {
        ++tenant.probes;  // refused by admission alone; the lanes are idle
        job->probe = true;
        status = Status::Ok();
      }
      last_admitted_ns_[job->model_id] = now;
      if (!job->request.calibration) ++tenant.admitted;
      ++tenant.in_flight;
      job->admitted_ns = now;
      queue_.Push(job->request.tenant_id, FairQueue::Item{job->id, job->model_id, job->predicted_ns,
                                                          job->request.device_ns, job->request.load_bytes});
      by_latest_start_.emplace(job->latest_start(), job->id);
      queued_.emplace(job->id, std::move(job));
      PublishUrgentLocked();
    }
  }
  FinishDropped(std::move(dropped));
  if (!status.ok()) return status;
  cv_.notify_one();
  return Status::Ok();
}

void FairScheduler::ObserveResponseNs(int64_t ns) {
  if (ns < 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  response_.Add(clock_->NowNs(), static_cast<double>(ns));
}

int64_t FairScheduler::ResponseMarginLocked(int64_t now) { return std::llround(response_.Value(now)); }

double FairScheduler::WaitSlackLocked(int64_t now) {
  (void)wait_error_.Value(now);  // expires old samples
  return WaitSlackNowLocked();
}

double FairScheduler::WaitSlackNowLocked() const {
  const double floor = options_.admission_wait_slack;
  if (wait_error_.size() < options_.wait_slack_min_samples) return floor;
  return std::clamp(wait_error_.last(), floor, std::max(floor, options_.wait_slack_max));
}

void FairScheduler::ObserveWaitLocked(const Job& job, int64_t now) {
  if (job.predicted_wait_ns < options_.wait_slack_min_wait_ns || job.request.calibration) return;
  const double waited = static_cast<double>(now - job.admitted_ns);
  const double predicted = static_cast<double>(job.predicted_wait_ns);
  wait_error_.Add(now, (waited - predicted) / predicted);
}

void FairScheduler::PublishUrgentLocked() {
  queued_count_.store(queue_.size(), std::memory_order_relaxed);
  urgent_latest_start_.store(by_latest_start_.empty() ? kNoDeadline : by_latest_start_.begin()->first,
                             std::memory_order_release);
  queue_generation_.fetch_add(1, std::memory_order_release);
}

void FairScheduler::DropInfeasibleLocked(int64_t now, Dropped* dropped) {
  bool any = false;
  for (auto at = by_latest_start_.begin(); at != by_latest_start_.end() && at->first < now;) {
    const uint64_t id = at->second;
    auto it = queued_.find(id);
    // Past its latest start as planned (its slowdown bound) but still in
    // time if it runs as predicted: kept, the most urgent request, which
    // the lanes run first.
    if (LatestStartNs(it->second->deadline_ns, it->second->drop_cost_ns) >= now) {
      ++at;
      continue;
    }
    at = by_latest_start_.erase(at);
    (void)queue_.Remove(id);
    std::unique_ptr<Job> job = std::move(it->second);
    queued_.erase(it);
    ObserveWaitLocked(*job, now);  // waited at least this long
    TenantState& tenant = TenantLocked(job->request.tenant_id);
    ++tenant.dropped;
    --tenant.in_flight;
    job->drop_status = Status::DeadlineExceeded(
        job->What() + ": dropped before running, it can no longer meet its deadline (planned completion in " +
        FormatDurationNs(job->drop_cost_ns) + " if started now, deadline " +
        (job->deadline_ns >= now ? "in " + FormatDurationNs(job->deadline_ns - now)
                                 : FormatDurationNs(now - job->deadline_ns) + " ago") +
        ")");
    dropped->push_back(std::move(job));
    any = true;
  }
  if (any) PublishUrgentLocked();
}

void FairScheduler::FinishDropped(Dropped dropped, bool on_lane) {
  if (dropped.empty()) return;
  const int64_t now = clock_->NowNs();
  const int64_t cpu = on_lane ? ThreadCpuNs() : 0;
  for (std::unique_ptr<Job>& job : dropped) {
    if (RunReport* r = job->request.report) *r = RunReport{.admitted_ns = job->admitted_ns, .ended_ns = now};
    job->done(job->drop_status);
  }
  if (on_lane) NoteLaneCallback(clock_->NowNs() - now, ThreadCpuNs() - cpu);
}

void FairScheduler::NoteLaneCallback(int64_t ns, int64_t cpu_ns) {
  lane_callback_ns_.fetch_add(ns, std::memory_order_relaxed);
  lane_callback_cpu_ns_.fetch_add(cpu_ns, std::memory_order_relaxed);
  lane_callbacks_.fetch_add(1, std::memory_order_relaxed);
  int64_t max = lane_callback_max_ns_.load(std::memory_order_relaxed);
  while (ns > max && !lane_callback_max_ns_.compare_exchange_weak(max, ns, std::memory_order_relaxed)) {
  }
}

bool FairScheduler::ProbeLocked(Job& job, int64_t now) const {
  if (options_.probe_interval_ns <= 0 || !queue_.empty() || !running_.empty()) return false;
  if (job.request.ready_ns > now || job.predicted_ns <= 0) return false;
  if (job.deadline_ns != kNoDeadline && now + job.predicted_ns > job.deadline_ns) return false;
  if (auto it = last_admitted_ns_.find(job.model_id);
      it != last_admitted_ns_.end() && now - it->second < options_.probe_interval_ns) {
    return false;
  }
  // Planned at its plain prediction, so that its latest start is not
  // already past (it would be dropped at once).
  job.planned_ns = job.predicted_ns;
  job.drop_cost_ns = std::min(job.drop_cost_ns, job.planned_ns);
  return true;
}

std::unique_ptr<FairScheduler::Job> FairScheduler::DispatchLocked(const FairQueue::Dispatch& d, int64_t now) {
  auto it = queued_.find(d.item.id);
  std::unique_ptr<Job> job = std::move(it->second);
  queued_.erase(it);
  by_latest_start_.erase({job->latest_start(), job->id});
  job->dispatch = d;
  job->slowdown = costs_.SlowdownBound(job->model_id);
  job->remaining_ns.store(job->predicted_ns, std::memory_order_relaxed);
  job->step_ns.store(job->predicted_ns / static_cast<int64_t>(std::max<size_t>(job->predicted_steps, 1)),
                     std::memory_order_relaxed);
  TenantState& tenant = TenantLocked(job->request.tenant_id);
  tenant.max_wait_ns = std::max(tenant.max_wait_ns, now - job->admitted_ns);
  ObserveWaitLocked(*job, now);
  running_.insert(job.get());
  PublishUrgentLocked();
  return job;
}

bool FairScheduler::YieldsToLocked(const std::string& heavy, const std::string& light, int64_t now) const {
  if (options_.light_share_fraction <= 0 || heavy == light) return false;
  const auto h = tenants_.find(heavy);
  const auto l = tenants_.find(light);
  if (h == tenants_.end() || l == tenants_.end()) return false;
  const double lanes = std::max(num_lanes_, 1);
  const double light_fair = queue_.weight(light) / (queue_.weight(light) + queue_.weight(heavy));
  return l->second.lane_rate.PerNs(now) / lanes < options_.light_share_fraction * light_fair &&
         h->second.lane_rate.PerNs(now) / lanes > 1.0 - light_fair;
}

std::optional<FairQueue::Dispatch> FairScheduler::LightPickLocked(const std::string& heavy, int64_t now) const {
  std::optional<FairQueue::Dispatch> best;
  if (options_.light_share_fraction <= 0) return best;
  for (const auto& [name, tenant] : tenants_) {
    if (tenant.in_flight == 0 || !YieldsToLocked(heavy, name, now)) continue;
    std::optional<FairQueue::Dispatch> d = queue_.PeekOf(name);
    if (d && (!best || d->virtual_start < best->virtual_start)) best = std::move(d);
  }
  return best;
}

std::unique_ptr<FairScheduler::Job> FairScheduler::TakeAtRiskLocked(int64_t now, int64_t busy_ns,
                                                                    int64_t deadline_ns, const std::string& tenant) {
  // Only the front of the latest-start order can be at risk; a few entries
  // are scanned because the most urgent may have a later deadline than the
  // running request (a costly request with a loose deadline).
  constexpr int kScan = 16;
  int scanned = 0;
  for (auto it = by_latest_start_.begin(); it != by_latest_start_.end() && scanned < kScan; ++it, ++scanned) {
    if (it->first >= now + busy_ns) break;  // can wait for the current one
    const Job& candidate = *queued_.at(it->second);
    if (candidate.deadline_ns >= deadline_ns) continue;
    if (YieldsToLocked(candidate.request.tenant_id, tenant, now)) continue;  // dropped if it cannot wait
    std::optional<FairQueue::Dispatch> d = queue_.Take(it->second);
    return DispatchLocked(*d, now);
  }
  return nullptr;
}

bool FairScheduler::StackCanWaitLocked(const std::vector<std::unique_ptr<Job>>& stack, int64_t now,
                                       int64_t first_ns) {
  const int64_t response = ResponseMarginLocked(now);
  double t = static_cast<double>(now + first_ns);
  for (auto it = stack.rbegin(); it != stack.rend(); ++it) {
    const Job& j = **it;
    t += static_cast<double>(j.remaining_ns.load(std::memory_order_relaxed)) * costs_.SlowdownBound(j.model_id);
    if (j.deadline_ns != kNoDeadline && t + static_cast<double>(response) > static_cast<double>(j.deadline_ns)) {
      return false;
    }
  }
  return true;
}

std::unique_ptr<FairScheduler::Job> FairScheduler::TakeFairlyEarlierLocked(
    const std::vector<std::unique_ptr<Job>>& stack, int64_t now) {
  if (!options_.fair_preemption) return nullptr;
  const Job& running = *stack.back();
  // A light tenant's request goes before a heavy tenant's run whatever
  // their virtual starts, and a light tenant's run (taken ahead of fair
  // order) is not undone by the heavy tenant; otherwise fair order decides.
  std::optional<FairQueue::Dispatch> next = LightPickLocked(running.request.tenant_id, now);
  const bool light = next.has_value();
  if (!light) {
    next = queue_.Peek();
    if (!next || next->tenant == running.request.tenant_id ||
        next->virtual_start > running.dispatch.virtual_start ||
        YieldsToLocked(next->tenant, running.request.tenant_id, now)) {
      return nullptr;
    }
  }
  // Fairness reorders work; it does not make an admitted request late.
  if (!StackCanWaitLocked(stack, now, queued_.at(next->item.id)->planned_ns)) return nullptr;
  // A run taken for its warm weights is not undone by the backlogged tenant
  // it went before (that is the window's trade); a lone request still
  // preempts it.
  if (!light && running.affinity && queue_.queued(next->tenant) > 1 &&
      next->virtual_start + static_cast<double>(options_.affinity_window_ns) /
                                running.dispatch.weight >= running.dispatch.virtual_start) {
    return nullptr;
  }
  std::unique_ptr<Job> job = DispatchLocked(light ? *queue_.Take(next->item.id) : *queue_.Pop(), now);
  FormBatchLocked(*job, now);
  return job;
}

std::unique_ptr<FairScheduler::Job> FairScheduler::PickLocked(int64_t now, const LaneCache& cache) {
  std::optional<FairQueue::Dispatch> fair = queue_.Peek();
  if (!fair) return nullptr;
  // A light tenant's request goes before a heavy tenant's fair pick.
  const std::optional<FairQueue::Dispatch> light = LightPickLocked(fair->tenant, now);
  const FairQueue::Dispatch& first = light ? *light : *fair;
  const Job& pick = *queued_.at(first.item.id);
  if (std::unique_ptr<Job> urgent = TakeAtRiskLocked(now, pick.predicted_ns, pick.deadline_ns, first.tenant)) {
    return urgent;
  }
  if (light) return DispatchLocked(*queue_.Take(light->item.id), now);
  if (std::unique_ptr<Job> warm = TakeWarmLocked(*fair, cache, now)) return warm;
  return DispatchLocked(*queue_.Pop(), now);
}

std::unique_ptr<FairScheduler::Job> FairScheduler::TakeWarmLocked(const FairQueue::Dispatch& fair,
                                                                  const LaneCache& cache, int64_t now) {
  // Only ahead of a backlogged tenant: a lone request (a light tenant, one
  // back from idle) keeps strict fair order and its short wait.
  if (options_.affinity_window_ns <= 0 || cache.model_id.empty() || fair.item.model_id == cache.model_id ||
      now - cache.ended_ns > options_.warm_gap_ns || queue_.queued(fair.tenant) < 2 ||
      YieldsToLocked(cache.tenant, fair.tenant, now)) {  // nor ahead of a light tenant
    return nullptr;
  }
  const std::optional<double> start = queue_.VirtualStartOf(cache.tenant);
  if (!start || *start > fair.virtual_start + static_cast<double>(options_.affinity_window_ns) /
                                                  queue_.weight(cache.tenant)) {
    return nullptr;
  }
  const std::vector<uint64_t> ids = queue_.QueuedOf(cache.tenant, cache.model_id, 1);
  if (ids.empty()) return nullptr;
  const Job& warm = *queued_.at(ids.front());
  // Running it first must not make any queued request miss its latest start.
  if (!by_latest_start_.empty() && by_latest_start_.begin()->first < now + warm.predicted_ns) return nullptr;
  ++affinity_dispatches_;
  std::unique_ptr<Job> job = DispatchLocked(*queue_.Take(ids.front()), now);
  job->affinity = true;
  return job;
}

int64_t FairScheduler::RunningRemainingLocked(int64_t deadline_ns) const {
  int64_t sum = 0;
  for (const Job* job : running_) {
    // A running request with a later deadline can be preempted between two
    // layers: only one layer of it is in the way.
    sum += job->deadline_ns > deadline_ns ? job->step_ns.load(std::memory_order_relaxed)
                                          : job->remaining_ns.load(std::memory_order_relaxed);
  }
  return sum;
}

void FairScheduler::LaneLoop(int lane) {
  // Named so that operators (top -H, /proc/PID/task) can tell lanes apart.
  const std::string name = "orrery-lane-" + std::to_string(lane);
  (void)pthread_setname_np(pthread_self(), name.substr(0, 15).c_str());
  runtime::LaneGroupOptions group_options;
  group_options.threads = options_.lane_threads;
  for (int j = 0; j < options_.lane_threads && !options_.lane_cpus.empty(); ++j) {
    const size_t k = static_cast<size_t>(lane * options_.lane_threads + j);
    group_options.cpus.push_back(options_.lane_cpus[k % options_.lane_cpus.size()]);
  }
  runtime::LaneGroup group(group_options);
  LaneCache cache;
  for (;;) {
    std::unique_ptr<Job> job;
    Dropped dropped;
    if (options_.lane_spin_ns > 0) SpinForWork();
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return LaneHasWorkLocked(); });
      if (queue_.empty()) {
        if (stopping_) return;  // drained
        continue;
      }
      const int64_t now = clock_->NowNs();
      DropInfeasibleLocked(now, &dropped);
      job = PickLocked(now, cache);
      if (job) FormBatchLocked(*job, now);
    }
    FinishDropped(std::move(dropped), /*on_lane=*/true);
    if (job) RunOnLane(std::move(job), &group, &cache);
  }
}

bool FairScheduler::LaneHasWorkLocked() const { return stopping_ || (!paused_ && !queue_.empty()); }

void FairScheduler::SpinForWork() {
  // The wall clock, not clock_: a fake clock in tests would never end it.
  const auto until = std::chrono::steady_clock::now() + std::chrono::nanoseconds(options_.lane_spin_ns);
  // The lock is taken only when a Submit (or a dispatch, a drop) has changed
  // the queue since the last look: a spinner that took it every few hundred
  // ns held it when Submit came ~1 time in 7, and a glibc mutex found held
  // puts its caller to sleep on a futex that the spinner's unlock must wake,
  // a cross-CPU wake-up on the request's path (api/README.md, lane spin,
  // has scenario 7 before and after). Resume() and Shutdown() bump the
  // generation too.
  uint64_t seen = queue_generation_.load(std::memory_order_acquire) - 1;
  for (;;) {
    const uint64_t generation = queue_generation_.load(std::memory_order_acquire);
    if (generation != seen && mu_.try_lock()) {
      seen = generation;
      const bool work = LaneHasWorkLocked();
      mu_.unlock();
      if (work) return;
    }
    if (std::chrono::steady_clock::now() >= until) return;
    for (int i = 0; i < 32; ++i) CpuRelax();
  }
}

void FairScheduler::PredictOnLane(Job& job, const LaneCache& cache, int64_t now) {
  job.cache_state = cache.model_id == job.model_id && now - cache.ended_ns <= options_.warm_gap_ns
                        ? CacheState::kWarm
                        : CacheState::kCold;
  if (job.request.calibration) return;
  int64_t batch = job.members.empty() ? job.batch : job.rows;
  for (const std::unique_ptr<Job>& m : job.members) batch += m->rows;
  std::lock_guard<std::mutex> lock(mu_);
  const CostPrediction p = costs_.Predict(job.model_id, static_cast<int>(batch), job.cache_state);
  if (p.known && p.ns > 0) {
    job.lane_predicted_ns = p.ns;
    job.reported_predicted_ns = std::max<int64_t>(std::llround(static_cast<double>(p.ns) * cache.speed), 1);
  }
}

void FairScheduler::LearnLaneSpeed(const Job& job, LaneCache* cache) const {
  if (options_.lane_speed_alpha <= 0 || job.lane_predicted_ns <= 0 || job.exec_ns <= 0) return;
  // Bounded like the cost model's updates: one descheduled run must not
  // double the next prediction.
  const double ratio = std::clamp(static_cast<double>(job.exec_ns) / static_cast<double>(job.lane_predicted_ns),
                                  cache->speed / 2, cache->speed * 2);
  cache->speed += options_.lane_speed_alpha * (ratio - cache->speed);
}

void FairScheduler::RunOnLane(std::unique_ptr<Job> first, ops::ThreadGroup* group, LaneCache* cache) {
  // The top of the stack runs; the ones below are parked (preempted).
  std::vector<std::unique_ptr<Job>> stack;
  stack.push_back(std::move(first));
  uint64_t checked_generation = 0;  // queue state of the last fruitless check
  bool checked_at_risk = false;     // whether that check already saw a request at risk
  // Looks for a queued request to run before the rest of the stack: one
  // at risk of missing its deadline waiting `busy_ns` (more urgent than
  // the running one), else one fair order puts first. Null if none.
  auto preemptor = [&](bool at_risk, int64_t busy_ns) {
    const Job& top = *stack.back();
    Dropped dropped;
    std::unique_ptr<Job> next;
    {
      std::lock_guard<std::mutex> lock(mu_);
      const int64_t now = clock_->NowNs();
      DropInfeasibleLocked(now, &dropped);
      if (!paused_ && at_risk) next = TakeAtRiskLocked(now, busy_ns, top.deadline_ns, top.request.tenant_id);
      if (!paused_ && !next) next = TakeFairlyEarlierLocked(stack, now);
      if (next) ++preemptions_;
      checked_generation = queue_generation_.load(std::memory_order_acquire);
      checked_at_risk = at_risk && !next;
    }
    FinishDropped(std::move(dropped), /*on_lane=*/true);
    return next;
  };
  bool resuming = false;  // the top was parked and resumes now
  while (!stack.empty()) {
    if (resuming) {
      // A queued request that was not at risk behind the run that just
      // ended may be at risk behind the rest of this one.
      resuming = false;
      const int64_t busy = StackBusyNs(stack);
      const int64_t urgent = urgent_latest_start_.load(std::memory_order_acquire);
      if (urgent != kNoDeadline && clock_->NowNs() + busy > urgent &&
          static_cast<int>(stack.size()) <= options_.max_parked) {
        if (std::unique_ptr<Job> next = preemptor(true, busy)) {
          stack.push_back(std::move(next));
          continue;
        }
      }
    }
    Job& job = *stack.back();
    Result<std::vector<NamedTensor>> outputs = Status::Internal("not run");
    bool finished = false;
    if (!job.exec) {
      Result<Execution> ex = Status::Internal("not started");
      if (job.members.empty()) {
        ex = Execution::Start(*job.request.model, job.request.inputs, {.threads = ops::NumThreads(group)});
      } else {
        std::vector<const std::vector<NamedTensor>*> parts{&job.request.inputs};
        for (const std::unique_ptr<Job>& m : job.members) parts.push_back(&m->request.inputs);
        Result<std::vector<NamedTensor>> batched = ConcatRows(parts);
        if (batched.ok()) {
          job.batch_inputs = std::move(batched).value();
          ex = Execution::Start(*job.request.model, job.batch_inputs, {.threads = ops::NumThreads(group)});
        } else {
          ex = batched.status();
        }
      }
      if (ex.ok()) {
        PredictOnLane(job, *cache, clock_->NowNs());
        job.exec.emplace(std::move(ex).value());
        job.step_ns.store(job.run_predicted_ns() / static_cast<int64_t>(std::max<size_t>(job.exec->num_steps(), 1)),
                          std::memory_order_relaxed);
      } else {
        outputs = ex.status();
        finished = true;
      }
    } else if (job.exec->done()) {
      outputs = job.exec->TakeOutputs();
      finished = true;
    }
    if (finished) {
      std::unique_ptr<Job> done = std::move(stack.back());
      stack.pop_back();
      LearnLaneSpeed(*done, cache);
      Finish(std::move(done), std::move(outputs));
      resuming = options_.at_risk_plans_stack && !stack.empty();
      continue;
    }

    const int64_t t0 = clock_->NowNs();
    if (job.started_ns == 0) job.started_ns = t0;
    (void)job.exec->Step(group);  // an error ends the execution; TakeOutputs returns it
    const int64_t t1 = clock_->NowNs();
    cache->model_id = job.model_id;
    cache->tenant = job.request.tenant_id;
    cache->ended_ns = t1;
    job.exec_ns += t1 - t0;
    if (job.request.calibration) job.step_times.push_back(t1 - t0);
    const size_t total = std::max<size_t>(job.exec->num_steps(), 1);
    recent_speed_.Add(t1, t1 - t0, job.run_predicted_ns() / static_cast<int64_t>(total));
    const int64_t remaining = static_cast<int64_t>(
        static_cast<double>(job.run_predicted_ns()) * static_cast<double>(total - job.exec->step_index()) /
        static_cast<double>(total));
    job.remaining_ns.store(remaining, std::memory_order_relaxed);
    if (job.exec->done() || static_cast<int>(stack.size()) > options_.max_parked) continue;
    if (options_.after_step_for_test) options_.after_step_for_test(job.model_id, job.exec->step_index());

    // Between two steps: would the most urgent queued request miss its
    // deadline waiting for the rest of this one (and, at_risk_plans_stack,
    // of the parked ones the lane resumes first), or has another tenant's
    // request arrived that fair order puts before this one? Checked without
    // the lock; the lock is taken only when the answer may have changed
    // (with at_risk_plans_stack also when a request became at risk since
    // the last check: runs slower than predicted make it so).
    const int64_t busy = StackBusyNs(stack);
    const int64_t urgent = urgent_latest_start_.load(std::memory_order_acquire);
    const bool at_risk = urgent != kNoDeadline && t1 + busy > urgent;
    const bool changed = queue_generation_.load(std::memory_order_acquire) != checked_generation;
    const bool newly_at_risk = options_.at_risk_plans_stack && at_risk && !checked_at_risk;
    if (!changed && !newly_at_risk && (!at_risk || t1 <= urgent)) continue;
    if (std::unique_ptr<Job> next = preemptor(at_risk, busy)) stack.push_back(std::move(next));
  }
}

int64_t FairScheduler::StackBusyNs(const std::vector<std::unique_ptr<Job>>& stack) const {
  // In a stall spell every run takes longer than predicted (recent speed).
  const double speed = recent_speed_.last(clock_->NowNs());
  if (!options_.at_risk_plans_stack) {
    return std::llround(static_cast<double>(stack.back()->remaining_ns.load(std::memory_order_relaxed)) * speed);
  }
  // The rest of the running job, then each parked one as the lane resumes
  // it, each as slow as its model may run (the bound admission planned it
  // with).
  double busy = 0;
  for (const std::unique_ptr<Job>& j : stack) {
    busy += static_cast<double>(j->remaining_ns.load(std::memory_order_relaxed)) * std::max(j->slowdown, speed);
  }
  return std::llround(busy);
}

void FairScheduler::FormBatchLocked(Job& leader, int64_t now) {
  const int64_t max_rows = options_.max_batch;
  if (max_rows <= 1 || leader.request.calibration || leader.rows <= 0 || leader.rows >= max_rows) return;
  if (!BatchDimIsDynamic(leader.request.model->signature())) return;
  const CostPrediction alone = costs_.Predict(leader.model_id, static_cast<int>(leader.rows));
  if (!alone.known || alone.ns <= 0) return;  // nothing to compare a batch with
  // Candidates join in queue order, each only if the batch with it still
  // meets every deadline (the leader's too); then the prefix with the
  // lowest predicted cost per row wins, if that is below running alone.
  // (Costs per batch size need not be convex: 1 -> 2 may not pay off while
  // 1 -> 4 does.)
  const double alone_per_row = static_cast<double>(alone.ns) / static_cast<double>(leader.rows);
  // The longest layer the batch may have (see max_batch_step_ns): a request
  // of another tenant queued behind it must still make its latest start.
  const int64_t steps = static_cast<int64_t>(std::max<size_t>(leader.predicted_steps, 1));
  int64_t step_cap = std::numeric_limits<int64_t>::max();
  if (options_.max_batch_step_ns > 0) step_cap = options_.max_batch_step_ns;
  const int64_t urgent = urgent_latest_start_.load(std::memory_order_relaxed);
  if (urgent != kNoDeadline) step_cap = std::min(step_cap, urgent - now);
  step_cap = std::max(step_cap, alone.ns / steps);
  double best_per_row = alone_per_row;
  size_t best_len = 0;
  int64_t best_ns = alone.ns, best_deadline = leader.deadline_ns;
  int64_t rows = leader.rows;
  int64_t deadline = leader.deadline_ns;
  std::vector<uint64_t> accepted;
  for (uint64_t id : queue_.QueuedOf(leader.request.tenant_id, leader.model_id, static_cast<size_t>(max_rows))) {
    const Job& c = *queued_.at(id);
    if (c.request.calibration || c.rows <= 0 || rows + c.rows > max_rows || c.request.model != leader.request.model ||
        !SameShapeBesidesRows(leader.request.inputs, c.request.inputs)) {
      continue;
    }
    const CostPrediction p = costs_.Predict(leader.model_id, static_cast<int>(rows + c.rows));
    if (!p.known || p.ns / steps > step_cap) break;
    const int64_t d = std::min(deadline, c.deadline_ns);
    if (now + p.ns > d) continue;
    rows += c.rows;
    deadline = d;
    accepted.push_back(id);
    const double per_row = static_cast<double>(p.ns) / static_cast<double>(rows);
    // Only sizes run before (calibrated or measured): their cost is known,
    // not interpolated, and their plan and arenas exist, so the batch runs
    // as predicted instead of specialising a new shape on the lane.
    if (p.measured && per_row < alone_per_row && per_row <= best_per_row) {  // ties: the larger batch
      best_per_row = per_row;
      best_len = accepted.size();
      best_ns = p.ns;
      best_deadline = d;
    }
  }
  accepted.resize(best_len);
  const std::vector<uint64_t>& chosen = accepted;
  const int64_t batch_ns = best_ns;
  if (chosen.empty()) return;
  TenantState& tenant = TenantLocked(leader.request.tenant_id);
  for (uint64_t id : chosen) {
    auto it = queued_.find(id);
    std::unique_ptr<Job> m = std::move(it->second);
    queued_.erase(it);
    by_latest_start_.erase({m->latest_start(), id});
    // Charged like a fair-order dispatch now; the end corrects each member
    // to its share of the batch's measured time.
    m->dispatch = *queue_.Take(id);
    tenant.max_wait_ns = std::max(tenant.max_wait_ns, now - m->admitted_ns);
    ObserveWaitLocked(*m, now);
    leader.members.push_back(std::move(m));
  }
  leader.batch_predicted_ns = batch_ns;
  leader.deadline_ns = best_deadline;  // the batch is as urgent as its most urgent member
  leader.remaining_ns.store(batch_ns, std::memory_order_relaxed);
  leader.step_ns.store(batch_ns / static_cast<int64_t>(std::max<size_t>(leader.predicted_steps, 1)),
                       std::memory_order_relaxed);
  PublishUrgentLocked();
}

void FairScheduler::Finish(std::unique_ptr<Job> leader, Result<std::vector<NamedTensor>> outputs) {
  // The leader first, then its members: one entry per request.
  std::vector<std::unique_ptr<Job>> jobs;
  jobs.push_back(std::move(leader));
  for (std::unique_ptr<Job>& m : jobs[0]->members) jobs.push_back(std::move(m));
  const Job& run = *jobs[0];
  const bool batched = jobs.size() > 1;
  std::vector<int64_t> rows;
  int64_t total_rows = 0;
  for (const auto& j : jobs) {
    rows.push_back(batched ? j->rows : 1);
    total_rows += rows.back();
  }
  const bool ran_ok = outputs.ok();
  std::vector<Result<std::vector<NamedTensor>>> results;
  if (!batched) {
    results.push_back(std::move(outputs));
  } else {
    Result<std::vector<std::vector<NamedTensor>>> parts =
        outputs.ok() ? SplitRows(*outputs, rows) : Result<std::vector<std::vector<NamedTensor>>>(outputs.status());
    for (size_t i = 0; i < jobs.size(); ++i) {
      if (parts.ok()) {
        results.push_back(std::move((*parts)[i]));
      } else {
        results.push_back(parts.status());
      }
    }
  }
  auto share_of = [&](size_t i) { return static_cast<double>(rows[i]) / static_cast<double>(total_rows); };
  {
    std::lock_guard<std::mutex> lock(mu_);
    running_.erase(jobs[0].get());
    for (size_t i = 0; i < jobs.size(); ++i) {
      Job& j = *jobs[i];
      const double share = share_of(i);
      const int64_t measured = std::llround(static_cast<double>(run.exec_ns) * share);
      const int64_t predicted = batched ? std::llround(static_cast<double>(run.batch_predicted_ns) * share) : j.predicted_ns;
      TenantState& tenant = TenantLocked(j.request.tenant_id);
      --tenant.in_flight;
      if (j.request.calibration) {
        ++tenant.calibration_runs;
      } else {
        ++tenant.completed;
        if (!results[i].ok()) ++tenant.failed;
      }
      if (batched) ++tenant.batched;
      tenant.service_ns += measured;
      // exec_ns is 0 only under a fake clock: no measurement, no correction
      // (the charge stays the predicted one).
      const int64_t charged = run.exec_ns > 0 ? ChargedNs(predicted, measured) : predicted;
      tenant.lane_rate.Add(clock_->NowNs(), static_cast<double>(charged));
      if (run.exec_ns > 0) queue_.Complete(j.dispatch, charged);
    }
    if (ran_ok && !run.request.calibration) {
      costs_.Record(run.model_id, batched ? static_cast<int>(total_rows) : run.batch, run.reported_ns(), run.exec_ns,
                    run.cache_state, run.run_predicted_ns(), /*correcting=*/run.probe);
      costs_.SetSteps(run.model_id, run.exec->num_steps());
    }
    completed_ += jobs.size();
    if (batched) ++batches_;
    RecordLaneBusyLocked(clock_->NowNs(), run.exec_ns);
  }
  // The Execution gives its arena back before the callers see the outputs.
  jobs[0]->exec.reset();
  jobs[0]->batch_inputs.clear();
  const int64_t ended = clock_->NowNs();
  const int64_t cpu = ThreadCpuNs();
  for (size_t i = 0; i < jobs.size(); ++i) {
    Job& j = *jobs[i];
    if (RunReport* r = j.request.report) {
      *r = RunReport{.admitted_ns = j.admitted_ns,
                     .started_ns = run.started_ns,
                     .ended_ns = ended,
                     .lane_ns = std::llround(static_cast<double>(run.exec_ns) * share_of(i)),
                     .batch_size = static_cast<int>(jobs.size()),
                     .batch_share = share_of(i),
                     .batch_lane_ns = run.exec_ns,
                     .predicted_lane_ns = std::llround(static_cast<double>(run.reported_ns()) * share_of(i)),
                     .step_ns = i == 0 ? std::move(jobs[0]->step_times) : std::vector<int64_t>{}};
      r->bytes_transferred = j.bytes_transferred;
    }
    j.done(std::move(results[i]));
  }
  NoteLaneCallback(clock_->NowNs() - ended, ThreadCpuNs() - cpu);  // Finish runs on a lane
}

Status FairScheduler::StartOnDeviceLocked(std::unique_ptr<Job> job, uint64_t ticket) {
  std::shared_ptr<Job> shared(std::move(job));
  DeviceWork work;
  // The device executor runs it (a GPU); without one (the simulated device)
  // the plan runs on the CPU, on the device worker's thread. The device
  // lanes hold its compute slot for the predicted time (or longer).
  if (options_.device_executor.run) {
    work.run = [run = options_.device_executor.run, shared](ops::ThreadGroup*) { return run(shared->request); };
  } else {
    work.run = [shared](ops::ThreadGroup* group) -> Result<std::vector<NamedTensor>> {
      ORRERY_ASSIGN_OR_RETURN(Execution ex, Execution::Start(*shared->request.model, shared->request.inputs,
                                                             {.threads = ops::NumThreads(group)}));
      while (!ex.done()) (void)ex.Step(group);  // an error ends it; TakeOutputs returns it
      return ex.TakeOutputs();
    };
  }
  work.done = [this, shared](Result<std::vector<NamedTensor>> outputs, const DeviceRunInfo& info) {
    FinishOnDevice(*shared, std::move(outputs), info);
  };
  Status started = options_.device->Start(ticket, std::move(work));
  // Refused only once the device is draining (after the scheduler stopped
  // admitting): the reservation goes back and Submit reports the error.
  if (!started.ok()) options_.device->Abandon(ticket);
  return started;
}

void FairScheduler::FinishOnDevice(Job& job, Result<std::vector<NamedTensor>> outputs, const DeviceRunInfo& info) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    TenantState& tenant = TenantLocked(job.request.tenant_id);
    --tenant.in_flight;
    ++tenant.completed;
    if (!outputs.ok()) ++tenant.failed;
    ++tenant.device_runs;
    tenant.device_ns += info.device_ns;
    tenant.max_wait_ns = std::max(tenant.max_wait_ns, info.started_ns - job.admitted_ns);
    ++completed_;
  }
  if (RunReport* r = job.request.report) {
    *r = RunReport{.admitted_ns = job.admitted_ns, .started_ns = info.started_ns, .ended_ns = info.ended_ns};
    r->on_device = true;
    r->device_ns = info.device_ns;
    r->bytes_transferred = job.bytes_transferred;
  }
  job.done(std::move(outputs));
}

void FairScheduler::RecordLaneBusyLocked(int64_t end_ns, int64_t busy_ns) {
  lane_busy_.emplace_back(end_ns, busy_ns);
  while (!lane_busy_.empty() && lane_busy_.front().first < end_ns - kUtilisationWindowNs) lane_busy_.pop_front();
}

void FairScheduler::Pause() {
  std::lock_guard<std::mutex> lock(mu_);
  paused_ = true;
}

void FairScheduler::Resume() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    paused_ = false;
    queue_generation_.fetch_add(1, std::memory_order_release);  // spinning lanes look again
  }
  cv_.notify_all();
}

void FairScheduler::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    paused_ = false;
    queue_generation_.fetch_add(1, std::memory_order_release);  // spinning lanes look again
  }
  cv_.notify_all();
  for (std::thread& t : workers_) {
    if (t.joinable()) t.join();
  }
  if (options_.device != nullptr) options_.device->Shutdown();
}

size_t FairScheduler::queue_depth() const {
  // Lock-free: lanes ask in their completion callbacks, and the scheduler's
  // lock may be held by a request handler preempted on a busy serving CPU.
  return queued_count_.load(std::memory_order_relaxed);
}

uint64_t FairScheduler::completed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return completed_;
}

SchedulerStats FairScheduler::Stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  SchedulerStats s;
  s.lanes = num_lanes_;
  s.virtual_time = queue_.virtual_time();
  s.queued = queue_.size();
  s.preemptions = preemptions_;
  s.batches = batches_;
  s.affinity_dispatches = affinity_dispatches_;
  for (const FairQueue::TenantView& v : queue_.Tenants()) {
    TenantSchedulerStats t;
    t.tenant = v.tenant;
    t.weight = v.weight;
    t.virtual_finish = v.virtual_finish;
    t.queued = v.queued;
    t.queued_ns = v.queued_ns;
    if (auto it = tenants_.find(v.tenant); it != tenants_.end()) {
      static_cast<TenantCounters&>(t) = it->second;
    }
    s.tenants.push_back(std::move(t));
  }
  s.models = costs_.Stats();
  const int64_t now = clock_->NowNs();
  int64_t busy = 0;
  for (const auto& [end, ns] : lane_busy_) {
    if (end >= now - kUtilisationWindowNs) busy += ns;
  }
  s.lane_utilisation = std::min(1.0, static_cast<double>(busy) / (static_cast<double>(kUtilisationWindowNs) *
                                                                   static_cast<double>(std::max(num_lanes_, 1))));
  if (options_.device != nullptr) {
    s.has_device = true;
    s.device = options_.device->Stats(kUtilisationWindowNs);
  }
  s.admission_wait_slack = WaitSlackNowLocked();
  s.response_margin_ns = std::llround(response_.last());
  s.recent_speed = recent_speed_.last(clock_->NowNs());
  s.lane_callback_ns = lane_callback_ns_.load(std::memory_order_relaxed);
  s.lane_callbacks = lane_callbacks_.load(std::memory_order_relaxed);
  s.lane_callback_cpu_ns = lane_callback_cpu_ns_.load(std::memory_order_relaxed);
  s.lane_callback_max_ns = lane_callback_max_ns_.load(std::memory_order_relaxed);
  return s;
}

}  // namespace orrery
