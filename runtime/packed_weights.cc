#include "runtime/packed_weights.h"

#include <cstring>
#include <string>
#include <string_view>

#include "ops/cpu/packed_state.h"
#include "ops/registry.h"
#include "runtime/model_impl.h"
#include "runtime/plan.h"
#include "runtime/plan_cache.h"

namespace orrery {
namespace {

constexpr char kMagic[4] = {'O', 'R', 'P', 'W'};
constexpr size_t kHeaderBytes = 16;
constexpr size_t kEntryHeaderBytes = 20;
// Version 2 pads each entry's bytes to this offset in the blob, so that a
// blob read into an aligned buffer can be borrowed (ImportPackedWeights
// with an owner).
constexpr size_t kEntryAlign = 64;

size_t PadTo(size_t pos, uint32_t version) {
  return version >= 2 ? (kEntryAlign - pos % kEntryAlign) % kEntryAlign : 0;
}

void PutU32(std::vector<std::byte>* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<std::byte>((v >> (8 * i)) & 0xff));
}
void PutU64(std::vector<std::byte>* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<std::byte>((v >> (8 * i)) & 0xff));
}
uint32_t GetU32(const std::byte* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(p[i]) << (8 * i);
  return v;
}
uint64_t GetU64(const std::byte* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

const ops::KernelDef* SerializableKernel(const runtime::Step& step) {
  if (step.node_cache == nullptr) return nullptr;
  const ops::KernelDef* def = ops::OpRegistry::Global().Find(step.op_type, ops::Backend::kCpu);
  return def != nullptr && def->serialize_cached != nullptr ? def : nullptr;
}

}  // namespace

Result<std::vector<std::byte>> ExportPackedWeights(const CompiledModel& model) {
  const CompiledModel::Impl& impl = *model.impl_;
  // Every Prepare runs, which fills the NodeCaches.
  ORRERY_RETURN_IF_ERROR(impl.SpecializeForSignature());

  const runtime::Plan& plan = *impl.plan;
  const auto* magic = reinterpret_cast<const std::byte*>(kMagic);
  std::vector<std::byte> out(magic, magic + 4);
  PutU32(&out, kPackedWeightsVersion);
  PutU32(&out, ops::kCachedStateVersion);
  const size_t count_at = out.size();
  PutU32(&out, 0);
  uint32_t count = 0;
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const runtime::Step& step = plan.steps[i];
    const ops::KernelDef* def = SerializableKernel(step);
    if (def == nullptr) continue;
    for (const auto& [key, value] : step.node_cache->Snapshot()) {
      ORRERY_ASSIGN_OR_RETURN(std::vector<std::byte> bytes, def->serialize_cached(*value));
      PutU32(&out, static_cast<uint32_t>(i));
      PutU32(&out, key);
      PutU32(&out, static_cast<uint32_t>(step.op_type.size()));
      PutU64(&out, bytes.size());
      const auto* op = reinterpret_cast<const std::byte*>(step.op_type.data());
      out.insert(out.end(), op, op + step.op_type.size());
      out.resize(out.size() + PadTo(out.size(), kPackedWeightsVersion), std::byte{0});
      out.insert(out.end(), bytes.begin(), bytes.end());
      ++count;
    }
  }
  for (int b = 0; b < 4; ++b) out[count_at + b] = static_cast<std::byte>((count >> (8 * b)) & 0xff);
  return out;
}

namespace runtime {

Result<size_t> ImportPackedWeights(const Plan& plan, std::span<const std::byte> blob,
                                   std::shared_ptr<const void> owner) {
  if (blob.size() < kHeaderBytes || std::memcmp(blob.data(), kMagic, 4) != 0) {
    return Status::InvalidArgument("packed weights: missing ORPW header");
  }
  const uint32_t version = GetU32(blob.data() + 4);
  const uint32_t state_version = GetU32(blob.data() + 8);
  if (version < kPackedWeightsMinVersion || version > kPackedWeightsVersion ||
      state_version != ops::kCachedStateVersion) {
    return Status::InvalidArgument("packed weights: version " + std::to_string(version) + "/" +
                                   std::to_string(state_version) + ", this build reads " +
                                   std::to_string(kPackedWeightsVersion) + "/" +
                                   std::to_string(ops::kCachedStateVersion));
  }
  const uint32_t count = GetU32(blob.data() + 12);
  // First pass: check the framing, so that a malformed blob imports nothing.
  struct Entry {
    uint32_t step, key;
    std::string_view op_type;
    std::span<const std::byte> bytes;
  };
  std::vector<Entry> entries;
  size_t pos = kHeaderBytes;
  for (uint32_t e = 0; e < count; ++e) {
    if (blob.size() - pos < kEntryHeaderBytes) {
      return Status::InvalidArgument("packed weights: entry " + std::to_string(e) + " truncated");
    }
    Entry entry;
    entry.step = GetU32(blob.data() + pos);
    entry.key = GetU32(blob.data() + pos + 4);
    const uint64_t op_len = GetU32(blob.data() + pos + 8);
    const uint64_t n = GetU64(blob.data() + pos + 12);
    pos += kEntryHeaderBytes;
    if (op_len > blob.size() - pos) {
      return Status::InvalidArgument("packed weights: entry " + std::to_string(e) + " truncated");
    }
    entry.op_type = std::string_view(reinterpret_cast<const char*>(blob.data() + pos), op_len);
    pos += op_len;
    const size_t pad = PadTo(pos, version);
    if (pad > blob.size() - pos || n > blob.size() - pos - pad) {
      return Status::InvalidArgument("packed weights: entry " + std::to_string(e) + " truncated");
    }
    pos += pad;
    entry.bytes = blob.subspan(pos, n);
    pos += n;
    entries.push_back(entry);
  }
  if (pos != blob.size()) return Status::InvalidArgument("packed weights: trailing bytes");

  size_t taken = 0;
  for (const Entry& e : entries) {
    if (e.step >= plan.steps.size()) continue;
    const Step& step = plan.steps[e.step];
    if (step.op_type != e.op_type) continue;
    const ops::KernelDef* def = SerializableKernel(step);
    if (def == nullptr) continue;
    const ops::cpu::DeserializeBorrowedFn borrow =
        owner != nullptr ? ops::cpu::BorrowingDeserializer(def->deserialize_cached) : nullptr;
    Result<std::shared_ptr<const ops::PreparedKernel>> value =
        borrow != nullptr ? borrow(e.key, e.bytes, owner) : def->deserialize_cached(e.key, e.bytes);
    if (!value.ok()) continue;
    step.node_cache->Insert(e.key, std::move(value).value());
    ++taken;
  }
  return taken;
}

}  // namespace runtime
}  // namespace orrery
