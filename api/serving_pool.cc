#include "api/serving_pool.h"

#include <pthread.h>

#include <algorithm>

#include <spdlog/spdlog.h>

#include "base/cpu_set.h"

namespace orrery {

ServingPool::ServingPool(int max_threads, std::vector<int> cpus)
    : max_threads_(std::max(max_threads, 1)), cpus_(std::move(cpus)) {}

ServingPool::~ServingPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void ServingPool::Post(std::function<void()> task) {
  std::unique_lock<std::mutex> lock(mu_);
  tasks_.push_back(std::move(task));
  if (idle_ >= static_cast<int>(tasks_.size()) || static_cast<int>(threads_.size()) >= max_threads_) {
    lock.unlock();
    cv_.notify_one();
    return;
  }
  ++idle_;  // the new thread counts as idle until it takes a task
  threads_.emplace_back([this] { Loop(); });
}

void ServingPool::Loop() {
  (void)pthread_setname_np(pthread_self(), "orrery-serving");
  if (!cpus_.empty()) {
    if (Status s = PinThisThread(cpus_); !s.ok()) spdlog::warn("serving thread: {}", s.message());
  }
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stopping_ || !tasks_.empty(); });
    if (tasks_.empty()) return;  // stopping, drained
    std::function<void()> task = std::move(tasks_.front());
    tasks_.pop_front();
    --idle_;
    lock.unlock();
    task();
    lock.lock();
    ++idle_;
  }
}

}  // namespace orrery
