// DeviceLanes: where the scheduler runs work it places on a device (the
// simulated accelerator, cache/device.h), and who performs the device tier's
// host -> device copies.
//
//   Place  -> cache/placement.h's ChoosePlacement for one request from the
//             current predictions (CPU lanes vs device: host load, transfer,
//             link queue, device compute queue); on the device path it pins
//             the model in the DeviceCache (Acquire: a transfer when absent)
//             and reserves the request's predicted device time on the
//             device's compute timeline, so the next prediction sees it; on
//             the CPU path, when the device would win once the weights are
//             there, it starts that transfer ahead (DeviceCache::Prewarm).
//   Start  -> the reserved request joins the device queue (reservation order
//             = predicted-start order).
//   fair order: the device queue is fair-queued across tenants with start-
//             time fair queuing, as the CPU lanes' FairQueue: a placement
//             gets virtual start max(V, its tenant's last virtual finish)
//             and finish start + device time / weight; V is the virtual
//             start of the last request the device began. A new request goes
//             ahead of queued requests with a later virtual start (another
//             tenant's backlog), but only of those that still end by their
//             deadlines when pushed back by its device time; the compute
//             reservations behind it are re-timed, so every prediction stays
//             the plan the device follows.
//   workers: one per compute slot. A worker waits until its request's weights
//             are resident, runs it (`DeviceWork::run`: for the simulated
//             device, the plan on the CPU, on the worker's own thread) and
//             holds the compute slot until the predicted device end (start +
//             Device::ExecNs), so the device's timing is the device's, not
//             the CPU's; then it finishes the reservation with the measured
//             end, unpins, and calls `done`.
//   transfer worker: performs the cache's transfer actions one at a time in
//             predicted-start order (the link has one slot): `copy` (the
//             simulated link: wait latency + bytes / bandwidth), then
//             DeviceCache::FinishMove with the measured start, so the cache
//             learns the bandwidth. Transfers overlap device execution; the
//             time both are busy at once is counted (`overlap_ns`).
//
// Every transfer the scheduler causes is on the link timeline before the
// next placement is predicted, and every device-placed request is on the
// compute timeline: admission of a later request includes both (no
// unplanned transfer can make an admitted request late, except a measured
// copy slower than predicted). Stats check it per device run: a run that
// waited for weights arriving later than its placement predicted, while a
// transfer queued after its placement had gone onto the link first, waited
// for an unplanned transfer (`waited_unplanned_transfer`); runs that ended
// after their deadline are counted with the cause (`late_*`).
//
// All times come from the injected Clock; `wait_until` and `copy` are the
// only places that let time pass, so tests with a FakeClock move it there
// and every decision is deterministic. Thread-safe (one mutex; callbacks
// never run under it).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <queue>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "base/clock.h"
#include "base/status.h"
#include "cache/device.h"
#include "cache/device_cache.h"
#include "cache/placement.h"
#include "ops/parallel.h"
#include "runtime/tensor.h"

