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

}  // namespace orrery::ops
