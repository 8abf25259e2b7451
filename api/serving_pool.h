// Threads for inference work that must not run where it arises: a request
// whose model must load first (it blocks until the weights are resident,
// and the threads that receive requests (InferenceServiceImpl::Serve) must
// never block),
// and the answer a lane hands off when other requests are waiting for it.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace orrery {

class ServingPool {
 public:
  // At most `max_threads` threads (at least 1), each pinned to `cpus` when
  // given (they may be started from a lane thread, pinned elsewhere).
  ServingPool(int max_threads, std::vector<int> cpus);
  // Runs every task already posted, then joins.
  ~ServingPool();

  // Runs `task` on an idle thread, else on a new one (below the cap), else
  // on the next thread to become idle. Threads stay once started. O(1)
  // apart from starting a thread.
  void Post(std::function<void()> task);

  ServingPool(const ServingPool&) = delete;
  ServingPool& operator=(const ServingPool&) = delete;

 private:
  void Loop();

  const int max_threads_;
  const std::vector<int> cpus_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  std::vector<std::thread> threads_;
  int idle_ = 0;
  bool stopping_ = false;
};

}  // namespace orrery
