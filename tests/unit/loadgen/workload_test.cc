#include "bench/loadgen/workload.h"

#include <gtest/gtest.h>

namespace orrery::loadgen {
namespace {

TEST(ParseStreamTest, PoissonClosedAndDeadline) {
  Result<StreamSpec> s = ParseStream("acme:mlp:250.5:10");
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->tenant, "acme");
  EXPECT_EQ(s->model, "mlp");
  EXPECT_DOUBLE_EQ(s->rate, 250.5);
  EXPECT_EQ(s->closed, 0);
  EXPECT_EQ(s->deadline_us, 10000);

  Result<StreamSpec> c = ParseStream("b:cnn:c8");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->closed, 8);
  EXPECT_EQ(c->rate, 0);
  EXPECT_EQ(c->deadline_us, 0);
}

TEST(ParseStreamTest, MalformedIsNamed) {
  for (const char* bad : {"a:mlp", "a:mlp:0", "a:mlp:-3", "a:mlp:fast", "a:mlp:c0", "a:mlp:c1.5", ":mlp:1",
                          "a::1", "a:mlp:1:0", "a:mlp:1:2:3"}) {
    Result<StreamSpec> s = ParseStream(bad);
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(s.status().message().find(bad), std::string::npos) << s.status().message();
  }
}

TEST(ParseTenantTest, WeightDefaultsToOne) {
  EXPECT_EQ(ParseTenant("a")->weight, 1u);
  EXPECT_EQ(ParseTenant("a:4")->weight, 4u);
  EXPECT_FALSE(ParseTenant("a:0").ok());
  EXPECT_FALSE(ParseTenant("a:x").ok());
  EXPECT_FALSE(ParseTenant(":2").ok());
}

TEST(PoissonScheduleTest, RatesSortedAndDeterministic) {
  std::vector<StreamSpec> streams = {{"a", "m", 1000, 0, 0}, {"b", "m", 250, 0, 0}, {"c", "m", 0, 4, 0}};
  const int64_t ns = 10'000'000'000;
  std::vector<Arrival> s = PoissonSchedule(streams, ns, 42);
  size_t a = 0, b = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    ASSERT_GE(s[i].at_ns, 0);
    ASSERT_LT(s[i].at_ns, ns);
    if (i > 0) {
      ASSERT_LE(s[i - 1].at_ns, s[i].at_ns);
    }
    ASSERT_NE(s[i].stream, 2) << "closed-loop streams have no scheduled arrivals";
    (s[i].stream == 0 ? a : b)++;
  }
  // 10000 and 2500 expected; Poisson sd is 100 and 50.
  EXPECT_NEAR(static_cast<double>(a), 10000, 500);
  EXPECT_NEAR(static_cast<double>(b), 2500, 250);
  std::vector<Arrival> again = PoissonSchedule(streams, ns, 42);
  ASSERT_EQ(again.size(), s.size());
  EXPECT_EQ(again.back().at_ns, s.back().at_ns);
  std::vector<Arrival> other = PoissonSchedule(streams, ns, 43);
  EXPECT_FALSE(other.size() == s.size() && other.back().at_ns == s.back().at_ns) << "the seed changes nothing";
}

TEST(ParseTraceTest, StreamsPerTenantModelDeadline) {
  std::vector<StreamSpec> streams = {{"x", "m", 5, 0, 0}};
  Result<std::vector<Arrival>> t = ParseTrace(
      "time_s,tenant,model,deadline_ms\n"
      "0.5,a,mlp,10\n"
      "# comment\n"
      "0.25,b,cnn\n"
      "1.0,a,mlp,10\n"
      "1.5,a,mlp,200\n",
      &streams);
  ASSERT_TRUE(t.ok()) << t.status().message();
  ASSERT_EQ(t->size(), 4u);
  ASSERT_EQ(streams.size(), 4u);  // x, (a,mlp,10ms), (b,cnn), (a,mlp,200ms)
  EXPECT_EQ((*t)[0].at_ns, 250'000'000);
  EXPECT_EQ(streams[static_cast<size_t>((*t)[0].stream)].model, "cnn");
  EXPECT_EQ((*t)[1].stream, (*t)[2].stream);
  EXPECT_EQ(streams[static_cast<size_t>((*t)[1].stream)].deadline_us, 10000);
  EXPECT_EQ(streams[static_cast<size_t>((*t)[3].stream)].deadline_us, 200000);
  EXPECT_EQ(streams[static_cast<size_t>((*t)[3].stream)].rate, 0);
}

TEST(ParseTraceTest, BadLineIsNamed) {
  std::vector<StreamSpec> streams;
  Result<std::vector<Arrival>> t = ParseTrace("0.1,a,mlp\nsoon,a,mlp\n", &streams);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("line 2"), std::string::npos) << t.status().message();
  EXPECT_FALSE(ParseTrace("0.1,a\n", &streams).ok());
  EXPECT_FALSE(ParseTrace("0.1,a,mlp,-5\n", &streams).ok());
  EXPECT_FALSE(ParseTrace("-1,a,mlp\n", &streams).ok());
}

}  // namespace
}  // namespace orrery::loadgen
