// The device weight layout (runtime/cuda/weight_layout.h): where each
// constant sits in a model's range, how many pages that takes, and that the
// device cache reserves exactly that many pages for a model registered with
// WeightLayoutBytes. Plain C++: runs in every build.
#include "runtime/cuda/weight_layout.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "cache/device.h"
#include "cache/device_cache.h"
#include "ops/registry.h"
#include "runtime/graph.h"
#include "runtime/plan.h"
#include "tests/unit/runtime/model_builder.h"

namespace orrery {
namespace {

using runtime::kWeightAlignment;
using runtime::LayOutWeights;
using runtime::WeightLayout;
using runtime::WeightSize;
using testing::kFloat;
using testing::ModelBuilder;

TEST(WeightLayoutTest, ConstantsFollowEachOtherAtAlignedOffsetsInOrder) {
  const std::vector<WeightSize> sizes{{4, 100}, {1, 256}, {9, 0}, {2, 1}, {7, 1000}};
  Result<WeightLayout> l = LayOutWeights(sizes, 1024);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  ASSERT_EQ(l->constants.size(), sizes.size());
  const int64_t want_offsets[] = {0, 256, 512, 512, 768};
  for (size_t i = 0; i < sizes.size(); ++i) {
    EXPECT_EQ(l->constants[i].slot, sizes[i].slot) << i;
    EXPECT_EQ(l->constants[i].bytes, sizes[i].bytes) << i;
    EXPECT_EQ(l->constants[i].offset, want_offsets[i]) << i;
    EXPECT_EQ(l->constants[i].offset % kWeightAlignment, 0) << i;
  }
  EXPECT_EQ(l->used_bytes, 768 + 1024);
  EXPECT_EQ(l->pages, 2);  // 1792 bytes in pages of 1024
  EXPECT_EQ(l->range_bytes(), 2048);
  for (const runtime::WeightPlacement& w : l->constants) EXPECT_LE(w.offset + w.bytes, l->range_bytes());
}

TEST(WeightLayoutTest, PageCountIsTheUsedBytesInWholePagesAndAtLeastOne) {
  EXPECT_EQ(LayOutWeights({}, 4096)->pages, 1);
  EXPECT_EQ(LayOutWeights(std::vector<WeightSize>{{0, 0}}, 4096)->pages, 1);
  EXPECT_EQ(LayOutWeights(std::vector<WeightSize>{{0, 4096}}, 4096)->pages, 1);
  EXPECT_EQ(LayOutWeights(std::vector<WeightSize>{{0, 4097}}, 4096)->pages, 2);
  // Two constants of 4000 bytes: the second starts at 4096, ends at 8096.
  Result<WeightLayout> two = LayOutWeights(std::vector<WeightSize>{{0, 4000}, {1, 4000}}, 4096);
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(two->constants[1].offset, 4096);
  EXPECT_EQ(two->pages, 2);
}

TEST(WeightLayoutTest, RefusesABadPageSizeOrANegativeSize) {
  EXPECT_EQ(LayOutWeights({}, 0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(LayOutWeights({}, 1000).status().code(), StatusCode::kInvalidArgument);  // not a multiple of 256
  Status st = LayOutWeights(std::vector<WeightSize>{{3, -1}}, 4096).status();
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("slot 3"), std::string::npos) << st.message();
}

// A plan with constants of uneven sizes (100 floats, 3, 70,000, 1).
Result<runtime::Plan> UnevenPlan() {
  ModelBuilder b(13);
  b.Input("X", kFloat, {1, 100});
  b.FloatInit("A", {1, 100}, std::vector<float>(100, 1.0f));
  b.FloatInit("W", {100, 700}, std::vector<float>(70000, 0.5f));
  b.FloatInit("c", {1}, {2.0f});
  b.Node("Add", {"X", "A"}, {"s"}, "add");
  b.Node("MatMul", {"s", "W"}, {"m"}, "matmul");
  b.Node("Mul", {"m", "c"}, {"Y"}, "mul");
  b.Output("Y", kFloat, {1, 700});
  ORRERY_ASSIGN_OR_RETURN(runtime::Graph g, runtime::ImportModel(b.model(), ops::OpRegistry::Global()));
  return runtime::CompilePlan(g, ops::OpRegistry::Global(), ops::Backend::kCpu, {.fuse = false});
}

TEST(WeightLayoutTest, PlanSizesAreItsConstantsInPlanOrder) {
  Result<runtime::Plan> plan = UnevenPlan();
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  const std::vector<WeightSize> sizes = runtime::PlanWeightSizes(*plan);
  ASSERT_EQ(sizes.size(), plan->constants.size());
  int64_t total = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    EXPECT_EQ(sizes[i].slot, plan->constants[i].first);
    EXPECT_EQ(sizes[i].bytes, static_cast<int64_t>(plan->constants[i].second.byte_size()));
    total += sizes[i].bytes;
  }
  EXPECT_EQ(total, (100 + 70000 + 1) * 4);
  EXPECT_EQ(runtime::WeightLayoutBytes(*plan), LayOutWeights(sizes, kWeightAlignment)->used_bytes);
}

// The device cache charges a model registered with WeightLayoutBytes exactly
// the layout's page count, for any page size.
TEST(WeightLayoutTest, DeviceCacheReservesExactlyTheLayoutsPages) {
  Result<runtime::Plan> plan = UnevenPlan();
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  const int64_t bytes = runtime::WeightLayoutBytes(*plan);
  for (int64_t page : {int64_t{256}, int64_t{4096}, int64_t{65536}, int64_t{1} << 20}) {
    Result<WeightLayout> layout = LayOutWeights(runtime::PlanWeightSizes(*plan), page);
    ASSERT_TRUE(layout.ok());
    std::unique_ptr<SimulatedDevice> device =
        std::move(SimulatedDevice::Create("memory=" + std::to_string(page * 2000) +
                                          ",link-gbps=8,latency-us=1,page=" + std::to_string(page)))
            .value();
    DeviceCacheOptions options;
    options.keepalive = false;
    std::unique_ptr<DeviceCache> cache = std::move(DeviceCache::Create(device.get(), options, SteadyClock::Get())).value();
    const ModelKey key{"t", "m", 1};
    ASSERT_TRUE(cache->Register(key, bytes).ok());
    Result<std::optional<TierAction>> move = cache->Prewarm(key);
    ASSERT_TRUE(move.ok()) << move.status().ToString();
    EXPECT_EQ(static_cast<int64_t>(cache->Pages(key).size()), layout->pages) << "page " << page;
  }
  // A layout needing more pages than the device has is refused at Register.
  std::unique_ptr<SimulatedDevice> small =
      std::move(SimulatedDevice::Create("memory=4096,link-gbps=8,latency-us=1,page=4096")).value();
  std::unique_ptr<DeviceCache> cache = std::move(DeviceCache::Create(small.get(), {}, SteadyClock::Get())).value();
  EXPECT_EQ(cache->Register({"t", "m", 1}, bytes).code(), StatusCode::kResourceExhausted);
}

}  // namespace
}  // namespace orrery
