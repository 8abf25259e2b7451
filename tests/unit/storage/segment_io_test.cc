// WriteSegment / SegmentReader / ReadSegmentHeader against real files, on
// every read path.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "storage/segment_reader.h"
#include "storage/segment_writer.h"
#include "tests/common/temp_dir.h"

namespace orrery {
namespace {

using orrery::testing::TempDir;

std::vector<std::byte> RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::byte> v(n);
  for (auto& b : v) b = static_cast<std::byte>(rng());
  return v;
}

// Sizes deliberately not multiples of 4096, with an empty section in the
// middle and a one-byte section at the end.
struct TestSegment {
  std::vector<std::byte> weights = RandomBytes((1 << 20) + 123, 1);
  std::vector<std::byte> bias = RandomBytes(4097, 2);
  std::vector<std::byte> tail = RandomBytes(1, 3);
  std::vector<SegmentSectionData> sections{
      {"weights", weights}, {"empty", {}}, {"bias", bias}, {"tail", tail}};
  SegmentContents contents() const {
    return {7, 0x0123456789ABCDEFull, "tenant-a/resnet/2", sections};
  }
};

std::string WriteTestSegment(const TempDir& dir, const TestSegment& seg,
                             const std::string& name = "model.seg") {
  auto h = WriteSegment(dir.path(), name, seg.contents());
  EXPECT_TRUE(h.ok()) << h.status().ToString();
  return dir.path() + "/" + name;
}

std::unique_ptr<SegmentReader> MakeReader(SegmentReader::Options o) {
  auto r = SegmentReader::Create(o);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? std::move(r).value() : nullptr;
}

// The four ways a read can go, forced through options.
struct PathCase {
  const char* label;
  SegmentReader::Options options;
  SegmentReadPath expected;
};

std::vector<PathCase> PathCases(uint32_t qd, uint32_t chunk) {
  SegmentReader::Options direct{.queue_depth = qd, .chunk_bytes = chunk};
  SegmentReader::Options buffered = direct;
  buffered.use_direct_io = false;
  SegmentReader::Options fallback = direct;
  fallback.testing_fail_first_direct_read = true;
  SegmentReader::Options pread = direct;
  pread.use_io_uring = false;
  return {{"uring_direct", direct, SegmentReadPath::kUringDirect},
          {"uring_buffered", buffered, SegmentReadPath::kUringBuffered},
          {"direct_einval_fallback", fallback, SegmentReadPath::kUringBuffered},
          {"pread", pread, SegmentReadPath::kPread}};
}

// Whether the file system under `path` takes O_DIRECT reads (tmpfs or
// overlayfs in a CI container may not); if not, the "direct" case ends on the
// buffered path, which is the fallback under test.
bool DirectIoWorks(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECT);
  if (fd < 0) return false;
  AlignedBuffer page;
  const bool ok = page.Resize(4096).ok() && ::pread(fd, page.data(), 4096, 0) == 4096;
  ::close(fd);
  return ok;
}

bool IoUringWorks() {
  auto r = SegmentReader::Create();
  return r.ok() && (*r)->io_uring_active();
}

void FlipByte(const std::string& path, uint64_t offset) {
  int fd = ::open(path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  std::byte b{};
  ASSERT_EQ(::pread(fd, &b, 1, static_cast<off_t>(offset)), 1);
  b ^= std::byte{0x40};
  ASSERT_EQ(::pwrite(fd, &b, 1, static_cast<off_t>(offset)), 1);
  ::close(fd);
}

void ExpectSections(const SegmentHeader& h, const AlignedBuffer& buf, const TestSegment& seg) {
  ASSERT_EQ(h.sections.size(), 4u);
  auto same = [&](const char* name, const std::vector<std::byte>& want) {
    const auto* s = h.Find(name);
    ASSERT_NE(s, nullptr) << name;
    auto got = SectionBytes(buf, *s);
    ASSERT_EQ(got.size(), want.size()) << name;
    if (!want.empty()) {
      EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size()), 0) << name;
    }
  };
  same("weights", seg.weights);
  same("empty", {});
  same("bias", seg.bias);
  same("tail", seg.tail);
}

// ---- round trips

