#include "api/auth.h"

#include <cctype>
#include <string_view>

#include "tenancy/api_key.h"

namespace orrery {

std::string BearerToken(const grpc::ServerContextBase& context) {
  const auto& md = context.client_metadata();
  auto it = md.find("authorization");
  if (it == md.end()) return "";
  std::string_view value(it->second.data(), it->second.size());
  constexpr std::string_view kBearer = "Bearer ";
  if (value.size() <= kBearer.size()) return "";
  // The scheme is case-insensitive (RFC 7235).
  for (size_t i = 0; i < kBearer.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(value[i])) !=
        std::tolower(static_cast<unsigned char>(kBearer[i]))) {
      return "";
    }
  }
  value.remove_prefix(kBearer.size());
  while (!value.empty() && value.back() == ' ') value.remove_suffix(1);
  return std::string(value);
}

Result<TenantRecord> AuthenticateTenant(const grpc::ServerContext& context, const Tenants& tenants) {
  return tenants.Authenticate(BearerToken(context));
}

Status AuthorizeAdmin(const grpc::ServerContext& context, const std::string& admin_token,
                      const Tenants& tenants) {
  std::string token = BearerToken(context);
  if (token.empty()) return Status::Unauthenticated("missing admin token");
  if (ConstantTimeEquals(token, admin_token)) return Status::Ok();
  if (tenants.Authenticate(token).ok()) {
    return Status::PermissionDenied("admin RPCs need the admin token, not a tenant API key");
  }
  return Status::Unauthenticated("invalid admin token");
}

}  // namespace orrery
