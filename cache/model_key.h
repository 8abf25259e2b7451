// The identity of one cached model version: (tenant id, model name, version),
// the same triple the catalog keys models by.
#pragma once

#include <compare>
#include <cstdint>
#include <string>

namespace orrery {

struct ModelKey {
  std::string tenant;
  std::string model;
  uint64_t version = 0;

  auto operator<=>(const ModelKey&) const = default;
  bool operator==(const ModelKey&) const = default;

  // "tenant/model@version", for error messages and logs.
  std::string ToString() const { return tenant + "/" + model + "@" + std::to_string(version); }
};

}  // namespace orrery
