// Ledger entries for the tests of the catalog's ledger and its writer.
#pragma once

#include <cstdint>
#include <string>

#include "storage/catalog.h"

namespace orrery::testing {

// An OK inference of model mlp v1 ending at `end_us`, costing `cost` micros
// (and 10 x cost lane ns).
inline LedgerEntry InferenceEntry(const std::string& tenant, const std::string& rid, int64_t end_us,
                                  int64_t cost) {
  LedgerEntry e;
  e.set_kind(LedgerEntry::INFERENCE);
  e.set_tenant_id(tenant);
  e.set_model_name("mlp");
  e.set_model_version(1);
  e.set_request_id(rid);
  e.set_end_unix_us(end_us);
  e.set_status("OK");
  e.set_lane_ns(cost * 10);
  e.set_cost_micros(cost);
  return e;
}

}  // namespace orrery::testing
