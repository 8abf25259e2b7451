// The segment store: one segment file (storage/segment_format.h) per model
// version under <data_dir>/segments/, holding the version's packed weights.
// Segments are derived data: the ONNX in the catalog is the source of truth
// and any segment can be rebuilt from it.
//
// Durability protocol (the catalog record names its segment file):
//   upload: Write (temp file, fdatasync, rename, dir fsync) BEFORE the
//     catalog commit of the record, so a crash leaves at most an orphan
//     file, never a record whose segment was never written;
//   delete: the catalog change first, then Remove, so a crash in between
//     leaves an orphan;
//   start-up: Recover deletes temp files and every segment no live record
//     names; a record whose segment is missing or corrupt is rebuilt on load.
//
// Reads go through SegmentReader (io_uring, O_DIRECT with fallback, every
// section's CRC32C verified). Thread-safe: readers are pooled (one per
// concurrent Read). All calls block on disk I/O.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "storage/aligned_buffer.h"
#include "storage/segment_format.h"
#include "storage/segment_reader.h"
#include "storage/segment_writer.h"

namespace orrery {

// The sections of a model segment: its packed weights and (layout 2 on,
// cache/model_loader.h) the compiled model image that makes the ONNX
// unnecessary on a load.
inline constexpr std::string_view kPackedWeightsSection = "packed_weights";
inline constexpr std::string_view kModelImageSection = "model_image";

struct SegmentFileInfo {
  std::string name;
  uint64_t bytes = 0;
  uint32_t header_crc32c = 0;
  uint32_t format_version = kSegmentFormatVersion;
};

// What a read must match: the header fields the writer chose and, when the
// catalog recorded one (non-zero), the header page's CRC32C.
struct SegmentExpectation {
  uint32_t layout_version = 0;  // 0: any (ReadVerified only; the caller checks)
  uint64_t content_id = 0;
  uint32_t header_crc32c = 0;  // 0: not checked
};

class SegmentStore {
 public:
  // Opens (creating if needed) `<data_dir>/segments`. Errors as in file_util.h.
  static Result<std::unique_ptr<SegmentStore>> Open(const std::string& data_dir,
                                                    SegmentReader::Options reader_options = {});

  const std::string& dir() const { return dir_; }

  // A fresh file name ("<32 random hex>.seg") for a new model version.
  static std::string NewName();

  // Writes `name` atomically with one kPackedWeightsSection holding
  // `payload` (see segment_writer.h; replaces a file of that name). Returns
  // what the catalog records. Cost: one pass over the payload, two syncs.
  Result<SegmentFileInfo> Write(std::string_view name, uint32_t layout_version, uint64_t content_id,
                                std::span<const std::byte> payload);

  // WriteSections: the same with any sections (names unique, at most
  // kSegmentMaxSections), each CRC32C'd and page-aligned in the file.
  Result<SegmentFileInfo> WriteSections(std::string_view name, uint32_t layout_version,
                                        uint64_t content_id,
                                        std::span<const SegmentSectionData> sections);

  // Reads and verifies `name` into *buffer (every section's CRC32C, the
  // header against `expected`) and returns its header; Section then gives a
  // section's bytes, a view into *buffer starting on a 4096-byte boundary.
  // Errors as for Read; Section: DATA_LOSS when there is no such section.
  Result<SegmentHeader> ReadVerified(std::string_view name, const SegmentExpectation& expected,
                                     AlignedBuffer* buffer);
  static Result<std::span<const std::byte>> Section(const SegmentHeader& header,
                                                    const AlignedBuffer& buffer,
                                                    std::string_view section_name);

  // Reads and verifies `name` into *buffer; returns the payload's bytes (a
  // view into *buffer). NOT_FOUND (no file), DATA_LOSS (corrupt, truncated,
  // or not the expected segment), FAILED_PRECONDITION (format this build
  // does not read), UNAVAILABLE (I/O). All but UNAVAILABLE mean: rebuild.
  Result<std::span<const std::byte>> Read(std::string_view name, const SegmentExpectation& expected,
                                          AlignedBuffer* buffer);

  // Deletes `name` (and fsyncs the dir). Absent is OK.
  Status Remove(std::string_view name);

  // Start-up recovery: deletes stale temp files and every segment not in
  // `live` (the names live catalog records hold). Returns the names removed
  // (temp files are counted in *temps_removed if non-null). Must not run
  // concurrently with Write (it would take a new file for an orphan).
  Result<std::vector<std::string>> Recover(const std::set<std::string>& live,
                                           size_t* temps_removed = nullptr);

  // The CRC32C the header page of `header` carries.
  static uint32_t HeaderCrc(const SegmentHeader& header);

  SegmentStore(const SegmentStore&) = delete;
  SegmentStore& operator=(const SegmentStore&) = delete;

 private:
  SegmentStore(std::string dir, SegmentReader::Options reader_options)
      : dir_(std::move(dir)), reader_options_(reader_options) {}
  Result<std::unique_ptr<SegmentReader>> AcquireReader();
  void ReleaseReader(std::unique_ptr<SegmentReader> reader);

  const std::string dir_;
  const SegmentReader::Options reader_options_;
  std::mutex mu_;
  std::vector<std::unique_ptr<SegmentReader>> idle_readers_;
};

}  // namespace orrery
