// Tenants and their API keys, on top of the catalog.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "storage/catalog.h"

namespace orrery {

// Tenant and model names: 1-128 chars of [A-Za-z0-9._-], not starting with '.'
// `what` is "tenant" or "model"; the message reads "<what> name '<name>': must be ...".
Status ValidateName(std::string_view what, std::string_view name);

class Tenants {
 public:
  explicit Tenants(Catalog* catalog) : catalog_(catalog) {}

  struct Created {
    TenantRecord tenant;
    std::string api_key;  // plaintext, returned once
  };
  // Optional settings of a new tenant; zero / empty means the default.
  struct Settings {
    std::optional<std::string> display_name;
    std::optional<uint32_t> weight;
    storage::TenantQuotas quotas;  // non-zero fields are set
  };
  // INVALID_ARGUMENT for a bad name or setting, ALREADY_EXISTS for a taken name.
  Result<Created> Create(std::string_view name, const Settings& settings);
  Result<Created> Create(std::string_view name) { return Create(name, Settings{}); }
  Result<std::vector<TenantRecord>> List() const;
  // By name, else by id. NOT_FOUND (deleted tenants included).
  Result<TenantRecord> Find(std::string_view name_or_id) const;
  // Applies the set fields of `settings`; returns the new record. NOT_FOUND.
  Result<TenantRecord> Update(std::string_view tenant_id, const Settings& settings);
  Status SetDisabled(std::string_view tenant_id, bool disabled);
  // Removes models and keys, keeps a tombstone (Catalog::DeleteTenant).
  Status Delete(std::string_view tenant_id);

  struct CreatedKey {
    ApiKeyRecord key;
    std::string api_key;  // plaintext, returned once
  };
  Result<CreatedKey> CreateKey(std::string_view tenant_id);
  Result<std::vector<ApiKeyRecord>> ListKeys(std::string_view tenant_id) const;
  Status RevokeKey(std::string_view tenant_id, std::string_view key_id);
  // UNAUTHENTICATED for an unknown key or a disabled tenant (same message, so
  // a caller cannot tell which).
  Result<TenantRecord> Authenticate(std::string_view api_key) const;

 private:
  Catalog* catalog_;
};

}  // namespace orrery
