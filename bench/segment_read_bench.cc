// Cold read of a ResNet-50-sized segment: the io_uring SegmentReader vs a plain
// pread loop vs dd, side by side in one run (issue 5).
//
//   segment_read_bench [--dir DIR] [--size-mb N] [--reps N] [--queue-depth N]
//                      [--chunk-kib N] [--sweep]
//
// Writes one segment of --size-mb (default 102, ResNet-50's 25.6 M fp32
// weights) of random bytes in 48 sections into a fresh temp dir under --dir
// (default: $TMPDIR or /tmp; use a directory on the disk you care about, not
// tmpfs), then --reps times (default 5), each method in turn and the file
// evicted from the page cache before each read (fsync + posix_fadvise
// DONTNEED):
//   io_uring  SegmentReader::Read (O_DIRECT, --queue-depth x --chunk-kib in
//             flight, every section's CRC32C verified) into a reused,
//             pre-faulted buffer, and again into a fresh buffer per read
//             (page faults included, as when filling a new cache entry);
//   the reader's fallback paths (io_uring buffered, pread), for reference;
//   pread     a pread loop of 1 MiB reads into the same buffer (buffered, no
//             checksum);
//   dd        `dd if=FILE of=/dev/null bs=1M`, run as a child process, timed
//             from spawn to exit.
// Prints the median / min / max time and median MB/s of each, and the ratio
// io_uring / dd (target: <= 1.2). --sweep first times io_uring alone over a
// grid of queue depths and chunk sizes (interleaved). Reports ratios measured in one run;
// absolute numbers depend on the disk and on whatever else the machine does.
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "storage/crc32c.h"
#include "storage/segment_reader.h"
#include "storage/segment_writer.h"

extern char** environ;

namespace orrery {
namespace {

using Clock = std::chrono::steady_clock;

struct Args {
  std::string dir;
  uint64_t size_mb = 102;
  int reps = 5;
  uint32_t queue_depth = 8;
  uint32_t chunk_kib = 1024;
  bool sweep = false;
};

[[noreturn]] void Die(const std::string& msg) {
  std::fprintf(stderr, "segment_read_bench: %s\n", msg.c_str());
  std::exit(1);
}

Args ParseArgs(int argc, char** argv) {
  Args a;
  const char* tmp = std::getenv("TMPDIR");
  a.dir = tmp != nullptr && *tmp != '\0' ? tmp : "/tmp";
  for (int i = 1; i < argc; ++i) {
    const std::string f = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) Die(f + " needs a value");
      return argv[++i];
    };
    if (f == "--dir") {
      a.dir = value();
    } else if (f == "--size-mb") {
      a.size_mb = std::stoull(value());
    } else if (f == "--reps") {
      a.reps = std::stoi(value());
    } else if (f == "--queue-depth") {
      a.queue_depth = static_cast<uint32_t>(std::stoul(value()));
    } else if (f == "--chunk-kib") {
      a.chunk_kib = static_cast<uint32_t>(std::stoul(value()));
    } else if (f == "--sweep") {
      a.sweep = true;
    } else {
      Die("unknown flag " + f + " (see the comment at the top of bench/segment_read_bench.cc)");
    }
  }
  if (a.reps < 1 || a.size_mb < 1) Die("--reps and --size-mb must be >= 1");
  return a;
}

void Check(const Status& s, const char* what) {
  if (!s.ok()) Die(std::string(what) + ": " + s.ToString());
}

void Evict(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) Die("open " + path + ": " + std::strerror(errno));
  if (::fsync(fd) != 0) Die("fsync: " + std::string(std::strerror(errno)));
  const int err = ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  if (err != 0) Die("posix_fadvise: " + std::string(std::strerror(err)));
  ::close(fd);
}

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

double TimeUring(SegmentReader* reader, const std::string& path, AlignedBuffer* buf) {
  const auto t0 = Clock::now();
  auto h = reader->Read(path, buf);
  const auto t1 = Clock::now();
  Check(h.status(), "SegmentReader::Read");
  return Seconds(t1 - t0);
}

