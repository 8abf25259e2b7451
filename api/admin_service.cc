#include "api/admin_service.h"

#include <spdlog/spdlog.h>

#include "api/auth.h"
#include "api/grpc_status.h"
#include "tenancy/quotas.h"

namespace orrery {
namespace {

void ToInfo(const TenantRecord& t, v1::TenantInfo* info) {
  info->set_id(t.id());
  info->set_name(t.name());
  info->set_created_unix_ms(t.created_unix_ms());
  info->set_disabled(t.disabled());
  info->set_display_name(t.display_name());
  info->set_weight(EffectiveWeight(t));
  const storage::TenantQuotas q = EffectiveQuotas(t);
  v1::Quotas* out = info->mutable_quotas();
  out->set_max_models(q.max_models());
  out->set_max_total_bytes(q.max_total_bytes());
  out->set_max_model_bytes(q.max_model_bytes());
  out->set_max_inflight_requests(q.max_inflight_requests());
  out->set_requests_per_second(q.requests_per_second());
  out->set_burst_requests(q.burst_requests());
}

void ToKeyInfo(const ApiKeyRecord& k, v1::KeyInfo* info) {
  info->set_key_id(k.key_id());
  info->set_prefix(k.prefix());
  info->set_created_unix_ms(k.created_unix_ms());
}

storage::TenantQuotas FromApi(const v1::Quotas& q) {
  storage::TenantQuotas out;
  out.set_max_models(q.max_models());
  out.set_max_total_bytes(q.max_total_bytes());
  out.set_max_model_bytes(q.max_model_bytes());
  out.set_max_inflight_requests(q.max_inflight_requests());
  out.set_requests_per_second(q.requests_per_second());
  out.set_burst_requests(q.burst_requests());
  return out;
}

}  // namespace

Result<TenantRecord> AdminServiceImpl::AdminAndTenant(const grpc::ServerContext& context,
                                                      const std::string& tenant) const {
  ORRERY_RETURN_IF_ERROR(AuthorizeAdmin(context, ctx_->admin_token, *ctx_->tenants));
  return ctx_->tenants->Find(tenant);
}

grpc::Status AdminServiceImpl::CreateTenant(grpc::ServerContext* context, const v1::CreateTenantRequest* request,
                                            v1::CreateTenantResponse* response) {
  Status auth = AuthorizeAdmin(*context, ctx_->admin_token, *ctx_->tenants);
  if (!auth.ok()) return ToGrpcStatus(auth);
  Tenants::Settings settings;
  if (!request->display_name().empty()) settings.display_name = request->display_name();
  if (request->weight() != 0) settings.weight = request->weight();
  settings.quotas = FromApi(request->quotas());
  Result<Tenants::Created> created = ctx_->tenants->Create(request->name(), settings);
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

grpc::Status AdminServiceImpl::GetTenant(grpc::ServerContext* context, const v1::GetTenantRequest* request,
                                         v1::GetTenantResponse* response) {
  Result<TenantRecord> tenant = AdminAndTenant(*context, request->tenant());
  if (!tenant.ok()) return ToGrpcStatus(tenant.status());
  Result<Catalog::Usage> usage = ctx_->catalog->TenantUsage(tenant->id());
  if (!usage.ok()) return ToGrpcStatus(usage.status());
  Result<std::vector<ApiKeyRecord>> keys = ctx_->tenants->ListKeys(tenant->id());
  if (!keys.ok()) return ToGrpcStatus(keys.status());
  ToInfo(*tenant, response->mutable_tenant());
  response->set_models(usage->models);
  response->set_versions(usage->versions);
  response->set_stored_bytes(usage->total_bytes);
  response->set_keys(static_cast<uint32_t>(keys->size()));
  return grpc::Status::OK;
}

grpc::Status AdminServiceImpl::UpdateTenant(grpc::ServerContext* context, const v1::UpdateTenantRequest* request,
                                            v1::UpdateTenantResponse* response) {
  Result<TenantRecord> tenant = AdminAndTenant(*context, request->tenant());
  if (!tenant.ok()) return ToGrpcStatus(tenant.status());
  Tenants::Settings settings;
  if (request->has_display_name()) settings.display_name = request->display_name();
  if (request->weight() != 0) settings.weight = request->weight();
  settings.quotas = FromApi(request->quotas());
  Result<TenantRecord> updated = ctx_->tenants->Update(tenant->id(), settings);
  if (!updated.ok()) return ToGrpcStatus(updated.status());
  ToInfo(*updated, response->mutable_tenant());
  spdlog::info("updated tenant '{}' ({})", updated->name(), updated->id());
  return grpc::Status::OK;
}

grpc::Status AdminServiceImpl::SetTenantDisabled(grpc::ServerContext* context,
                                                 const v1::SetTenantDisabledRequest* request,
                                                 v1::SetTenantDisabledResponse* response) {
  Result<TenantRecord> tenant = AdminAndTenant(*context, request->tenant());
  if (!tenant.ok()) return ToGrpcStatus(tenant.status());
  if (Status s = ctx_->tenants->SetDisabled(tenant->id(), request->disabled()); !s.ok()) return ToGrpcStatus(s);
  tenant->set_disabled(request->disabled());
  ToInfo(*tenant, response->mutable_tenant());
  spdlog::info("{} tenant '{}' ({})", request->disabled() ? "disabled" : "enabled", tenant->name(), tenant->id());
  return grpc::Status::OK;
}

grpc::Status AdminServiceImpl::DeleteTenant(grpc::ServerContext* context, const v1::DeleteTenantRequest* request,
                                            v1::DeleteTenantResponse*) {
  Result<TenantRecord> tenant = AdminAndTenant(*context, request->tenant());
  if (!tenant.ok()) return ToGrpcStatus(tenant.status());
  Result<std::vector<ModelRecord>> models = ctx_->catalog->ListModels(tenant->id());
  if (!models.ok()) return ToGrpcStatus(models.status());
  if (Status s = ctx_->tenants->Delete(tenant->id()); !s.ok()) return ToGrpcStatus(s);
  for (const ModelRecord& m : *models) ctx_->cache->Erase(m.tenant_id(), m.name());
  ctx_->cache->loader().RemoveSegments(*models);
  if (ctx_->host != nullptr) {
    for (const ModelRecord& m : *models) ctx_->host->Unregister(m);
  }
  spdlog::info("deleted tenant '{}' ({}): {} model versions removed, tombstone kept", tenant->name(), tenant->id(),
               models->size());
  return grpc::Status::OK;
}

grpc::Status AdminServiceImpl::CreateKey(grpc::ServerContext* context, const v1::CreateKeyRequest* request,
                                         v1::CreateKeyResponse* response) {
  Result<TenantRecord> tenant = AdminAndTenant(*context, request->tenant());
  if (!tenant.ok()) return ToGrpcStatus(tenant.status());
  Result<Tenants::CreatedKey> key = ctx_->tenants->CreateKey(tenant->id());
  if (!key.ok()) return ToGrpcStatus(key.status());
  ToKeyInfo(key->key, response->mutable_key());
  response->set_api_key(key->api_key);
  spdlog::info("tenant '{}': created key {}", tenant->name(), key->key.key_id());
  return grpc::Status::OK;
}

grpc::Status AdminServiceImpl::ListKeys(grpc::ServerContext* context, const v1::ListKeysRequest* request,
                                        v1::ListKeysResponse* response) {
  Result<TenantRecord> tenant = AdminAndTenant(*context, request->tenant());
  if (!tenant.ok()) return ToGrpcStatus(tenant.status());
  Result<std::vector<ApiKeyRecord>> keys = ctx_->tenants->ListKeys(tenant->id());
  if (!keys.ok()) return ToGrpcStatus(keys.status());
  for (const ApiKeyRecord& k : *keys) ToKeyInfo(k, response->add_keys());
  return grpc::Status::OK;
}

grpc::Status AdminServiceImpl::RevokeKey(grpc::ServerContext* context, const v1::RevokeKeyRequest* request,
                                         v1::RevokeKeyResponse*) {
  Result<TenantRecord> tenant = AdminAndTenant(*context, request->tenant());
  if (!tenant.ok()) return ToGrpcStatus(tenant.status());
  if (Status s = ctx_->tenants->RevokeKey(tenant->id(), request->key_id()); !s.ok()) return ToGrpcStatus(s);
  spdlog::info("tenant '{}': revoked key {}", tenant->name(), request->key_id());
  return grpc::Status::OK;
}

}  // namespace orrery
