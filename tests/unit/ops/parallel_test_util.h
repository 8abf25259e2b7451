// A ThreadGroup for kernel tests: each ParallelFor starts size() - 1
// threads that pull tasks with the caller (ops tests do not link runtime/).
#pragma once

#include <atomic>
#include <thread>
#include <vector>

#include "ops/parallel.h"

namespace orrery::ops::testing {

class SpawnThreads : public ThreadGroup {
 public:
  explicit SpawnThreads(int n) : n_(n) {}
  int size() const override { return n_; }
  void ParallelFor(int64_t num_tasks, FunctionRef<void(int64_t, int)> fn) override {
    std::atomic<int64_t> next{0};
    auto work = [&](int thread) {
      for (int64_t t = next++; t < num_tasks; t = next++) fn(t, thread);
    };
    std::vector<std::thread> pool;
    for (int i = 1; i < n_; ++i) pool.emplace_back(work, i);
    work(0);
    for (std::thread& t : pool) t.join();
  }

 private:
  int n_;
};

}  // namespace orrery::ops::testing
