// A group of threads that run one kernel's tasks together: the concrete
// ops::ThreadGroup that callers (the scheduler's lanes, orrery-run) own and
// lend to executions. Kernels never create threads themselves.
//
// A group of size N owns N - 1 worker threads; the thread calling
// ParallelFor is the N-th. Between calls the workers spin briefly (a
// kernel's next step usually follows within microseconds) and then sleep on
// a futex, so an idle group costs no CPU. ParallelFor allocates nothing.
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

class LaneGroup final : public ops::ThreadGroup {
 public:
  explicit LaneGroup(LaneGroupOptions options);
  ~LaneGroup() override;
  LaneGroup(const LaneGroup&) = delete;
  LaneGroup& operator=(const LaneGroup&) = delete;

  int size() const override { return size_; }
  // One caller at a time (a group serves one execution step at a time).
  void ParallelFor(int64_t num_tasks, FunctionRef<void(int64_t task, int thread)> fn) override;

 private:
  struct Job {
    const FunctionRef<void(int64_t, int)>* fn = nullptr;
    int64_t num_tasks = 0;
  };
  void WorkerLoop(int thread);
  void RunTasks(int thread);

  const int size_;
  const int64_t spin_ns_;
  Job job_;
  std::atomic<int64_t> next_task_{0};
  std::atomic<uint32_t> generation_{0};  // bumped per ParallelFor (and on shutdown)
  std::atomic<int> pending_workers_{0};  // workers still inside the current job
  std::atomic<bool> stop_{false};
  std::vector<std::jthread> workers_;
};

}  // namespace orrery::runtime
