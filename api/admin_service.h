// orrery.v1.AdminService: operator RPCs, authorised by the admin token (a
// tenant key gets PERMISSION_DENIED). Tenants are named by name or id.
#pragma once

#include <functional>
#include <string>

#include "api/proto/orrery.grpc.pb.h"
#include "api/service_context.h"
#include "cache/model_key.h"

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

  // admin_cache_service.cc: the cache tiers. List costs O(registered
  // versions) plus one tenant scan; Pin and Prefetch block the handler until
  // the version is resident (a segment read on a loader thread).
  grpc::Status CacheList(grpc::ServerContext* context, const v1::CacheListRequest* request,
                         v1::CacheListResponse* response) override;
  grpc::Status CacheEvict(grpc::ServerContext* context, const v1::CacheModelRequest* request,
                          v1::CacheModelResponse* response) override;
  grpc::Status CachePin(grpc::ServerContext* context, const v1::CacheModelRequest* request,
                        v1::CacheModelResponse* response) override;
  grpc::Status CacheUnpin(grpc::ServerContext* context, const v1::CacheModelRequest* request,
                          v1::CacheModelResponse* response) override;
  grpc::Status CachePrefetch(grpc::ServerContext* context, const v1::CacheModelRequest* request,
                             v1::CacheModelResponse* response) override;

 private:
  // Authorises the admin and resolves request->tenant (name or id).
  Result<TenantRecord> AdminAndTenant(const grpc::ServerContext& context, const std::string& tenant) const;
  // Authorises the admin, checks the tier and resolves the model version
  // (NOT_FOUND naming what is unknown); the tenant's name in *tenant_name.
  Result<ModelRecord> CacheTarget(const grpc::ServerContext& context, const v1::CacheModelRequest& request,
                                  std::string* tenant_name) const;
  // The host tier's entry for `record` after an action, into *response.
  grpc::Status CacheReply(const ModelRecord& record, const std::string& tenant_name, bool device,
                          v1::CacheModelResponse* response) const;
  // Evict / pin / unpin / prefetch: resolves the target (CacheTarget), applies `host`
  // or `device` by the request's tier, logs "operator <done> <key>" and
  // replies with the entry (CacheReply).
  using HostAction = std::function<Status(const ModelRecord&, const ModelKey&)>;
  using DeviceAction = std::function<Status(const ModelKey&)>;
  grpc::Status CacheAction(const grpc::ServerContext& context, const v1::CacheModelRequest& request, const char* done,
                           const HostAction& host, const DeviceAction& device, v1::CacheModelResponse* response);

  ServiceContext* ctx_;
};

}  // namespace orrery
