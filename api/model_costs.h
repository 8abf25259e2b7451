// Model costs at the API layer: calibrating a model after its upload (as
// scheduled work of the uploading tenant, billed as a CALIBRATION ledger
// entry), keeping the profile in the catalog, and loading stored profiles
// into the scheduler's cost model.
#pragma once

#include <string>

#include "api/service_context.h"
#include "base/status.h"
#include "cache/model_cache.h"
#include "storage/catalog.h"

namespace orrery {

// The scheduler's cost-model id of a model version: "tenant_id/name@version".
std::string ModelCostId(const ModelRecord& record);

// After an upload is stored: queues the calibration runs for the record's
// tenant (scheduler/calibration.h) and returns at once. When they end (on a
// lane thread) the profile goes to the scheduler, to the catalog's
// cost_profiles CF, and one CALIBRATION ledger entry bills the runs' lane
// time at the lane price. Failures are logged, never returned: the upload
// has already succeeded, and an uncalibrated model is only less well
// predicted. No-op when ctx->calibrate_uploads is false.
void CalibrateAfterUpload(ServiceContext* ctx, const ModelRecord& record, ModelCache::ModelPtr model);

// Loads every stored profile into the scheduler (start-up). Cost: one scan.
Status LoadCostProfiles(const Catalog& catalog, FairScheduler* scheduler);

// Loads the record's stored profile if the scheduler knows nothing of the
// model yet (after a restart raced the start-up load, or ForgetModel).
// Cost: one lock when known, else one catalog point read.
void LoadCostProfileIfUnknown(const Catalog& catalog, FairScheduler* scheduler, const ModelRecord& record);

}  // namespace orrery