namespace orrery {

struct DeviceLanesOptions {
  const Clock* clock = nullptr;  // null = SteadyClock
  // Blocks until the clock reads `t_ns`. Default: sleeps (a SteadyClock).
  // A test with a FakeClock advances it instead.
  std::function<void(int64_t t_ns)> wait_until = {};
  // Performs one host -> device transfer; its end is the measured end.
  // Default: the simulated link, wait_until(now + Device::CopyNs(bytes)).
  std::function<Status(const TierAction&)> copy = {};
  // False: the tier is kept (cache, transfers by operator actions, stats)
  // but Place never chooses the device (a device without an executor).
  bool place = true;
};

// What Place decided for one request.
struct DevicePlacement {
  Placement placement;       // both predictions; target as decided
  bool on_device = false;    // reserved: call Start (or Abandon) with ticket
  uint64_t ticket = 0;
  Interval predicted;        // on the device's compute timeline (on_device)
  // Bytes of a transfer this placement started (the device path's own, or
  // a pre-warm next to a CPU placement); 0 when none. What the request is
  // billed for moving.
  int64_t bytes_transferred = 0;
  bool prewarmed = false;    // a CPU placement that started the transfer
};

// Measured on the device, for the RunReport.
struct DeviceRunInfo {
  int64_t started_ns = 0;
  int64_t ended_ns = 0;  // the compute slot was held until then
  int64_t device_ns = 0;  // ended - started
};

struct DeviceWork {
  // Runs the request (on the worker's thread, with its thread group).
  std::function<Result<std::vector<NamedTensor>>(ops::ThreadGroup* group)> run;
  std::function<void(Result<std::vector<NamedTensor>> outputs, const DeviceRunInfo& info)> done;
};

struct DeviceLanesStats {
  DeviceStats device;  // name, simulated, utilisation over the window below
  int64_t window_ns = 0;
  bool placing = false;
  uint64_t placed_device = 0;   // requests run on the device
  uint64_t placed_cpu = 0;      // requests Place sent to the CPU lanes
  uint64_t prewarms = 0;        // transfers started next to a CPU placement
  uint64_t transfers = 0;       // finished transfers (all causes)
  uint64_t transfers_failed = 0;
  int64_t bytes_transferred = 0;  // by finished transfers
  int64_t transfer_ns = 0;      // their summed measured durations
  int64_t device_busy_ns = 0;   // summed held compute time of finished runs
  // Summed time a transfer and a device run were both under way (measured
  // intervals, per transfer-run pair): link and compute busy at once.
  int64_t overlap_ns = 0;
  uint64_t fair_reordered = 0;  // placements queued ahead of another tenant's requests
  // Device runs whose weights arrived after the placement's predicted ready
  // time (+ 1 ms) because a transfer queued after the placement went first.
  uint64_t waited_unplanned_transfer = 0;
  uint64_t late = 0;                     // device runs that ended after their deadline
  uint64_t late_slow_transfer = 0;       // of late: weights later than predicted (+ 1 ms)
  uint64_t late_unplanned_transfer = 0;  // of late: also waited_unplanned_transfer
  // Of late: began over 1 ms after its planned start (at placement or when a
  // fair insertion re-timed it), or held the device over 1 ms longer than
  // predicted (the simulated device runs on the host CPU, so a descheduled
  // run overruns and delays the queue behind it).
  uint64_t late_overrun = 0;
  size_t queued = 0;            // placed, not finished
};

class DeviceLanes {
 public:
  // `device` and `cache` must outlive this. Starts one worker per compute
  // slot and the transfer worker.
  DeviceLanes(const Device* device, DeviceCache* cache, DeviceLanesOptions options = {});
  ~DeviceLanes();  // Shutdown()

  const Device& device() const { return *device_; }
  DeviceCache& cache() const { return *cache_; }
  bool placing() const { return options_.place; }

  // Decides CPU or device for one request of `key` whose CPU run is
  // predicted at `cpu_exec_ns` (0 = unknown: CPU) and could start on a lane
  // at `cpu_lane_free_ns`, with the weights in host RAM from
  // `host_ready_ns`. The device is chosen only when it is predicted first
  // and by `deadline_ns` (0 = none); a device it cannot make room on (pinned
  // or moving entries) leaves the request on the CPU.
  // `weight` is the tenant's (key.tenant) fair-share weight (> 0) on the
  // device queue.
  DevicePlacement Place(const ModelKey& key, int64_t cpu_exec_ns, int64_t cpu_lane_free_ns, int64_t host_ready_ns,
                        int64_t deadline_ns, double weight = 1.0);
  // Queues a request Place reserved. INVALID_ARGUMENT for an unknown ticket.
  Status Start(uint64_t ticket, DeviceWork work);
  // Gives a reservation back unrun (unpins, frees its compute time).
  void Abandon(uint64_t ticket);

  // Operator actions on the device tier; none is a request. Pin and Load
  // start the transfer when absent; Pin, Load and WaitResident return once
  // the model is resident (or its transfer failed, or `timeout_ns` passed:
  // UNAVAILABLE). Errors as DeviceCache's.
  Status OperatorPin(const ModelKey& key, int64_t timeout_ns);
  Status Load(const ModelKey& key, int64_t timeout_ns);
  Status WaitResident(const ModelKey& key, int64_t timeout_ns);

