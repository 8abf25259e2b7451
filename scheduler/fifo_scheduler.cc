#include "scheduler/fifo_scheduler.h"

#include <algorithm>
#include <utility>

namespace orrery {

FifoScheduler::FifoScheduler(int lanes) {
  lanes = std::max(lanes, 1);
  workers_.reserve(lanes);
  for (int i = 0; i < lanes; ++i) workers_.emplace_back([this] { LaneLoop(); });
}

FifoScheduler::~FifoScheduler() { Shutdown(); }

Status FifoScheduler::Submit(InferenceRequest request, InferenceCallback done) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return Status::Unavailable("server is shutting down");
    queue_.push_back(Job{std::move(request), std::move(done)});
  }
  cv_.notify_one();
  return Status::Ok();
}

void FifoScheduler::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : workers_) {
    if (t.joinable()) t.join();
  }
}

size_t FifoScheduler::queue_depth() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queue_.size();
}

uint64_t FifoScheduler::completed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return completed_;
}

void FifoScheduler::LaneLoop() {
  for (;;) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping and drained
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    Result<std::vector<NamedTensor>> outputs = job.request.model->Run(job.request.inputs);
    job.done(std::move(outputs));
    std::lock_guard<std::mutex> lock(mu_);
    ++completed_;
  }
}

}  // namespace orrery
