#pragma once

namespace orrery {
inline constexpr const char kOrreryVersion[] = "0.1.0";
}  // namespace orrery
