// Small helpers shared by kernels' inference and compute functions.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>

#include "base/status.h"
#include "ops/registry.h"
#include "ops/tensor.h"

namespace orrery::ops {

// Maps axis in [-rank, rank + extra) to [0, rank + extra); INVALID_ARGUMENT otherwise.
// extra = 1 for attributes such as Flatten's axis that may equal rank.
inline Result<int64_t> NormalizeAxis(int64_t axis, int64_t rank, int64_t extra = 0) {
  if (axis < -rank || axis >= rank + extra) {
    return Status::InvalidArgument("axis " + std::to_string(axis) + " is out of range for rank " +
                                   std::to_string(rank));
  }
  return axis < 0 ? axis + rank : axis;
}

// INVALID_ARGUMENT unless `t` is present and has one of `allowed` dtypes.
inline Status RequireDType(const TensorType& t, const char* what,
                           std::initializer_list<DType> allowed) {
  for (DType d : allowed) {
    if (t.dtype == d) return Status::Ok();
  }
  std::string names;
  for (DType d : allowed) {
    if (!names.empty()) names += " or ";
    names += DTypeName(d);
  }
  return Status::InvalidArgument(std::string(what) + " must be " + names + ", got " +
                                 std::string(DTypeName(t.dtype)));
}

// Product of shape[begin, end); dims are already validated (>= 0, bounded).
inline int64_t DimProduct(const Shape& shape, size_t begin, size_t end) {
  int64_t n = 1;
  for (size_t i = begin; i < end && i < shape.size(); ++i) n *= shape[i];
  return n;
}

}  // namespace orrery::ops
