#include "scheduler/batching.h"

#include <cstring>
#include <numeric>

namespace orrery {

bool BatchDimIsDynamic(const ModelSignature& signature) {
  if (signature.inputs.empty()) return false;
  for (const auto* specs : {&signature.inputs, &signature.outputs}) {
    for (const TensorSpec& t : *specs) {
      if (!t.rank_known || t.shape.empty() || t.shape[0] >= 0) return false;
    }
  }
  return true;
}

int64_t BatchRows(const std::vector<NamedTensor>& inputs) {
  int64_t rows = -1;
  for (const NamedTensor& in : inputs) {
    const Shape& s = in.tensor.shape();
    if (s.empty() || DTypeSize(in.tensor.dtype()) == 0) return 0;
    if (rows >= 0 && s[0] != rows) return 0;
    rows = s[0];
  }
  return rows > 0 ? rows : 0;
}

bool SameShapeBesidesRows(const std::vector<NamedTensor>& a, const std::vector<NamedTensor>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    const Tensor& x = a[i].tensor;
    const Tensor& y = b[i].tensor;
    if (a[i].name != b[i].name || x.dtype() != y.dtype() || x.shape().size() != y.shape().size() ||
        x.shape().empty()) {
      return false;
    }
    if (!std::equal(x.shape().begin() + 1, x.shape().end(), y.shape().begin() + 1)) return false;
  }
  return true;
}

Result<std::vector<NamedTensor>> ConcatRows(const std::vector<const std::vector<NamedTensor>*>& parts) {
  if (parts.empty()) return Status::InvalidArgument("nothing to batch");
  const std::vector<NamedTensor>& first = *parts[0];
  std::vector<NamedTensor> out;
  out.reserve(first.size());
  for (size_t i = 0; i < first.size(); ++i) {
    Shape shape = first[i].tensor.shape();
    shape[0] = 0;
    for (const auto* p : parts) shape[0] += (*p)[i].tensor.shape()[0];
    ORRERY_ASSIGN_OR_RETURN(Tensor t, Tensor::Allocate(first[i].tensor.dtype(), std::move(shape)));
    char* dst = static_cast<char*>(t.raw_data());
    for (const auto* p : parts) {
      const std::string_view bytes = (*p)[i].tensor.bytes();
      if (!bytes.empty()) std::memcpy(dst, bytes.data(), bytes.size());
      dst += bytes.size();
    }
    out.push_back({first[i].name, std::move(t)});
  }
  return out;
}

Result<std::vector<std::vector<NamedTensor>>> SplitRows(const std::vector<NamedTensor>& outputs,
                                                        const std::vector<int64_t>& rows) {
  const int64_t total = std::accumulate(rows.begin(), rows.end(), int64_t{0});
  std::vector<std::vector<NamedTensor>> out(rows.size());
  for (const NamedTensor& o : outputs) {
    const Shape& shape = o.tensor.shape();
    if (shape.empty() || shape[0] != total || DTypeSize(o.tensor.dtype()) == 0) {
      return Status::Internal("batched output '" + o.name + "' has shape " + ShapeToString(shape) +
                              ", not " + std::to_string(total) + " rows");
    }
    const size_t row_bytes = total > 0 ? o.tensor.byte_size() / static_cast<size_t>(total) : 0;
    const char* src = static_cast<const char*>(o.tensor.raw_data());
    for (size_t i = 0; i < rows.size(); ++i) {
      Shape part = shape;
      part[0] = rows[i];
      ORRERY_ASSIGN_OR_RETURN(Tensor t, Tensor::Allocate(o.tensor.dtype(), std::move(part)));
      const size_t n = row_bytes * static_cast<size_t>(rows[i]);
      if (n > 0) std::memcpy(t.raw_data(), src, n);
      src += n;
      out[i].push_back({o.name, std::move(t)});
    }
  }
  return out;
}

}  // namespace orrery
