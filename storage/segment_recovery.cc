#include "storage/segment_recovery.h"

#include <set>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

namespace orrery {

Result<SegmentRecoveryReport> RecoverSegments(const Catalog& catalog, SegmentStore* store) {
  std::set<std::string> live;
  // Deleted tenants' model records are deleted with them, so live tenants
  // hold every live record.
  ORRERY_ASSIGN_OR_RETURN(std::vector<TenantRecord> tenants, catalog.ListTenants());
  for (const TenantRecord& t : tenants) {
    ORRERY_ASSIGN_OR_RETURN(std::vector<ModelRecord> models, catalog.ListModels(t.id()));
    for (const ModelRecord& m : models) {
      if (!m.segment_file().empty()) live.insert(m.segment_file());
    }
  }
  SegmentRecoveryReport report;
  report.live = live.size();
  ORRERY_ASSIGN_OR_RETURN(std::vector<std::string> removed, store->Recover(live, &report.temps_removed));
  report.orphans_removed = removed.size();
  for (const std::string& name : removed) spdlog::info("segment recovery: removed orphan {}", name);
  if (report.temps_removed > 0) {
    spdlog::info("segment recovery: removed {} unfinished segment writes", report.temps_removed);
  }
  return report;
}

}  // namespace orrery
