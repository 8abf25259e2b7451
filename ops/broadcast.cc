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

namespace {

// Input `in`'s stride along output dim i (0 where it broadcasts).
int64_t StrideAt(const Shape& in, const Shape& out, size_t i) {
  const size_t off = out.size() - in.size();
  if (i < off || in[i - off] == 1) return 0;
  int64_t s = 1;
  for (size_t j = i - off + 1; j < in.size(); ++j) s *= in[j];
  return s;
}

}  // namespace

BinaryLoop MakeBinaryLoop(const Shape& a, const Shape& b, const Shape& out) {
  BinaryLoop loop;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == 1) continue;
    const int64_t sa = StrideAt(a, out, i), sb = StrideAt(b, out, i);
    if (!loop.dims.empty()) {
      // Merge with the previous dim when the merged index stays linear for both.
      const int64_t d = out[i];
      if (loop.a_strides.back() == sa * d && loop.b_strides.back() == sb * d) {
        loop.dims.back() *= d;
        loop.a_strides.back() = sa;
        loop.b_strides.back() = sb;
        continue;
      }
    }
    loop.dims.push_back(out[i]);
    loop.a_strides.push_back(sa);
    loop.b_strides.push_back(sb);
  }
  return loop;
}

MultiLoop MakeMultiLoop(std::span<const Shape* const> inputs, const Shape& out) {
  MultiLoop loop;
  const size_t k = inputs.size();
  loop.num_inputs = k;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == 1) continue;
    const int64_t d = out[i];
    bool merge = !loop.dims.empty();
    const size_t last = loop.dims.size() - 1;
    for (size_t j = 0; merge && j < k; ++j) {
      merge = loop.strides[last * k + j] == StrideAt(*inputs[j], out, i) * d;
    }
    if (merge) {
      loop.dims.back() *= d;
      for (size_t j = 0; j < k; ++j) loop.strides[last * k + j] = StrideAt(*inputs[j], out, i);
      continue;
    }
    loop.dims.push_back(d);
    for (size_t j = 0; j < k; ++j) loop.strides.push_back(StrideAt(*inputs[j], out, i));
  }
  return loop;
}

}  // namespace orrery::ops
