// v0 scheduler: one FIFO queue served by a fixed set of lanes (worker
// threads). Each request runs to completion on one lane.
//
// The fair, cost-aware scheduler replaces this behind the same Submit()
// shape: the API layer hands over a request and a completion callback.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/status.h"
#include "scheduler/request.h"

namespace orrery {

class FifoScheduler {
 public:
  // `lanes` worker threads (at least 1).
  explicit FifoScheduler(int lanes);
  // Finishes queued work, then joins the lanes.
  ~FifoScheduler();

  // Queues the request; `done` runs on a lane with the outputs or the error.
  // UNAVAILABLE once Shutdown() has begun (and `done` is not called).
  Status Submit(InferenceRequest request, InferenceCallback done);

  // Stops admitting, runs everything already queued, joins the lanes.
  // Idempotent.
  void Shutdown();

  int lanes() const { return static_cast<int>(workers_.size()); }
  size_t queue_depth() const;
  uint64_t completed() const;

  FifoScheduler(const FifoScheduler&) = delete;
  FifoScheduler& operator=(const FifoScheduler&) = delete;

 private:
  struct Job {
    InferenceRequest request;
    InferenceCallback done;
  };
  void LaneLoop();

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> queue_;
  bool stopping_ = false;
  uint64_t completed_ = 0;
  std::vector<std::thread> workers_;
};

}  // namespace orrery
