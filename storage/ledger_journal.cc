#include "storage/ledger_journal.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <optional>
#include <utility>

#include <spdlog/spdlog.h>

#include "storage/crc32c.h"
#include "storage/file_util.h"

namespace orrery {
namespace {

constexpr size_t kHeaderBytes = 4096;
constexpr size_t kRecordHeader = 16;  // u32 length, u32 crc, u64 seq
constexpr size_t kMinCapacity = 64 << 10;
constexpr uint32_t kWrap = 0xffffffffu;
constexpr char kMagic[8] = {'O', 'R', 'L', 'J', 'R', 'N', 'L', '1'};

// The header page: magic, capacity and the consumed position, each u64 as
// the machine stores it. The position is one aligned 8-byte store, so a
// kill never leaves half of it; the seqs are in the records themselves.
struct Header {
  char magic[8];
  uint64_t capacity;
  uint64_t consumed_pos;
};

constexpr size_t Align16(size_t n) { return (n + 15) & ~size_t{15}; }

uint32_t RecordCrc(uint64_t seq, const void* payload, size_t n) {
  return Crc32cExtend(Crc32c(&seq, sizeof(seq)), payload, n);
}

// A record's (or wrap marker's) 16-byte header.
struct RecordHeader {
  uint32_t length = 0;
  uint32_t crc = 0;
  uint64_t seq = 0;
};

RecordHeader ReadRecordHeader(const void* at) {
  const auto* p = static_cast<const std::byte*>(at);
  RecordHeader h;
  std::memcpy(&h.length, p, 4);
  std::memcpy(&h.crc, p + 4, 4);
  std::memcpy(&h.seq, p + 8, 8);
  return h;
}

// The length last, after a release fence: a record cut short by a kill
// fails its crc anyway, but a reader in this process never sees one half
// written (it reads below the head only, under the journal's mutex).
void WriteRecordHeader(std::byte* at, const RecordHeader& h) {
  std::memcpy(at + 8, &h.seq, 8);
  std::memcpy(at + 4, &h.crc, 4);
  std::atomic_thread_fence(std::memory_order_release);
  std::memcpy(at, &h.length, 4);
}

}  // namespace

Result<std::vector<LedgerJournal::Record>> LedgerJournal::Recover(const std::string& path, uint64_t after_seq) {
  std::vector<Record> out;
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) {
    if (errno == ENOENT) return out;
    return ErrnoStatus("open ledger journal", path, errno);
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return ErrnoStatus("stat ledger journal", path, errno);
  Header h{};
  const size_t size = static_cast<size_t>(st.st_size);
  if (size < kHeaderBytes || ::pread(fd.get(), &h, sizeof(h), 0) != static_cast<ssize_t>(sizeof(h)) ||
      std::memcmp(h.magic, kMagic, sizeof(kMagic)) != 0 || h.capacity < kMinCapacity || h.capacity % 4096 != 0 ||
      size < kHeaderBytes + h.capacity || h.consumed_pos % 16 != 0) {
    spdlog::warn("ledger journal {}: not a journal (left by a crash while it was created?); nothing to recover", path);
    return out;
  }
  std::string data(h.capacity, '\0');
  if (::pread(fd.get(), data.data(), data.size(), kHeaderBytes) != static_cast<ssize_t>(data.size())) {
    return ErrnoStatus("read ledger journal", path, errno);
  }
  uint64_t pos = h.consumed_pos;
  // The first record's seq starts the run. Where nothing was pending, what
  // lies there is of an earlier lap: applied already (seq <= after_seq),
  // and the seqs break where the current lap's begin.
  std::optional<uint64_t> expect;
  // At most one lap: anything further would be records it already read.
  for (uint64_t start = pos; pos - start < h.capacity;) {
    const size_t phys = pos % h.capacity;
    const auto [length, crc, seq] = ReadRecordHeader(data.data() + phys);
    if (expect && seq != *expect) break;
    if (length == kWrap) {
      if (crc != RecordCrc(seq, nullptr, 0)) break;
      expect = seq;
      pos += h.capacity - phys;
      continue;
    }
    if (length == 0 || length > h.capacity - phys - kRecordHeader) break;
    const char* payload = data.data() + phys + kRecordHeader;
    if (crc != RecordCrc(seq, payload, length)) break;
    if (seq > after_seq) out.push_back(Record{seq, std::string(payload, length)});
    pos += Align16(kRecordHeader + length);
    expect = seq + 1;
  }
  return out;
}

Result<std::unique_ptr<LedgerJournal>> LedgerJournal::Create(const std::string& path, size_t capacity,
                                                             uint64_t first_seq) {
  capacity = std::max(kMinCapacity, (capacity + 4095) & ~size_t{4095});
  ORRERY_RETURN_IF_ERROR(Remove(path));
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
  if (!fd.valid()) return ErrnoStatus("create ledger journal", path, errno);
  const size_t size = kHeaderBytes + capacity;
  // Blocks reserved now, so that a store into the mapping never meets a
  // full disk (SIGBUS) later.
  if (const int err = ::posix_fallocate(fd.get(), 0, static_cast<off_t>(size)); err != 0) {
    return ErrnoStatus("allocate ledger journal", path, err);
  }
  void* map = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  if (map == MAP_FAILED) return ErrnoStatus("map ledger journal", path, errno);
  auto journal = std::unique_ptr<LedgerJournal>(
      new LedgerJournal(std::move(fd), static_cast<std::byte*>(map), capacity, first_seq));
  Header h{};
  std::memcpy(h.magic, kMagic, sizeof(kMagic));
  h.capacity = capacity;
  h.consumed_pos = 0;
  std::memcpy(journal->map_, &h, sizeof(h));
  // The header is what makes the file a journal: on disk before any record.
  if (::msync(journal->map_, kHeaderBytes, MS_SYNC) != 0) return ErrnoStatus("sync ledger journal", path, errno);
  return journal;
}

Status LedgerJournal::Remove(const std::string& path) {
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) return ErrnoStatus("remove ledger journal", path, errno);
  return Status::Ok();
}

