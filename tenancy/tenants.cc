#include "tenancy/tenants.h"

#include <chrono>

#include "tenancy/api_key.h"

namespace orrery {
namespace {

constexpr size_t kMaxNameLength = 128;
constexpr size_t kKeyPrefixLength = 12;  // "ork_" + 8 hex, for display

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
         c == '-';
}

int64_t NowUnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

Status InvalidApiKey() { return Status::Unauthenticated("invalid API key"); }

}  // namespace

Status ValidateName(std::string_view what, std::string_view name) {
  bool ok = !name.empty() && name.size() <= kMaxNameLength && name.front() != '.';
  for (char c : name) ok = ok && IsNameChar(c);
  if (ok) return Status::Ok();
  std::string shown(name.substr(0, kMaxNameLength + 1));
  for (char& c : shown) {
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) c = '?';
  }
  if (name.size() > shown.size()) shown += "...";
  // Callers pass "tenant" or "model" (or already "tenant name").
  std::string label(what);
  if (!label.ends_with("name")) label += " name";
  return Status::InvalidArgument(label + " '" + shown +
                                 "': must be 1-128 characters of [A-Za-z0-9._-], not starting with '.'");
}

Result<Tenants::Created> Tenants::Create(std::string_view name) {
  ORRERY_RETURN_IF_ERROR(ValidateName("tenant", name));
  Created out;
  out.tenant.set_id("t_" + RandomHex(16));
  out.tenant.set_name(std::string(name));
  out.tenant.set_created_unix_ms(NowUnixMs());
  out.tenant.set_disabled(false);
  out.api_key = GenerateApiKey();

  ApiKeyRecord key;
  key.set_key_id("k_" + RandomHex(16));
  key.set_tenant_id(out.tenant.id());
  key.set_prefix(out.api_key.substr(0, kKeyPrefixLength));
  key.set_created_unix_ms(out.tenant.created_unix_ms());
  ORRERY_RETURN_IF_ERROR(catalog_->CreateTenant(out.tenant, Sha256(out.api_key), key));
  return out;
}

Result<std::vector<TenantRecord>> Tenants::List() const { return catalog_->ListTenants(); }

Result<TenantRecord> Tenants::Authenticate(std::string_view api_key) const {
  if (api_key.empty()) return Status::Unauthenticated("missing API key");
  Result<ApiKeyRecord> key = catalog_->GetKey(Sha256(api_key));
  if (!key.ok()) {
    if (key.status().code() == StatusCode::kNotFound) return InvalidApiKey();
    return key.status();
  }
  Result<TenantRecord> tenant = catalog_->GetTenant(key->tenant_id());
  if (!tenant.ok()) {
    if (tenant.status().code() == StatusCode::kNotFound) return InvalidApiKey();
    return tenant.status();
  }
  if (tenant->disabled()) return InvalidApiKey();
  return tenant;
}

}  // namespace orrery
