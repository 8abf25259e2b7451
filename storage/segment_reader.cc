#include "storage/segment_reader.h"

#include <fcntl.h>
#include <liburing.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <vector>

#include <spdlog/spdlog.h>

#include "storage/crc32c.h"
#include "storage/file_util.h"

namespace orrery {
namespace {

constexpr uint32_t kMaxQueueDepth = 256;
constexpr uint32_t kMaxChunkBytes = 64u << 20;
// Bound on retries of an io_uring_submit that keeps failing with EAGAIN/EBUSY
// while nothing is in flight (the kernel is out of resources).
constexpr int kMaxSubmitRetries = 1000;

void LogPathOnce(SegmentReadPath path, std::string_view why) {
  static std::atomic<bool> logged[3];
  if (!logged[static_cast<int>(path)].exchange(true)) {
    spdlog::info("segment reader: using {}{}{}", SegmentReadPathName(path), why.empty() ? "" : ": ",
                 why);
  }
}

std::string Hex32(uint32_t v) {
  char buf[11];
  std::snprintf(buf, sizeof buf, "0x%08" PRIx32, v);
  return buf;
}

// Checks section CRCs over the growing contiguous prefix [0, end) of the file
// in the buffer, so checksumming runs while later reads are in flight.
class SectionVerifier {
 public:
  SectionVerifier(const std::string& path, const SegmentHeader& header, const std::byte* base)
      : path_(path), header_(header), base_(base) {}

  // Bytes [0, end) of the file are in the buffer.
  Status Advance(uint64_t end) {
    const auto& secs = header_.sections;
    while (next_ < secs.size()) {
      const auto& s = secs[next_];
      const uint64_t s_end = s.offset + s.size;
      const uint64_t from = std::max(s.offset, pos_);
      const uint64_t to = std::min(s_end, end);
      if (to > from) {
        crc_ = Crc32cExtend(crc_, base_ + from, to - from);
        pos_ = to;
      }
      if (end < s_end) break;
      if (crc_ != s.crc32c) {
        return Status::DataLoss("segment " + path_ + ": section \"" + s.name +
                                "\" checksum mismatch (stored " + Hex32(s.crc32c) + ", computed " +
                                Hex32(crc_) + ")");
      }
      ++next_;
      crc_ = 0;
      pos_ = s_end;
    }
    return Status::Ok();
  }

  bool done() const { return next_ == header_.sections.size(); }

