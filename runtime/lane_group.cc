#include "runtime/lane_group.h"

#include <pthread.h>
#include <sched.h>

#include <chrono>

namespace orrery::runtime {
namespace {

void PinTo(pthread_t thread, int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  // Best effort: a container may forbid it; the group still works unpinned.
  (void)pthread_setaffinity_np(thread, sizeof(set), &set);
}

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

LaneGroup::LaneGroup(LaneGroupOptions options)
    : size_(options.threads < 1 ? 1 : options.threads), spin_ns_(options.spin_ns) {
  if (!options.cpus.empty()) PinTo(pthread_self(), options.cpus[0]);
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
  generation_.fetch_add(1, std::memory_order_acq_rel);
  generation_.notify_all();
  workers_.clear();  // joins
}

void LaneGroup::RunTasks(int thread) {
  for (;;) {
    const int64_t task = next_task_.fetch_add(1, std::memory_order_relaxed);
    if (task >= job_.num_tasks) return;
    (*job_.fn)(task, thread);
  }
}

void LaneGroup::ParallelFor(int64_t num_tasks, FunctionRef<void(int64_t, int)> fn) {
  if (size_ == 1 || num_tasks <= 1) {
    for (int64_t t = 0; t < num_tasks; ++t) fn(t, 0);
    return;
  }
  job_ = Job{&fn, num_tasks};
  next_task_.store(0, std::memory_order_relaxed);
  pending_workers_.store(size_ - 1, std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_release);  // publishes job_
  generation_.notify_all();
  RunTasks(0);
  // Workers that have not woken yet still take part: wait for every one,
  // so no worker reads job_ after this call returns.
  while (pending_workers_.load(std::memory_order_acquire) != 0) CpuRelax();
}

void LaneGroup::WorkerLoop(int thread) {
  uint32_t seen = 0;
  for (;;) {
    uint32_t gen = generation_.load(std::memory_order_acquire);
    if (gen == seen) {
      const int64_t deadline = NowNs() + spin_ns_;
      while ((gen = generation_.load(std::memory_order_acquire)) == seen && NowNs() < deadline) {
        CpuRelax();
      }
      while ((gen = generation_.load(std::memory_order_acquire)) == seen) {
        generation_.wait(seen, std::memory_order_acquire);
      }
    }
    seen = gen;
    if (stop_.load(std::memory_order_acquire)) return;
    RunTasks(thread);
    pending_workers_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

}  // namespace orrery::runtime
