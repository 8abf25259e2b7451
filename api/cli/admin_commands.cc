// `orrery admin ...`: tenants and their keys (admin token).
#include <cinttypes>
#include <cstdio>
#include <iostream>

#include "api/cli/commands.h"
#include "api/cli/common.h"
#include "api/proto/orrery.grpc.pb.h"
#include "base/json.h"

namespace orrery::cli {
namespace {

void FillQuotas(const TenantFlags& f, v1::Quotas* q) {
  q->set_max_models(f.max_models);
  q->set_max_total_bytes(f.max_total_bytes);
  q->set_max_model_bytes(f.max_model_bytes);
  q->set_max_inflight_requests(f.max_inflight_requests);
  q->set_requests_per_second(f.requests_per_second);
  q->set_burst_requests(f.burst_requests);
}

void PrintTenant(const v1::TenantInfo& t) {
  const v1::Quotas& q = t.quotas();
  std::cout << "tenant                 " << t.name() << "\nid                     " << t.id()
            << "\ndisplay name           " << t.display_name() << "\nstatus                 "
            << (t.disabled() ? "disabled" : "active") << "\nweight                 " << t.weight()
            << "\nmax_models             " << q.max_models() << "\nmax_total_bytes        " << q.max_total_bytes()
            << "\nmax_model_bytes        " << q.max_model_bytes() << "\nmax_inflight_requests  "
            << q.max_inflight_requests() << "\nrequests_per_second    " << q.requests_per_second()
            << "\nburst_requests         " << q.burst_requests() << "\n";
}

std::unique_ptr<v1::AdminService::Stub> AdminStub(const GlobalOptions& g, grpc::ClientContext* ctx) {
  Authorize(ctx, g.admin_token);
  return v1::AdminService::NewStub(Connect(g));
}

}  // namespace

int AdminTenantCreate(const GlobalOptions& g, const std::string& name, const TenantFlags& flags) {
  if (!NeedAdmin(g)) return 1;
  grpc::ClientContext ctx;
  auto stub = AdminStub(g, &ctx);
  v1::CreateTenantRequest req;
  req.set_name(name);
  if (flags.display_name) req.set_display_name(*flags.display_name);
  req.set_weight(flags.weight);
  FillQuotas(flags, req.mutable_quotas());
  v1::CreateTenantResponse resp;
  grpc::Status s = stub->CreateTenant(&ctx, req, &resp);
  if (!s.ok()) return Fail(s, g);
  if (g.json) {
    std::cout << ToJson(resp) << "\n";
  } else {
    // The key alone on stdout so that $(orrery admin tenant create NAME) captures it.
    std::cerr << "created tenant '" << resp.tenant().name() << "' (" << resp.tenant().id()
              << "); its API key is shown once:\n";
    std::cout << resp.api_key() << "\n";
  }
  return 0;
}

int AdminTenantList(const GlobalOptions& g) {
  if (!NeedAdmin(g)) return 1;
  grpc::ClientContext ctx;
  auto stub = AdminStub(g, &ctx);
  v1::ListTenantsResponse resp;
  grpc::Status s = stub->ListTenants(&ctx, v1::ListTenantsRequest(), &resp);
  if (!s.ok()) return Fail(s, g);
  if (g.json) {
    std::cout << ToJson(resp) << "\n";
    return 0;
  }
  std::printf("%-20s %-24s %-8s %s\n", "ID", "NAME", "STATUS", "WEIGHT");
  for (const auto& t : resp.tenants()) {
    std::printf("%-20s %-24s %-8s %u\n", t.id().c_str(), t.name().c_str(), t.disabled() ? "disabled" : "active",
                t.weight());
  }
  return 0;
}

int AdminTenantShow(const GlobalOptions& g, const std::string& tenant) {
  if (!NeedAdmin(g)) return 1;
  grpc::ClientContext ctx;
  auto stub = AdminStub(g, &ctx);
  v1::GetTenantRequest req;
  req.set_tenant(tenant);
  v1::GetTenantResponse resp;
  grpc::Status s = stub->GetTenant(&ctx, req, &resp);
  if (!s.ok()) return Fail(s, g);
  if (g.json) {
    std::cout << ToJson(resp) << "\n";
    return 0;
  }
  PrintTenant(resp.tenant());
  std::cout << "models                 " << resp.models() << " (" << resp.versions() << " versions, "
            << resp.stored_bytes() << " bytes)\nkeys                   " << resp.keys() << "\n";
  return 0;
}

int AdminTenantUpdate(const GlobalOptions& g, const std::string& tenant, const TenantFlags& flags) {
  if (!NeedAdmin(g)) return 1;
  grpc::ClientContext ctx;
  auto stub = AdminStub(g, &ctx);
  v1::UpdateTenantRequest req;
  req.set_tenant(tenant);
  if (flags.display_name) req.set_display_name(*flags.display_name);
  req.set_weight(flags.weight);
  FillQuotas(flags, req.mutable_quotas());
  v1::UpdateTenantResponse resp;
  grpc::Status s = stub->UpdateTenant(&ctx, req, &resp);
  if (!s.ok()) return Fail(s, g);
  if (g.json) {
    std::cout << ToJson(resp) << "\n";
  } else {
    PrintTenant(resp.tenant());
  }
  return 0;
}

int AdminTenantSetDisabled(const GlobalOptions& g, const std::string& tenant, bool disabled) {
  if (!NeedAdmin(g)) return 1;
  grpc::ClientContext ctx;
  auto stub = AdminStub(g, &ctx);
  v1::SetTenantDisabledRequest req;
  req.set_tenant(tenant);
  req.set_disabled(disabled);
  v1::SetTenantDisabledResponse resp;
  grpc::Status s = stub->SetTenantDisabled(&ctx, req, &resp);
  if (!s.ok()) return Fail(s, g);
  if (g.json) {
    std::cout << ToJson(resp) << "\n";
  } else {
    std::cout << (disabled ? "disabled " : "enabled ") << resp.tenant().name() << "\n";
  }
  return 0;
}

int AdminTenantDelete(const GlobalOptions& g, const std::string& tenant) {
  if (!NeedAdmin(g)) return 1;
  grpc::ClientContext ctx;
  auto stub = AdminStub(g, &ctx);
  v1::DeleteTenantRequest req;
  req.set_tenant(tenant);
  v1::DeleteTenantResponse resp;
  grpc::Status s = stub->DeleteTenant(&ctx, req, &resp);
  if (!s.ok()) return Fail(s, g);
  std::cout << (g.json ? "{\"deleted\":true}" : "deleted tenant " + tenant + " (its models and keys)") << "\n";
  return 0;
}

int AdminKeyCreate(const GlobalOptions& g, const std::string& tenant) {
  if (!NeedAdmin(g)) return 1;
  grpc::ClientContext ctx;
  auto stub = AdminStub(g, &ctx);
  v1::CreateKeyRequest req;
  req.set_tenant(tenant);
  v1::CreateKeyResponse resp;
  grpc::Status s = stub->CreateKey(&ctx, req, &resp);
  if (!s.ok()) return Fail(s, g);
  if (g.json) {
    std::cout << ToJson(resp) << "\n";
  } else {
    std::cerr << "created key " << resp.key().key_id() << "; it is shown once:\n";
    std::cout << resp.api_key() << "\n";
  }
  return 0;
}

int AdminKeyList(const GlobalOptions& g, const std::string& tenant) {
  if (!NeedAdmin(g)) return 1;
  grpc::ClientContext ctx;
  auto stub = AdminStub(g, &ctx);
  v1::ListKeysRequest req;
  req.set_tenant(tenant);
  v1::ListKeysResponse resp;
  grpc::Status s = stub->ListKeys(&ctx, req, &resp);
  if (!s.ok()) return Fail(s, g);
  if (g.json) {
    std::cout << ToJson(resp) << "\n";
    return 0;
  }
  std::printf("%-20s %-14s %s\n", "KEY ID", "PREFIX", "CREATED (unix ms)");
  for (const auto& k : resp.keys()) {
    std::printf("%-20s %-14s %" PRId64 "\n", k.key_id().c_str(), k.prefix().c_str(), k.created_unix_ms());
  }
  return 0;
}

int AdminKeyRevoke(const GlobalOptions& g, const std::string& tenant, const std::string& key_id) {
  if (!NeedAdmin(g)) return 1;
  grpc::ClientContext ctx;
  auto stub = AdminStub(g, &ctx);
  v1::RevokeKeyRequest req;
  req.set_tenant(tenant);
  req.set_key_id(key_id);
  v1::RevokeKeyResponse resp;
  grpc::Status s = stub->RevokeKey(&ctx, req, &resp);
  if (!s.ok()) return Fail(s, g);
  std::cout << (g.json ? "{\"revoked\":" + JsonQuote(key_id) + "}" : "revoked " + key_id) << "\n";
  return 0;
}

}  // namespace orrery::cli