double TimePread(const std::string& path, AlignedBuffer* buf) {
  const auto t0 = Clock::now();
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) Die("open " + path);
  const size_t kChunk = 1 << 20;
  uint64_t off = 0;
  for (;;) {
    const size_t n = std::min<uint64_t>(kChunk, buf->size() - off);
    if (n == 0) break;
    const ssize_t r = ::pread(fd, buf->data() + off, n, static_cast<off_t>(off));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) Die("pread failed or hit EOF early");
    off += static_cast<uint64_t>(r);
  }
  ::close(fd);
  return Seconds(Clock::now() - t0);
}

double TimeDd(const std::string& path) {
  const std::string in = "if=" + path;
  std::vector<std::string> argv_s = {"dd", in, "of=/dev/null", "bs=1M", "status=none"};
  std::vector<char*> argv;
  for (auto& s : argv_s) argv.push_back(s.data());
  argv.push_back(nullptr);
  const auto t0 = Clock::now();
  pid_t pid;
  const int err = ::posix_spawnp(&pid, "dd", nullptr, nullptr, argv.data(), environ);
  if (err != 0) Die("spawn dd: " + std::string(std::strerror(err)));
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  const auto t1 = Clock::now();
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) Die("dd failed");
  return Seconds(t1 - t0);
}

struct Stats {
  double median, min, max;
};

Stats Summarize(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  const double med = n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  return {med, v.front(), v.back()};
}

std::unique_ptr<SegmentReader> MakeReader(uint32_t qd, uint32_t chunk_kib) {
  SegmentReader::Options o;
  o.queue_depth = qd;
  o.chunk_bytes = chunk_kib * 1024;
  auto r = SegmentReader::Create(o);
  Check(r.status(), "SegmentReader::Create");
  return std::move(r).value();
}

