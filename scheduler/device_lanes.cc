#include "scheduler/device_lanes.h"

#include <algorithm>
#include <chrono>

#include "runtime/lane_group.h"

namespace orrery {
namespace {

// Busy periods older than this are dropped from the link and compute
// timelines (utilisation windows are at most this long).
constexpr int64_t kHistoryNs = 10 * 60 * kNsPerSec;
// Measured intervals kept for the overlap of link and compute busy time (no
// transfer or run lasts longer), and transfer starts kept for the unplanned-
// transfer check.
constexpr int64_t kOverlapHistoryNs = 10 * kNsPerSec;
constexpr size_t kMaxLinkStarts = 1 << 16;
// A device run's weights count as late when they arrive this much after the
// placement's prediction (a real link sleep overshoots by tens of us).
constexpr int64_t kReadySlackNs = kNsPerMs;

}  // namespace

DeviceLanes::DeviceLanes(const Device* device, DeviceCache* cache, DeviceLanesOptions options)
    : device_(device),
      cache_(cache),
      options_(std::move(options)),
      clock_(options_.clock != nullptr ? options_.clock : SteadyClock::Get()) {
  if (!options_.wait_until) {
    options_.wait_until = [clock = clock_](int64_t t_ns) {
      const int64_t left = t_ns - clock->NowNs();
      if (left > 0) std::this_thread::sleep_for(std::chrono::nanoseconds(left));
    };
  }
  if (!options_.copy) {
    options_.copy = [this](const TierAction& action) {
      options_.wait_until(clock_->NowNs() + device_->CopyNs(action.bytes));
      return Status::Ok();
    };
  }
  counters_.placing = options_.place;
  const int slots = std::max(1, device_->compute()->slots());
  for (int i = 0; i < slots; ++i) workers_.emplace_back([this] { WorkerLoop(); });
  transfer_worker_ = std::thread([this] { TransferLoop(); });
}

DeviceLanes::~DeviceLanes() { Shutdown(); }

void DeviceLanes::QueueTransferLocked(const TierAction& action) {
  transfers_.push(Transfer{action, ++transfers_queued_});
  cv_.notify_all();
}

size_t DeviceLanes::FairPositionLocked(double vstart, int64_t exec_ns) const {
  size_t pos = jobs_.size();
  while (pos > 0) {
    const Job& before = jobs_[pos - 1];
    if (before.vstart <= vstart) break;  // fair order (ties: first come first)
    if (before.deadline_ns > 0) {
      // Its current prediction (re-timed by measured ends since placement).
      const int64_t end = device_->compute()->Get(before.reservation).value_or(before.predicted).end_ns;
      if (end + exec_ns > before.deadline_ns) break;
    }
    --pos;
  }
  return pos;
}

void DeviceLanes::InsertJobLocked(Job job, size_t pos, int64_t now_ns) {
  ResourceTimeline& compute = *device_->compute();
  for (size_t i = pos; i < jobs_.size(); ++i) compute.Cancel(jobs_[i].reservation);
  job.reservation = compute.Reserve(std::max(now_ns, job.ready_ns), job.exec_ns, &job.predicted);
  for (size_t i = pos; i < jobs_.size(); ++i) {
    Job& later = jobs_[i];
    later.reservation = compute.Reserve(std::max(now_ns, later.ready_ns), later.exec_ns, &later.predicted);
  }
  if (pos < jobs_.size()) ++counters_.fair_reordered;
  jobs_.insert(jobs_.begin() + static_cast<std::ptrdiff_t>(pos), std::move(job));
}

int64_t DeviceLanes::OverlapNs(const Interval& x, const std::deque<Interval>& other) {
  int64_t sum = 0;
  for (auto it = other.rbegin(); it != other.rend(); ++it) {
    // Appended in order of their ends, give or take concurrent workers.
    if (it->end_ns + kNsPerSec < x.start_ns) break;
    sum += std::max<int64_t>(0, std::min(x.end_ns, it->end_ns) - std::max(x.start_ns, it->start_ns));
  }
  return sum;
}

void DeviceLanes::PruneHistory(std::deque<Interval>* history, int64_t before_ns) {
  while (!history->empty() && history->front().end_ns < before_ns) history->pop_front();
}

void DeviceLanes::RecordRunLocked(const Job& job, const DeviceRunInfo& info) {
  const Interval ran{info.started_ns, info.ended_ns};
  counters_.device_busy_ns += info.device_ns;
  counters_.overlap_ns += OverlapNs(ran, link_done_);
  compute_done_.push_back(ran);
  PruneHistory(&compute_done_, info.ended_ns - kOverlapHistoryNs);

  // When did its weights arrive? At placement if they were resident, else at
  // the end of the transfer it waited for.
  int64_t ready = job.placed_ns;
  if (job.ready_ns > job.placed_ns) {
    auto end = transfer_end_.find(job.key);
    if (end != transfer_end_.end()) ready = std::max(ready, end->second);
  }
  const bool slow = ready > job.ready_ns + kReadySlackNs;
  bool unplanned = false;
  if (slow) {
    for (const auto& [seq, start] : link_starts_) {
      if (seq > job.known_transfers && start < ready) {
        unplanned = true;
        break;
      }
    }
  }
  counters_.waited_unplanned_transfer += unplanned;
  if (job.deadline_ns > 0 && info.ended_ns > job.deadline_ns) {
    ++counters_.late;
    counters_.late_slow_transfer += slow;
    counters_.late_unplanned_transfer += unplanned;
    // Began later than planned (at placement, or when a fair insertion
    // re-timed it), or ran longer than its predicted device time: its own or
    // an earlier run overran.
    counters_.late_overrun += info.started_ns > job.predicted.start_ns + kReadySlackNs ||
                              info.device_ns > job.exec_ns + kReadySlackNs;
  }
}

DevicePlacement DeviceLanes::Place(const ModelKey& key, int64_t cpu_exec_ns, int64_t cpu_lane_free_ns,
                                   int64_t host_ready_ns, int64_t deadline_ns, double weight) {
  std::lock_guard<std::mutex> lock(mu_);
  PlacementInput in;
  in.now_ns = clock_->NowNs();
  in.cpu_exec_ns = cpu_exec_ns;
  in.cpu_lane_free_ns = cpu_lane_free_ns;
  in.host_state = host_ready_ns <= in.now_ns ? Residency::kResident : Residency::kMoving;
  in.host_ready_ns = host_ready_ns;
  DevicePlacement out;
  // Without a CPU prediction there is nothing to compare: the CPU lanes run
  // it (and measure it).
  if (options_.place && !shut_down_ && cpu_exec_ns > 0 && AddDevicePlacementInput(key, cache_, &in).ok()) {
    out.placement = ChoosePlacement(in);
  } else {
    in.device_available = false;
    out.placement = ChoosePlacement(in);
  }
  const Placement& p = out.placement;
  const bool device_meets = deadline_ns <= 0 || p.device_done_ns <= deadline_ns;
  if (p.target == PlacementTarget::kDevice && device_meets) {
    Result<Acquisition> acq = cache_->Acquire(key);
    if (acq.ok()) {
      if (acq->action.has_value()) {
        QueueTransferLocked(*acq->action);
        out.bytes_transferred = acq->action->bytes;
      }
      Job job;
      job.ticket = next_ticket_++;
      job.key = key;
      job.exec_ns = in.device_exec_ns;
      job.placed_ns = in.now_ns;
      job.ready_ns = std::max(in.now_ns, acq->ready_ns);
      job.deadline_ns = deadline_ns;
      job.known_transfers = transfers_queued_;
      // Start-time fair queuing, as the CPU lanes' FairQueue.
      double& finish = tenant_finish_[key.tenant];
      job.vstart = std::max(vtime_, finish);
      finish = job.vstart + static_cast<double>(job.exec_ns) / (weight > 0 ? weight : 1.0);
      const size_t pos = FairPositionLocked(job.vstart, job.exec_ns);
      out.on_device = true;
      out.ticket = job.ticket;
      InsertJobLocked(std::move(job), pos, in.now_ns);
      out.predicted = jobs_[pos].predicted;
      return out;
    }
    // No room on the device now (pinned or moving entries hold it): CPU.
  }
  out.placement.target = PlacementTarget::kCpu;
  ++counters_.placed_cpu;
  // The device tier sees this demand too, so that a model the CPU serves
  // now can displace colder ones on the device (a pre-warm's test below).
  if (in.device_available) (void)cache_->NoteDemand(key);
  // Would the device win once the weights are there? Then start moving them
  // now, while this request runs on the CPU.
  if (in.device_available && in.device_state == Residency::kAbsent &&
      std::max(in.now_ns, in.device_free_ns) + in.device_exec_ns < p.cpu_done_ns) {
    Result<std::optional<TierAction>> warm = cache_->Prewarm(key);
    if (warm.ok() && warm->has_value()) {
      QueueTransferLocked(**warm);
      out.bytes_transferred = (*warm)->bytes;
      out.prewarmed = true;
      ++counters_.prewarms;
    }
  }
  return out;
}

Status DeviceLanes::Start(uint64_t ticket, DeviceWork work) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stop_) return Status::Unavailable("device lanes are shutting down");
  for (Job& job : jobs_) {
    if (job.ticket != ticket) continue;
    job.work = std::move(work);
    job.started = true;
    ++counters_.placed_device;
    cv_.notify_all();
    return Status::Ok();
  }
  return Status::InvalidArgument("no device reservation " + std::to_string(ticket));
}

