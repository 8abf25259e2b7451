#include "runtime/memory_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace orrery::runtime {
namespace {

TEST(MemoryPlanTest, ChainReusesTwoBuffers) {
  // a -> b -> c -> d: each value is read by the next step only.
  std::vector<BufferRequest> r = {{1000, 0, 1}, {1000, 1, 2}, {1000, 2, 3}, {1000, 3, 4}};
  MemoryPlan p = PlanMemory(r);
  ASSERT_TRUE(CheckMemoryPlan(r, p).ok()) << CheckMemoryPlan(r, p).ToString();
  EXPECT_EQ(p.naive_bytes, 4 * AlignedBytes(1000));
  EXPECT_EQ(p.peak_bytes, 2 * AlignedBytes(1000));
  EXPECT_EQ(p.offsets[0], p.offsets[2]);
  EXPECT_EQ(p.offsets[1], p.offsets[3]);
}

TEST(MemoryPlanTest, BestFitTakesTheSmallestGap) {
  // Long-lived A, C, F with short-lived B (1024 bytes) and E (256 bytes)
  // placed between them. A later 200-byte buffer, live only while A, C and
  // F are, fits both holes; best fit takes E's.
  std::vector<BufferRequest> r = {
      {2048, 0, 9},  // A -> 0
      {1024, 0, 0},  // B -> 2048
      {1024, 0, 9},  // C -> 3072
      {256, 0, 0},   // E -> 4096
      {256, 0, 9},   // F -> 4352
      {200, 5, 6},   // G
  };
  MemoryPlan p = PlanMemory(r);
  ASSERT_TRUE(CheckMemoryPlan(r, p).ok()) << CheckMemoryPlan(r, p).ToString();
  EXPECT_EQ(p.offsets[1], 2048);
  EXPECT_EQ(p.offsets[3], 4096);
  EXPECT_EQ(p.offsets[5], p.offsets[3]);
  EXPECT_EQ(p.peak_bytes, 4608);
}

TEST(MemoryPlanTest, CheckerCatchesOverlapsAndBounds) {
  std::vector<BufferRequest> r = {{128, 0, 2}, {128, 1, 3}};
  MemoryPlan bad;
  bad.offsets = {0, 64};  // live together at steps 1-2, bytes [64, 128) shared
  bad.peak_bytes = 192;
  Status st = CheckMemoryPlan(r, bad);
  EXPECT_EQ(st.code(), StatusCode::kInternal);
  EXPECT_NE(st.message().find("overlap"), std::string::npos) << st.message();
  bad.offsets = {0, 128};
  bad.peak_bytes = 200;  // second buffer ends at 256
  EXPECT_FALSE(CheckMemoryPlan(r, bad).ok());
  bad.peak_bytes = 256;
  EXPECT_TRUE(CheckMemoryPlan(r, bad).ok());
  bad.offsets = {0, 130};  // misaligned
  bad.peak_bytes = 512;
  EXPECT_FALSE(CheckMemoryPlan(r, bad).ok());
  // Disjoint lifetimes may share bytes.
  std::vector<BufferRequest> seq = {{128, 0, 1}, {128, 2, 3}};
  MemoryPlan shared;
  shared.offsets = {0, 0};
  shared.peak_bytes = 128;
  EXPECT_TRUE(CheckMemoryPlan(seq, shared).ok());
}

// Concat inputs written in place: slices take their parent's bytes, and
// the checker holds them to where they say they are.
TEST(MemoryPlanTest, SlicesLiveInsideTheirParent) {
  std::vector<BufferRequest> r = {
      {256, 0, 5},                                  // 0: the Concat output
      {128, 0, 5, /*parent=*/0, /*parent_offset=*/0},    // 1: first slice
      {128, 2, 5, /*parent=*/0, /*parent_offset=*/128},  // 2: second slice
      {512, 1, 1},                                  // 3: live during the slices' writes
  };
  MemoryPlan p = PlanMemory(r);
  ASSERT_TRUE(CheckMemoryPlan(r, p).ok()) << CheckMemoryPlan(r, p).ToString();
  EXPECT_EQ(p.offsets[1], p.offsets[0]);
  EXPECT_EQ(p.offsets[2], p.offsets[0] + 128);
  EXPECT_EQ(p.naive_bytes, 256 + 512);
  EXPECT_EQ(p.peak_bytes, 256 + 512);

  MemoryPlan bad = p;
  bad.offsets[2] = p.offsets[0] + 64;  // not where parent_offset says
  EXPECT_NE(CheckMemoryPlan(r, bad).message().find("parent's offset"), std::string::npos);
  std::vector<BufferRequest> past = r;
  past[2].parent_offset = 192;  // runs past the parent
  EXPECT_NE(CheckMemoryPlan(past, PlanMemory(past)).message().find("past its parent"),
            std::string::npos);
  std::vector<BufferRequest> outlives = r;
  outlives[2].last = 6;
  EXPECT_NE(CheckMemoryPlan(outlives, PlanMemory(outlives)).message().find("outlives"),
            std::string::npos);
  std::vector<BufferRequest> nested = r;
  nested[2].parent = 1;
  EXPECT_FALSE(CheckMemoryPlan(nested, PlanMemory(nested)).ok());
  std::vector<BufferRequest> siblings = r;
  siblings[2].parent_offset = 64;  // overlaps the first slice
  Status st = CheckMemoryPlan(siblings, PlanMemory(siblings));
  EXPECT_NE(st.message().find("overlap"), std::string::npos) << st.message();
}

TEST(MemoryPlanTest, RandomLifetimesNeverOverlapAndBeatNaive) {
  uint64_t s = 0x243F6A8885A308D3ull;
  auto next = [&s] {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return s;
  };
  for (int round = 0; round < 50; ++round) {
    std::vector<BufferRequest> r;
    const int steps = 40;
    for (int i = 0; i < 60; ++i) {
      const int first = static_cast<int>(next() % steps);
      const int last = std::min(steps - 1, first + static_cast<int>(next() % 8));
      r.push_back({static_cast<int64_t>(next() % 5000), first, last});
    }
    MemoryPlan p = PlanMemory(r);
    ASSERT_TRUE(CheckMemoryPlan(r, p).ok()) << CheckMemoryPlan(r, p).ToString();
    EXPECT_LE(p.peak_bytes, p.naive_bytes);
    // Lower bound: the bytes live at the busiest step.
    int64_t busiest = 0;
    for (int t = 0; t < steps; ++t) {
      int64_t live = 0;
      for (const BufferRequest& b : r) {
        if (b.first <= t && t <= b.last) live += AlignedBytes(b.bytes);
      }
      busiest = std::max(busiest, live);
    }
    EXPECT_GE(p.peak_bytes, busiest);
  }
}

}  // namespace
}  // namespace orrery::runtime