int Run(const Args& args) {
  std::string tmpl = args.dir + "/orrery_segbench_XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) {
    Die("mkdtemp in " + args.dir + ": " + std::strerror(errno));
  }
  const std::string dir = tmpl;
  struct Cleanup {
    std::string dir;
    ~Cleanup() {
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
    }
  } cleanup{dir};

  // The payload: 48 sections of uneven sizes (like conv layers), random bytes.
  const uint64_t total = args.size_mb * 1000 * 1000;
  std::vector<std::byte> payload(total);
  std::mt19937_64 rng(1);
  for (size_t i = 0; i + 8 <= payload.size(); i += 8) {
    const uint64_t w = rng();
    std::memcpy(payload.data() + i, &w, 8);
  }
  constexpr int kSections = 48;
  std::vector<std::string> names;
  std::vector<SegmentSectionData> sections;
  uint64_t off = 0;
  for (int i = 0; i < kSections; ++i) {
    // Sizes grow with depth, like ResNet's stages; the last takes the rest.
    const uint64_t n =
        i == kSections - 1 ? total - off : total * (i + 1) / (kSections * (kSections + 1) / 2) + 13;
    names.push_back("layer" + std::to_string(i));
    sections.push_back({names.back(), std::span<const std::byte>(payload.data() + off, n)});
    off += n;
  }
  const auto w0 = Clock::now();
  auto written = WriteSegment(dir, "resnet50.seg", {1, 42, "bench/resnet50", sections});
  Check(written.status(), "WriteSegment");
  const double write_s = Seconds(Clock::now() - w0);
  const std::string path = dir + "/resnet50.seg";
  const double mb = static_cast<double>(written->file_size()) / 1e6;
  std::printf("segment: %s, %.1f MB, %d sections, written (with fdatasync) in %.0f ms\n",
              path.c_str(), mb, kSections, write_s * 1e3);

  AlignedBuffer buf;
  Check(buf.Resize(written->file_size()), "buffer");
  std::memset(buf.data(), 0, buf.size());  // pre-fault: time the I/O, not page faults
  {
    const auto t0 = Clock::now();
    const uint32_t crc = Crc32c(buf.data(), buf.size());
    const double s = Seconds(Clock::now() - t0);
    std::printf("CRC32C (%s) over the buffer: %.1f ms, %.0f MB/s (crc %08x)\n",
                Crc32cHardwareAvailable() ? "sse4.2" : "portable", s * 1e3, mb / s, crc);
  }

  if (args.sweep) {
    // Every configuration once per rep, in turn, so drift in the machine's
    // load hits them alike.
    struct Config {
      uint32_t qd, kib;
      std::unique_ptr<SegmentReader> reader;
      std::vector<double> t;
    };
    std::vector<Config> configs;
    for (uint32_t qd : {1u, 2u, 4u, 8u, 16u, 32u}) {
      for (uint32_t kib : {128u, 256u, 1024u, 4096u}) {
        configs.push_back({qd, kib, MakeReader(qd, kib), {}});
      }
    }
    for (int r = 0; r < args.reps; ++r) {
      for (auto& c : configs) {
        Evict(path);
        c.t.push_back(TimeUring(c.reader.get(), path, &buf));
      }
    }
    std::printf("\nsweep: io_uring reader, median of %d cold reads, configurations interleaved\n",
                args.reps);
    std::printf("| queue depth | chunk KiB | median ms | MB/s |\n|---|---|---|---|\n");
    for (const auto& c : configs) {
      const Stats s = Summarize(c.t);
      std::printf("| %u | %u | %.1f | %.0f |\n", c.qd, c.kib, s.median * 1e3, mb / s.median);
    }
  }

  auto reader = MakeReader(args.queue_depth, args.chunk_kib);
  // The reader's fallback paths, for reference.
  SegmentReader::Options fallback_options;
  fallback_options.queue_depth = args.queue_depth;
  fallback_options.chunk_bytes = args.chunk_kib * 1024;
  fallback_options.use_direct_io = false;
  auto buffered_reader = SegmentReader::Create(fallback_options);
  Check(buffered_reader.status(), "SegmentReader::Create");
  fallback_options.use_io_uring = false;
  auto pread_reader = SegmentReader::Create(fallback_options);
  Check(pread_reader.status(), "SegmentReader::Create");
  std::vector<double> tu, tf, tb, tr, tp, td;
  for (int r = 0; r < args.reps; ++r) {  // interleaved, so drift hits all methods alike
    Evict(path);
    tu.push_back(TimeUring(reader.get(), path, &buf));
    Evict(path);
    AlignedBuffer fresh;  // as a loader filling a new host-cache entry: page faults included
    tf.push_back(TimeUring(reader.get(), path, &fresh));
    Evict(path);
    tb.push_back(TimeUring(buffered_reader->get(), path, &buf));
    Evict(path);
    tr.push_back(TimeUring(pread_reader->get(), path, &buf));
    Evict(path);
    tp.push_back(TimePread(path, &buf));
    Evict(path);
    td.push_back(TimeDd(path));
  }
  const Stats su = Summarize(tu), sf = Summarize(tf), sb = Summarize(tb), sr = Summarize(tr),
              sp = Summarize(tp), sd = Summarize(td);
  std::printf(
      "\ncold reads, %d reps each, interleaved; io_uring reader: %s, queue depth %u x %u KiB\n",
      args.reps, std::string(SegmentReadPathName(reader->last_path())).c_str(), args.queue_depth,
      args.chunk_kib);
  std::printf("| method | median ms | min ms | max ms | median MB/s |\n|---|---|---|---|---|\n");
  auto row = [&](const char* name, const Stats& s) {
    std::printf("| %s | %.1f | %.1f | %.1f | %.0f |\n", name, s.median * 1e3, s.min * 1e3,
                s.max * 1e3, mb / s.median);
  };
  row("io_uring reader (CRC verified)", su);
  row("io_uring reader, fresh buffer each read", sf);
  row("reader fallback: io_uring buffered (no O_DIRECT)", sb);
  row("reader fallback: pread path", sr);
  row("pread loop, 1 MiB", sp);
  row("dd bs=1M", sd);
  const double ratio = su.median / sd.median;
  std::printf(
      "\ntime io_uring / time dd = %.2f (target <= 1.20: %s); time pread / time dd = %.2f\n", ratio,
      ratio <= 1.2 ? "met" : "NOT met", sp.median / sd.median);
  return 0;
}

}  // namespace
}  // namespace orrery

int main(int argc, char** argv) { return orrery::Run(orrery::ParseArgs(argc, argv)); }
