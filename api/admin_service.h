// orrery.v1.AdminService: operator RPCs, authorised by the admin token (a
// tenant key gets PERMISSION_DENIED). Tenants are named by name or id.
#pragma once

#include "api/proto/orrery.grpc.pb.h"
#include "api/service_context.h"

namespace orrery {

class AdminServiceImpl final : public orrery::v1::AdminService::Service {
 public:
  explicit AdminServiceImpl(ServiceContext* ctx) : ctx_(ctx) {}

  grpc::Status CreateTenant(grpc::ServerContext* context, const v1::CreateTenantRequest* request,
                            v1::CreateTenantResponse* response) override;
  grpc::Status ListTenants(grpc::ServerContext* context, const v1::ListTenantsRequest* request,
                           v1::ListTenantsResponse* response) override;
  grpc::Status GetTenant(grpc::ServerContext* context, const v1::GetTenantRequest* request,
                         v1::GetTenantResponse* response) override;
  grpc::Status UpdateTenant(grpc::ServerContext* context, const v1::UpdateTenantRequest* request,
                            v1::UpdateTenantResponse* response) override;
  grpc::Status SetTenantDisabled(grpc::ServerContext* context, const v1::SetTenantDisabledRequest* request,
                                 v1::SetTenantDisabledResponse* response) override;
  // Also drops the tenant's compiled models from the cache; requests already
  // running finish on their own reference.
  grpc::Status DeleteTenant(grpc::ServerContext* context, const v1::DeleteTenantRequest* request,
                            v1::DeleteTenantResponse* response) override;
  grpc::Status CreateKey(grpc::ServerContext* context, const v1::CreateKeyRequest* request,
                         v1::CreateKeyResponse* response) override;
  grpc::Status ListKeys(grpc::ServerContext* context, const v1::ListKeysRequest* request,
                        v1::ListKeysResponse* response) override;
  grpc::Status RevokeKey(grpc::ServerContext* context, const v1::RevokeKeyRequest* request,
                         v1::RevokeKeyResponse* response) override;

  // admin_server_service.cc. request.tenant: name or id (also of a deleted
  // tenant, by id), "" = every tenant with ledger entries. Cost: one ledger
  // range scan per tenant.
  grpc::Status BillingReport(grpc::ServerContext* context, const v1::BillingReportRequest* request,
                             v1::BillingReportResponse* response) override;
  grpc::Status SchedulerStats(grpc::ServerContext* context, const v1::SchedulerStatsRequest* request,
                              v1::SchedulerStatsResponse* response) override;
  // Blocks the handler up to request.timeout_ms (polling every 10 ms).
  grpc::Status Drain(grpc::ServerContext* context, const v1::DrainRequest* request,
                     v1::DrainResponse* response) override;
  grpc::Status Resume(grpc::ServerContext* context, const v1::ResumeRequest* request,
                      v1::ResumeResponse* response) override;
  grpc::Status ServerInfo(grpc::ServerContext* context, const v1::ServerInfoRequest* request,
                          v1::ServerInfoResponse* response) override;

 private:
  // Authorises the admin and resolves request->tenant (name or id).
  Result<TenantRecord> AdminAndTenant(const grpc::ServerContext& context, const std::string& tenant) const;

  ServiceContext* ctx_;
};

}  // namespace orrery
