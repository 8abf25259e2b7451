#include "base/cpu_set.h"

#include <atomic>
#include <thread>

#include <gtest/gtest.h>

namespace orrery {
namespace {

TEST(CpuSetTest, ParsesSinglesRangesAndMixes) {
  EXPECT_EQ(ParseCpuList("0").value(), (std::vector<int>{0}));
  EXPECT_EQ(ParseCpuList("1-3").value(), (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(ParseCpuList("5,0-1,3").value(), (std::vector<int>{0, 1, 3, 5}));
  EXPECT_EQ(ParseCpuList("2,2,1-2").value(), (std::vector<int>{1, 2}));
}

TEST(CpuSetTest, RejectsMalformedListsNamingThePart) {
  for (const char* bad : {"", ",", "0,", "a", "1-", "-1", "3-1", "4096", "0x1", " 1"}) {
    Result<std::vector<int>> parsed = ParseCpuList(bad);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_NE(ParseCpuList("3-1").status().message().find("'3-1' ends before it starts"), std::string::npos);
  EXPECT_NE(ParseCpuList("0,x").status().message().find("'x' is not a CPU number"), std::string::npos);
}

TEST(CpuSetTest, FormatIsTheInverseOfParse) {
  EXPECT_EQ(FormatCpuList({0, 1, 2, 5, 7, 8}), "0-2,5,7-8");
  EXPECT_EQ(FormatCpuList({}), "");
  EXPECT_EQ(ParseCpuList(FormatCpuList({0, 2, 3, 4})).value(), (std::vector<int>{0, 2, 3, 4}));
}

TEST(CpuSetTest, ChecksAgainstTheAllowedCpus) {
  const std::vector<int> allowed = AllowedCpus();
  ASSERT_FALSE(allowed.empty());
  EXPECT_TRUE(CheckCpusAllowed(allowed, "--lane-cpus").ok());
  Status missing = CheckCpusAllowed({4095}, "--lane-cpus");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.message().find("--lane-cpus: CPU 4095 is not available"), std::string::npos);
}

TEST(CpuSetTest, PinsTheCallingThread) {
  const std::vector<int> before = AllowedCpus();
  ASSERT_TRUE(PinThisThread({before.front()}).ok());
  EXPECT_EQ(AllowedCpus(), (std::vector<int>{before.front()}));
  ASSERT_TRUE(PinThisThread(before).ok());
  EXPECT_EQ(AllowedCpus(), before);
}

TEST(CpuSetTest, PinsEveryThreadOfTheProcessIncludingOlderOnes) {
  const std::vector<int> before = AllowedCpus();
  std::atomic<bool> pinned{false};
  std::atomic<bool> checked{false};
  std::vector<int> seen;
  std::thread older([&] {
    while (!pinned.load()) std::this_thread::yield();
    seen = AllowedCpus();
    checked = true;
  });
  ASSERT_TRUE(PinThisProcess({before.back()}).ok());
  pinned = true;
  older.join();
  ASSERT_TRUE(checked.load());
  EXPECT_EQ(seen, (std::vector<int>{before.back()}));
  ASSERT_TRUE(PinThisProcess(before).ok());
  EXPECT_EQ(AllowedCpus(), before);
}

TEST(CpuSetTest, DisjointOnlyWhenBothListsAreGivenAndShareNoCpu) {
  EXPECT_TRUE(CpuListsDisjoint({1}, {0}));
  EXPECT_TRUE(CpuListsDisjoint({2, 3}, {0, 1}));
  EXPECT_FALSE(CpuListsDisjoint({0, 1}, {1}));
  EXPECT_FALSE(CpuListsDisjoint({1}, {}));  // serving unpinned: may run anywhere
  EXPECT_FALSE(CpuListsDisjoint({}, {0}));  // lanes unpinned
}

}  // namespace
}  // namespace orrery