  // Utilisation over the last `window_ns` (at most 10 minutes: the
  // timelines keep that much history).
  DeviceLanesStats Stats(int64_t window_ns = 60 * kNsPerSec) const;

  // Runs what is queued and the transfers it waits for, then joins the
  // workers. Place still works afterwards but Start refuses (UNAVAILABLE).
  // Idempotent.
  void Shutdown();

  DeviceLanes(const DeviceLanes&) = delete;
  DeviceLanes& operator=(const DeviceLanes&) = delete;

 private:
  struct Job {
    uint64_t ticket = 0;
    ModelKey key;
    uint64_t reservation = 0;
    Interval predicted;
    int64_t exec_ns = 0;
    int64_t placed_ns = 0;
    int64_t ready_ns = 0;     // weights on the device, as predicted at placement
    int64_t deadline_ns = 0;  // 0 = none
    uint64_t known_transfers = 0;  // transfers queued up to its placement
    double vstart = 0;        // fair order on the device queue
    bool started = false;  // Start called: `work` is set
    DeviceWork work;
  };
  struct Transfer {
    TierAction action;
    uint64_t seq = 0;  // order of queueing
    bool operator<(const Transfer& o) const {  // priority_queue: earliest start on top
      return action.predicted.start_ns > o.action.predicted.start_ns ||
             (action.predicted.start_ns == o.action.predicted.start_ns && action.id > o.action.id);
    }
  };

  void QueueTransferLocked(const TierAction& action);
  // Where a new job of virtual start `vstart` and device time `exec_ns` goes
  // in jobs_: after every job with a virtual start <= its own and every job
  // that its device time would push past its deadline.
  size_t FairPositionLocked(double vstart, int64_t exec_ns) const;
  // Inserts `job` at `pos`, re-reserving the compute time of the jobs behind.
  void InsertJobLocked(Job job, size_t pos, int64_t now_ns);
  // Accounts a finished device run (overlap, lateness).
  void RecordRunLocked(const Job& job, const DeviceRunInfo& info);
  // Sum of the intersections of `x` with the intervals of `other` (recent first).
  static int64_t OverlapNs(const Interval& x, const std::deque<Interval>& other);
  static void PruneHistory(std::deque<Interval>* history, int64_t before_ns);
  void TransferLoop();
  void WorkerLoop();
  // Waits (on cv_) until `key` is not moving; `lock` holds mu_.
  bool WaitSettledLocked(std::unique_lock<std::mutex>& lock, const ModelKey& key, int64_t timeout_ns);
  // Waits for `key` to settle after an operator action that `started`.
  Status AfterOperatorMove(const Status& started, const ModelKey& key, int64_t timeout_ns);
  // OperatorPin (pin) or Load, queueing the transfer, then waits.
  Status OperatorMove(const ModelKey& key, bool pin, int64_t timeout_ns);

  const Device* device_;
  DeviceCache* cache_;
  DeviceLanesOptions options_;
  const Clock* clock_;

  mutable std::mutex mu_;
  std::condition_variable cv_;  // jobs, transfers, residency changes, stop
  bool stop_ = false;
  bool shut_down_ = false;
  uint64_t next_ticket_ = 1;
  std::deque<Job> jobs_;  // in reservation order
  std::priority_queue<Transfer> transfers_;
  int transfers_in_flight_ = 0;
  // The model the transfer worker is moving (while transfers_in_flight_ >
  // 0): a caller waiting for it returns only once the worker has counted
  // the move (Stats), not as soon as the cache shows it settled.
  ModelKey in_flight_key_;
  uint64_t transfers_queued_ = 0;
  // Transfers as they went onto the link: (seq, measured start), recent ones.
  std::deque<std::pair<uint64_t, int64_t>> link_starts_;
  std::map<ModelKey, int64_t> transfer_end_;  // last measured transfer end per model
  // Measured busy intervals of the last few seconds, for overlap_ns.
  std::deque<Interval> link_done_;
  std::deque<Interval> compute_done_;
  double vtime_ = 0;                          // the device queue's virtual time
  std::map<std::string, double> tenant_finish_;  // last virtual finish per tenant
  DeviceLanesStats counters_;
  std::vector<std::thread> workers_;
  std::thread transfer_worker_;
};

}  // namespace orrery
