// Per-tenant admission of inference requests: the in-flight limit and the
// request-rate token bucket (quotas max_inflight_requests,
// requests_per_second and burst_requests; tenancy/quotas.h).
//
// Admit() is O(log tenants) under one mutex and never blocks on I/O. A
// refused request consumes nothing (no token, no slot). Thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "base/status.h"
#include "storage/catalog.h"

namespace orrery {

class Admission {
 public:
  using Clock = std::chrono::steady_clock;

  // Holds one in-flight slot of a tenant until destroyed.
  class Ticket {
   public:
    Ticket() = default;
    Ticket(Ticket&& other) noexcept : owner_(other.owner_), tenant_id_(std::move(other.tenant_id_)) {
      other.owner_ = nullptr;
    }
    Ticket& operator=(Ticket&& other) noexcept;
    ~Ticket() { Release(); }
    Ticket(const Ticket&) = delete;
    Ticket& operator=(const Ticket&) = delete;

   private:
    friend class Admission;
    Ticket(Admission* owner, std::string tenant_id) : owner_(owner), tenant_id_(std::move(tenant_id)) {}
    void Release();
    Admission* owner_ = nullptr;
    std::string tenant_id_;
  };

  // RESOURCE_EXHAUSTED naming the quota when the tenant has no free slot or
  // no token. `now` is for tests.
  Result<Ticket> Admit(const TenantRecord& tenant, Clock::time_point now = Clock::now());

  uint32_t inflight(const std::string& tenant_id) const;

 private:
  struct State {
    uint32_t inflight = 0;
    double tokens = -1;  // < 0: not yet initialised (starts full)
    Clock::time_point refilled;
  };
  void Release(const std::string& tenant_id);

  mutable std::mutex mu_;
  std::map<std::string, State, std::less<>> tenants_;
};

}  // namespace orrery
