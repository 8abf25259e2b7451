#include "storage/segment_format.h"

#include <algorithm>
#include <cassert>
#include <cstring>
#include <unordered_set>

#include "storage/crc32c.h"

namespace orrery {
namespace {

// Field offsets in the header page (see segment_format.h).
constexpr size_t kOffMagic = 0;
constexpr size_t kOffFormatVersion = 8;
constexpr size_t kOffHeaderBytes = 12;
constexpr size_t kOffLayoutVersion = 16;
constexpr size_t kOffSectionCount = 20;
constexpr size_t kOffContentId = 24;
constexpr size_t kOffPayloadSize = 32;
constexpr size_t kOffKey = 40;
constexpr size_t kOffTable = 128;
constexpr size_t kEntryBytes = 64;
constexpr size_t kEntryOffName = 0;
constexpr size_t kEntryOffOffset = 40;
constexpr size_t kEntryOffSize = 48;
constexpr size_t kEntryOffCrc = 56;
constexpr size_t kOffHeaderCrc = kSegmentPageSize - 4;
static_assert(kOffTable + kSegmentMaxSections * kEntryBytes <= kOffHeaderCrc);
static_assert(kOffKey + kSegmentMaxKeyBytes <= kOffTable);

// Sizes above this are rejected so offset arithmetic can never overflow.
constexpr uint64_t kMaxSectionBytes = uint64_t{1} << 48;

template <typename T>
void Put(std::span<std::byte> page, size_t off, T v) {
  std::memcpy(page.data() + off, &v, sizeof v);  // little-endian host (x86-64)
}

template <typename T>
T Get(std::span<const std::byte> page, size_t off) {
  T v;
  std::memcpy(&v, page.data() + off, sizeof v);
  return v;
}

void PutString(std::span<std::byte> page, size_t off, std::string_view s) {
  std::memcpy(page.data() + off, s.data(), s.size());
}

// A NUL-padded field of `max` bytes.
std::string GetString(std::span<const std::byte> page, size_t off, size_t max) {
  const char* p = reinterpret_cast<const char*>(page.data() + off);
  return std::string(p, ::strnlen(p, max));
}

Status CheckString(std::string_view what, std::string_view s, size_t max, bool allow_empty) {
  if (s.empty() && !allow_empty) return Status::InvalidArgument(std::string(what) + " is empty");
  if (s.size() > max) {
    return Status::InvalidArgument(std::string(what) + " \"" + std::string(s.substr(0, max)) +
                                   "...\" is " + std::to_string(s.size()) + " bytes, limit " +
                                   std::to_string(max));
  }
  if (s.find('\0') != std::string_view::npos) {
    return Status::InvalidArgument(std::string(what) + " contains a NUL byte");
  }
  return Status::Ok();
}

}  // namespace

const SegmentSectionInfo* SegmentHeader::Find(std::string_view name) const {
  for (const auto& s : sections) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

Result<SegmentHeader> PlanSegment(uint32_t layout_version, uint64_t content_id,
                                  std::string_view key,
                                  std::span<const SegmentSectionSpec> sections) {
  ORRERY_RETURN_IF_ERROR(CheckString("segment key", key, kSegmentMaxKeyBytes, true));
  if (sections.size() > kSegmentMaxSections) {
    return Status::InvalidArgument("segment has " + std::to_string(sections.size()) +
                                   " sections, limit " + std::to_string(kSegmentMaxSections));
  }
  SegmentHeader h;
  h.layout_version = layout_version;
  h.content_id = content_id;
  h.key = std::string(key);
  std::unordered_set<std::string_view> names;
  uint64_t cursor = kSegmentPageSize;
  for (const auto& spec : sections) {
    ORRERY_RETURN_IF_ERROR(CheckString("section name", spec.name, kSegmentMaxNameBytes, false));
    if (!names.insert(spec.name).second) {
      return Status::InvalidArgument("duplicate section name \"" + std::string(spec.name) + "\"");
    }
    if (spec.size > kMaxSectionBytes) {
      return Status::InvalidArgument("section \"" + std::string(spec.name) + "\" is " +
                                     std::to_string(spec.size) + " bytes, limit " +
                                     std::to_string(kMaxSectionBytes));
    }
    h.sections.push_back({std::string(spec.name), cursor, spec.size, 0});
    cursor = SegmentAlignUp(cursor + spec.size);
  }
  h.payload_size = cursor - kSegmentPageSize;
  return h;
}

void EncodeSegmentHeader(const SegmentHeader& h, std::span<std::byte> page) {
  assert(page.size() >= kSegmentPageSize);
  page = page.first(kSegmentPageSize);
  std::fill(page.begin(), page.end(), std::byte{0});
  PutString(page, kOffMagic, kSegmentMagic);
  Put<uint32_t>(page, kOffFormatVersion, kSegmentFormatVersion);
  Put<uint32_t>(page, kOffHeaderBytes, static_cast<uint32_t>(kSegmentPageSize));
  Put<uint32_t>(page, kOffLayoutVersion, h.layout_version);
  Put<uint32_t>(page, kOffSectionCount, static_cast<uint32_t>(h.sections.size()));
  Put<uint64_t>(page, kOffContentId, h.content_id);
  Put<uint64_t>(page, kOffPayloadSize, h.payload_size);
  PutString(page, kOffKey, h.key);
  for (size_t i = 0; i < h.sections.size(); ++i) {
    const size_t e = kOffTable + i * kEntryBytes;
    PutString(page, e + kEntryOffName, h.sections[i].name);
    Put<uint64_t>(page, e + kEntryOffOffset, h.sections[i].offset);
    Put<uint64_t>(page, e + kEntryOffSize, h.sections[i].size);
    Put<uint32_t>(page, e + kEntryOffCrc, h.sections[i].crc32c);
  }
  Put<uint32_t>(page, kOffHeaderCrc, Crc32c(page.data(), kOffHeaderCrc));
}

Result<SegmentHeader> DecodeSegmentHeader(std::span<const std::byte> page) {
  if (page.size() < kSegmentPageSize) {
    return Status::DataLoss("segment header truncated: " + std::to_string(page.size()) +
                            " bytes, need " + std::to_string(kSegmentPageSize));
  }
  if (std::memcmp(page.data() + kOffMagic, kSegmentMagic.data(), kSegmentMagic.size()) != 0) {
    return Status::DataLoss("not a segment file (bad magic)");
  }
  const auto version = Get<uint32_t>(page, kOffFormatVersion);
  if (version != kSegmentFormatVersion) {
    return Status::FailedPrecondition("segment format version " + std::to_string(version) +
                                      " not supported (this build reads version " +
                                      std::to_string(kSegmentFormatVersion) + ")");
  }
  const auto stored_crc = Get<uint32_t>(page, kOffHeaderCrc);
  const uint32_t crc = Crc32c(page.data(), kOffHeaderCrc);
  if (stored_crc != crc) return Status::DataLoss("segment header checksum mismatch");

  // From here on the bytes are what the writer wrote; a failure means a
  // writer bug or a forged file, still not something to serve.
  if (Get<uint32_t>(page, kOffHeaderBytes) != kSegmentPageSize) {
    return Status::DataLoss("segment header size field is not " + std::to_string(kSegmentPageSize));
  }
  SegmentHeader h;
  h.format_version = version;
  h.layout_version = Get<uint32_t>(page, kOffLayoutVersion);
  h.content_id = Get<uint64_t>(page, kOffContentId);
  h.payload_size = Get<uint64_t>(page, kOffPayloadSize);
  h.key = GetString(page, kOffKey, kSegmentMaxKeyBytes);
  const auto count = Get<uint32_t>(page, kOffSectionCount);
  if (count > kSegmentMaxSections) {
    return Status::DataLoss("segment header lists " + std::to_string(count) + " sections, limit " +
                            std::to_string(kSegmentMaxSections));
  }
  std::unordered_set<std::string> names;
  uint64_t cursor = kSegmentPageSize;
  for (uint32_t i = 0; i < count; ++i) {
    const size_t e = kOffTable + i * kEntryBytes;
    SegmentSectionInfo s;
    s.name = GetString(page, e + kEntryOffName, kSegmentMaxNameBytes);
    s.offset = Get<uint64_t>(page, e + kEntryOffOffset);
    s.size = Get<uint64_t>(page, e + kEntryOffSize);
    s.crc32c = Get<uint32_t>(page, e + kEntryOffCrc);
    const std::string where = "segment section " + std::to_string(i) + " \"" + s.name + "\"";
    if (s.name.empty()) return Status::DataLoss(where + ": empty name");
    if (!names.insert(s.name).second) return Status::DataLoss(where + ": duplicate name");
    if (s.offset != cursor) {
      return Status::DataLoss(where + ": offset " + std::to_string(s.offset) + ", expected " +
                              std::to_string(cursor));
    }
    if (s.size > kMaxSectionBytes) {
      return Status::DataLoss(where + ": size " + std::to_string(s.size) + " too large");
    }
    cursor = SegmentAlignUp(s.offset + s.size);
    h.sections.push_back(std::move(s));
  }
  if (h.payload_size != cursor - kSegmentPageSize) {
    return Status::DataLoss("segment payload size " + std::to_string(h.payload_size) +
                            " does not match its sections (" +
                            std::to_string(cursor - kSegmentPageSize) + ")");
  }
  return h;
}

}  // namespace orrery
