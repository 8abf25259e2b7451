// ServingPool: every posted task runs, blocked tasks do not hold up others
// below the thread cap, and destruction runs what is queued.
#include "api/serving_pool.h"

#include <atomic>
#include <chrono>
#include <future>
#include <thread>

#include <gtest/gtest.h>

namespace orrery {
namespace {

TEST(ServingPoolTest, RunsEveryTask) {
  std::atomic<int> ran{0};
  {
    ServingPool pool(4, {});
    for (int i = 0; i < 100; ++i) pool.Post([&ran] { ran.fetch_add(1); });
  }  // the destructor runs what is still queued
  EXPECT_EQ(ran.load(), 100);
}

TEST(ServingPoolTest, ABlockedTaskDoesNotHoldUpTheNextBelowTheCap) {
  ServingPool pool(2, {});
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  pool.Post([released] { released.wait(); });  // like a request waiting for its model's load
  std::promise<void> second;
  std::future<void> second_ran = second.get_future();
  pool.Post([&second] { second.set_value(); });
  EXPECT_EQ(second_ran.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  release.set_value();
}

TEST(ServingPoolTest, AtTheCapTasksWaitForAThread) {
  ServingPool pool(1, {});
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  pool.Post([released] { released.wait(); });
  std::atomic<bool> second{false};
  pool.Post([&second] { second.store(true); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(second.load());  // the only thread is blocked
  release.set_value();
  for (int i = 0; i < 1000 && !second.load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_TRUE(second.load());
}

}  // namespace
}  // namespace orrery
