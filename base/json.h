// Minimal JSON output helper shared by the command-line tools.
#pragma once

#include <string>
#include <string_view>

namespace orrery {

// `s` as a JSON string literal, quotes included: quotes, backslashes and
// control characters are escaped.
std::string JsonQuote(std::string_view s);

}  // namespace orrery
