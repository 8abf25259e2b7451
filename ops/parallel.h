// Threads a kernel may use, lent by its caller.
//
// Kernels own no threads and start none: the scheduler decides how many
// cores a request gets (a lane or a lane group) and passes that group down
// through KernelContext::threads. A kernel splits its work into tasks and
// calls ParallelFor; with no group (or a group of one) the tasks run inline
// on the calling thread, in order.
#pragma once

#include <cstdint>

#include "base/function_ref.h"

namespace orrery::ops {

class ThreadGroup {
 public:
  virtual ~ThreadGroup() = default;
  // Threads that run tasks, the calling thread included (>= 1).
  virtual int size() const = 0;
  // Runs fn(task, thread) for every task in [0, num_tasks) and returns when
  // all have finished. `thread` in [0, size()) identifies the running thread
  // (for per-thread scratch); each thread runs its tasks one at a time. The
  // caller takes part. Not reentrant: fn must not call ParallelFor.
  virtual void ParallelFor(int64_t num_tasks, FunctionRef<void(int64_t task, int thread)> fn) = 0;
  // ParallelFor calls so far that handed tasks to other threads (not run
  // inline), so that a caller can learn which of its steps use the group.
  // One load; 0 for groups that do not count.
  virtual int64_t jobs() const { return 0; }
  // A hint from the caller: its next ParallelFor comes in about `in_ns`.
  // A group whose idle threads sleep may wake them now when they would
  // still be spinning by then, so that the wake-up overlaps the caller's
  // work instead of delaying the job. Costs a store when they are awake,
  // a wake-up system call when they sleep; the default ignores it.
  virtual void ExpectJob(int64_t in_ns) { (void)in_ns; }
};

inline int NumThreads(const ThreadGroup* group) { return group == nullptr ? 1 : group->size(); }

// ParallelFor on `group`, or inline when it is null, has one thread or
// there is only one task.
inline void ParallelFor(ThreadGroup* group, int64_t num_tasks,
                        FunctionRef<void(int64_t task, int thread)> fn) {
  if (group == nullptr || group->size() <= 1 || num_tasks <= 1) {
    for (int64_t t = 0; t < num_tasks; ++t) fn(t, 0);
    return;
  }
  group->ParallelFor(num_tasks, fn);
}

// Guided chunks of `units` for `threads` threads that claim tasks in order
// (ParallelFor): chunk i takes CeilDiv(remaining, 2 * threads) units (at
// least one), so the first chunks are large and the last ones single
// units. A thread whose core runs slower for a while (another guest's load
// on it: traced at T=2 on a shared VM, the worker 20% slower per chunk over
// a whole GoogLeNet 56x56 layer, so that with 8 equal chunks the caller sat
// idle for most of one) then takes fewer units, and the job ends within
// about one unit of balance. Writes bounds[0..count] (bounds[0] = 0,
// bounds[count] = units) and returns count <= kMaxGuidedChunks; 1 for one
// thread. Costs O(count).
inline constexpr int64_t kMaxGuidedChunks = 64;
inline int64_t GuidedBounds(int64_t units, int64_t threads, int64_t* bounds) {
  bounds[0] = 0;
  if (threads <= 1 || units <= 1) {
    bounds[1] = units;
    return 1;
  }
  int64_t count = 0, b = 0;
  while (b < units) {
    const int64_t left = units - b;
    int64_t size = (left + 2 * threads - 1) / (2 * threads);
    if (size < 1) size = 1;
    if (count == kMaxGuidedChunks - 1) size = left;
    b += size;
    bounds[++count] = b;
  }
  return count;
}

}  // namespace orrery::ops
