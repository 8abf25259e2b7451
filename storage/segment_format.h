// The on-disk format of segment files: compiled, packed model weights stored
// as derived data in the data dir (rebuildable from the stored ONNX).
//
// A segment is one 4096-byte header page followed by the payload: named
// sections, each starting on a 4096-byte boundary and zero-padded to the next
// one, so the whole file is a multiple of 4096 bytes and every read of it can
// use O_DIRECT. All integers are little-endian.
//
// Header page (format version 1):
//
//   offset  size  field
//   0       8     magic "ORRERYSG"
//   8       4     format version (kSegmentFormatVersion; bumped on any change
//                 to this page's layout). Magic and version never move.
//   12      4     header bytes (4096)
//   16      4     payload layout version, chosen by the caller (what the
//                 section bytes mean; the format does not interpret it)
//   20      4     section count (<= kSegmentMaxSections)
//   24      8     content id, chosen by the caller (e.g. a hash of the ONNX
//                 and compiler version the segment was derived from)
//   32      8     payload size: file size - 4096
//   40      64    key, caller-chosen string, NUL-padded (no NUL inside)
//   104     24    reserved, zero
//   128     3840  section table: kSegmentMaxSections entries of 64 bytes,
//                 unused ones zero:
//                   0   40  name, NUL-padded, non-empty, unique, no NUL inside
//                   40  8   offset in the file (multiple of 4096)
//                   48  8   size in bytes (any; 0 allowed)
//                   56  4   CRC32C of the section's `size` bytes (padding
//                           excluded)
//                   60  4   reserved, zero
//   3968    124   reserved, zero
//   4092    4     CRC32C of bytes [0, 4092) of this page
//
// Layout is canonical: the first section starts at 4096, each next one at the
// end of the previous rounded up to 4096 (an empty section takes no space and
// shares its offset with the next), and payload size is the end of the last
// section rounded up to 4096. The decoder rejects anything else, so a header
// that passes its checksum and these rules describes exactly one file size.
//
// Costs: encoding and decoding touch one page; no I/O here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace orrery {

inline constexpr uint64_t kSegmentPageSize = 4096;
inline constexpr uint32_t kSegmentFormatVersion = 1;
inline constexpr size_t kSegmentMaxSections = 60;
inline constexpr size_t kSegmentMaxNameBytes = 40;
inline constexpr size_t kSegmentMaxKeyBytes = 64;
inline constexpr std::string_view kSegmentMagic = "ORRERYSG";
// Segment files are named "<something>.seg"; see segment_writer.h.
inline constexpr std::string_view kSegmentSuffix = ".seg";

struct SegmentSectionInfo {
  std::string name;
  uint64_t offset = 0;  // in the file, so also in a buffer holding the whole file
  uint64_t size = 0;
  uint32_t crc32c = 0;
};

struct SegmentHeader {
  uint32_t format_version = kSegmentFormatVersion;
  uint32_t layout_version = 0;
  uint64_t content_id = 0;
  std::string key;
  uint64_t payload_size = 0;
  std::vector<SegmentSectionInfo> sections;

  uint64_t file_size() const { return kSegmentPageSize + payload_size; }
  // nullptr if there is no section of that name.
  const SegmentSectionInfo* Find(std::string_view name) const;
};

// Rounds up to a multiple of kSegmentPageSize.
constexpr uint64_t SegmentAlignUp(uint64_t n) {
  return (n + kSegmentPageSize - 1) & ~(kSegmentPageSize - 1);
}

// Builds the header for sections of the given names and sizes: assigns
// offsets and payload size (CRCs stay 0 for the caller to fill in).
// INVALID_ARGUMENT naming the problem for a bad key, name, duplicate name or
// too many sections.
struct SegmentSectionSpec {
  std::string_view name;
  uint64_t size = 0;
};
Result<SegmentHeader> PlanSegment(uint32_t layout_version, uint64_t content_id,
                                  std::string_view key,
                                  std::span<const SegmentSectionSpec> sections);

// Writes the header page, including its checksum. `page` must hold
// kSegmentPageSize bytes. The header must come from PlanSegment.
void EncodeSegmentHeader(const SegmentHeader& header, std::span<std::byte> page);

// Parses and validates a header page. Errors (messages do not name the file;
// callers prefix it):
//   DATA_LOSS            page too short, wrong magic, bad header checksum, or a
//                        section table that breaks the layout rules;
//   FAILED_PRECONDITION  a format version this build does not read.
Result<SegmentHeader> DecodeSegmentHeader(std::span<const std::byte> page);

}  // namespace orrery
