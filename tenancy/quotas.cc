#include "tenancy/quotas.h"

namespace orrery {

storage::TenantQuotas EffectiveQuotas(const TenantRecord& tenant) {
  const storage::TenantQuotas& q = tenant.quotas();
  storage::TenantQuotas out;
  out.set_max_models(q.max_models() ? q.max_models() : QuotaDefaults::kMaxModels);
  out.set_max_total_bytes(q.max_total_bytes() ? q.max_total_bytes() : QuotaDefaults::kMaxTotalBytes);
  out.set_max_model_bytes(q.max_model_bytes() ? q.max_model_bytes() : QuotaDefaults::kMaxModelBytes);
  out.set_max_inflight_requests(q.max_inflight_requests() ? q.max_inflight_requests()
                                                          : QuotaDefaults::kMaxInflightRequests);
  out.set_requests_per_second(q.requests_per_second() ? q.requests_per_second()
                                                      : QuotaDefaults::kRequestsPerSecond);
  out.set_burst_requests(q.burst_requests() ? q.burst_requests() : QuotaDefaults::kBurstRequests);
  return out;
}

uint32_t EffectiveWeight(const TenantRecord& tenant) {
  return tenant.weight() ? tenant.weight() : QuotaDefaults::kWeight;
}

void MergeQuotas(const storage::TenantQuotas& from, storage::TenantQuotas* into) {
  if (from.max_models()) into->set_max_models(from.max_models());
  if (from.max_total_bytes()) into->set_max_total_bytes(from.max_total_bytes());
  if (from.max_model_bytes()) into->set_max_model_bytes(from.max_model_bytes());
  if (from.max_inflight_requests()) into->set_max_inflight_requests(from.max_inflight_requests());
  if (from.requests_per_second()) into->set_requests_per_second(from.requests_per_second());
  if (from.burst_requests()) into->set_burst_requests(from.burst_requests());
}

}  // namespace orrery
