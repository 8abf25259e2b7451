// Writing segment files atomically, and the directory housekeeping start-up
// recovery needs. Format: storage/segment_format.h.
//
// WriteSegment writes "<dir>/.<name>.tmp-<nonce>.<pid>-<n>" (a hidden temp
// name in the same directory), fdatasyncs it, renames it over "<dir>/<name>"
// and fsyncs the directory. A crash at any point leaves either the old file (or
// none) or the complete new one under the final name, plus at worst a temp
// file that RemoveStaleSegmentTempFiles deletes. Files are created mode 0600
// (tenants' weights).
//
// All calls block on disk I/O; WriteSegment costs one pass over the payload
// (CRC32C + write) and two syncs. Thread-safe: concurrent writers use distinct
// temp names; the last rename of the same final name wins.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "storage/segment_format.h"

namespace orrery {

struct SegmentSectionData {
  std::string_view name;
  std::span<const std::byte> bytes;
};

struct SegmentContents {
  uint32_t layout_version = 0;
  uint64_t content_id = 0;
  std::string_view key;
  std::span<const SegmentSectionData> sections;
};

// Writes `<dir>/<name>` atomically (replacing an existing file of that name)
// and returns the header written. `name` must end in kSegmentSuffix (".seg"),
// must not start with '.', contain '/' or NUL, and be at most 200 bytes.
// INVALID_ARGUMENT for a bad name, key or section list (nothing is written);
// I/O errors as in file_util.h (NOT_FOUND if `dir` does not exist,
// RESOURCE_EXHAUSTED when the disk is full); the temp file is removed on any
// failure.
Result<SegmentHeader> WriteSegment(const std::string& dir, std::string_view name,
                                   const SegmentContents& contents);

// Names (not paths) of the segment files in `dir`: regular files ending in
// kSegmentSuffix, temp files excluded, sorted. The caller compares them with
// the catalog to find orphans.
Result<std::vector<std::string>> ListSegmentFiles(const std::string& dir);

// Deletes the temp files other processes (or an earlier run of this one) left
// in `dir` and returns how many. Temp files of writers still running in this
// process are kept (their names carry a random per-run nonce and the pid), so
// this is safe to call at any time; temp files of another live process
// writing into the same dir are not (one orreryd owns a data dir).
Result<size_t> RemoveStaleSegmentTempFiles(const std::string& dir);

// Unlinks `<dir>/<name>` and fsyncs the directory. NOT_FOUND if absent.
Status RemoveSegmentFile(const std::string& dir, std::string_view name);

// True for names WriteSegment accepts.
bool IsValidSegmentName(std::string_view name);

}  // namespace orrery
