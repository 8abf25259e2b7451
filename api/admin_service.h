// orrery.v1.AdminService: operator RPCs, authorised by the admin token.
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

 private:
  ServiceContext* ctx_;
};

}  // namespace orrery