void DeviceLanes::Abandon(uint64_t ticket) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = jobs_.begin(); it != jobs_.end(); ++it) {
    if (it->ticket != ticket || it->started) continue;
    device_->compute()->Cancel(it->reservation);
    (void)cache_->Release(it->key);
    jobs_.erase(it);
    cv_.notify_all();
    return;
  }
}

bool DeviceLanes::WaitSettledLocked(std::unique_lock<std::mutex>& lock, const ModelKey& key, int64_t timeout_ns) {
  // Real time, not the injected clock: this is how long a caller blocks.
  return cv_.wait_for(lock, std::chrono::nanoseconds(timeout_ns),
                      [&] {
                        return cache_->state(key) != Residency::kMoving &&
                               !(transfers_in_flight_ > 0 && in_flight_key_ == key);
                      });
}

Status DeviceLanes::AfterOperatorMove(const Status& started, const ModelKey& key, int64_t timeout_ns) {
  if (!started.ok()) return started;
  std::unique_lock<std::mutex> lock(mu_);
  if (!WaitSettledLocked(lock, key, timeout_ns)) {
    return Status::Unavailable(key.ToString() + " is still moving to the device");
  }
  if (cache_->state(key) != Residency::kResident) {
    return Status::Unavailable("the transfer of " + key.ToString() + " to the device failed");
  }
  return Status::Ok();
}

