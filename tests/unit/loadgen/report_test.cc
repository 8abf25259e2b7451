#include "bench/loadgen/report.h"

#include <fstream>
#include <string>

#include <gtest/gtest.h>

namespace orrery::loadgen {
namespace {

TEST(ClassifyTest, EarlyLateAndMisses) {
  EXPECT_EQ(Classify(0, "", 5'000'000, 10'000), Outcome::kOk);
  EXPECT_EQ(Classify(0, "", 11'000'000, 10'000), Outcome::kLate);
  EXPECT_EQ(Classify(0, "", 11'000'000, 0), Outcome::kOk);
  EXPECT_EQ(Classify(8, "in-flight limit", 1000, 0), Outcome::kRejectedEarly);
  EXPECT_EQ(Classify(4, "admitted, then refused after waiting for its model's load: model 'm': predicted completion "
                        "in 30 ms ... is after the deadline", 90'000'000, 100'000),
            Outcome::kRejectedLate);
  EXPECT_EQ(Classify(4, "model 'm': predicted completion in 30 ms ... is after the deadline", 1000, 10'000),
            Outcome::kRejectedEarly);
  EXPECT_EQ(Classify(4, "dropped before running, it can no longer meet its deadline (predicted completion in 2 ms",
                     9'000'000, 10'000),
            Outcome::kRejectedLate);
  EXPECT_EQ(Classify(4, "Deadline Exceeded", 20'000'000'000, 10'000), Outcome::kRejectedLate);
  EXPECT_EQ(Classify(13, "boom", 1000, 0), Outcome::kError);
}

TEST(PercentileTest, NearestRank) {
  std::vector<double> v;
  for (int i = 100; i >= 1; --i) v.push_back(i);
  EXPECT_EQ(Percentile(v, 0.5), 50);
  EXPECT_EQ(Percentile(v, 0.99), 99);
  EXPECT_EQ(Percentile(v, 0.999), 100);
  EXPECT_EQ(Percentile(v, 0), 1);
  EXPECT_EQ(Percentile({}, 0.5), 0);
}

TEST(JainIndexTest, FairAndUnfair) {
  EXPECT_DOUBLE_EQ(JainIndex({3, 3, 3}), 1.0);
  EXPECT_DOUBLE_EQ(JainIndex({1, 0, 0, 0}), 0.25);
  EXPECT_NEAR(JainIndex({1, 2}), 9.0 / 10.0, 1e-12);
  EXPECT_EQ(JainIndex({}), 0);
}

TEST(SummariseTest, PerTenantCountsSharesAndJain) {
  std::vector<StreamInfo> streams = {{"a", "m"}, {"b", "m"}};
  std::vector<Record> rs;
  auto add = [&](int stream, int64_t latency_ms, int code, Outcome o, int64_t lane_ms) {
    Record r;
    r.stream = stream;
    r.latency_ns = latency_ms * 1'000'000;
    r.grpc_code = code;
    r.outcome = o;
    r.deadline_us = 50'000;
    r.lane_ns = code == 0 ? lane_ms * 1'000'000 : -1;
    rs.push_back(r);
  };
  for (int i = 1; i <= 10; ++i) add(0, i, 0, Outcome::kOk, 1);
  add(0, 60, 0, Outcome::kLate, 1);
  add(0, 0, 4, Outcome::kRejectedEarly, 0);
  add(1, 5, 0, Outcome::kOk, 2);
  add(1, 9, 4, Outcome::kRejectedLate, 0);
  // Service from the scheduler: b got twice a's lane time at twice the weight.
  Summary s = Summarise(rs, streams, {{"a", 1}, {"b", 2}}, 2.0, {{"a", 100}, {"b", 200}});
  ASSERT_EQ(s.tenants.size(), 2u);
  const TenantSummary& a = s.tenants[0];
  EXPECT_EQ(a.sent, 12u);
  EXPECT_EQ(a.ok, 11u);
  EXPECT_EQ(a.late, 1u);
  EXPECT_EQ(a.rejected_early, 1u);
  EXPECT_DOUBLE_EQ(a.goodput_rps, 5.0);          // 10 in time over 2 s
  EXPECT_DOUBLE_EQ(a.attainment, 10.0 / 11.0);   // admitted = 12 - 1 early
  EXPECT_DOUBLE_EQ(a.p50_ms, 6);
  EXPECT_DOUBLE_EQ(a.p99_ms, 60);
  EXPECT_DOUBLE_EQ(a.overhead_p50_ms, 5);        // latency - 1 ms lane
  EXPECT_NEAR(a.service_share, 1.0 / 3.0, 1e-12);
  EXPECT_NEAR(a.weight_share, 1.0 / 3.0, 1e-12);
  EXPECT_DOUBLE_EQ(s.jain_index, 1.0);
  EXPECT_EQ(s.total.sent, 14u);
  EXPECT_DOUBLE_EQ(s.rejected_early_fraction, 0.5);
  // Without scheduler stats, service is the lane time the responses report.
  Summary r = Summarise(rs, streams, {{"a", 1}, {"b", 2}}, 2.0, {});
  EXPECT_EQ(r.tenants[0].service_ns, 11'000'000);
  EXPECT_EQ(r.tenants[1].service_ns, 2'000'000);
  EXPECT_LT(r.jain_index, 1.0);
}

TEST(ReportFilesTest, ServerCountersAndLoadTimesAreWritten) {
  Summary s;
  s.server["host_misses"] = 3;
  s.server["upload_seconds"] = 1.5;
  s.echoes.push_back(EchoSummary{"127.0.0.1:1", 0.2, 0.5, 0.08, 0.07});
  const std::string json = SummaryJson(s);
  EXPECT_NE(json.find("\"server\":{\"host_misses\":3,\"upload_seconds\":1.5}"), std::string::npos) << json;
  EXPECT_NE(json.find("\"request_path_p50_ms\":0.08,\"response_path_p50_ms\":0.07"), std::string::npos) << json;
  Record cold;
  cold.load_wait_ns = 2'500'000;
  cold.load_predicted_ns = 2'000'000;
  cold.request_path_ns = 100'000;
  cold.response_path_ns = 250'000;
  Record warm;  // no load and no arrival stamp reported
  const std::string path = ::testing::TempDir() + "/requests.csv";
  ASSERT_TRUE(WriteRequestsCsv(path, {cold, warm}, {{"a", "m"}}));
  std::ifstream in(path);
  std::string header, first, second;
  std::getline(in, header);
  std::getline(in, first);
  std::getline(in, second);
  const std::string tail = ",load_ms,load_pred_ms,request_path_ms,response_path_ms";
  EXPECT_EQ(header.substr(header.size() - tail.size()), tail);
  EXPECT_EQ(first.substr(first.size() - 15), ",2.5,2,0.1,0.25") << first;
  EXPECT_EQ(second.substr(second.size() - 4), ",,,,") << second;
}

}  // namespace
}  // namespace orrery::loadgen
