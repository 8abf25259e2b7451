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

 private:
  // Authorises the admin and resolves request->tenant (name or id).
  Result<TenantRecord> AdminAndTenant(const grpc::ServerContext& context, const std::string& tenant) const;

  ServiceContext* ctx_;
};

}  // namespace orrery