Status DeviceLanes::OperatorMove(const ModelKey& key, bool pin, int64_t timeout_ns) {
  Status started;
  {
    std::lock_guard<std::mutex> lock(mu_);  // transfers queue in the order they were predicted
    Result<Acquisition> acq = pin ? cache_->OperatorPin(key) : cache_->Load(key);
    if (acq.ok() && acq->action.has_value()) QueueTransferLocked(*acq->action);
    started = acq.status();
  }
  return AfterOperatorMove(started, key, timeout_ns);
}

Status DeviceLanes::OperatorPin(const ModelKey& key, int64_t timeout_ns) { return OperatorMove(key, true, timeout_ns); }

Status DeviceLanes::Load(const ModelKey& key, int64_t timeout_ns) { return OperatorMove(key, false, timeout_ns); }

Status DeviceLanes::WaitResident(const ModelKey& key, int64_t timeout_ns) {
  return AfterOperatorMove(Status::Ok(), key, timeout_ns);
}

void DeviceLanes::TransferLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return !transfers_.empty() || (stop_ && jobs_.empty()); });
    if (transfers_.empty()) return;  // stopping, and nobody waits for a transfer
    const TierAction action = transfers_.top().action;
    const uint64_t seq = transfers_.top().seq;
    transfers_.pop();
    ++transfers_in_flight_;
    in_flight_key_ = action.key;
    const int64_t started = clock_->NowNs();
    link_starts_.emplace_back(seq, started);
    while (link_starts_.size() > kMaxLinkStarts ||
           (!link_starts_.empty() && link_starts_.front().second < started - kOverlapHistoryNs)) {
      link_starts_.pop_front();
    }
    lock.unlock();
    Status copied = options_.copy(action);
    const int64_t ended = clock_->NowNs();
    lock.lock();
    // Recorded before the weights count as resident, so that the run that
    // waited for them finds when they arrived.
    const Interval moved{started, ended};
    counters_.overlap_ns += OverlapNs(moved, compute_done_);
    link_done_.push_back(moved);
    PruneHistory(&link_done_, ended - kOverlapHistoryNs);
    transfer_end_[action.key] = ended;
    lock.unlock();
    Status finished = cache_->FinishMove(action.id, started, copied);
    device_->link()->Prune(ended - kHistoryNs);
    lock.lock();
    --transfers_in_flight_;
    if (copied.ok() && finished.ok()) {
      ++counters_.transfers;
      counters_.bytes_transferred += action.bytes;
      counters_.transfer_ns += ended - started;
    } else {
      ++counters_.transfers_failed;
    }
    cv_.notify_all();
  }
}

