// Mapping a model's device pages into one range (runtime/cuda/page_mapping.h)
// against a fake PageMapper that records every call: the logic the CUDA
// driver implementation (runtime/cuda/cuda_pages.cc, never run here) sits
// under. Plain C++: runs in every build.
#include "runtime/cuda/page_mapping.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace orrery {
namespace {

using runtime::MappedPages;
using runtime::PageMapper;

constexpr int64_t kPage = 4096;
constexpr int64_t kPages = 8;

// Physical pages 0..kPages-1; address ranges 1 GiB apart. Fails the
// fail_map-th Map (1-based), SetAccess or Reserve on request.
class FakePageMapper final : public PageMapper {
 public:
  int64_t page_bytes() const override { return kPage; }
  int64_t num_pages() const override { return kPages; }

  Result<uint64_t> Reserve(int64_t bytes) override {
    ++reserves;
    if (fail_reserve) return Status::ResourceExhausted("fake: no address space");
    EXPECT_EQ(bytes % kPage, 0);
    const uint64_t address = next_;
    next_ += uint64_t{1} << 30;
    reserved[address] = bytes;
    return address;
  }
  Status Map(uint64_t address, uint32_t page) override {
    ++maps;
    if (maps == fail_map) return Status::Internal("fake: cuMemMap failed");
    EXPECT_TRUE(InReservedRange(address, kPage)) << address;
    EXPECT_EQ(mapped.count(address), 0u) << "mapped twice at " << address;
    EXPECT_LT(page, static_cast<uint32_t>(kPages));
    mapped[address] = page;
    map_log.emplace_back(address, page);
    return Status::Ok();
  }
  Status SetAccess(uint64_t address, int64_t bytes) override {
    if (fail_access) return Status::Internal("fake: cuMemSetAccess failed");
    EXPECT_TRUE(InReservedRange(address, bytes));
    for (uint64_t a = address; a < address + static_cast<uint64_t>(bytes); a += kPage) {
      EXPECT_EQ(mapped.count(a), 1u) << "access set on an unmapped page at " << a;
    }
    access[address] = bytes;
    return Status::Ok();
  }
  Status Unmap(uint64_t address, int64_t bytes) override {
    EXPECT_EQ(bytes, kPage);
    EXPECT_EQ(mapped.erase(address), 1u) << "unmapping what is not mapped at " << address;
    ++unmaps;
    return Status::Ok();
  }
  Status Free(uint64_t address, int64_t bytes) override {
    auto it = reserved.find(address);
    EXPECT_NE(it, reserved.end());
    if (it != reserved.end()) {
      EXPECT_EQ(it->second, bytes);
      reserved.erase(it);
    }
    EXPECT_EQ(mapped.lower_bound(address), mapped.lower_bound(address + static_cast<uint64_t>(bytes)))
        << "freeing a range with pages still mapped";
    access.erase(address);
    return Status::Ok();
  }

  int reserves = 0, maps = 0, unmaps = 0;
  int fail_map = 0;  // 1-based; 0: never
  bool fail_access = false, fail_reserve = false;
  std::map<uint64_t, int64_t> reserved;  // live ranges
  std::map<uint64_t, uint32_t> mapped;   // live page mappings
  std::map<uint64_t, int64_t> access;
  std::vector<std::pair<uint64_t, uint32_t>> map_log;

 private:
  bool InReservedRange(uint64_t address, int64_t bytes) const {
    auto it = reserved.upper_bound(address);
    if (it == reserved.begin()) return false;
    --it;
    return address + static_cast<uint64_t>(bytes) <= it->first + static_cast<uint64_t>(it->second);
  }
  uint64_t next_ = uint64_t{1} << 32;
};

TEST(PageMappingTest, EveryAssignedPageIsMappedOnceAtConsecutiveOffsetsAndAllUnmappedOnRelease) {
  FakePageMapper fake;
  const std::vector<uint32_t> pages{6, 1, 3, 0};  // any numbers, any order
  {
    Result<std::unique_ptr<MappedPages>> m = MappedPages::Map(&fake, pages);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    const uint64_t base = (*m)->address();
    EXPECT_EQ((*m)->bytes(), 4 * kPage);
    EXPECT_EQ((*m)->pages(), pages);
    ASSERT_EQ(fake.map_log.size(), pages.size());
    for (size_t i = 0; i < pages.size(); ++i) {
      EXPECT_EQ(fake.map_log[i].first, base + i * kPage) << i;
      EXPECT_EQ(fake.map_log[i].second, pages[i]) << i;
    }
    EXPECT_EQ(fake.reserved.size(), 1u);
    EXPECT_EQ(fake.reserved.at(base), 4 * kPage);
    EXPECT_EQ(fake.access.at(base), 4 * kPage);  // the whole range, once
  }
  EXPECT_EQ(fake.unmaps, 4);
  EXPECT_TRUE(fake.mapped.empty());
  EXPECT_TRUE(fake.reserved.empty());
}

TEST(PageMappingTest, AFailedMapMidwayUnmapsWhatItMappedAndReturnsTheError) {
  FakePageMapper fake;
  fake.fail_map = 3;
  Result<std::unique_ptr<MappedPages>> m = MappedPages::Map(&fake, std::vector<uint32_t>{2, 5, 7, 4});
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kInternal);
  EXPECT_NE(m.status().message().find("cuMemMap"), std::string::npos) << m.status().message();
  EXPECT_EQ(fake.maps, 3);    // stopped at the failure
  EXPECT_EQ(fake.unmaps, 2);  // the two that were mapped
  EXPECT_TRUE(fake.mapped.empty());
  EXPECT_TRUE(fake.reserved.empty());
}

