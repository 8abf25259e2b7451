#include "cache/host_cache.h"

namespace orrery {

TierOptions HostCache::ToTierOptions(const HostCacheOptions& o) {
  TierOptions t;
  t.name = "host";
  t.capacity_bytes = o.budget_bytes;
  t.granule_bytes = 1;
  t.concurrency = o.load_concurrency;
  t.transfer = o.disk;
  t.policy = o.policy;
  t.keepalive = o.keepalive;
  t.keepalive_options = o.keepalive_options;
  t.prewarm_margin_ns = o.prewarm_margin_ns;
  t.rate_tau_ns = o.rate_tau_ns;
  t.move_slack.max = o.load_slack_max;
  return t;
}

Result<std::unique_ptr<HostCache>> HostCache::Create(const HostCacheOptions& options, const Clock* clock) {
  const TierOptions t = ToTierOptions(options);
  ORRERY_RETURN_IF_ERROR(Validate(t));
  return std::unique_ptr<HostCache>(new HostCache(t, clock));
}

}  // namespace orrery
