#include "tenancy/tenants.h"

#include <chrono>

#include "tenancy/api_key.h"
#include "tenancy/quotas.h"

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

constexpr size_t kMaxDisplayNameLength = 256;
constexpr uint32_t kMaxWeight = 1000;

Status ValidateSettings(const Tenants::Settings& settings) {
  if (settings.display_name) {
    const std::string& d = *settings.display_name;
    if (d.size() > kMaxDisplayNameLength) {
      return Status::InvalidArgument("display name is longer than " + std::to_string(kMaxDisplayNameLength) +
                                     " bytes");
    }
    for (char c : d) {
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
        return Status::InvalidArgument("display name must not contain control characters");
      }
    }
  }
  if (settings.weight && (*settings.weight == 0 || *settings.weight > kMaxWeight)) {
    return Status::InvalidArgument("weight " + std::to_string(*settings.weight) + " is outside 1.." +
                                   std::to_string(kMaxWeight));
  }
  return Status::Ok();
}

void ApplySettings(const Tenants::Settings& settings, TenantRecord* t) {
  if (settings.display_name) t->set_display_name(*settings.display_name);
  if (settings.weight) t->set_weight(*settings.weight);
  MergeQuotas(settings.quotas, t->mutable_quotas());
}

ApiKeyRecord NewKeyRecord(const std::string& tenant_id, const std::string& api_key) {
  ApiKeyRecord key;
  key.set_key_id("k_" + RandomHex(16));
  key.set_tenant_id(tenant_id);
  key.set_prefix(api_key.substr(0, kKeyPrefixLength));
  key.set_created_unix_ms(NowUnixMs());
  return key;
}

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
  if (label == "tenant" || label == "model") label += " name";
  return Status::InvalidArgument(label + " '" + shown +
                                 "': must be 1-128 characters of [A-Za-z0-9._-], not starting with '.'");
}

Result<Tenants::Created> Tenants::Create(std::string_view name, const Settings& settings) {
  ORRERY_RETURN_IF_ERROR(ValidateName("tenant", name));
  ORRERY_RETURN_IF_ERROR(ValidateSettings(settings));
  Created out;
  out.tenant.set_id("t_" + RandomHex(16));
  out.tenant.set_name(std::string(name));
  out.tenant.set_created_unix_ms(NowUnixMs());
  out.tenant.set_disabled(false);
  ApplySettings(settings, &out.tenant);
  out.api_key = GenerateApiKey();

  ApiKeyRecord key = NewKeyRecord(out.tenant.id(), out.api_key);
  key.set_created_unix_ms(out.tenant.created_unix_ms());
  ORRERY_RETURN_IF_ERROR(catalog_->CreateTenant(out.tenant, Sha256(out.api_key), key));
  return out;
}

Result<std::vector<TenantRecord>> Tenants::List() const { return catalog_->ListTenants(); }

Result<TenantRecord> Tenants::Find(std::string_view name_or_id) const {
  if (name_or_id.empty()) return Status::InvalidArgument("tenant name or id must not be empty");
  Result<TenantRecord> by_name = catalog_->GetTenantByName(name_or_id);
  if (by_name.ok() || by_name.status().code() != StatusCode::kNotFound) return by_name;
  if (name_or_id.find('\0') == std::string_view::npos) {
    Result<TenantRecord> by_id = catalog_->GetTenant(name_or_id);
    if (by_id.ok() || by_id.status().code() != StatusCode::kNotFound) return by_id;
  }
  return Status::NotFound("tenant '" + std::string(name_or_id) + "' not found");
}

Result<TenantRecord> Tenants::Update(std::string_view tenant_id, const Settings& settings) {
  ORRERY_RETURN_IF_ERROR(ValidateSettings(settings));
  ORRERY_ASSIGN_OR_RETURN(TenantRecord t, catalog_->GetTenant(tenant_id));
  ApplySettings(settings, &t);
  ORRERY_RETURN_IF_ERROR(catalog_->UpdateTenant(t));
  return catalog_->GetTenant(tenant_id);
}

Status Tenants::SetDisabled(std::string_view tenant_id, bool disabled) {
  return catalog_->SetTenantDisabled(tenant_id, disabled);
}

Status Tenants::Delete(std::string_view tenant_id) { return catalog_->DeleteTenant(tenant_id); }

Result<Tenants::CreatedKey> Tenants::CreateKey(std::string_view tenant_id) {
  CreatedKey out;
  out.api_key = GenerateApiKey();
  out.key = NewKeyRecord(std::string(tenant_id), out.api_key);
  ORRERY_RETURN_IF_ERROR(catalog_->AddKey(Sha256(out.api_key), out.key));
  return out;
}

Result<std::vector<ApiKeyRecord>> Tenants::ListKeys(std::string_view tenant_id) const {
  return catalog_->ListKeys(tenant_id);
}

Status Tenants::RevokeKey(std::string_view tenant_id, std::string_view key_id) {
  return catalog_->RevokeKey(tenant_id, key_id);
}

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
