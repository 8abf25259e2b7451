// Caller identity from gRPC metadata: `authorization: Bearer <secret>`.
#pragma once

#include <string>

#include <grpcpp/server_context.h>

#include "base/status.h"
#include "storage/catalog.h"
#include "tenancy/tenants.h"

namespace orrery {

// The bearer secret, or "" when the header is missing or malformed.
std::string BearerToken(const grpc::ServerContextBase& context);

// Resolves the caller's tenant; UNAUTHENTICATED if the key is missing,
// unknown or belongs to a disabled tenant.
Result<TenantRecord> AuthenticateTenant(const grpc::ServerContext& context, const Tenants& tenants);

// OK for the admin token; PERMISSION_DENIED for a valid tenant key;
// UNAUTHENTICATED otherwise.
Status AuthorizeAdmin(const grpc::ServerContext& context, const std::string& admin_token,
                      const Tenants& tenants);

}  // namespace orrery
