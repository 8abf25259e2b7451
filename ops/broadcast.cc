#include "ops/broadcast.h"

#include <algorithm>
#include <string>

namespace orrery::ops {

Result<Shape> BroadcastShapes(const Shape& a, const Shape& b) {
  const size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    const int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    const int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da == db || db == 1) {
      out[i] = da;
    } else if (da == 1) {
      out[i] = db;
    } else {
      return Status::InvalidArgument("shapes " + ShapeToString(a) + " and " + ShapeToString(b) +
                                     " are not broadcastable");
    }
  }
  return out;
}

Result<Shape> BroadcastShapes(std::span<const Shape> shapes) {
  Shape out;
  for (const Shape& s : shapes) {
    ORRERY_ASSIGN_OR_RETURN(out, BroadcastShapes(out, s));
  }
  return out;
}

bool IsUnidirectionalBroadcastable(const Shape& from, const Shape& to) {
  if (from.size() > to.size()) return false;
  const size_t off = to.size() - from.size();
  for (size_t i = 0; i < from.size(); ++i) {
    if (from[i] != 1 && from[i] != to[i + off]) return false;
  }
  return true;
}

std::vector<int64_t> BroadcastStrides(const Shape& in, const Shape& out) {
  std::vector<int64_t> strides(out.size(), 0);
  const size_t off = out.size() - in.size();
  int64_t s = 1;
  for (size_t i = in.size(); i-- > 0;) {
    strides[i + off] = in[i] == 1 ? 0 : s;
    s *= in[i];
  }
  return strides;
}

BinaryLoop MakeBinaryLoop(const Shape& a, const Shape& b, const Shape& out) {
  const std::vector<int64_t> sa = BroadcastStrides(a, out);
  const std::vector<int64_t> sb = BroadcastStrides(b, out);
  BinaryLoop loop;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == 1) continue;
    if (!loop.dims.empty()) {
      // Merge with the previous dim when the merged index stays linear for both.
      const int64_t d = out[i];
      if (loop.a_strides.back() == sa[i] * d && loop.b_strides.back() == sb[i] * d) {
        loop.dims.back() *= d;
        loop.a_strides.back() = sa[i];
        loop.b_strides.back() = sb[i];
        continue;
      }
    }
    loop.dims.push_back(out[i]);
    loop.a_strides.push_back(sa[i]);
    loop.b_strides.push_back(sb[i]);
  }
  return loop;
}

MultiLoop MakeMultiLoop(std::span<const Shape> inputs, const Shape& out) {
  std::vector<std::vector<int64_t>> in_strides;
  in_strides.reserve(inputs.size());
  for (const Shape& in : inputs) in_strides.push_back(BroadcastStrides(in, out));
  MultiLoop loop;
  loop.strides.resize(inputs.size());
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == 1) continue;
    const int64_t d = out[i];
    bool merge = !loop.dims.empty();
    for (size_t k = 0; merge && k < inputs.size(); ++k) {
      merge = loop.strides[k].back() == in_strides[k][i] * d;
    }
    if (merge) {
      loop.dims.back() *= d;
      for (size_t k = 0; k < inputs.size(); ++k) loop.strides[k].back() = in_strides[k][i];
      continue;
    }
    loop.dims.push_back(d);
    for (size_t k = 0; k < inputs.size(); ++k) loop.strides[k].push_back(in_strides[k][i]);
  }
  return loop;
}

}  // namespace orrery::ops
