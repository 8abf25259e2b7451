#include "runtime/lane_group.h"

#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/cpu_relax.h"

namespace orrery::runtime {
namespace {

void PinTo(pthread_t thread, int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  // Best effort: a container may forbid it; the group still works unpinned.
  (void)pthread_setaffinity_np(thread, sizeof(set), &set);
}

// Slot::moved: a rescuer is narrowing its affinity; it is narrowed to the
// rescuer's core; it is being (kExcluding) or has been (kExcluded) pushed
// off that core again (see ParallelFor). The thread itself restores its
// saved mask from kMoved or kExcluded.
constexpr int kMoving = 1;
constexpr int kMoved = 2;
constexpr int kExcluding = 3;
constexpr int kExcluded = 4;
// How often a waiting thread samples the other's CPU clock (a system
// call, ~1 us): a few samples per stall window.
constexpr int64_t kSampleNs = 20'000;

int64_t CpuClockNs(clockid_t clock) {
  timespec ts{};
  if (clock_gettime(clock, &ts) != 0) return -1;
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

pid_t ThisTid() {
  thread_local const pid_t tid = static_cast<pid_t>(gettid());
  return tid;
}

}  // namespace

LaneGroup::LaneGroup(LaneGroupOptions options)
    : size_(options.threads < 1 ? 1 : options.threads),
      spin_ns_(options.spin_ns),
      pinned_(!options.cpus.empty()),
      stall_ns_(options.stall_ns),
      rescue_ok_(options.stall_ns > 0),
      slots_(std::make_unique<Slot[]>(static_cast<size_t>(size_))),
      watches_(static_cast<size_t>(size_)) {
  if (!options.cpus.empty()) PinTo(pthread_self(), options.cpus[0]);
  // The constructing thread is usually the caller: workers that sleep
  // before the first job keep off its core already.
  if (!pinned_) caller_cpu_.store(sched_getcpu(), std::memory_order_relaxed);
  workers_.reserve(static_cast<size_t>(size_ - 1));
  for (int t = 1; t < size_; ++t) {
    workers_.emplace_back([this, t] { WorkerLoop(t); });
    if (static_cast<size_t>(t) < options.cpus.size()) {
      PinTo(workers_.back().native_handle(), options.cpus[static_cast<size_t>(t)]);
    }
  }
}

LaneGroup::~LaneGroup() {
  stop_.store(true, std::memory_order_release);
  wake_.fetch_add(1, std::memory_order_acq_rel);
  wake_.notify_all();
  workers_.clear();  // joins
  // A worker may have moved the caller; restored by the caller only.
  if (slots_[0].tid.load(std::memory_order_relaxed) == ThisTid()) RestoreIfMoved(0);
}

LaneGroupStats LaneGroup::stats() const {
  LaneGroupStats s = stats_;
  s.rescues = rescues_.load(std::memory_order_relaxed);
  return s;
}

bool LaneGroup::RegisterThisThread(int thread) {
  Slot& slot = slots_[thread];
  clockid_t clock{};
  if (pthread_getcpuclockid(pthread_self(), &clock) != 0) return false;
  slot.clock.store(clock, std::memory_order_relaxed);
  slot.tid.store(ThisTid(), std::memory_order_release);
  return true;
}

void LaneGroup::RegisterCaller() {
  if (slots_[0].tid.load(std::memory_order_relaxed) == ThisTid()) return;
  if (!RegisterThisThread(0)) rescue_ok_.store(false);
}

void LaneGroup::StartWatch(int64_t now, Watch& w) {
  // No clock read yet: most waits end within the first sample interval,
  // and reading another thread's CPU clock is a system call that locks
  // its run queue.
  w.since_ns = now;
  w.cpu_ns = -1;
  w.next_ns = now + kSampleNs;
}

bool LaneGroup::Stalled(int target, int64_t now, Watch& w) const {
  if (now < w.next_ns) return false;
  w.next_ns = now + kSampleNs;
  const int64_t cpu = CpuClockNs(slots_[target].clock.load(std::memory_order_relaxed));
  if (cpu < 0) return false;
  if (w.cpu_ns < 0) {  // the first sample opens the window
    w.since_ns = now;
    w.cpu_ns = cpu;
    return false;
  }
  const int64_t wall = now - w.since_ns;
  // Ran at least a quarter of the window: it is running (an interrupt or
  // a short preemption aside); watch a new window from here.
  if (4 * (cpu - w.cpu_ns) >= wall) {
    if (wall >= stall_ns_) {
      w.since_ns = now;
      w.cpu_ns = cpu;
    }
    return false;
  }
  return wall >= stall_ns_;
}

bool LaneGroup::MoveHere(int target) {
  Slot& slot = slots_[target];
  const pid_t tid = slot.tid.load(std::memory_order_acquire);
  if (tid == 0) return false;
  int expected = 0;
  if (!slot.moved.compare_exchange_strong(expected, kMoving, std::memory_order_acq_rel)) {
    return false;  // being moved, or moved and not yet restored
  }
  cpu_set_t here;
  CPU_ZERO(&here);
  const int cpu = sched_getcpu();
  if (cpu < 0 || sched_getaffinity(tid, sizeof(slot.saved), &slot.saved) != 0) {
    slot.moved.store(0, std::memory_order_release);
    return false;
  }
  CPU_SET(cpu, &here);
  // Counted before the move: the moved thread may run as soon as it is
  // made, and once it has (its job done) its stats() must include it.
  rescues_.fetch_add(1, std::memory_order_relaxed);
  if (sched_setaffinity(tid, sizeof(here), &here) != 0) {
    // Forbidden (a container, a cpuset without this CPU): stop trying.
    rescues_.fetch_sub(1, std::memory_order_relaxed);
    rescue_ok_.store(false, std::memory_order_relaxed);
    slot.moved.store(0, std::memory_order_release);
    return false;
  }
  slot.moved.store(kMoved, std::memory_order_release);
  return true;
}

bool LaneGroup::RestoreIfMoved(int thread) {
  Slot& slot = slots_[thread];
  int state = slot.moved.load(std::memory_order_acquire);
  while (state == kExcluding) {  // one system call away
    CpuRelax();
    state = slot.moved.load(std::memory_order_acquire);
  }
  if (state != kMoved && state != kExcluded) return false;
  if (!slot.moved.compare_exchange_strong(state, kMoving, std::memory_order_acq_rel)) return false;
  (void)sched_setaffinity(0, sizeof(slot.saved), &slot.saved);
  slot.moved.store(0, std::memory_order_release);
  return true;
}

bool LaneGroup::ExcludeFrom(int target, int cpu) {
  Slot& slot = slots_[target];
  int expected = kMoved;
  if (!slot.moved.compare_exchange_strong(expected, kExcluding, std::memory_order_acq_rel)) {
    return false;  // it has restored its mask already (or is doing so)
  }
  cpu_set_t others = slot.saved;
  CPU_CLR(cpu, &others);
  const bool ok = CPU_COUNT(&others) > 0 &&
                  sched_setaffinity(slot.tid.load(std::memory_order_relaxed), sizeof(others), &others) == 0;
  slot.moved.store(ok ? kExcluded : kMoved, std::memory_order_release);
  return ok;
}

bool LaneGroup::AvoidCore(int cpu, cpu_set_t* mask) {
  if (cpu < 0 || sched_getaffinity(0, sizeof(*mask), mask) != 0) return false;
  cpu_set_t others = *mask;
  CPU_CLR(cpu, &others);
  // Not in the mask (nothing to do), or the only core in it (pinned there).
  if (CPU_COUNT(&others) == 0 || CPU_COUNT(&others) == CPU_COUNT(mask)) return false;
  return sched_setaffinity(0, sizeof(others), &others) == 0;
}

void LaneGroup::LeaveCore(int cpu) {
  // Moves this thread off `cpu` now (it returns once it runs elsewhere,
  // behind the intruder if that core is still taken), then lets it back.
  // Pinned to `cpu`: it just sleeps instead.
  cpu_set_t mine;
  if (AvoidCore(cpu, &mine)) (void)sched_setaffinity(0, sizeof(mine), &mine);
}

void LaneGroup::FinishTask() {
  // seq_cst with SleepUntilDone's store and load: either it sees this
  // task done or this sees it asleep.
  done_.fetch_add(1, std::memory_order_seq_cst);
  if (caller_asleep_.load(std::memory_order_seq_cst) != 0) {
    finished_.fetch_add(1, std::memory_order_release);
    finished_.notify_one();
  }
}

void LaneGroup::SleepUntilDone(int64_t num_tasks) {
  caller_asleep_.store(1, std::memory_order_seq_cst);
  for (;;) {
    const uint32_t seen = finished_.load(std::memory_order_acquire);
    if (done_.load(std::memory_order_seq_cst) == num_tasks) break;
    finished_.wait(seen, std::memory_order_acquire);
  }
  caller_asleep_.store(0, std::memory_order_relaxed);
}

void LaneGroup::RunTasks(int thread) {
  // Claims are checked against the generation and task count read here,
  // together: checked against the next job's count, a claim word still
  // naming this finished job (the caller has published the next job's
  // count but not yet its claim word) would pass, and a task of the next
  // job would run twice and be counted in its done_ once too often (the
  // caller then waited forever). A job read here that is not yet (or no
  // longer) claimable returns at once; the caller bumps wake_ after
  // publishing the claim word, so the worker comes back for it.
  const uint64_t job = job_.load(std::memory_order_acquire);
  const auto generation = static_cast<uint32_t>(job >> 32);
  const int64_t num_tasks = static_cast<int64_t>(job & 0xffffffffu);
  Slot& slot = slots_[thread];
  for (;;) {
    uint64_t s = claim_.load(std::memory_order_acquire);
    if (static_cast<uint32_t>(s >> 32) != generation) return;
    const int64_t task = static_cast<int64_t>(s & 0xffffffffu);
    if (task >= num_tasks) return;
    // Flagged before the claim, so that a waiting thread that sees the
    // task claimed and not done sees this thread in it (the claim's
    // locked CAS orders the store on x86; elsewhere the waiter at worst
    // samples once more).
    slot.in_task.store(1, std::memory_order_relaxed);
    if (!claim_.compare_exchange_weak(s, s + 1, std::memory_order_acq_rel)) {
      slot.in_task.store(0, std::memory_order_relaxed);
      continue;
    }
    (*fn_.load(std::memory_order_acquire))(task, thread);
    slot.in_task.store(0, std::memory_order_release);
    FinishTask();
  }
}

void LaneGroup::ParallelFor(int64_t num_tasks, FunctionRef<void(int64_t, int)> fn) {
  if (size_ == 1 || num_tasks <= 1 || num_tasks > 0xffffffffLL) {
    for (int64_t t = 0; t < num_tasks; ++t) fn(t, 0);
    return;
  }
  const bool rescue = rescue_ok_.load(std::memory_order_relaxed);
  if (rescue) {
    RegisterCaller();
    RestoreIfMoved(0);
  }
  // The previous job is fully done (every claimed task finished), so no
  // worker reads these until the claim word below names the new job.
  ++generation_;
  fn_.store(&fn, std::memory_order_relaxed);
  job_.store((static_cast<uint64_t>(generation_) << 32) | static_cast<uint64_t>(num_tasks), std::memory_order_relaxed);
  done_.store(0, std::memory_order_relaxed);
  claim_.store(static_cast<uint64_t>(generation_) << 32, std::memory_order_release);
  ++stats_.jobs;
  if (sleeping_.load(std::memory_order_relaxed) > 0) ++stats_.asleep_jobs;
  Wake();
  RunTasks(0);
  // Only tasks claimed by workers can still be running.
  if (done_.load(std::memory_order_acquire) == num_tasks) {
    // Moved here by a worker during this job: the rest of the run (and
    // whatever the caller does next) may use every core it had.
    if (rescue) RestoreIfMoved(0);
    return;
  }
  const Clock* clock = SteadyClock::Get();
  const int64_t wait_start = clock->NowNs();
  if (rescue) {
    for (int t = 1; t < size_; ++t) StartWatch(wait_start, watches_[static_cast<size_t>(t)]);
  }
  uint32_t spins = 0;
  while (done_.load(std::memory_order_acquire) != num_tasks) {
    CpuRelax();
    if (!rescue || ++spins % 16 != 0) continue;
    // A worker still in a task that has not run for stall_ns: preempted
    // on its core. Move it onto this one and sleep until it is done.
    const int64_t now = clock->NowNs();
    int moved = -1;
    for (int t = 1; t < size_ && moved < 0; ++t) {
      if (slots_[t].in_task.load(std::memory_order_acquire) == 0) {
        StartWatch(now, watches_[static_cast<size_t>(t)]);
      } else if (Stalled(t, now, watches_[static_cast<size_t>(t)]) && MoveHere(t)) {
        moved = t;
      }
    }
    if (moved >= 0) {
      const int here = sched_getcpu();
      SleepUntilDone(num_tasks);
      // Woken by the moved worker's last task. Put back on this core (no
      // idle one to wake on: the intruder still has the other), the two
      // now share it, and Linux would leave them stacked for ~10 ms after
      // the other core is free (traced: both on CPU0, switching at each
      // 4 ms tick, CPU1 idle). Push the worker off it, behind the
      // intruder; it restores its own mask once it runs there.
      if (sched_getcpu() == here) ExcludeFrom(moved, here);
      break;
    }
  }
  ++stats_.waits;
  stats_.wait_ns += clock->NowNs() - wait_start;
}

void LaneGroup::Wake() {
  if (!pinned_) caller_cpu_.store(sched_getcpu(), std::memory_order_relaxed);
  wake_.store(++epoch_, std::memory_order_release);
  wake_.notify_all();  // no system call when no worker waits
}

void LaneGroup::ExpectJob(int64_t in_ns) {
  if (size_ == 1 || in_ns > spin_ns_) return;
  if (sleeping_.load(std::memory_order_relaxed) > 0) ++stats_.prewakes;
  Wake();
}

bool LaneGroup::SleepAwayFromCaller(cpu_set_t* mask) const {
  return !pinned_ && AvoidCore(caller_cpu_.load(std::memory_order_relaxed), mask);
}

void LaneGroup::WorkerLoop(int thread) {
  (void)RegisterThisThread(thread);  // unregistered, it is never moved
  uint32_t seen = 0;
  for (;;) {
    uint32_t gen = wake_.load(std::memory_order_acquire);
    if (gen == seen) {
      const Clock* clock = SteadyClock::Get();
      const int64_t start = clock->NowNs();
      const int64_t deadline = start + spin_ns_;
      // While the caller is still in a task of the job just run, spin on
      // past the deadline (the next job follows that task) for up to one
      // stall window, and swap cores with the caller if it is not running.
      const bool rescue = rescue_ok_.load(std::memory_order_relaxed);
      const int64_t watch_end = deadline + stall_ns_;
      Watch watch;
      if (rescue) StartWatch(start, watch);
      uint32_t spins = 0;
      while ((gen = wake_.load(std::memory_order_acquire)) == seen) {
        CpuRelax();
        if (++spins % 16 != 0) continue;
        const int64_t now = clock->NowNs();
        const bool caller_busy = rescue && slots_[0].in_task.load(std::memory_order_acquire) != 0;
        if (!caller_busy) {
          if (now >= deadline) break;
          if (rescue) StartWatch(now, watch);
          continue;
        }
        if (now >= watch_end) break;
        if (Stalled(0, now, watch)) {
          const int here = sched_getcpu();
          if (MoveHere(0)) {
            // The caller now runs here; this worker waits on the core the
            // caller was stuck on (behind the intruder) and takes part
            // again once it gets it, instead of sharing this one.
            LeaveCore(here);
          }
          break;
        }
      }
    }
    cpu_set_t mask;
    bool away = false;
    if (gen == seen) {
      away = SleepAwayFromCaller(&mask);
      sleeping_.fetch_add(1, std::memory_order_relaxed);
      while ((gen = wake_.load(std::memory_order_acquire)) == seen) {
        wake_.wait(seen, std::memory_order_acquire);
      }
      sleeping_.fetch_sub(1, std::memory_order_relaxed);
    }
    seen = gen;
    const bool stop = stop_.load(std::memory_order_acquire);
    if (!stop) {
      RunTasks(thread);
      RestoreIfMoved(thread);
    }
    // After the job, not before it: the wake-up's tasks wait for no system call.
    if (away) (void)sched_setaffinity(0, sizeof(mask), &mask);
    if (stop) break;
  }
  RestoreIfMoved(thread);
}

}  // namespace orrery::runtime
