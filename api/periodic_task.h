// Runs a function every `every` on its own thread until destroyed: the
// server's storage metering and its once-a-minute summary log line. The
// destructor wakes the thread at once (no waiting out the interval) and
// joins it; `fn` is never called after the destructor returns.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace orrery {

class PeriodicTask {
 public:
  PeriodicTask(std::chrono::milliseconds every, std::function<void()> fn)
      : every_(every), fn_(std::move(fn)), thread_([this] { Loop(); }) {}
  ~PeriodicTask() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  PeriodicTask(const PeriodicTask&) = delete;
  PeriodicTask& operator=(const PeriodicTask&) = delete;

 private:
  void Loop() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!cv_.wait_for(lock, every_, [this] { return stop_; })) {
      lock.unlock();
      fn_();
      lock.lock();
    }
  }

  const std::chrono::milliseconds every_;
  const std::function<void()> fn_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;  // last: starts once the members above exist
};

}  // namespace orrery
