// A group of threads that run one kernel's tasks together: the concrete
// ops::ThreadGroup that callers (the scheduler's lanes, orrery-run) own and
// lend to executions. Kernels never create threads themselves.
//
// A group of size N owns N - 1 worker threads; the thread calling
// ParallelFor is the N-th. Tasks are claimed one at a time from a shared
// counter, and ParallelFor returns as soon as every task has finished: a
// worker that has not woken up yet (its core busy with other work) is not
// waited for, so a busy core costs throughput, never a scheduler tick of
// latency. Between calls the workers spin briefly (a kernel's next step
// usually follows within microseconds) and then sleep on a futex, so an
// idle group costs no CPU. ExpectJob wakes sleeping workers ahead of a job
// the caller knows is coming (a plan's next parallel step): in a VM a
// futex wake-up takes tens of microseconds to reach the other core, which
// a short parallel step would otherwise lose. ParallelFor allocates nothing.
//
// Stalls: a thread preempted in the middle of a task (another process
// woke on its core) holds up the whole job, and Linux leaves it queued
// behind the intruder for milliseconds even when the group's other core is
// idle or spinning for it: it ran a moment ago, so the balancer counts it
// cache-hot and does not pull it. Traced on the 2-vCPU Zen 5 VM at T=2
// (runtime/README.md): the VM's own agent and other shells woke for 1-3
// ms slices a few times a second; a caller stuck 2.8 ms with the other core
// idle, a worker stuck 7 ms with the caller spinning at the barrier. So a
// thread with nothing left to do that sees another in a task whose CPU
// clock stood still for `stall_ns` swaps cores with it (sched_setaffinity):
// the stalled thread runs on the waiting thread's core, the waiting one
// queues behind the intruder and rejoins when it gets that core back.
// Without the swap the two would share one core, and Linux separates two
// threads that just ran only after ~10 ms (traced: both on CPU0, switching
// at each 4 ms tick, CPU1 idle). Each moved thread restores its own
// affinity (a pin included) when it next finishes or starts a job.
// Counted in stats().rescues.
#pragma once

#include <sched.h>
#include <sys/types.h>
#include <time.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "ops/parallel.h"

namespace orrery::runtime {

struct LaneGroupOptions {
  int threads = 1;  // >= 1, the caller included
  // CPU per thread (caller first) to pin to with sched_setaffinity; empty:
  // not pinned. The caller's thread is pinned by the constructor.
  std::vector<int> cpus = {};
  // How long idle workers spin before sleeping.
  int64_t spin_ns = 50'000;
  // How long a thread in a task may be off its CPU (its CPU clock standing
  // still) while another waits for it before the waiting one moves it onto
  // its own core; 0: never. Shorter than the intruders' slices (~1 ms),
  // longer than an interrupt or a kernel thread's turn (~10-50 us).
  int64_t stall_ns = 100'000;
};

// What the caller's side of a group saw: enough to tell a slow hand-off (a
// worker that had to be woken, a barrier wait) from slow work. Counted by
// the calling thread; costs one relaxed load per job and two clock reads
// per job that ends in a wait.
struct LaneGroupStats {
  int64_t jobs = 0;         // ParallelFor calls handed to the workers
  int64_t asleep_jobs = 0;  // of which found a worker asleep on the futex
  int64_t waits = 0;        // of which the caller ran out of tasks and waited
  int64_t wait_ns = 0;      // the total of those waits (the end-of-step barrier)
  int64_t prewakes = 0;     // ExpectJob calls that woke a sleeping worker
  // Threads moved onto a waiting thread's core because they were stalled
  // in a task (the caller moving a worker, or a worker the caller).
  int64_t rescues = 0;
};

class LaneGroup final : public ops::ThreadGroup {
 public:
  explicit LaneGroup(LaneGroupOptions options);
  ~LaneGroup() override;
  LaneGroup(const LaneGroup&) = delete;
  LaneGroup& operator=(const LaneGroup&) = delete;

  int size() const override { return size_; }
  // One caller at a time (a group serves one execution step at a time).
  void ParallelFor(int64_t num_tasks, FunctionRef<void(int64_t task, int thread)> fn) override;
  int64_t jobs() const override { return stats_.jobs; }
  // When `in_ns` is within the workers' spin time: restarts their spin and
  // wakes those asleep (a system call, counted in stats().prewakes), so
  // they are spinning when the job comes. Later than that, nothing: woken
  // now they would be asleep again by then. A worker woken for nothing
  // spins spin_ns and sleeps again, so a wrong hint costs at most that.
  // Same thread as ParallelFor.
  void ExpectJob(int64_t in_ns) override;
  // Totals since construction; read on the thread that calls ParallelFor.
  LaneGroupStats stats() const;
  // Workers asleep on the futex right now (a snapshot; for tests).
  int sleeping_workers() const { return sleeping_.load(std::memory_order_relaxed); }

