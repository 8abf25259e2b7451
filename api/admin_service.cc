#include "api/admin_service.h"

#include <spdlog/spdlog.h>

#include "api/auth.h"
#include "api/grpc_status.h"

namespace orrery {
namespace {

void ToInfo(const TenantRecord& t, v1::TenantInfo* info) {
  info->set_id(t.id());
  info->set_name(t.name());
  info->set_created_unix_ms(t.created_unix_ms());
  info->set_disabled(t.disabled());
}

}  // namespace

grpc::Status AdminServiceImpl::CreateTenant(grpc::ServerContext* context, const v1::CreateTenantRequest* request,
                                            v1::CreateTenantResponse* response) {
  Status auth = AuthorizeAdmin(*context, ctx_->admin_token, *ctx_->tenants);
  if (!auth.ok()) return ToGrpcStatus(auth);
  Result<Tenants::Created> created = ctx_->tenants->Create(request->name());
  if (!created.ok()) return ToGrpcStatus(created.status());
  ToInfo(created->tenant, response->mutable_tenant());
  response->set_api_key(created->api_key);
  spdlog::info("created tenant '{}' ({})", created->tenant.name(), created->tenant.id());
  return grpc::Status::OK;
}

grpc::Status AdminServiceImpl::ListTenants(grpc::ServerContext* context, const v1::ListTenantsRequest*,
                                           v1::ListTenantsResponse* response) {
  Status auth = AuthorizeAdmin(*context, ctx_->admin_token, *ctx_->tenants);
  if (!auth.ok()) return ToGrpcStatus(auth);
  Result<std::vector<TenantRecord>> tenants = ctx_->tenants->List();
  if (!tenants.ok()) return ToGrpcStatus(tenants.status());
  for (const TenantRecord& t : *tenants) ToInfo(t, response->add_tenants());
  return grpc::Status::OK;
}

}  // namespace orrery
