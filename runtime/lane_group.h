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
#pragma once

#include <atomic>
#include <cstdint>
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
  const LaneGroupStats& stats() const { return stats_; }
  // Workers asleep on the futex right now (a snapshot; for tests).
  int sleeping_workers() const { return sleeping_.load(std::memory_order_relaxed); }

 private:
  void WorkerLoop(int thread);
  // Claims and runs tasks of the current job until none is left (or a
  // newer job has replaced it).
  void RunTasks(int thread);
  // Tells the workers to look for a job (or just spin on) and wakes the
  // sleeping ones.
  void Wake();

  const int size_;
  const int64_t spin_ns_;
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
  LaneGroupStats stats_;
  std::vector<std::jthread> workers_;
};

}  // namespace orrery::runtime