TEST(PageMappingTest, AFailedSetAccessUnmapsEverything) {
  FakePageMapper fake;
  fake.fail_access = true;
  Result<std::unique_ptr<MappedPages>> m = MappedPages::Map(&fake, std::vector<uint32_t>{1, 0});
  EXPECT_EQ(m.status().code(), StatusCode::kInternal);
  EXPECT_EQ(fake.unmaps, 2);
  EXPECT_TRUE(fake.mapped.empty());
  EXPECT_TRUE(fake.reserved.empty());
}

TEST(PageMappingTest, AFailedReserveMapsNothing) {
  FakePageMapper fake;
  fake.fail_reserve = true;
  EXPECT_EQ(MappedPages::Map(&fake, std::vector<uint32_t>{1}).status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(fake.maps, 0);
}

TEST(PageMappingTest, BadPageListsAreRefusedBeforeReservingAnything) {
  FakePageMapper fake;
  Status none = MappedPages::Map(&fake, {}).status();
  Status out = MappedPages::Map(&fake, std::vector<uint32_t>{1, 8}).status();
  Status twice = MappedPages::Map(&fake, std::vector<uint32_t>{3, 1, 3}).status();
  EXPECT_EQ(none.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(out.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(out.message().find("page 8"), std::string::npos) << out.message();
  EXPECT_EQ(twice.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(twice.message().find("page 3"), std::string::npos) << twice.message();
  EXPECT_EQ(fake.reserves, 0);
  EXPECT_EQ(MappedPages::Map(nullptr, std::vector<uint32_t>{0}).status().code(), StatusCode::kUnavailable);
}

// A model's constants over its pages: every constant inside the range, the
// page count the layout's, else nothing is mapped.
TEST(PageMappingTest, WeightsLandInsideTheMappedRange) {
  FakePageMapper fake;
  // 3 x 4000 bytes + 5000: offsets 0, 4096, 8192, 12288; ends at 17288: 5 pages.
  const std::vector<runtime::WeightSize> sizes{{0, 4000}, {1, 4000}, {2, 4000}, {3, 5000}};
  Result<runtime::WeightLayout> layout = runtime::LayOutWeights(sizes, kPage);
  ASSERT_TRUE(layout.ok());
  ASSERT_EQ(layout->pages, 5);
  const std::vector<uint32_t> pages{4, 0, 7, 2, 5};
  Result<std::unique_ptr<MappedPages>> m = runtime::MapWeightPages(&fake, *layout, pages);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  for (const runtime::WeightPlacement& w : layout->constants) {
    EXPECT_GE(w.offset, 0);
    EXPECT_LE(w.offset + w.bytes, (*m)->bytes()) << "slot " << w.slot << " straddles the range end";
    // Every byte of it is on a mapped page.
    for (int64_t b = w.offset; b < w.offset + w.bytes; b += kPage) {
      EXPECT_EQ(fake.mapped.count((*m)->address() + static_cast<uint64_t>(b / kPage * kPage)), 1u);
    }
  }
  m->reset();
  EXPECT_TRUE(fake.mapped.empty());
  EXPECT_TRUE(fake.reserved.empty());

  // The device cache assigned another count: refused, nothing reserved.
  const int reserves = fake.reserves;
  Status st = runtime::MapWeightPages(&fake, *layout, std::vector<uint32_t>{0, 1, 2, 3}).status();
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(st.message().find("need 5"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("assigned 4"), std::string::npos) << st.message();
  Result<runtime::WeightLayout> other = runtime::LayOutWeights(sizes, 2 * kPage);
  EXPECT_EQ(runtime::MapWeightPages(&fake, *other, std::vector<uint32_t>{0, 1, 2}).status().code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(fake.reserves, reserves);
}

}  // namespace
}  // namespace orrery