 private:
  const std::string& path_;
  const SegmentHeader& header_;
  const std::byte* base_;
  size_t next_ = 0;
  uint32_t crc_ = 0;
  uint64_t pos_ = 0;
};

// pread of n bytes at off, retrying EINTR/EAGAIN and short reads. Returns
// the bytes read (< n only at end of file), or -1 with *err = errno.
int64_t PreadFull(int fd, std::byte* p, size_t n, uint64_t off, int* err) {
  size_t got = 0;
  while (got < n) {
    const ssize_t r = ::pread(fd, p + got, n - got, static_cast<off_t>(off + got));
    if (r < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      *err = errno;
      return -1;
    }
    if (r == 0) break;
    got += static_cast<size_t>(r);
  }
  return static_cast<int64_t>(got);
}

Status TruncatedWhileReading(const std::string& path, uint64_t off, uint64_t want) {
  return Status::DataLoss("segment " + path + ": truncated while reading (end of file at " +
                          std::to_string(off) + ", header says " + std::to_string(want) +
                          " bytes)");
}

struct OpenedSegment {
  UniqueFd fd;
  SegmentHeader header;
};

// Opens `path` (O_DIRECT if `direct`; *direct is cleared if the file system
// refuses it), reads and validates the header page into `page`, and checks the
// file size against it.
Result<OpenedSegment> OpenSegment(const std::string& path, bool* direct, AlignedBuffer* page) {
  OpenedSegment out;
  const int base_flags = O_RDONLY | O_CLOEXEC;
  if (*direct) {
    out.fd = UniqueFd(::open(path.c_str(), base_flags | O_DIRECT));
    if (!out.fd.valid() && errno == EINVAL) *direct = false;  // e.g. a file system without O_DIRECT
    if (!out.fd.valid() && errno != EINVAL) return ErrnoStatus("open", path, errno);
  }
  if (!out.fd.valid()) {
    out.fd = UniqueFd(::open(path.c_str(), base_flags));
    if (!out.fd.valid()) return ErrnoStatus("open", path, errno);
  }
  struct stat st;
  if (::fstat(out.fd.get(), &st) != 0) return ErrnoStatus("stat", path, errno);
  if (!S_ISREG(st.st_mode)) return Status::DataLoss("segment " + path + ": not a regular file");
  const auto file_size = static_cast<uint64_t>(st.st_size);
  if (file_size < kSegmentPageSize) {
    return Status::DataLoss("segment " + path + ": truncated (" + std::to_string(file_size) +
                            " bytes, shorter than the " + std::to_string(kSegmentPageSize) +
                            "-byte header)");
  }
  ORRERY_RETURN_IF_ERROR(page->Resize(kSegmentPageSize));
  int err = 0;
  int64_t got = PreadFull(out.fd.get(), page->data(), kSegmentPageSize, 0, &err);
  if (got < 0 && err == EINVAL && *direct) {
    // Accepted O_DIRECT at open, refuses it at read: reopen buffered.
    *direct = false;
    out.fd = UniqueFd(::open(path.c_str(), base_flags));
    if (!out.fd.valid()) return ErrnoStatus("open", path, errno);
    got = PreadFull(out.fd.get(), page->data(), kSegmentPageSize, 0, &err);
  }
  if (got < 0) return ErrnoStatus("read", path, err);
  if (static_cast<uint64_t>(got) < kSegmentPageSize) {
    return TruncatedWhileReading(path, static_cast<uint64_t>(got), kSegmentPageSize);
  }
  auto header = DecodeSegmentHeader(page->span());
  if (!header.ok()) return header.status().WithPrefix("segment " + path);
  out.header = std::move(header).value();
  if (file_size != out.header.file_size()) {
    return Status::DataLoss("segment " + path + ": " +
                            (file_size < out.header.file_size() ? "truncated" : "trailing bytes") +
                            " (file is " + std::to_string(file_size) + " bytes, header says " +
                            std::to_string(out.header.file_size()) + ")");
  }
  return out;
}

}  // namespace

std::string_view SegmentReadPathName(SegmentReadPath path) {
  switch (path) {
    case SegmentReadPath::kUringDirect:
      return "io_uring + O_DIRECT";
    case SegmentReadPath::kUringBuffered:
      return "io_uring, buffered";
    case SegmentReadPath::kPread:
      return "pread";
  }
  return "?";
}

struct SegmentReader::Ring {
  io_uring ring{};
  bool initialized = false;
  ~Ring() {
    if (initialized) io_uring_queue_exit(&ring);
  }
};

Result<std::unique_ptr<SegmentReader>> SegmentReader::Create(const Options& options) {
  if (options.queue_depth < 1 || options.queue_depth > kMaxQueueDepth) {
    return Status::InvalidArgument("segment reader queue_depth " +
                                   std::to_string(options.queue_depth) + " not in [1, " +
                                   std::to_string(kMaxQueueDepth) + "]");
  }
  if (options.chunk_bytes < kSegmentPageSize || options.chunk_bytes > kMaxChunkBytes ||
      options.chunk_bytes % kSegmentPageSize != 0) {
    return Status::InvalidArgument("segment reader chunk_bytes " +
                                   std::to_string(options.chunk_bytes) +
                                   " is not a multiple of 4096 in [4096, 64 MiB]");
  }
  return std::unique_ptr<SegmentReader>(new SegmentReader(options));  // private constructor
}

SegmentReader::SegmentReader(const Options& options) : options_(options) {
  if (!options_.use_io_uring) return;
  auto ring = std::make_unique<Ring>();
  const int err = io_uring_queue_init(options_.queue_depth, &ring->ring, 0);
  if (err < 0) {
    LogPathOnce(SegmentReadPath::kPread,
                std::string("io_uring_queue_init failed: ") + std::strerror(-err));
    return;
  }
  ring->initialized = true;
  ring_ = std::move(ring);
}

SegmentReader::~SegmentReader() = default;

bool SegmentReader::io_uring_active() const { return ring_ != nullptr; }

Result<SegmentHeader> SegmentReader::Read(const std::string& path, AlignedBuffer* buffer) {
  bool direct = ring_ != nullptr && options_.use_direct_io;
  AlignedBuffer page;
  ORRERY_ASSIGN_OR_RETURN(OpenedSegment seg, OpenSegment(path, &direct, &page));
  const uint64_t size = seg.header.file_size();
  ORRERY_RETURN_IF_ERROR(buffer->Resize(size));
  std::memcpy(buffer->data(), page.data(), kSegmentPageSize);

  if (ring_ == nullptr) {
    last_path_ = SegmentReadPath::kPread;
    LogPathOnce(last_path_, options_.use_io_uring ? "" : "io_uring disabled by options");
    ORRERY_RETURN_IF_ERROR(ReadPayloadPread(seg.fd.get(), path, seg.header, buffer));
    return std::move(seg.header);
  }
  if (direct) {
    last_path_ = SegmentReadPath::kUringDirect;
    bool einval = false;
    Status st = ReadPayloadUring(seg.fd.get(), path, seg.header, buffer, true, &einval);
    if (!einval) {
      if (st.ok()) LogPathOnce(last_path_, "");
      ORRERY_RETURN_IF_ERROR(st);
      return std::move(seg.header);
    }
    // The file system refused a direct read: start over buffered.
    seg.fd = UniqueFd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!seg.fd.valid()) return ErrnoStatus("open", path, errno);
    LogPathOnce(SegmentReadPath::kUringBuffered, "O_DIRECT read failed with EINVAL");
    if (ring_ == nullptr) {  // the ring could not be rebuilt after the failed read
      last_path_ = SegmentReadPath::kPread;
      ORRERY_RETURN_IF_ERROR(ReadPayloadPread(seg.fd.get(), path, seg.header, buffer));
      return std::move(seg.header);
    }
  } else {
    const char* why = options_.use_direct_io ? "O_DIRECT not supported by the file system"
                                             : "O_DIRECT disabled by options";
    LogPathOnce(SegmentReadPath::kUringBuffered, why);
  }
  last_path_ = SegmentReadPath::kUringBuffered;
  bool unused = false;
  ORRERY_RETURN_IF_ERROR(ReadPayloadUring(seg.fd.get(), path, seg.header, buffer, false, &unused));
  return std::move(seg.header);
}

