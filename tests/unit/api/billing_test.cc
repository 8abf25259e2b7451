// Billing arithmetic and the price table file.
#include "api/billing.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include <gtest/gtest.h>

namespace orrery {
namespace {

std::string WriteTemp(const std::string& text) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("orrery_prices_" + std::to_string(::getpid()) + ".json")).string();
  std::ofstream(path) << text;
  return path;
}

TEST(BillingTest, InferenceCostIsLaneTimeTimesPriceRounded) {
  v1::PriceTable p = DefaultPriceTable();
  ASSERT_EQ(p.lane_second_micros(), 20'000);
  EXPECT_EQ(InferenceCostMicros(p, 1'000'000'000, 1.0, 0), 20'000);  // one lane-second
  EXPECT_EQ(InferenceCostMicros(p, 1'000'000, 1.0, 0), 20);          // one lane-millisecond
  EXPECT_EQ(InferenceCostMicros(p, 24'999, 1.0, 0), 0);              // 0.49999 micros rounds down
  EXPECT_EQ(InferenceCostMicros(p, 25'000, 1.0, 0), 1);              // 0.5 rounds up
  EXPECT_EQ(InferenceCostMicros(p, 1'000'000, 0.5, 0), 10);          // half a batch
  EXPECT_EQ(InferenceCostMicros(p, 0, 1.0, 2'000'000'000), 2'000);   // 2 GB loaded
  EXPECT_EQ(InferenceCostMicros(p, -5, 1.0, 0), 0);
  // No overflow for a very long run at a high price.
  p.set_lane_second_micros(int64_t{1} << 40);
  EXPECT_EQ(InferenceCostMicros(p, int64_t{1'000'000'000} * 3600, 1.0, 0), (int64_t{1} << 40) * 3600);
}

TEST(BillingTest, DeviceCostIsDeviceTimeAndTransferredBytes) {
  v1::PriceTable p = DefaultPriceTable();
  ASSERT_EQ(p.device_second_micros(), 200'000);
  EXPECT_EQ(DeviceCostMicros(p, 1'000'000'000, 0), 200'000);         // one device-second
  EXPECT_EQ(DeviceCostMicros(p, 5'000'000, 0), 1'000);               // 5 device-ms
  EXPECT_EQ(DeviceCostMicros(p, 0, 2'000'000'000), 2'000);           // 2 GB moved to the device
  EXPECT_EQ(DeviceCostMicros(p, 2'500, 499'999), 1);                 // 0.5 + 0.499999 rounded apart
  EXPECT_EQ(DeviceCostMicros(p, -5, 0), 0);
}

TEST(BillingTest, StorageCostIsGbMonths) {
  v1::PriceTable p = DefaultPriceTable();
  const int64_t month_ms = int64_t{30} * 24 * 3600 * 1000;
  EXPECT_EQ(StorageCostMicros(p, 1'000'000'000, month_ms), 20'000);
  EXPECT_EQ(StorageCostMicros(p, 1'000'000'000, month_ms / 30), 667);  // one day: 666.67 rounds up
  EXPECT_EQ(StorageCostMicros(p, 0, month_ms), 0);
}

TEST(BillingTest, PriceTableFileOverridesOnlyItsFields) {
  const std::string path = WriteTemp(R"({"currency": "EUR", "lane_second_micros": 5, "gb_loaded_micros": 0})");
  Result<v1::PriceTable> p = LoadPriceTable(path);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->currency(), "EUR");
  EXPECT_EQ(p->lane_second_micros(), 5);
  EXPECT_EQ(p->gb_loaded_micros(), 0);  // explicit 0 = free
  EXPECT_EQ(p->gb_month_stored_micros(), DefaultPriceTable().gb_month_stored_micros());
  std::remove(path.c_str());
}

TEST(BillingTest, BadPriceTablesAreRefusedWithTheReason) {
  const std::string typo = WriteTemp(R"({"lane_secnd_micros": 5})");
  Result<v1::PriceTable> p = LoadPriceTable(typo);
  EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(p.status().message().find("lane_secnd_micros"), std::string::npos) << p.status().message();
  const std::string negative = WriteTemp(R"({"lane_second_micros": -1})");
  p = LoadPriceTable(negative);
  EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(p.status().message().find("negative"), std::string::npos);
  std::remove(negative.c_str());
  EXPECT_EQ(LoadPriceTable("/nonexistent/prices.json").status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(LoadPriceTable("").ok());
}

TEST(BillingTest, RequestIds) {
  const std::string a = NewRequestId(), b = NewRequestId();
  EXPECT_EQ(a.size(), 34u);
  EXPECT_EQ(a.rfind("r_", 0), 0u);
  EXPECT_NE(a, b);
  // A per-process prefix and a counter: never the same id twice.
  std::set<std::string> ids{a, b};
  for (int i = 0; i < 10'000; ++i) ids.insert(NewRequestId());
  EXPECT_EQ(ids.size(), 10'002u);
  EXPECT_TRUE(CheckRequestId(a).ok());
  EXPECT_TRUE(CheckRequestId("client-42.retry_ok").ok());
  EXPECT_FALSE(CheckRequestId("").ok());
  EXPECT_FALSE(CheckRequestId("has space").ok());
  EXPECT_FALSE(CheckRequestId(std::string("nul\0x", 5)).ok());
  EXPECT_FALSE(CheckRequestId(std::string(129, 'a')).ok());
  EXPECT_EQ(UtcDay(0), "1970-01-01");
  EXPECT_EQ(UtcDay(int64_t{86'400'000} * 365), "1971-01-01");
}

}  // namespace
}  // namespace orrery
