#include "scheduler/calibration.h"

#include <future>

#include <gtest/gtest.h>

#include "runtime/execution.h"
#include "scheduler/scheduler.h"
#include "tests/unit/common/tiny_models.h"

namespace orrery {
namespace {

ModelCache::ModelPtr ReluModel() {  // x: float32 [N, 4], one step
  Result<std::unique_ptr<CompiledModel>> m = CompiledModel::Compile(testing::ReluModelBytes());
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return ModelCache::ModelPtr(std::move(m).value());
}

ModelSignature Signature(std::vector<Shape> shapes) {
  ModelSignature sig;
  for (size_t i = 0; i < shapes.size(); ++i) {
    sig.inputs.push_back(TensorSpec{"in" + std::to_string(i), DType::kFloat32, shapes[i]});
  }
  return sig;
}

TEST(CalibrationTest, BatchSizesFollowTheBatchDim) {
  EXPECT_EQ(CalibrationBatchSizes(Signature({{-1, 4}, {-1}}), 8), (std::vector<int>{1, 2, 4, 8}));
  EXPECT_EQ(CalibrationBatchSizes(Signature({{-1, 4}}), 16), (std::vector<int>{1, 2, 4, 8}));  // up to 8
  EXPECT_EQ(CalibrationBatchSizes(Signature({{-1, 4}}), 5), (std::vector<int>{1, 2, 4}));
  EXPECT_EQ(CalibrationBatchSizes(Signature({{-1, 4}}), 1), (std::vector<int>{1}));
  EXPECT_EQ(CalibrationBatchSizes(Signature({{3, 4}, {3}}), 8), (std::vector<int>{3}));  // fixed: only that
  EXPECT_EQ(CalibrationBatchSizes(Signature({{3, 4}, {2}}), 8), (std::vector<int>{1}));  // no common batch
  EXPECT_EQ(CalibrationBatchSizes(Signature({{-1, 4}, {2}}), 8), (std::vector<int>{2}));
  EXPECT_EQ(CalibrationBatchSizes(Signature({{}}), 8), (std::vector<int>{1}));  // scalar
}

TEST(CalibrationTest, InputsAreZerosWithTheBatchInDimZeroAndOtherDynamicDimsOne) {
  Result<std::vector<NamedTensor>> in = CalibrationInputs(Signature({{-1, -1, 3}}), 4);
  ASSERT_TRUE(in.ok()) << in.status().ToString();
  ASSERT_EQ(in->size(), 1u);
  EXPECT_EQ((*in)[0].name, "in0");
  EXPECT_EQ((*in)[0].tensor.shape(), (Shape{4, 1, 3}));
  EXPECT_EQ((*in)[0].tensor.data<float>()[11], 0.0f);
}

TEST(CalibrationTest, RunsEveryBatchSizeOnALaneAndSeedsTheCostModel) {
  FairScheduler scheduler(FairSchedulerOptions{.lanes = 1});
  std::promise<CostProfile> p;
  ASSERT_TRUE(StartCalibration(&scheduler, "t", ReluModel(), "t/relu@1", {1, 2, 4, 8},
                               [&](CostProfile profile) { p.set_value(std::move(profile)); })
                  .ok());
  CostProfile profile = p.get_future().get();
  EXPECT_EQ(profile.model_id, "t/relu@1");
  EXPECT_EQ(profile.runs, 8);  // two per batch size
  ASSERT_EQ(profile.batches.size(), 4u);
  int64_t sum = 0;
  for (size_t i = 0; i < profile.batches.size(); ++i) {
    const BatchProfile& b = profile.batches[i];
    EXPECT_EQ(b.batch, 1 << i);
    EXPECT_GT(b.total_ns, 0);
    ASSERT_EQ(b.step_ns.size(), 1u);  // one Relu step
    EXPECT_LE(b.step_ns[0], b.total_ns);
    sum += b.total_ns;
  }
  EXPECT_GE(profile.lane_ns, sum);  // the kept runs are among all the runs

  // The runs were the tenant's scheduled work; the cost model learns the
  // profile only through LoadProfile.
  SchedulerStats before = scheduler.Stats();
  ASSERT_EQ(before.tenants.size(), 1u);
  EXPECT_EQ(before.tenants[0].calibration_runs, 8u);
  EXPECT_EQ(before.tenants[0].completed, 0u);  // requests only
  EXPECT_EQ(before.tenants[0].admitted, 0u);
  EXPECT_GT(before.tenants[0].service_ns, 0);
  EXPECT_FALSE(scheduler.KnowsModel("t/relu@1"));
  scheduler.LoadProfile(profile);
  EXPECT_TRUE(scheduler.KnowsModel("t/relu@1"));
  SchedulerStats after = scheduler.Stats();
  ASSERT_EQ(after.models.size(), 1u);
  EXPECT_EQ(after.models[0].steps, 1u);
  ASSERT_EQ(after.models[0].calibrated_ns.size(), 4u);
  EXPECT_EQ(after.models[0].calibrated_ns.at(8), profile.batches[3].total_ns);
  EXPECT_EQ(after.models[0].estimate_ns.at(8), profile.batches[3].total_ns);
}

TEST(CalibrationTest, NothingIsSubmittedAfterShutdownOrWithoutBatchSizes) {
  FairScheduler scheduler(FairSchedulerOptions{.lanes = 1});
  std::promise<CostProfile> p;
  ModelCache::ModelPtr model = ReluModel();
  ASSERT_TRUE(StartCalibration(&scheduler, "t", model, "m", {1, 2},
                               [&](CostProfile profile) { p.set_value(std::move(profile)); })
                  .ok());
  EXPECT_EQ(p.get_future().get().batches.size(), 2u);
  scheduler.Shutdown();
  EXPECT_EQ(StartCalibration(&scheduler, "t", model, "m", {1}, [](CostProfile) { FAIL() << "called"; }).code(),
            StatusCode::kUnavailable);
  EXPECT_EQ(StartCalibration(&scheduler, "t", model, "m", {}, [](CostProfile) { FAIL() << "called"; }).code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace orrery