LedgerJournal::LedgerJournal(UniqueFd fd, std::byte* map, size_t capacity, uint64_t next_seq)
    : fd_(std::move(fd)), map_(map), capacity_(capacity), next_seq_(next_seq) {}

LedgerJournal::~LedgerJournal() { ::munmap(map_, kHeaderBytes + capacity_); }

Result<LedgerJournal::Staged> LedgerJournal::Append(std::string_view payload) {
  if (payload.empty() || payload.size() > capacity_ / 4) {
    return Status::InvalidArgument("ledger journal record of " + std::to_string(payload.size()) +
                                   " bytes (must be 1 to " + std::to_string(capacity_ / 4) + ")");
  }
  const size_t need = Align16(kRecordHeader + payload.size());
  std::lock_guard<std::mutex> lock(mu_);
  size_t phys = head_ % capacity_;
  const size_t waste = phys + need > capacity_ ? capacity_ - phys : 0;
  if (head_ + waste + need - tail_ > capacity_) {
    return Status::ResourceExhausted("ledger journal full (" + std::to_string(head_ - tail_) + " of " +
                                     std::to_string(capacity_) + " bytes not yet moved to the catalog)");
  }
  std::byte* data = map_ + kHeaderBytes;
  const uint64_t seq = next_seq_;
  if (waste != 0) {
    // phys and capacity_ are 16-aligned, so a marker always fits.
    WriteRecordHeader(data + phys, {.length = kWrap, .crc = RecordCrc(seq, nullptr, 0), .seq = seq});
    head_ += waste;
    phys = 0;
  }
  std::memcpy(data + phys + kRecordHeader, payload.data(), payload.size());
  WriteRecordHeader(data + phys, {.length = static_cast<uint32_t>(payload.size()),
                                  .crc = RecordCrc(seq, payload.data(), payload.size()),
                                  .seq = seq});
  head_ += need;
  ++next_seq_;
  return Staged{.seq = seq, .used_bytes = static_cast<size_t>(head_ - tail_)};
}

LedgerJournal::Pending LedgerJournal::Take() const {
  Pending out;
  std::lock_guard<std::mutex> lock(mu_);
  const std::byte* data = map_ + kHeaderBytes;
  uint64_t pos = tail_;
  while (pos < head_) {
    const size_t phys = pos % capacity_;
    const RecordHeader h = ReadRecordHeader(data + phys);
    if (h.length == kWrap) {
      pos += capacity_ - phys;
      continue;
    }
    out.records.push_back(
        Record{h.seq, std::string(reinterpret_cast<const char*>(data + phys + kRecordHeader), h.length)});
    pos += Align16(kRecordHeader + h.length);
  }
  out.end_pos = pos;
  return out;
}

void LedgerJournal::Consume(uint64_t end_pos) {
  std::lock_guard<std::mutex> lock(mu_);
  if (end_pos <= tail_) return;
  tail_ = end_pos;
  std::atomic_ref<uint64_t>(reinterpret_cast<Header*>(map_)->consumed_pos).store(end_pos, std::memory_order_release);
}

size_t LedgerJournal::used_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<size_t>(head_ - tail_);
}

}  // namespace orrery
