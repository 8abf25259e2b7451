// Tenant quotas: the defaults and the effective value of each quota (a
// stored 0 means "the default", so old records and partial updates work).
// docs/storage.md lists the defaults; change both together.
#pragma once

#include <cstdint>

#include "storage/catalog.h"

namespace orrery {

struct QuotaDefaults {
  static constexpr uint64_t kMaxModels = 100;                       // distinct model names
  static constexpr uint64_t kMaxTotalBytes = uint64_t{10} << 30;    // 10 GiB over all versions
  static constexpr uint64_t kMaxModelBytes = uint64_t{1} << 30;     // 1 GiB per upload
  static constexpr uint32_t kMaxInflightRequests = 64;
  static constexpr uint32_t kRequestsPerSecond = 100;
  static constexpr uint32_t kBurstRequests = 200;
  static constexpr uint32_t kWeight = 1;
};

// Every field filled in: the stored value, or the default where it is 0.
storage::TenantQuotas EffectiveQuotas(const TenantRecord& tenant);
uint32_t EffectiveWeight(const TenantRecord& tenant);

// Overwrites the fields of `into` that are non-zero in `from` (a partial
// update; 0 leaves a quota as it is).
void MergeQuotas(const storage::TenantQuotas& from, storage::TenantQuotas* into);

}  // namespace orrery
