#include "ops/cpu/packed_state.h"

#include <cstring>
#include <string>

namespace orrery::ops::cpu {
namespace {

void PutU64(std::vector<std::byte>* out, uint64_t v) {
  std::byte b[8];
  for (int i = 0; i < 8; ++i) b[i] = static_cast<std::byte>((v >> (8 * i)) & 0xff);
  out->insert(out->end(), b, b + 8);
}

uint64_t GetU64(const std::byte* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

}  // namespace

Result<std::vector<std::byte>> SerializePackedOperand(const PreparedKernel& cached) {
  const auto* op = dynamic_cast<const PackedOperand*>(&cached);
  if (op == nullptr) return Status::InvalidArgument("node cache entry is not a packed operand");
  return op->matrix.Serialize();
}

Result<std::shared_ptr<const PreparedKernel>> DeserializePackedOperand(
    uint32_t key, std::span<const std::byte> bytes) {
  return DeserializePackedOperandBorrowed(key, bytes, nullptr);
}

Result<std::shared_ptr<const PreparedKernel>> DeserializePackedOperandBorrowed(
    uint32_t, std::span<const std::byte> bytes, std::shared_ptr<const void> owner) {
  ORRERY_ASSIGN_OR_RETURN(PackedMatrix m, PackedMatrix::Deserialize(bytes, std::move(owner)));
  return std::shared_ptr<const PreparedKernel>(std::make_shared<PackedOperand>(std::move(m)));
}

// Layout: u64 group count, then per group u64 byte count and the matrix's
// serialised bytes.
Result<std::vector<std::byte>> SerializePackedGroups(const PreparedKernel& cached) {
  const auto* pg = dynamic_cast<const PackedGroups*>(&cached);
  if (pg == nullptr) return Status::InvalidArgument("node cache entry is not packed groups");
  std::vector<std::byte> out;
  PutU64(&out, pg->groups.size());
  for (const PackedMatrix& m : pg->groups) {
    const std::vector<std::byte> bytes = m.Serialize();
    PutU64(&out, bytes.size());
    out.insert(out.end(), bytes.begin(), bytes.end());
  }
  return out;
}

Result<std::shared_ptr<const PreparedKernel>> DeserializePackedGroups(
    uint32_t key, std::span<const std::byte> bytes) {
  return DeserializePackedGroupsBorrowed(key, bytes, nullptr);
}

DeserializeBorrowedFn BorrowingDeserializer(DeserializeCachedFn fn) {
  if (fn == &DeserializePackedOperand) return &DeserializePackedOperandBorrowed;
  if (fn == &DeserializePackedGroups) return &DeserializePackedGroupsBorrowed;
  return nullptr;
}

Result<std::shared_ptr<const PreparedKernel>> DeserializePackedGroupsBorrowed(
    uint32_t, std::span<const std::byte> bytes, std::shared_ptr<const void> owner) {
  if (bytes.size() < 8) return Status::InvalidArgument("packed groups: truncated");
  const uint64_t count = GetU64(bytes.data());
  size_t pos = 8;
  // Each group takes at least its 8-byte length, which bounds a hostile count.
  if (count > (bytes.size() - pos) / 8) {
    return Status::InvalidArgument("packed groups: group count " + std::to_string(count) +
                                   " does not fit " + std::to_string(bytes.size()) + " bytes");
  }
  auto pg = std::make_shared<PackedGroups>();
  pg->groups.reserve(count);
  for (uint64_t g = 0; g < count; ++g) {
    if (bytes.size() - pos < 8) return Status::InvalidArgument("packed groups: truncated");
    const uint64_t n = GetU64(bytes.data() + pos);
    pos += 8;
    if (n > bytes.size() - pos) return Status::InvalidArgument("packed groups: truncated group");
    ORRERY_ASSIGN_OR_RETURN(PackedMatrix m, PackedMatrix::Deserialize(bytes.subspan(pos, n), owner));
    pg->groups.push_back(std::move(m));
    pos += n;
  }
  if (pos != bytes.size()) return Status::InvalidArgument("packed groups: trailing bytes");
  return std::shared_ptr<const PreparedKernel>(std::move(pg));
}

Status PackedValuesMissing(std::string_view op, std::string_view operand) {
  return Status::FailedPrecondition(std::string(op) + ": the values of constant " + std::string(operand) +
                                    " are not in memory (the model image keeps only their packed form) and "
                                    "no packed form fits this call; recompile the model from its ONNX");
}

}  // namespace orrery::ops::cpu
