// Tenants and their API keys, on top of the catalog.
#pragma once

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
  // INVALID_ARGUMENT for a bad name, ALREADY_EXISTS for a taken one.
  Result<Created> Create(std::string_view name);
  Result<std::vector<TenantRecord>> List() const;
  // UNAUTHENTICATED for an unknown key or a disabled tenant (same message, so
  // a caller cannot tell which).
  Result<TenantRecord> Authenticate(std::string_view api_key) const;

 private:
  Catalog* catalog_;
};

}  // namespace orrery
