#include "ops/attributes.h"

namespace orrery::ops {
namespace {

template <typename T>
Result<T> Get(const std::map<std::string, AttrValue, std::less<>>& values, std::string_view name,
              const char* type_name, T default_value) {
  auto it = values.find(name);
  if (it == values.end()) return default_value;
  if (const T* v = std::get_if<T>(&it->second)) return *v;
  return Status::InvalidArgument("attribute '" + std::string(name) + "' must be of type " +
                                 type_name);
}

}  // namespace

Result<int64_t> Attributes::GetInt(std::string_view name, int64_t default_value) const {
  return Get<int64_t>(values_, name, "int", default_value);
}
Result<float> Attributes::GetFloat(std::string_view name, float default_value) const {
  return Get<float>(values_, name, "float", default_value);
}
Result<std::string> Attributes::GetString(std::string_view name, std::string default_value) const {
  return Get<std::string>(values_, name, "string", std::move(default_value));
}
Result<std::vector<int64_t>> Attributes::GetInts(std::string_view name) const {
  return Get<std::vector<int64_t>>(values_, name, "ints", {});
}
Result<std::vector<float>> Attributes::GetFloats(std::string_view name) const {
  return Get<std::vector<float>>(values_, name, "floats", {});
}
Result<Tensor> Attributes::GetTensor(std::string_view name) const {
  auto it = values_.find(name);
  if (it == values_.end()) {
    return Status::NotFound("attribute '" + std::string(name) + "' is missing");
  }
  if (const Tensor* t = std::get_if<Tensor>(&it->second)) return *t;
  return Status::InvalidArgument("attribute '" + std::string(name) + "' must be a tensor");
}

}  // namespace orrery::ops