void DeviceLanes::WorkerLoop() {
  runtime::LaneGroup group(runtime::LaneGroupOptions{});
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    // The front request runs next (reservation order); it waits for its
    // weights if they are still moving.
    cv_.wait(lock, [this] {
      if (jobs_.empty()) return stop_;
      const Job& front = jobs_.front();
      return front.started && cache_->state(front.key) != Residency::kMoving;
    });
    if (jobs_.empty()) {
      cv_.notify_all();  // the transfer worker may be waiting for the queue to drain
      return;
    }
    Job job = std::move(jobs_.front());
    jobs_.pop_front();
    vtime_ = std::max(vtime_, job.vstart);
    const bool resident = cache_->state(job.key) == Residency::kResident;
    lock.unlock();

    DeviceRunInfo info;
    info.started_ns = clock_->NowNs();
    Result<std::vector<NamedTensor>> outputs =
        resident ? job.work.run(&group)
                 : Result<std::vector<NamedTensor>>(Status::Unavailable(
                       "the transfer of " + job.key.ToString() + " to the device failed; the request did not run"));
    // The simulated device's time is the prediction: hold the slot until
    // then (a CPU run slower than that ends later).
    if (resident) options_.wait_until(info.started_ns + job.exec_ns);
    info.ended_ns = clock_->NowNs();
    info.device_ns = info.ended_ns - info.started_ns;
    device_->compute()->Finish(job.reservation, info.ended_ns);
    device_->compute()->Prune(info.ended_ns - kHistoryNs);
    (void)cache_->Release(job.key);
    lock.lock();
    RecordRunLocked(job, info);  // before `done`: its caller sees the run counted
    lock.unlock();
    job.work.done(std::move(outputs), info);

    lock.lock();
    cv_.notify_all();
  }
}

DeviceLanesStats DeviceLanes::Stats(int64_t window_ns) const {
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t now = clock_->NowNs();
  DeviceLanesStats s = counters_;
  s.window_ns = window_ns;
  s.device = device_->Stats(now - window_ns, now);
  s.queued = jobs_.size();
  return s;
}

void DeviceLanes::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (shut_down_) return;
    shut_down_ = true;
    stop_ = true;
    // Reservations never started cannot run: give them back.
    for (auto it = jobs_.begin(); it != jobs_.end();) {
      if (it->started) {
        ++it;
        continue;
      }
      device_->compute()->Cancel(it->reservation);
      (void)cache_->Release(it->key);
      it = jobs_.erase(it);
    }
  }
  cv_.notify_all();
  for (std::thread& t : workers_) {
    if (t.joinable()) t.join();
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    cv_.notify_all();
  }
  if (transfer_worker_.joinable()) transfer_worker_.join();
}

}  // namespace orrery