TEST(SegmentIo, EveryPathReadsIdenticalBytes) {
  TempDir dir;
  TestSegment seg;
  const std::string path = WriteTestSegment(dir, seg);
  const bool uring = IoUringWorks();
  const bool direct = DirectIoWorks(path);
  std::vector<std::byte> first;
  // Small chunks and depth 3 so completions interleave and a section spans
  // many chunks; then the defaults.
  for (auto [qd, chunk] : {std::pair<uint32_t, uint32_t>{3, 4096}, {8, 1u << 20}, {1, 8192}}) {
    for (const auto& c : PathCases(qd, chunk)) {
      SCOPED_TRACE(std::string(c.label) + " qd=" + std::to_string(qd) +
                   " chunk=" + std::to_string(chunk));
      if (c.expected != SegmentReadPath::kPread && !uring) continue;
      auto reader = MakeReader(c.options);
      ASSERT_NE(reader, nullptr);
      AlignedBuffer buf;
      auto h = reader->Read(path, &buf);
      ASSERT_TRUE(h.ok()) << h.status().ToString();
      const SegmentReadPath expected = c.expected == SegmentReadPath::kUringDirect && !direct
                                           ? SegmentReadPath::kUringBuffered
                                           : c.expected;
      EXPECT_EQ(reader->last_path(), expected) << SegmentReadPathName(reader->last_path());
      EXPECT_EQ(h->layout_version, 7u);
      EXPECT_EQ(h->content_id, 0x0123456789ABCDEFull);
      EXPECT_EQ(h->key, "tenant-a/resnet/2");
      EXPECT_EQ(buf.size(), h->file_size());
      EXPECT_EQ(reinterpret_cast<uintptr_t>(buf.data()) % 4096, 0u);
      ExpectSections(*h, buf, seg);
      std::vector<std::byte> all(buf.data(), buf.data() + buf.size());
      if (first.empty()) {
        first = all;
      } else {
        EXPECT_TRUE(all == first) << "bytes differ from the first path's";
      }
    }
  }
  EXPECT_EQ(first.size(), std::filesystem::file_size(path));
  if (!uring) GTEST_SKIP() << "only the pread path ran: io_uring_queue_init fails here";
  if (!direct) GTEST_SKIP() << "no O_DIRECT on this file system: the direct case read buffered";
}

TEST(SegmentIo, ZeroSectionsAndOnlyEmptySections) {
  TempDir dir;
  auto reader = MakeReader({});
  for (size_t n : {0, 2}) {
    std::vector<SegmentSectionData> secs;
    if (n == 2) secs = {{"a", {}}, {"b", {}}};
    auto w = WriteSegment(dir.path(), "e.seg", {1, 2, "", secs});
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    AlignedBuffer buf;
    auto h = reader->Read(dir.path() + "/e.seg", &buf);
    ASSERT_TRUE(h.ok()) << h.status().ToString();
    EXPECT_EQ(h->sections.size(), n);
    EXPECT_EQ(buf.size(), kSegmentPageSize);
  }
}

TEST(SegmentIo, BufferIsReusedAndReaderRecoversAfterAnError) {
  TempDir dir;
  TestSegment seg;
  const std::string good = WriteTestSegment(dir, seg, "good.seg");
  const std::string bad = WriteTestSegment(dir, seg, "bad.seg");
  FlipByte(bad, 4096 + 5000);  // in "weights"
  auto reader = MakeReader({.queue_depth = 4, .chunk_bytes = 16384});
  AlignedBuffer buf;
  ASSERT_TRUE(reader->Read(good, &buf).ok());
  const std::byte* data = buf.data();
  EXPECT_EQ(reader->Read(bad, &buf).status().code(), StatusCode::kDataLoss);
  auto h = reader->Read(good, &buf);
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  EXPECT_EQ(buf.data(), data);  // same size: no reallocation
  ExpectSections(*h, buf, seg);
}

// ---- corruption and bad files

TEST(SegmentIo, OneFlippedPayloadByteIsDataLossNamingFileAndSection) {
  TempDir dir;
  TestSegment seg;
  const std::string path = WriteTestSegment(dir, seg);
  auto header = ReadSegmentHeader(path);
  ASSERT_TRUE(header.ok());
  FlipByte(path, header->Find("bias")->offset + 4096);  // the last byte of "bias"
  const bool uring = IoUringWorks();
  for (const auto& c : PathCases(3, 8192)) {
    SCOPED_TRACE(c.label);
    if (c.expected != SegmentReadPath::kPread && !uring) continue;
    auto reader = MakeReader(c.options);
    AlignedBuffer buf;
    auto r = reader->Read(path, &buf);
    ASSERT_EQ(r.status().code(), StatusCode::kDataLoss) << r.status().ToString();
    EXPECT_NE(r.status().message().find(path), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find("\"bias\""), std::string::npos) << r.status().message();
  }
  // The header alone is still fine: ReadSegmentHeader does not checksum sections.
  EXPECT_TRUE(ReadSegmentHeader(path).ok());
}

