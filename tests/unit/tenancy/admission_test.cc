#include "tenancy/admission.h"

#include <gtest/gtest.h>

#include "tenancy/quotas.h"

namespace orrery {
namespace {

using namespace std::chrono_literals;

TenantRecord Tenant(const std::string& id, uint32_t inflight, uint32_t rate, uint32_t burst) {
  TenantRecord t;
  t.set_id(id);
  t.mutable_quotas()->set_max_inflight_requests(inflight);
  t.mutable_quotas()->set_requests_per_second(rate);
  t.mutable_quotas()->set_burst_requests(burst);
  return t;
}

TEST(QuotasTest, ZeroMeansDefault) {
  TenantRecord t;
  storage::TenantQuotas q = EffectiveQuotas(t);
  EXPECT_EQ(q.max_models(), QuotaDefaults::kMaxModels);
  EXPECT_EQ(q.max_total_bytes(), QuotaDefaults::kMaxTotalBytes);
  EXPECT_EQ(q.max_model_bytes(), QuotaDefaults::kMaxModelBytes);
  EXPECT_EQ(q.max_inflight_requests(), QuotaDefaults::kMaxInflightRequests);
  EXPECT_EQ(q.requests_per_second(), QuotaDefaults::kRequestsPerSecond);
  EXPECT_EQ(q.burst_requests(), QuotaDefaults::kBurstRequests);
  EXPECT_EQ(EffectiveWeight(t), 1u);
  t.mutable_quotas()->set_max_models(3);
  t.set_weight(5);
  EXPECT_EQ(EffectiveQuotas(t).max_models(), 3u);
  EXPECT_EQ(EffectiveWeight(t), 5u);
}

TEST(QuotasTest, MergeOverwritesOnlyNonZeroFields) {
  storage::TenantQuotas into;
  into.set_max_models(4);
  into.set_max_total_bytes(1000);
  storage::TenantQuotas from;
  from.set_max_total_bytes(2000);
  from.set_burst_requests(9);
  MergeQuotas(from, &into);
  EXPECT_EQ(into.max_models(), 4u);
  EXPECT_EQ(into.max_total_bytes(), 2000u);
  EXPECT_EQ(into.burst_requests(), 9u);
}

TEST(AdmissionTest, InflightLimitAndRelease) {
  Admission adm;
  const TenantRecord t = Tenant("t_a", 2, 1000, 1000);
  const auto now = Admission::Clock::now();
  auto a = adm.Admit(t, now);
  auto b = adm.Admit(t, now);
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(adm.inflight("t_a"), 2u);
  auto c = adm.Admit(t, now);
  ASSERT_EQ(c.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(c.status().message().find("max_inflight_requests"), std::string::npos);
  // Another tenant is not affected.
  EXPECT_TRUE(adm.Admit(Tenant("t_b", 2, 1000, 1000), now).ok());
  { Admission::Ticket dropped = std::move(a).value(); }
  EXPECT_EQ(adm.inflight("t_a"), 1u);
  EXPECT_TRUE(adm.Admit(t, now).ok());
}

TEST(AdmissionTest, TokenBucketRefillsAtTheRate) {
  Admission adm;
  const TenantRecord t = Tenant("t_a", 100, 10, 3);  // 10/s, burst 3
  auto now = Admission::Clock::now();
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(adm.Admit(t, now).ok()) << i;
  auto refused = adm.Admit(t, now);
  ASSERT_EQ(refused.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(refused.status().message().find("requests_per_second"), std::string::npos);
  // A refused request took no token: 100 ms later exactly one is back.
  now += 100ms;
  EXPECT_TRUE(adm.Admit(t, now).ok());
  EXPECT_FALSE(adm.Admit(t, now).ok());
  // Never more than the burst, however long the pause.
  now += 1h;
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(adm.Admit(t, now).ok()) << i;
  EXPECT_FALSE(adm.Admit(t, now).ok());
}

}  // namespace
}  // namespace orrery