Status SegmentReader::ReadPayloadPread(int fd, const std::string& path, const SegmentHeader& header,
                                       AlignedBuffer* buffer) {
  SectionVerifier verifier(path, header, buffer->data());
  const uint64_t end = header.file_size();
  for (uint64_t off = kSegmentPageSize; off < end;) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(options_.chunk_bytes, end - off));
    int err = 0;
    const int64_t got = PreadFull(fd, buffer->data() + off, n, off, &err);
    if (got < 0) return ErrnoStatus("read", path, err);
    if (static_cast<size_t>(got) < n) return TruncatedWhileReading(path, off + got, end);
    off += n;
    ORRERY_RETURN_IF_ERROR(verifier.Advance(off));
  }
  return verifier.Advance(end);  // empty trailing sections
}

// The payload [4096, file_size) is cut into chunks of chunk_bytes; each of up
// to queue_depth slots reads one chunk at a time (resubmitting the rest after
// a short read or EAGAIN). Chunks complete in any order; `contiguous` tracks
// the prefix that is fully read, which the verifier checksums.
Status SegmentReader::ReadPayloadUring(int fd, const std::string& path, const SegmentHeader& header,
                                       AlignedBuffer* buffer, bool direct, bool* einval_on_direct) {
  io_uring* ring = &ring_->ring;
  const uint64_t end = header.file_size();
  const uint64_t chunk = options_.chunk_bytes;
  const uint64_t num_chunks = (end - kSegmentPageSize + chunk - 1) / chunk;
  auto chunk_end = [&](uint64_t i) { return std::min(end, kSegmentPageSize + (i + 1) * chunk); };
  std::vector<uint64_t> remaining(num_chunks);  // bytes still to read per chunk
  for (uint64_t i = 0; i < num_chunks; ++i) {
    remaining[i] = chunk_end(i) - kSegmentPageSize - i * chunk;
  }
  SectionVerifier verifier(path, header, buffer->data());
  uint64_t next_chunk = 0;  // next chunk to start
  uint64_t contiguous = 0;  // chunks [0, contiguous) are complete
  unsigned prepared = 0;    // SQEs prepared, not yet submitted
  unsigned in_flight = 0;   // submitted, not yet completed
  bool fail_next_direct = direct && options_.testing_fail_first_direct_read;
  Status error;

  auto prep = [&](uint64_t i) {
    io_uring_sqe* sqe = io_uring_get_sqe(ring);  // never null: prepared + in_flight <= depth
    const uint64_t off = chunk_end(i) - remaining[i];
    io_uring_prep_read(sqe, fd, buffer->data() + off, static_cast<unsigned>(remaining[i]), off);
    io_uring_sqe_set_data64(sqe, i);
    ++prepared;
  };

  int submit_retries = 0;
  while (error.ok() && (next_chunk < num_chunks || prepared + in_flight > 0)) {
    while (error.ok() && next_chunk < num_chunks && prepared + in_flight < options_.queue_depth) {
      prep(next_chunk++);
    }
    if (prepared > 0) {
      const int r = io_uring_submit(ring);
      if (r >= 0) {
        prepared -= static_cast<unsigned>(r);
        in_flight += static_cast<unsigned>(r);
        submit_retries = 0;
      } else if (r == -EINTR ||
                 ((r == -EAGAIN || r == -EBUSY) && ++submit_retries < kMaxSubmitRetries)) {
        if (in_flight == 0) continue;  // nothing to wait for: submit again
      } else {
        error = ErrnoStatus("io_uring submit for", path, -r);
        break;
      }
    }
    if (in_flight == 0) continue;
    io_uring_cqe* cqe = nullptr;
    const int w = io_uring_wait_cqe(ring, &cqe);
    if (w == -EINTR || w == -EAGAIN) continue;
    if (w < 0) {
      error = ErrnoStatus("io_uring wait for", path, -w);
      break;
    }
    unsigned head;
    unsigned seen = 0;
    io_uring_for_each_cqe(ring, head, cqe) {
      ++seen;
      --in_flight;
      const uint64_t i = io_uring_cqe_get_data64(cqe);
      int res = cqe->res;
      if (fail_next_direct) {
        fail_next_direct = false;
        res = -EINVAL;
      }
      if (!error.ok()) continue;  // draining
      if (res == -EINTR || res == -EAGAIN) {
        prep(i);
      } else if (res < 0) {
        if (res == -EINVAL && direct) *einval_on_direct = true;
        error = ErrnoStatus("read", path, -res);
      } else if (res == 0) {
        error = TruncatedWhileReading(path, chunk_end(i) - remaining[i], end);
      } else {
        remaining[i] -= std::min<uint64_t>(static_cast<uint64_t>(res), remaining[i]);
        if (remaining[i] > 0) prep(i);  // short read: read the rest
      }
    }
    io_uring_cq_advance(ring, seen);
    if (!error.ok()) break;
    while (contiguous < num_chunks && remaining[contiguous] == 0) ++contiguous;
    error = verifier.Advance(std::min(end, kSegmentPageSize + contiguous * chunk));
  }

  // Never return with reads still writing into the caller's buffer.
  while (in_flight > 0) {
    io_uring_cqe* cqe = nullptr;
    const int w = io_uring_wait_cqe(ring, &cqe);
    if (w == -EINTR || w == -EAGAIN) continue;
    if (w < 0) break;  // the ring is broken; dropping it below cancels what is left
    io_uring_cqe_seen(ring, cqe);
    --in_flight;
  }
  if (prepared > 0 || in_flight > 0) {
    // SQEs pointing into this buffer sit unsubmitted in the ring (or the ring
    // failed): tear it down so a later Read cannot submit them, and use a
    // fresh ring next time.
    spdlog::warn("segment reader: resetting io_uring after an error reading {}", path);
    ring_.reset();
    auto fresh = std::make_unique<Ring>();
    if (io_uring_queue_init(options_.queue_depth, &fresh->ring, 0) == 0) {
      fresh->initialized = true;
      ring_ = std::move(fresh);
    }
  }
  ORRERY_RETURN_IF_ERROR(error);
  return verifier.Advance(end);
}

Result<SegmentHeader> ReadSegmentHeader(const std::string& path) {
  bool direct = false;
  AlignedBuffer page;
  ORRERY_ASSIGN_OR_RETURN(OpenedSegment seg, OpenSegment(path, &direct, &page));
  return std::move(seg.header);
}

}  // namespace orrery
