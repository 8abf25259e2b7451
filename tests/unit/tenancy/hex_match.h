#pragma once

#include <string>

// "<prefix><n lowercase hex chars>" exactly (n < 0: any length). Plain code
// rather than std::regex, which trips GCC 12 false warnings under -fsanitize.
inline bool IsPrefixedHex(const std::string& s, const std::string& prefix, long n) {
  if (s.compare(0, prefix.size(), prefix) != 0) return false;
  const std::string rest = s.substr(prefix.size());
  if (n >= 0 && rest.size() != static_cast<size_t>(n)) return false;
  for (char c : rest) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}