 private:
  void WorkerLoop(int thread);
  // Unpinned groups: before a worker sleeps on the futex, narrows its
  // affinity to the cores other than the caller's last (restored once it
  // wakes), so that the wake-up puts it on another core. Linux otherwise
  // often wakes it on the waker's core, where it cannot run while the
  // caller works, and its balancer leaves it there as cache-hot: the
  // caller then claimed every task itself (a 2-thread mlp at batch 8,
  // fresh processes of 60 runs: 20 of 30 at the one-thread time). True
  // when narrowed; `mask` then holds the affinity to restore.
  bool SleepAwayFromCaller(cpu_set_t* mask) const;
  // Claims and runs tasks of the current job until none is left (or a
  // newer job has replaced it).
  void RunTasks(int thread);
  // Tells the workers to look for a job (or just spin on) and wakes the
  // sleeping ones.
  void Wake();

  // Per thread (0 = the caller), for the stall rescue.
  struct alignas(64) Slot {
    std::atomic<uint32_t> in_task{0};  // 1 while it runs a task
    std::atomic<pid_t> tid{0};
    std::atomic<clockid_t> clock{0};  // its CPU-time clock
    // 0, or kMoving / kMoved while a rescuer narrowed its affinity to one
    // CPU; `saved` holds the mask it restores (written before kMoved).
    std::atomic<int> moved{0};
    cpu_set_t saved{};
  };
  // Watches one thread's CPU clock from another thread: Stalled is true
  // once the target has run less than a quarter of the last stall_ns.
  struct Watch {
    int64_t since_ns = 0;  // start of the window
    int64_t cpu_ns = -1;   // the target's CPU clock then; -1: not read yet
    int64_t next_ns = 0;   // next sample
  };
  static void StartWatch(int64_t now, Watch& w);
  bool Stalled(int target, int64_t now, Watch& w) const;
  // Narrows `target`'s affinity to this thread's CPU; false when not
  // allowed (rescues are then switched off) or already being moved.
  bool MoveHere(int target);
  // Restores this thread's affinity if a rescue narrowed it; true if so.
  bool RestoreIfMoved(int thread);
  // Narrows a moved `target`'s affinity to its saved mask without `cpu`,
  // unless it has restored it already; it restores it when it next runs.
  bool ExcludeFrom(int target, int cpu);
  // Narrows this thread's affinity to its mask without `cpu`, saving the
  // mask in `mask`; false, changing nothing, when `cpu` is not in it, is
  // the only core in it, or a call fails. LeaveCore and
  // SleepAwayFromCaller; they restore `mask` when they are done.
  static bool AvoidCore(int cpu, cpu_set_t* mask);
  // Moves this thread off `cpu` (when its mask allows another core).
  static void LeaveCore(int cpu);
  // The caller's side after moving a stalled worker here: sleeps until
  // every task of the job has finished.
  void SleepUntilDone(int64_t num_tasks);
  // After a task: wakes the caller if it sleeps in SleepUntilDone.
  void FinishTask();
  // Records this thread's id and CPU clock in slot `thread`; false when
  // its CPU clock cannot be read.
  bool RegisterThisThread(int thread);
  void RegisterCaller();

  const int size_;
  const int64_t spin_ns_;
  const bool pinned_;  // options.cpus given
  std::atomic<int> caller_cpu_{-1};  // the caller's core at its last Wake (unpinned)
  uint32_t generation_ = 0;  // the caller's count of jobs
  uint32_t epoch_ = 0;       // the caller's count of Wake calls
  // The job's description (read by every thread), the claim counter and
  // the finish counter (written per task) sit on separate cache lines, so
  // finishing a task does not steal the line the next claim needs.
  // (generation << 32) | next unclaimed task: a claim is a CAS that fails
  // once the job is replaced, so a late worker never runs a stale task.
  alignas(64) std::atomic<uint64_t> claim_{0};
  // The current job; read by a worker only after a successful claim, when
  // the caller cannot replace it (one of its tasks is unfinished).
  alignas(64) std::atomic<const FunctionRef<void(int64_t, int)>*> fn_{nullptr};
  std::atomic<uint64_t> job_{0};  // (generation << 32) | number of tasks
  alignas(64) std::atomic<int64_t> done_{0};  // tasks finished in the current job
  // Bumped (to epoch_) after each job is published and by ExpectJob: a
  // worker that sees it change looks for a job and restarts its spin.
  alignas(64) std::atomic<uint32_t> wake_{0};
  std::atomic<bool> stop_{false};
  std::atomic<int> sleeping_{0};  // workers inside the futex wait
  const int64_t stall_ns_;
  std::atomic<bool> rescue_ok_;  // false after a sched_setaffinity failed
  std::unique_ptr<Slot[]> slots_;
  // The caller sleeping in SleepUntilDone, and the futex word it sleeps on.
  alignas(64) std::atomic<uint32_t> caller_asleep_{0};
  std::atomic<uint32_t> finished_{0};
  std::atomic<int64_t> rescues_{0};  // MoveHere's moves, by the caller or a worker
  std::vector<Watch> watches_;              // the caller's, one per thread
  LaneGroupStats stats_;
  std::vector<std::jthread> workers_;
};

}  // namespace orrery::runtime
