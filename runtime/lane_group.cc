#include "runtime/lane_group.h"

#include <pthread.h>
#include <sched.h>

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
  wake_.fetch_add(1, std::memory_order_acq_rel);
  wake_.notify_all();
  workers_.clear();  // joins
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
  for (;;) {
    uint64_t s = claim_.load(std::memory_order_acquire);
    if (static_cast<uint32_t>(s >> 32) != generation) return;
    const int64_t task = static_cast<int64_t>(s & 0xffffffffu);
    if (task >= num_tasks) return;
    if (!claim_.compare_exchange_weak(s, s + 1, std::memory_order_acq_rel)) continue;
    (*fn_.load(std::memory_order_acquire))(task, thread);
    done_.fetch_add(1, std::memory_order_release);
  }
}

void LaneGroup::ParallelFor(int64_t num_tasks, FunctionRef<void(int64_t, int)> fn) {
  if (size_ == 1 || num_tasks <= 1 || num_tasks > 0xffffffffLL) {
    for (int64_t t = 0; t < num_tasks; ++t) fn(t, 0);
    return;
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
  if (done_.load(std::memory_order_acquire) == num_tasks) return;
  const Clock* clock = SteadyClock::Get();
  const int64_t wait_start = clock->NowNs();
  while (done_.load(std::memory_order_acquire) != num_tasks) CpuRelax();
  ++stats_.waits;
  stats_.wait_ns += clock->NowNs() - wait_start;
}

void LaneGroup::Wake() {
  wake_.store(++epoch_, std::memory_order_release);
  wake_.notify_all();  // no system call when no worker waits
}

void LaneGroup::ExpectJob(int64_t in_ns) {
  if (size_ == 1 || in_ns > spin_ns_) return;
  if (sleeping_.load(std::memory_order_relaxed) > 0) ++stats_.prewakes;
  Wake();
}

void LaneGroup::WorkerLoop(int thread) {
  uint32_t seen = 0;
  for (;;) {
    uint32_t gen = wake_.load(std::memory_order_acquire);
    if (gen == seen) {
      const Clock* clock = SteadyClock::Get();
      const int64_t deadline = clock->NowNs() + spin_ns_;
      while ((gen = wake_.load(std::memory_order_acquire)) == seen && clock->NowNs() < deadline) {
        CpuRelax();
      }
      sleeping_.fetch_add(1, std::memory_order_relaxed);
      while ((gen = wake_.load(std::memory_order_acquire)) == seen) {
        wake_.wait(seen, std::memory_order_acquire);
      }
      sleeping_.fetch_sub(1, std::memory_order_relaxed);
    }
    seen = gen;
    if (stop_.load(std::memory_order_acquire)) return;
    RunTasks(thread);
  }
}

}  // namespace orrery::runtime
