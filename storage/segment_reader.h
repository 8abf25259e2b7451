// Reading segment files (storage/segment_format.h) into memory, verified.
//
// SegmentReader::Read loads a whole segment into a caller-owned, page-aligned
// AlignedBuffer with io_uring: up to `queue_depth` reads of `chunk_bytes` in
// flight, O_DIRECT when the file system takes it (no page-cache copy; weights
// are read once into the host cache, caching them twice would waste RAM).
// Paths, chosen per reader and per file:
//   kUringDirect    io_uring + O_DIRECT (the default);
//   kUringBuffered  io_uring, buffered: O_DIRECT open or a direct read failed
//                   with EINVAL, or Options::use_direct_io is false;
//   kPread          pread loop of chunk_bytes: io_uring_queue_init failed
//                   (old kernel, seccomp, io_uring_disabled) or
//                   Options::use_io_uring is false.
// The first use of each path in a process is logged (spdlog info); the path a
// read took is last_path().
//
// Every section's CRC32C is checked while the reads are still in flight (in
// file order as the contiguous prefix completes), so checksumming overlaps the
// I/O. Any mismatch, a bad header, or a file size that disagrees with the
// header is DATA_LOSS naming the file (and the section): the caller must
// rebuild the segment from the ONNX, never serve it.
//
// Cost: blocks for the I/O (one header pread + file_size / chunk_bytes reads)
// and one CRC pass over the payload. A SegmentReader owns one io_uring and is
// not thread-safe: use one per loader thread. Reads never leave I/O in flight
// into the buffer after returning, success or not.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "base/status.h"
#include "storage/aligned_buffer.h"
#include "storage/segment_format.h"

namespace orrery {

enum class SegmentReadPath { kUringDirect, kUringBuffered, kPread };
std::string_view SegmentReadPathName(SegmentReadPath path);

class SegmentReader {
 public:
  struct Options {
    uint32_t queue_depth = 8;         // io_uring reads in flight, 1..256
    uint32_t chunk_bytes = 1u << 20;  // bytes per read, a multiple of 4096, <= 64 MiB
    bool use_io_uring = true;         // false: the pread path, as if io_uring were unavailable
    bool use_direct_io = true;        // false: never open with O_DIRECT
    // Test only: the first O_DIRECT io_uring read of each Read completes with
    // EINVAL, as on a file system that accepts O_DIRECT at open but not at read.
    bool testing_fail_first_direct_read = false;
  };

  // INVALID_ARGUMENT for bad options. An unavailable io_uring is not an error:
  // the reader falls back to pread.
  static Result<std::unique_ptr<SegmentReader>> Create(const Options& options);
  static Result<std::unique_ptr<SegmentReader>> Create() { return Create(Options{}); }
  ~SegmentReader();

  // Reads the whole file at `path` into *buffer (resized to the file size) and
  // returns its header. buffer[0, 4096) is the header page; section s is
  // buffer[s.offset, s.offset + s.size) (see SectionBytes). On error the
  // buffer's contents are unspecified. Errors: NOT_FOUND (no file),
  // DATA_LOSS (corrupt or truncated; rebuild it), FAILED_PRECONDITION (format
  // version this build cannot read; rebuild it), UNAVAILABLE (I/O error),
  // RESOURCE_EXHAUSTED (buffer allocation).
  Result<SegmentHeader> Read(const std::string& path, AlignedBuffer* buffer);

  // The path the last successful or failed Read used for its payload.
  SegmentReadPath last_path() const { return last_path_; }
  // False if io_uring_queue_init failed or was disabled by Options.
  bool io_uring_active() const;

  SegmentReader(const SegmentReader&) = delete;
  SegmentReader& operator=(const SegmentReader&) = delete;

 private:
  struct Ring;
  explicit SegmentReader(const Options& options);
  Status ReadPayloadUring(int fd, const std::string& path, const SegmentHeader& header,
                          AlignedBuffer* buffer, bool direct, bool* einval_on_direct);
  Status ReadPayloadPread(int fd, const std::string& path, const SegmentHeader& header,
                          AlignedBuffer* buffer);

  Options options_;
  std::unique_ptr<Ring> ring_;  // null on the pread path
  SegmentReadPath last_path_ = SegmentReadPath::kPread;
};

// Reads and validates only the header page (one 4 KiB pread) and checks the
// file size against it; section checksums are not verified. Cheap enough for
// start-up validation of every segment. Errors as for SegmentReader::Read.
Result<SegmentHeader> ReadSegmentHeader(const std::string& path);

// The bytes of `section` in a buffer filled by SegmentReader::Read.
inline std::span<const std::byte> SectionBytes(const AlignedBuffer& buffer,
                                               const SegmentSectionInfo& section) {
  return buffer.span().subspan(section.offset, section.size);
}

}  // namespace orrery
