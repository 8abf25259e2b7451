#include "scheduler/fifo_scheduler.h"

#include <atomic>
#include <future>

#include <gtest/gtest.h>

#include "tests/unit/common/tiny_models.h"

namespace orrery {
namespace {

ModelCache::ModelPtr ReluModel() {
  Result<std::unique_ptr<CompiledModel>> m = CompiledModel::Compile(testing::ReluModelBytes());
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return ModelCache::ModelPtr(std::move(m).value());
}

InferenceRequest Request(ModelCache::ModelPtr model, float value) {
  Tensor x(DType::kFloat32, {1, 4});
  for (int i = 0; i < 4; ++i) x.data<float>()[i] = value * (i % 2 ? 1 : -1);
  return InferenceRequest{"t_test", std::move(model), {NamedTensor{"x", x}}};
}

TEST(FifoSchedulerTest, RunsRequestsAndReturnsOutputs) {
  FifoScheduler scheduler(2);
  EXPECT_EQ(scheduler.lanes(), 2);
  auto model = ReluModel();
  std::promise<Result<std::vector<NamedTensor>>> p;
  ASSERT_TRUE(scheduler.Submit(Request(model, 3.0f), [&](auto r) { p.set_value(std::move(r)); }).ok());
  Result<std::vector<NamedTensor>> r = p.get_future().get();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 1u);
  const float* y = (*r)[0].tensor.data<float>();
  EXPECT_EQ(y[0], 0.0f);
  EXPECT_EQ(y[1], 3.0f);
}

TEST(FifoSchedulerTest, ErrorsReachTheCallback) {
  FifoScheduler scheduler(1);
  InferenceRequest req = Request(ReluModel(), 1.0f);
  req.inputs[0].name = "wrong";
  std::promise<Status> p;
  ASSERT_TRUE(scheduler.Submit(std::move(req), [&](auto r) { p.set_value(r.status()); }).ok());
  EXPECT_EQ(p.get_future().get().code(), StatusCode::kInvalidArgument);
}

TEST(FifoSchedulerTest, ShutdownDrainsQueuedWorkThenRefuses) {
  auto model = ReluModel();
  std::atomic<int> done{0};
  FifoScheduler scheduler(1);
  for (int i = 0; i < 50; ++i) {
    ASSERT_TRUE(scheduler.Submit(Request(model, 1.0f), [&](auto r) { done += r.ok() ? 1 : 0; }).ok());
  }
  scheduler.Shutdown();
  EXPECT_EQ(done.load(), 50);
  EXPECT_EQ(scheduler.completed(), 50u);
  EXPECT_EQ(scheduler.Submit(Request(model, 1.0f), [](auto) {}).code(), StatusCode::kUnavailable);
}

}  // namespace
}  // namespace orrery
