#include "api/model_costs.h"

#include <chrono>

#include <spdlog/spdlog.h>

#include "api/billing.h"
#include "scheduler/calibration.h"

namespace orrery {
namespace {

int64_t NowUnixUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

CostProfile FromRecord(const CostProfileRecord& rec) {
  CostProfile p;
  p.model_id = rec.tenant_id() + "/" + rec.name() + "@" + std::to_string(rec.version());
  for (const storage::BatchCostRecord& b : rec.batches()) {
    p.batches.push_back(BatchProfile{static_cast<int>(b.batch()), b.total_ns(), {b.step_ns().begin(), b.step_ns().end()}});
  }
  p.lane_ns = rec.lane_ns();
  p.runs = static_cast<int>(rec.runs());
  return p;
}

CostProfileRecord ToRecord(const ModelRecord& model, const CostProfile& p) {
  CostProfileRecord rec;
  rec.set_tenant_id(model.tenant_id());
  rec.set_name(model.name());
  rec.set_version(model.version());
  rec.set_calibrated_unix_ms(NowUnixUs() / 1000);
  for (const BatchProfile& b : p.batches) {
    storage::BatchCostRecord* o = rec.add_batches();
    o->set_batch(static_cast<uint32_t>(b.batch));
    o->set_total_ns(b.total_ns);
    for (int64_t s : b.step_ns) o->add_step_ns(s);
  }
  rec.set_lane_ns(p.lane_ns);
  rec.set_runs(static_cast<uint32_t>(p.runs));
  return rec;
}

}  // namespace

std::string ModelCostId(const ModelRecord& record) {
  return record.tenant_id() + "/" + record.name() + "@" + std::to_string(record.version());
}

void CalibrateAfterUpload(ServiceContext* ctx, const ModelRecord& record, ModelCache::ModelPtr model) {
  if (!ctx->calibrate_uploads) return;
  const std::vector<int> batches = CalibrationBatchSizes(model->signature(), ctx->max_batch);
  const int64_t start_us = NowUnixUs();
  Catalog* catalog = ctx->catalog;
  FairScheduler* scheduler = ctx->scheduler;
  const v1::PriceTable prices = ctx->prices;
  Status s = StartCalibration(
      scheduler, record.tenant_id(), std::move(model), ModelCostId(record), batches,
      [catalog, scheduler, prices, record, start_us](CostProfile profile) {
        scheduler->LoadProfile(profile);
        if (!profile.batches.empty()) {
          if (Status put = catalog->PutCostProfile(ToRecord(record, profile)); !put.ok()) {
            spdlog::warn("model {}: cost profile not stored: {}", ModelCostId(record), put.message());
          }
        }
        if (profile.runs == 0) return;
        // The tenant pays for the lane time its model's calibration took,
        // at the lane price, like an inference of that length.
        LedgerEntry entry;
        entry.set_kind(LedgerEntry::CALIBRATION);
        entry.set_tenant_id(record.tenant_id());
        entry.set_model_name(record.name());
        entry.set_model_version(record.version());
        entry.set_arrival_unix_us(start_us);
        entry.set_end_unix_us(NowUnixUs());
        entry.set_status(profile.batches.empty() ? "INTERNAL" : "OK");
        entry.set_batch_size(static_cast<uint32_t>(profile.runs));
        entry.set_batch_share(1.0);
        entry.set_lane_ns(profile.lane_ns);
        entry.set_cost_micros(InferenceCostMicros(prices, profile.lane_ns, 1.0, 0));
        if (Result<bool> r = catalog->AppendLedger(&entry); !r.ok()) {
          spdlog::warn("model {}: calibration not billed: {}", ModelCostId(record), r.status().message());
        }
        std::string summary;
        for (const BatchProfile& b : profile.batches) {
          summary += " b" + std::to_string(b.batch) + "=" + std::to_string(b.total_ns / 1000) + "us";
        }
        spdlog::info("model {} calibrated in {} runs:{}", ModelCostId(record), profile.runs, summary);
      });
  if (!s.ok()) spdlog::warn("model {}: calibration not started: {}", ModelCostId(record), s.message());
}

Status LoadCostProfiles(const Catalog& catalog, FairScheduler* scheduler) {
  ORRERY_ASSIGN_OR_RETURN(std::vector<CostProfileRecord> profiles, catalog.ListCostProfiles());
  for (const CostProfileRecord& rec : profiles) scheduler->LoadProfile(FromRecord(rec));
  return Status::Ok();
}

void LoadCostProfileIfUnknown(const Catalog& catalog, FairScheduler* scheduler, const ModelRecord& record) {
  if (scheduler->KnowsModel(ModelCostId(record))) return;
  Result<CostProfileRecord> rec = catalog.GetCostProfile(record.tenant_id(), record.name(), record.version());
  if (rec.ok()) scheduler->LoadProfile(FromRecord(*rec));
}

}  // namespace orrery