TEST(SegmentIo, CorruptHeaderIsDataLoss) {
  TempDir dir;
  TestSegment seg;
  const std::string path = WriteTestSegment(dir, seg);
  FlipByte(path, 30);  // content id
  auto reader = MakeReader({});
  AlignedBuffer buf;
  auto r = reader->Read(path, &buf);
  EXPECT_EQ(r.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(r.status().message().find("header checksum"), std::string::npos)
      << r.status().message();
  EXPECT_NE(r.status().message().find(path), std::string::npos);
  EXPECT_EQ(ReadSegmentHeader(path).status().code(), StatusCode::kDataLoss);
}

TEST(SegmentIo, TruncatedOrExtendedFileIsDataLoss) {
  TempDir dir;
  TestSegment seg;
  const std::string path = WriteTestSegment(dir, seg);
  const auto size = std::filesystem::file_size(path);
  auto reader = MakeReader({});
  AlignedBuffer buf;
  for (uint64_t new_size : {size - 4096, size - 1, uint64_t{100}, uint64_t{0}, size + 4096}) {
    SCOPED_TRACE(new_size);
    WriteTestSegment(dir, seg);
    std::filesystem::resize_file(path, new_size);
    auto r = reader->Read(path, &buf);
    EXPECT_EQ(r.status().code(), StatusCode::kDataLoss) << r.status().ToString();
    EXPECT_NE(r.status().message().find(new_size > size ? "trailing" : "truncated"),
              std::string::npos)
        << r.status().message();
    EXPECT_EQ(ReadSegmentHeader(path).status().code(), StatusCode::kDataLoss);
  }
}

TEST(SegmentIo, WrongMagicAndNewerVersionAreClearErrors) {
  TempDir dir;
  TestSegment seg;
  const std::string path = WriteTestSegment(dir, seg);
  auto reader = MakeReader({});
  AlignedBuffer buf;

  FlipByte(path, 8);  // format version 1 -> 0x41
  auto r = reader->Read(path, &buf);
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition) << r.status().ToString();
  EXPECT_NE(r.status().message().find("format version 65 not supported"), std::string::npos)
      << r.status().message();
  FlipByte(path, 8);

  FlipByte(path, 0);  // magic
  r = reader->Read(path, &buf);
  EXPECT_EQ(r.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(r.status().message().find("bad magic"), std::string::npos) << r.status().message();

  // A file that is not a segment at all.
  std::ofstream(dir.path() + "/text.seg") << std::string(8192, 'x');
  r = reader->Read(dir.path() + "/text.seg", &buf);
  EXPECT_EQ(r.status().code(), StatusCode::kDataLoss);
}

TEST(SegmentIo, MissingFileIsNotFound) {
  TempDir dir;
  auto reader = MakeReader({});
  AlignedBuffer buf;
  EXPECT_EQ(reader->Read(dir.path() + "/nope.seg", &buf).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(ReadSegmentHeader(dir.path() + "/nope.seg").status().code(), StatusCode::kNotFound);
}

TEST(SegmentIo, ReadSegmentHeaderReturnsTheTable) {
  TempDir dir;
  TestSegment seg;
  const std::string path = WriteTestSegment(dir, seg);
  auto h = ReadSegmentHeader(path);
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  EXPECT_EQ(h->key, "tenant-a/resnet/2");
  EXPECT_EQ(h->file_size(), std::filesystem::file_size(path));
  EXPECT_EQ(h->Find("bias")->size, 4097u);
}

TEST(SegmentIo, BadReaderOptionsAreInvalidArgument) {
  EXPECT_EQ(SegmentReader::Create({.queue_depth = 0}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(SegmentReader::Create({.queue_depth = 1000}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(SegmentReader::Create({.chunk_bytes = 1000}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(SegmentReader::Create({.chunk_bytes = 0}).status().code(),
            StatusCode::kInvalidArgument);
}

// ---- writer and directory housekeeping

TEST(SegmentWriter, LeavesOnlyTheFinalFileMode0600AndReplacesAtomically) {
  TempDir dir;
  TestSegment seg;
  const std::string path = WriteTestSegment(dir, seg);
  std::vector<std::string> entries;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
    entries.push_back(e.path().filename().string());
  }
  EXPECT_EQ(entries, std::vector<std::string>{"model.seg"});
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(st.st_size % 4096, 0);

  // Rewriting replaces it.
  const auto other = RandomBytes(10, 9);
  const SegmentSectionData one[] = {{"only", other}};
  ASSERT_TRUE(WriteSegment(dir.path(), "model.seg", {2, 3, "k2", one}).ok());
  auto h = ReadSegmentHeader(path);
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->key, "k2");
  EXPECT_EQ(h->sections.size(), 1u);
}

TEST(SegmentWriter, BadNamesAndSectionsWriteNothing) {
  TempDir dir;
  TestSegment seg;
  for (const char* name : {"", "model", ".model.seg", "a/b.seg", ".seg", "x.seg.tmp"}) {
    auto r = WriteSegment(dir.path(), name, seg.contents());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << name;
  }
  const SegmentSectionData dup[] = {{"a", seg.bias}, {"a", seg.tail}};
  auto r = WriteSegment(dir.path(), "ok.seg", {1, 1, "k", dup});
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("duplicate"), std::string::npos);
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
  EXPECT_EQ(WriteSegment(dir.path() + "/missing", "ok.seg", seg.contents()).status().code(),
            StatusCode::kNotFound);
}

TEST(SegmentWriter, ListAndRemoveStaleTempFiles) {
  TempDir dir;
  TestSegment seg;
  WriteTestSegment(dir, seg, "b.seg");
  WriteTestSegment(dir, seg, "a.seg");
  // What a crash mid-write leaves behind (earlier runs had other nonces),
  // plus things that are neither segments nor temp files.
  std::ofstream(dir.path() + "/.c.seg.tmp-00000000deadbeef-0") << "half";
  std::ofstream(dir.path() + "/.a.seg.tmp-1111111111111111-42") << "half";
  std::ofstream(dir.path() + "/notes.txt") << "keep";
  std::ofstream(dir.path() + "/.hidden") << "keep";
  std::filesystem::create_directory(dir.path() + "/dir.seg");

  auto list = ListSegmentFiles(dir.path());
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  EXPECT_EQ(*list, (std::vector<std::string>{"a.seg", "b.seg"}));

  auto removed = RemoveStaleSegmentTempFiles(dir.path());
  ASSERT_TRUE(removed.ok()) << removed.status().ToString();
  EXPECT_EQ(*removed, 2u);
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/.c.seg.tmp-00000000deadbeef-0"));
  EXPECT_TRUE(std::filesystem::exists(dir.path() + "/notes.txt"));
  EXPECT_TRUE(std::filesystem::exists(dir.path() + "/.hidden"));
  EXPECT_TRUE(std::filesystem::exists(dir.path() + "/a.seg"));
  EXPECT_EQ(*RemoveStaleSegmentTempFiles(dir.path()), 0u);

  ASSERT_TRUE(RemoveSegmentFile(dir.path(), "a.seg").ok());
  EXPECT_EQ(RemoveSegmentFile(dir.path(), "a.seg").code(), StatusCode::kNotFound);
  EXPECT_EQ(*ListSegmentFiles(dir.path()), std::vector<std::string>{"b.seg"});
  EXPECT_EQ(ListSegmentFiles(dir.path() + "/missing").status().code(), StatusCode::kNotFound);
}

// A writer killed with SIGKILL at random moments never leaves a half segment
// under the final name: each time, model.seg is absent or reads back verified,
// and RemoveStaleSegmentTempFiles clears whatever temp file the kill left.
TEST(SegmentWriter, KillDuringWritesLeavesOnlyCompleteSegments) {
  TempDir dir;
  const std::string path = dir.path() + "/model.seg";
  auto reader = MakeReader({});
  std::mt19937 rng(5);
  int complete = 0;
  for (int round = 0; round < 12; ++round) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      // Child: rewrite model.seg forever, each version different.
      const auto data = RandomBytes(6 << 20, 100 + round);
      for (uint64_t id = 0;; ++id) {
        const SegmentSectionData secs[] = {{"w", data}};
        if (!WriteSegment(dir.path(), "model.seg", {1, id, "k", secs}).ok()) ::_exit(2);
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5 + rng() % 60));
    ASSERT_EQ(::kill(pid, SIGKILL), 0);
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFSIGNALED(status)) << "writer exited on its own with " << status;

    if (std::filesystem::exists(path)) {
      AlignedBuffer buf;
      auto h = reader->Read(path, &buf);
      ASSERT_TRUE(h.ok()) << "round " << round << ": " << h.status().ToString();
      EXPECT_EQ(h->sections.at(0).size, size_t{6} << 20);
      ++complete;
    }
    ASSERT_TRUE(RemoveStaleSegmentTempFiles(dir.path()).ok());
    for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
      EXPECT_EQ(e.path().filename().string(), "model.seg") << "left behind after recovery";
    }
  }
  // Not asserted: how many rounds killed the child before its first rename.
  RecordProperty("rounds_with_segment", complete);
}

}  // namespace
}  // namespace orrery
