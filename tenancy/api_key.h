// API keys and the admin token: generation, digests, constant-time checks.
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"

namespace orrery {

// "ork_" followed by 64 hex chars: 256 bits from the OS CSPRNG.
std::string GenerateApiKey();
// Raw 32-byte SHA-256 digest (what the catalog stores).
std::string Sha256(std::string_view data);
std::string Sha256Hex(std::string_view data);
// Compares without an early exit, so timing does not reveal a common prefix.
bool ConstantTimeEquals(std::string_view a, std::string_view b);
// Random lowercase hex string of `n` chars (ids such as "t_" + 16 hex).
std::string RandomHex(size_t n);

// Returns the admin token: $ORRERY_ADMIN_TOKEN if set and non-empty, else the
// contents of <data_dir>/admin.token, creating it (mode 0600) on first start.
// `created_path` receives the file path when the file is used.
Result<std::string> LoadOrCreateAdminToken(const std::string& data_dir, std::string* created_path);

}  // namespace orrery
