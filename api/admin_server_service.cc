// AdminService RPCs about the server itself: billing reports over any
// tenant, scheduler statistics, drain / resume and build information.
#include <chrono>
#include <thread>

#include <spdlog/spdlog.h>

#include "api/admin_service.h"
#include "api/auth.h"
#include "api/billing.h"
#include "api/grpc_status.h"
#include "api/version.h"

#ifndef ORRERY_BUILD_TYPE
#define ORRERY_BUILD_TYPE "unknown"
#endif
#ifndef ORRERY_GIT_COMMIT
#define ORRERY_GIT_COMMIT "unknown"
#endif

namespace orrery {

grpc::Status AdminServiceImpl::BillingReport(grpc::ServerContext* context, const v1::BillingReportRequest* request,
                                             v1::BillingReportResponse* response) {
  Status auth = AuthorizeAdmin(*context, ctx_->admin_token, *ctx_->tenants);
  if (!auth.ok()) return ToGrpcStatus(auth);
  std::vector<std::string> ids;
  if (request->tenant().empty()) {
    Result<std::vector<std::string>> all = ctx_->catalog->LedgerTenants();
    if (!all.ok()) return ToGrpcStatus(all.status());
    ids = std::move(all).value();
  } else {
    Result<TenantRecord> tenant = ctx_->tenants->Find(request->tenant());
    if (!tenant.ok() && tenant.status().code() == StatusCode::kNotFound) {
      // A deleted tenant's ledger stays attributable through its tombstone.
      tenant = ctx_->catalog->GetTenantTombstone(request->tenant());
    }
    if (!tenant.ok()) return ToGrpcStatus(tenant.status());
    ids.push_back(tenant->id());
  }
  Result<v1::BillingReportResponse> report = BuildBillingReport(*ctx_->catalog, ids, *request, ctx_->prices);
  if (!report.ok()) return ToGrpcStatus(report.status());
  *response = std::move(report).value();
  return grpc::Status::OK;
}

grpc::Status AdminServiceImpl::SchedulerStats(grpc::ServerContext* context, const v1::SchedulerStatsRequest*,
                                              v1::SchedulerStatsResponse* response) {
  Status auth = AuthorizeAdmin(*context, ctx_->admin_token, *ctx_->tenants);
  if (!auth.ok()) return ToGrpcStatus(auth);
  const orrery::SchedulerStats st = ctx_->scheduler->Stats();
  response->set_lanes(st.lanes);
  response->set_virtual_time(st.virtual_time);
  response->set_queued(st.queued);
  response->set_preemptions(st.preemptions);
  response->set_batches(st.batches);
  for (const TenantSchedulerStats& t : st.tenants) {
    v1::TenantSchedulerInfo* o = response->add_tenants();
    o->set_tenant_id(t.tenant);
    o->set_weight(t.weight);
    o->set_virtual_finish(t.virtual_finish);
    o->set_queued(t.queued);
    o->set_queued_ns(t.queued_ns);
    o->set_in_flight(t.in_flight);
    o->set_admitted(t.admitted);
    o->set_rejected_deadline(t.rejected_deadline);
    o->set_rejected_in_flight(t.rejected_in_flight);
    o->set_dropped(t.dropped);
    o->set_completed(t.completed);
    o->set_failed(t.failed);
    o->set_service_ns(t.service_ns);
    o->set_max_wait_ns(t.max_wait_ns);
    o->set_batched(t.batched);
    o->set_calibration_runs(t.calibration_runs);
    o->set_device_runs(t.device_runs);
    o->set_device_ns(t.device_ns);
    o->set_probes(t.probes);
  }
  response->set_lane_utilisation(st.lane_utilisation);
  response->set_admission_wait_slack(st.admission_wait_slack);
  response->set_response_margin_ns(st.response_margin_ns);
  response->set_affinity_dispatches(st.affinity_dispatches);
  response->set_lane_callback_ns(st.lane_callback_ns);
  response->set_lane_callback_max_ns(st.lane_callback_max_ns);
  if (st.has_device) {
    const DeviceLanesStats& d = st.device;
    v1::DeviceSchedulerInfo* o = response->mutable_device();
    o->set_name(d.device.name);
    o->set_description(d.device.description);
    o->set_simulated(d.device.simulated);
    o->set_placing(d.placing);
    o->set_placed_device(d.placed_device);
    o->set_placed_cpu(d.placed_cpu);
    o->set_prewarms(d.prewarms);
    o->set_transfers(d.transfers);
    o->set_transfers_failed(d.transfers_failed);
    o->set_bytes_transferred(static_cast<uint64_t>(d.bytes_transferred));
    o->set_transfer_seconds(static_cast<double>(d.transfer_ns) / 1e9);
    o->set_device_busy_seconds(static_cast<double>(d.device_busy_ns) / 1e9);
    o->set_queued(d.queued);
    o->set_link_utilisation(d.device.link_utilisation);
    o->set_compute_utilisation(d.device.compute_utilisation);
    o->set_window_seconds(static_cast<double>(d.window_ns) / 1e9);
    o->set_overlap_seconds(static_cast<double>(d.overlap_ns) / 1e9);
    o->set_fair_reordered(d.fair_reordered);
    o->set_waited_unplanned_transfer(d.waited_unplanned_transfer);
    o->set_late(d.late);
    o->set_late_slow_transfer(d.late_slow_transfer);
    o->set_late_unplanned_transfer(d.late_unplanned_transfer);
    o->set_late_overrun(d.late_overrun);
  }
  for (const ModelCostStats& m : st.models) {
    v1::ModelCostInfo* o = response->add_models();
    o->set_model_id(m.model_id);
    o->set_samples(m.samples);
    o->set_error_p50(m.error_p50);
    o->set_error_p90(m.error_p90);
    o->set_error_p99(m.error_p99);
    o->set_error_max(m.error_max);
    o->set_last_predicted_ns(m.last_predicted_ns);
    o->set_last_measured_ns(m.last_measured_ns);
    o->set_mean_predicted_ns(m.mean_predicted_ns);
    o->set_mean_measured_ns(m.mean_measured_ns);
    o->set_steps(m.steps);
    for (const auto& [batch, ns] : m.estimate_ns) (*o->mutable_estimate_ns())[batch] = ns;
    for (const auto& [batch, ns] : m.calibrated_ns) (*o->mutable_calibrated_ns())[batch] = ns;
  }
  return grpc::Status::OK;
}

grpc::Status AdminServiceImpl::Drain(grpc::ServerContext* context, const v1::DrainRequest* request,
                                     v1::DrainResponse* response) {
  Status auth = AuthorizeAdmin(*context, ctx_->admin_token, *ctx_->tenants);
  if (!auth.ok()) return ToGrpcStatus(auth);
  if (request->timeout_ms() < 0) return ToGrpcStatus(Status::InvalidArgument("timeout_ms must not be negative"));
  const auto timeout = std::chrono::milliseconds(request->timeout_ms() == 0 ? 30'000 : request->timeout_ms());
  if (ctx_->ready.exchange(false)) spdlog::info("draining: new inferences are refused");
  const auto until = std::chrono::steady_clock::now() + timeout;
  while (ctx_->in_flight.load() > 0 && std::chrono::steady_clock::now() < until && !context->IsCancelled()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  response->set_in_flight(ctx_->in_flight.load());
  response->set_queued(ctx_->scheduler->queue_depth());
  response->set_drained(response->in_flight() == 0);
  if (response->drained()) spdlog::info("drained: nothing in flight");
  return grpc::Status::OK;
}

grpc::Status AdminServiceImpl::Resume(grpc::ServerContext* context, const v1::ResumeRequest*, v1::ResumeResponse*) {
  Status auth = AuthorizeAdmin(*context, ctx_->admin_token, *ctx_->tenants);
  if (!auth.ok()) return ToGrpcStatus(auth);
  if (!ctx_->ready.exchange(true)) spdlog::info("resumed: admitting inferences");
  return grpc::Status::OK;
}

grpc::Status AdminServiceImpl::ServerInfo(grpc::ServerContext* context, const v1::ServerInfoRequest*,
                                          v1::ServerInfoResponse* response) {
  Status auth = AuthorizeAdmin(*context, ctx_->admin_token, *ctx_->tenants);
  if (!auth.ok()) return ToGrpcStatus(auth);
  response->set_version(kOrreryVersion);
  response->set_build_type(ORRERY_BUILD_TYPE);
  response->set_compiler("g++ " __VERSION__);
  response->set_git_commit(ORRERY_GIT_COMMIT);
  response->set_start_unix_ms(ctx_->start_unix_ms);
  response->set_lanes(ctx_->scheduler->lanes());
  response->set_draining(!ctx_->ready.load());
  response->set_in_flight(ctx_->in_flight.load());
  return grpc::Status::OK;
}

}  // namespace orrery
