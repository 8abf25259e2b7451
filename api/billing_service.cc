#include "api/billing_service.h"

#include "api/auth.h"
#include "api/billing.h"
#include "api/grpc_status.h"

namespace orrery {

grpc::Status BillingServiceImpl::Report(grpc::ServerContext* context, const v1::BillingReportRequest* request,
                                        v1::BillingReportResponse* response) {
  Result<TenantRecord> tenant = AuthenticateTenant(*context, *ctx_->tenants);
  if (!tenant.ok()) return ToGrpcStatus(tenant.status());
  if (!request->tenant().empty()) {
    return ToGrpcStatus(Status::InvalidArgument(
        "field 'tenant' is for the admin report (AdminService.BillingReport); a tenant sees only its own ledger"));
  }
  Result<v1::BillingReportResponse> report =
      BuildBillingReport(*ctx_->catalog, {tenant->id()}, *request, ctx_->prices);
  if (!report.ok()) return ToGrpcStatus(report.status());
  *response = std::move(report).value();
  return grpc::Status::OK;
}

}  // namespace orrery
