#include "tenancy/admission.h"

#include <algorithm>

#include "tenancy/quotas.h"

namespace orrery {

Admission::Ticket& Admission::Ticket::operator=(Ticket&& other) noexcept {
  if (this != &other) {
    Release();
    owner_ = other.owner_;
    tenant_id_ = std::move(other.tenant_id_);
    other.owner_ = nullptr;
  }
  return *this;
}

void Admission::Ticket::Release() {
  if (owner_ == nullptr) return;
  owner_->Release(tenant_id_);
  owner_ = nullptr;
}

Result<Admission::Ticket> Admission::Admit(const TenantRecord& tenant, Clock::time_point now) {
  const storage::TenantQuotas q = EffectiveQuotas(tenant);
  std::lock_guard<std::mutex> lock(mu_);
  State& s = tenants_[tenant.id()];
  const double burst = static_cast<double>(q.burst_requests());
  if (s.tokens < 0) {
    s.tokens = burst;
    s.refilled = now;
  } else if (now > s.refilled) {
    const double elapsed = std::chrono::duration<double>(now - s.refilled).count();
    s.tokens = std::min(burst, s.tokens + elapsed * q.requests_per_second());
    s.refilled = now;
  }
  s.tokens = std::min(s.tokens, burst);  // the quota may have been lowered
  if (s.inflight >= q.max_inflight_requests()) {
    return Status::ResourceExhausted("quota max_inflight_requests (" + std::to_string(q.max_inflight_requests()) +
                                     ") reached: wait for running requests to finish");
  }
  if (s.tokens < 1.0) {
    return Status::ResourceExhausted("quota requests_per_second (" + std::to_string(q.requests_per_second()) +
                                     ", burst " + std::to_string(q.burst_requests()) + ") exceeded: retry later");
  }
  s.tokens -= 1.0;
  ++s.inflight;
  return Ticket(this, tenant.id());
}

void Admission::Release(const std::string& tenant_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = tenants_.find(tenant_id);
  if (it != tenants_.end() && it->second.inflight > 0) --it->second.inflight;
}

uint32_t Admission::inflight(const std::string& tenant_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = tenants_.find(tenant_id);
  return it == tenants_.end() ? 0 : it->second.inflight;
}

}  // namespace orrery
