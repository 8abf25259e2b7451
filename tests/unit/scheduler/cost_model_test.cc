#include "scheduler/cost_model.h"

#include <cmath>

#include <gtest/gtest.h>

namespace orrery {
namespace {

TEST(CostModelTest, UnknownModelIsUnknown) {
  CostModel m;
  CostPrediction p = m.Predict("m", 1);
  EXPECT_FALSE(p.known);
  EXPECT_EQ(p.ns, 0);
}

TEST(CostModelTest, CalibrationThenEwmaOfMeasurements) {
  CostModel m(CostModelOptions{.ewma_alpha = 0.5});
  m.Calibrate("m", 1, 1000);
  EXPECT_EQ(m.Predict("m", 1).ns, 1000);
  EXPECT_TRUE(m.Predict("m", 1).measured);
  m.Record("m", 1, 1000, 2000);  // 1000 + 0.5 * (2000 - 1000)
  EXPECT_EQ(m.Predict("m", 1).ns, 1500);
  m.Record("m", 1, 1500, 1500);
  EXPECT_EQ(m.Predict("m", 1).ns, 1500);
}

TEST(CostModelTest, OutliersMoveTheEstimateOnlyUpToTheFactor) {
  CostModel m(CostModelOptions{.ewma_alpha = 0.5, .max_update_factor = 2.0});
  m.Calibrate("m", 1, 1000);
  m.Record("m", 1, 1000, 100'000);  // a 100x spike counts as 2000
  EXPECT_EQ(m.Predict("m", 1).ns, 1500);
  EXPECT_NEAR(m.Stats()[0].error_max, 0.99, 1e-9);  // the error is kept as measured
  for (int i = 0; i < 20; ++i) m.Record("m", 1, 0, 8000);  // a real change converges
  EXPECT_EQ(m.Predict("m", 1).ns, 8000);
}

// The first 1 / alpha samples (the calibration counts) are averaged; the
// EWMA takes over after them.
TEST(CostModelTest, RunningMeanUntilTheEwmaWeightIsReached) {
  CostModel m(CostModelOptions{.ewma_alpha = 0.25});
  m.Calibrate("m", 1, 1000);
  m.Record("m", 1, 0, 2000);  // weight 1/2
  EXPECT_EQ(m.Predict("m", 1).ns, 1500);
  m.Record("m", 1, 0, 2000);  // 1/3
  m.Record("m", 1, 0, 2000);  // 1/4: the mean of 1000 and three 2000s
  EXPECT_EQ(m.Predict("m", 1).ns, 1750);
  m.Record("m", 1, 0, 2000);  // 0.25 from now on (a mean would give 1800)
  EXPECT_EQ(m.Predict("m", 1).ns, 1813);
  // A new calibration starts the mean again.
  m.Calibrate("m", 1, 1000);
  m.Record("m", 1, 0, 2000);
  EXPECT_EQ(m.Predict("m", 1).ns, 1500);
}

// With the default (slow) weight, a calibration that ran at twice the real
// time is half gone after one run and within 10% after ten: a plain EWMA
// at 0.05 would still predict ~1600 then.
TEST(CostModelTest, ASlowCalibrationIsAveragedAwayQuickly) {
  CostModel m;
  m.Calibrate("m", 1, 2000);
  m.Record("m", 1, 2000, 1000, CacheState::kWarm);
  EXPECT_EQ(m.Predict("m", 1, CacheState::kWarm).ns, 1500);
  for (int i = 0; i < 9; ++i) m.Record("m", 1, m.Predict("m", 1, CacheState::kWarm).ns, 1000, CacheState::kWarm);
  EXPECT_NEAR(static_cast<double>(m.Predict("m", 1, CacheState::kWarm).ns), 1000, 100);
  // The warm factor did not take part of the correction while the mean ran.
  EXPECT_EQ(m.Predict("m", 1, CacheState::kWarm).ns, m.Predict("m", 1, CacheState::kCold).ns);
}

// A probe (a run admitted only to correct an over-estimate) moves a settled
// estimate with correction_alpha, not the slow ewma_alpha.
TEST(CostModelTest, ACorrectingRunMovesTheEstimateWithTheCorrectionWeight) {
  CostModel m(CostModelOptions{.ewma_alpha = 0.05, .correction_alpha = 0.2});
  m.Calibrate("m", 1, 1000);
  for (int i = 0; i < 40; ++i) m.Record("m", 1, 0, 1000);  // past the running mean
  m.Record("m", 1, 0, 600);
  EXPECT_EQ(m.Predict("m", 1).ns, 980);  // 1000 + 0.05 x (600 - 1000)
  m.Record("m", 1, 0, 580, CacheState::kUnknown, 0, /*correcting=*/true);
  EXPECT_EQ(m.Predict("m", 1).ns, 900);  // 980 + 0.2 x (580 - 980)
}

TEST(CostModelTest, FirstMeasurementSetsTheEstimate) {
  CostModel m(CostModelOptions{.ewma_alpha = 0.1});
  m.Record("m", 2, 0, 5000);
  EXPECT_EQ(m.Predict("m", 2).ns, 5000);
}

TEST(CostModelTest, OtherBatchSizesInterpolateBetweenMeasuredOnes) {
  CostModel m;
  m.Calibrate("m", 1, 1000);
  m.Calibrate("m", 8, 4500);
  EXPECT_EQ(m.Predict("m", 2).ns, 1500);   // on the line through 1 and 8
  EXPECT_FALSE(m.Predict("m", 2).measured);
  EXPECT_EQ(m.Predict("m", 6).ns, 3500);
  EXPECT_EQ(m.Predict("m", 16).ns, 9000);  // above all: 8 scaled by 16 / 8
  CostModel high;
  high.Calibrate("m", 4, 4000);
  EXPECT_EQ(high.Predict("m", 2).ns, 2000);  // below all: 4 scaled by 2 / 4
}

TEST(CostModelTest, SlowdownBoundIsAHighQuantileOfMeasuredOverPredicted) {
  CostModel m(CostModelOptions{.ewma_alpha = 0.0, .slowdown_quantile = 0.9, .slowdown_window = 100,
                               .slowdown_min_samples = 20, .slowdown_max = 3.0});
  m.Calibrate("m", 1, 1000);
  EXPECT_EQ(m.SlowdownBound("m"), 1.0);  // nothing seen yet
  EXPECT_EQ(m.SlowdownBound("other"), 1.0);
  // 100 runs: 80 on time, 20 at 1.5x the prediction.
  for (int i = 0; i < 100; ++i) m.Record("m", 1, 1000, i % 5 == 0 ? 1500 : 1000);
  EXPECT_DOUBLE_EQ(m.SlowdownBound("m"), 1.5);
  // Faster than predicted never lowers it below 1; a wild run is capped.
  CostModel fast(CostModelOptions{.slowdown_min_samples = 20});
  for (int i = 0; i < 64; ++i) fast.Record("f", 1, 1000, 500);
  EXPECT_EQ(fast.SlowdownBound("f"), 1.0);
  for (int i = 0; i < 512; ++i) fast.Record("f", 1, 1000, 100'000);
  EXPECT_EQ(fast.SlowdownBound("f"), 3.0);
}

// The bound is the nearest-rank quantile of the window, whatever order the
// runs came in (it is selected, not sorted, on the lane).
TEST(CostModelTest, SlowdownBoundIsTheNearestRankQuantileOfDistinctRatios) {
  CostModel m(CostModelOptions{.ewma_alpha = 0.0, .slowdown_quantile = 0.9, .slowdown_window = 100,
                               .slowdown_min_samples = 20, .slowdown_max = 3.0});
  m.Calibrate("m", 1, 1000);
  // Ratios 1.00, 1.01, ..., 1.99 in a scrambled order (37 is coprime to 100);
  // 112 runs, so the last bound update (every 16th run) sees the last 100.
  for (int i = 0; i < 112; ++i) m.Record("m", 1, 1000, 1000 + 10 * ((i * 37) % 100));
  // The window holds runs 12..111: ratios 1 + ((i * 37) % 100) / 100, every
  // value once; the 90th of 100 ranks is 1.89.
  EXPECT_DOUBLE_EQ(m.SlowdownBound("m"), 1.89);
}

// A lane's prediction (the estimate x the lane's speed) can be right while
// the estimate alone was off: errors compare the prediction, the slowdown
// bound the estimate, since admission plans the estimate x that bound.
TEST(CostModelTest, SlowdownBoundComparesTheEstimateAndErrorsThePrediction) {
  CostModel m;
  for (int i = 0; i < 32; ++i) {
    m.Record("a", 1, /*predicted_ns=*/2000, /*measured_ns=*/2000, CacheState::kUnknown, /*estimate_ns=*/1000);
  }
  EXPECT_DOUBLE_EQ(m.SlowdownBound("a"), 2.0);
  EXPECT_DOUBLE_EQ(m.Stats()[0].error_p99, 0.0);
  EXPECT_EQ(m.Stats()[0].mean_predicted_ns, 2000);
}

TEST(CostModelTest, WarmAndColdRunsHaveTheirOwnFactors) {
  CostModel m(CostModelOptions{.ewma_alpha = 0.5, .state_alpha = 0.5});
  m.Calibrate("m", 1, 1000);
  EXPECT_EQ(m.Predict("m", 1, CacheState::kWarm).ns, 1000);  // factors start at 1
  EXPECT_EQ(m.Predict("m", 1, CacheState::kCold).ns, 1000);
  m.Record("m", 1, 1000, 1800, CacheState::kCold);  // cold factor 1 + 0.5 x 0.8; overall 1400
  EXPECT_EQ(m.Predict("m", 1, CacheState::kCold).ns, 1960);
  EXPECT_EQ(m.Predict("m", 1, CacheState::kWarm).ns, 1400);
  EXPECT_EQ(m.Predict("m", 1).ns, 1960);  // unknown: the slower of overall and cold
  m.Record("m", 1, 1400, 700, CacheState::kWarm);  // warm factor 0.75; overall 1050
  EXPECT_EQ(m.Predict("m", 1, CacheState::kWarm).ns, 788);
  EXPECT_EQ(m.Predict("m", 1, CacheState::kCold).ns, 1470);
  // A cold run on a lane running at 2x (predicted 2 x 1470): the slowness
  // was the lane's, so the cold factor stays 1.4; the overall estimate
  // moves (1050 + 0.5 x (2100, the clamped sample, - 1050)).
  m.Record("m", 1, 2940, 2940, CacheState::kCold, 1470);
  EXPECT_EQ(m.Predict("m", 1, CacheState::kCold).ns, 2205);
  // Another batch size: the overall estimate, interpolated, x the factor.
  m.Calibrate("m", 4, 2000);
  EXPECT_EQ(m.Predict("m", 2, CacheState::kCold).ns, m.Predict("m", 2).ns);
  EXPECT_EQ(m.Predict("m", 2, CacheState::kCold).ns, std::llround((1575.0 + 425.0 / 3) * 1.4));
}

// A calibration that ran slow is corrected by runs in any cache state: the
// warm prediction follows the cold runs' estimate. (With an estimate per
// state, scenario 5's `mlp_long` kept a 19.2 ms warm estimate for its ~10 ms
// runs until warm runs came, half a second into the measured window.)
TEST(CostModelTest, ASlowCalibrationDoesNotStayInTheWarmPrediction) {
  CostModel m;
  m.Calibrate("m", 1, 2000);
  for (int i = 0; i < 40; ++i) m.Record("m", 1, m.Predict("m", 1, CacheState::kCold).ns, 1000, CacheState::kCold);
  // Within 3%: while the overall estimate came down, the cold factor took
  // part of the difference and gives it back at its slower weight.
  EXPECT_NEAR(static_cast<double>(m.Predict("m", 1, CacheState::kWarm).ns), 1000, 30);
  EXPECT_NEAR(static_cast<double>(m.Predict("m", 1, CacheState::kCold).ns), 1000, 30);
}

TEST(CostModelTest, WorkPriorUntilMeasured) {
  CostModel m(CostModelOptions{.flops_per_ns = 2.0, .bytes_per_ns = 10.0});
  m.SetWorkPrior("m", 1, /*flops=*/20'000, /*bytes=*/1'000);  // compute-bound: 10000 ns
  CostPrediction p = m.Predict("m", 1);
  EXPECT_TRUE(p.known);
  EXPECT_FALSE(p.measured);
  EXPECT_EQ(p.ns, 10'000);
  m.Record("m", 1, p.ns, 12'000);
  EXPECT_EQ(m.Predict("m", 1).ns, 12'000);
  EXPECT_TRUE(m.Predict("m", 1).measured);
}

TEST(CostModelTest, ErrorPercentiles) {
  CostModel m;
  // Errors 0.00, 0.01, ..., 0.99 (|predicted - measured| / measured).
  for (int i = 0; i < 100; ++i) m.Record("m", 1, 10'000 + 100 * i, 10'000);
  m.Record("other", 1, 0, 10);  // nothing predicted: no error sample
  std::vector<ModelCostStats> stats = m.Stats();
  ASSERT_EQ(stats.size(), 2u);
  EXPECT_EQ(stats[0].model_id, "m");
  EXPECT_EQ(stats[0].samples, 100u);
  EXPECT_EQ(stats[0].window, 100u);
  EXPECT_NEAR(stats[0].error_p50, 0.49, 1e-9);
  EXPECT_NEAR(stats[0].error_p90, 0.89, 1e-9);
  EXPECT_NEAR(stats[0].error_p99, 0.98, 1e-9);
  EXPECT_NEAR(stats[0].error_max, 0.99, 1e-9);
  EXPECT_EQ(stats[1].samples, 1u);
  EXPECT_EQ(stats[1].window, 0u);
}

TEST(CostModelTest, ErrorWindowIsBounded) {
  CostModel m(CostModelOptions{.error_window = 10});
  for (int i = 0; i < 50; ++i) m.Record("m", 1, 2000, 1000);  // error 1.0
  for (int i = 0; i < 10; ++i) m.Record("m", 1, 1000, 1000);  // error 0
  EXPECT_EQ(m.Stats()[0].window, 10u);
  EXPECT_EQ(m.Stats()[0].error_max, 0.0);
}

TEST(CostModelTest, NonPositiveMeasurementsAreIgnoredAndEraseForgets) {
  CostModel m;
  m.Record("m", 1, 100, 0);
  EXPECT_FALSE(m.Predict("m", 1).known);
  m.Calibrate("m", 1, 100);
  m.Erase("m");
  EXPECT_FALSE(m.Predict("m", 1).known);
}

}  // namespace
}  // namespace orrery

namespace orrery {
namespace {

TEST(CostModelTest, StepsAreReportedWithPredictions) {
  CostModel m;
  EXPECT_EQ(m.Predict("m", 1).steps, 0u);
  m.SetSteps("m", 12);
  EXPECT_EQ(m.Predict("m", 1).steps, 12u);
  EXPECT_FALSE(m.Predict("m", 1).known);
  m.Calibrate("m", 1, 1200);
  EXPECT_EQ(m.Predict("m", 4).steps, 12u);
}

}  // namespace
}  // namespace orrery
