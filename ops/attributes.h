// Node attributes as plain C++ values, so kernels never see onnx protobufs.
// The runtime converts onnx::AttributeProto into an Attributes at import.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "base/status.h"
#include "ops/tensor.h"

namespace orrery::ops {

using AttrValue = std::variant<int64_t, float, std::string, Tensor, std::vector<int64_t>,
                               std::vector<float>, std::vector<std::string>>;

class Attributes {
 public:
  void Set(std::string name, AttrValue value) { values_[std::move(name)] = std::move(value); }
  bool Has(std::string_view name) const { return values_.find(name) != values_.end(); }
  size_t size() const { return values_.size(); }
  const std::map<std::string, AttrValue, std::less<>>& values() const { return values_; }

  // Typed getters: the default when absent, INVALID_ARGUMENT naming the
  // attribute when present with another type.
  Result<int64_t> GetInt(std::string_view name, int64_t default_value) const;
  Result<float> GetFloat(std::string_view name, float default_value) const;
  Result<std::string> GetString(std::string_view name, std::string default_value) const;
  Result<std::vector<int64_t>> GetInts(std::string_view name) const;  // empty when absent
  Result<std::vector<float>> GetFloats(std::string_view name) const;  // empty when absent
  // NOT_FOUND when absent.
  Result<Tensor> GetTensor(std::string_view name) const;

 private:
  std::map<std::string, AttrValue, std::less<>> values_;
};

}  // namespace orrery::ops
