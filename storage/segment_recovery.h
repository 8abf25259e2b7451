// Start-up recovery of the segment store against the catalog: what a crash
// between a segment write and its catalog commit (or between a catalog
// delete and the segment's removal) leaves behind goes. Run after
// Catalog::Open (whose fsck has already dropped broken records) and before
// serving. Cost: a scan of every tenant's model records and one directory
// listing; one unlink + dir fsync per orphan.
#pragma once

#include <cstddef>

#include "base/status.h"
#include "storage/catalog.h"
#include "storage/segment_store.h"

namespace orrery {

struct SegmentRecoveryReport {
  size_t live = 0;             // segment files named by live model records
  size_t orphans_removed = 0;  // segment files no live record names
  size_t temps_removed = 0;    // unfinished writes
};

Result<SegmentRecoveryReport> RecoverSegments(const Catalog& catalog, SegmentStore* store);

}  // namespace orrery
