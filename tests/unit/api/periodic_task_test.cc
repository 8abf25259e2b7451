#include "api/periodic_task.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace orrery {
namespace {

TEST(PeriodicTaskTest, RunsRepeatedlyAndStopsPromptly) {
  std::atomic<int> calls{0};
  {
    PeriodicTask task(std::chrono::milliseconds(5), [&calls] { ++calls; });
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (calls.load() < 3 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  const int at_stop = calls.load();
  EXPECT_GE(at_stop, 3);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(calls.load(), at_stop);  // never called after destruction
}

TEST(PeriodicTaskTest, DestructorDoesNotWaitOutALongInterval) {
  const auto start = std::chrono::steady_clock::now();
  { PeriodicTask task(std::chrono::hours(1), [] {}); }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
}

}  // namespace
}  // namespace orrery
