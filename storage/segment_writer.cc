#include "storage/segment_writer.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <random>

#include "storage/aligned_buffer.h"
#include "storage/crc32c.h"
#include "storage/file_util.h"

namespace orrery {
namespace {

constexpr size_t kMaxNameBytes = 200;
constexpr std::string_view kTempMarker = ".tmp-";

// Distinguishes this process's temp files from those of earlier runs, which
// may have had the same pid (containers restart as pid 1), and from those of
// forked children, which inherit the random part: "<random>.<pid>".
std::string ProcessNonce() {
  static const uint64_t random = [] {
    std::random_device rd;
    return (uint64_t{rd()} << 32) ^ rd();
  }();
  char buf[40];
  std::snprintf(buf, sizeof buf, "%016" PRIx64 ".%ld", random, static_cast<long>(::getpid()));
  return buf;
}

std::string TempName(std::string_view name) {
  static std::atomic<uint64_t> counter{0};
  // Built with append: g++ 12 warns falsely (-Wrestrict) on "." + std::string.
  std::string out(1, '.');
  out.append(name).append(kTempMarker).append(ProcessNonce()).push_back('-');
  out.append(std::to_string(counter.fetch_add(1)));
  return out;
}

// ".<x>.seg.tmp-<nonce>-<n>"
bool IsTempName(std::string_view n) {
  if (n.empty() || n[0] != '.') return false;
  const std::string marker = std::string(kSegmentSuffix) + std::string(kTempMarker);
  return n.find(marker) != std::string_view::npos;
}

bool IsOwnTempName(std::string_view n) {
  const std::string own = std::string(kTempMarker) + ProcessNonce() + "-";
  return n.find(own) != std::string_view::npos;
}

Status PwriteAll(int fd, const std::byte* p, size_t n, uint64_t off, const std::string& path) {
  while (n > 0) {
    const ssize_t w = ::pwrite(fd, p, n, static_cast<off_t>(off));
    if (w < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return ErrnoStatus("write", path, errno);
    }
    if (w == 0) return Status::Unavailable("write " + path + ": wrote 0 bytes");
    p += w;
    n -= static_cast<size_t>(w);
    off += static_cast<uint64_t>(w);
  }
  return Status::Ok();
}

// Writes header and payload of an open temp file and fdatasyncs it.
Status WriteContents(int fd, const std::string& path, const SegmentContents& c,
                     SegmentHeader* header) {
  for (size_t i = 0; i < c.sections.size(); ++i) {
    const auto& data = c.sections[i].bytes;
    auto& info = header->sections[i];
    info.crc32c = Crc32c(data.data(), data.size());
    ORRERY_RETURN_IF_ERROR(PwriteAll(fd, data.data(), data.size(), info.offset, path));
  }
  // Zero padding after the last section: extending the file with ftruncate
  // makes the padding read back as zeros without writing it.
  if (::ftruncate(fd, static_cast<off_t>(header->file_size())) != 0) {
    return ErrnoStatus("truncate", path, errno);
  }
  AlignedBuffer page;
  ORRERY_RETURN_IF_ERROR(page.Resize(kSegmentPageSize));
  EncodeSegmentHeader(*header, page.span());
  ORRERY_RETURN_IF_ERROR(PwriteAll(fd, page.data(), kSegmentPageSize, 0, path));
  if (::fdatasync(fd) != 0) return ErrnoStatus("fdatasync", path, errno);
  return Status::Ok();
}

}  // namespace

bool IsValidSegmentName(std::string_view name) {
  return name.size() > kSegmentSuffix.size() && name.size() <= kMaxNameBytes &&
         name.ends_with(kSegmentSuffix) && name[0] != '.' &&
         name.find('/') == std::string_view::npos && name.find('\0') == std::string_view::npos;
}

Result<SegmentHeader> WriteSegment(const std::string& dir, std::string_view name,
                                   const SegmentContents& contents) {
  if (!IsValidSegmentName(name)) {
    return Status::InvalidArgument("bad segment file name \"" + std::string(name) +
                                   "\": want <name>" + std::string(kSegmentSuffix) +
                                   ", no leading '.', no '/', at most " +
                                   std::to_string(kMaxNameBytes) + " bytes");
  }
  std::vector<SegmentSectionSpec> specs;
  specs.reserve(contents.sections.size());
  for (const auto& s : contents.sections) specs.push_back({s.name, s.bytes.size()});
  ORRERY_ASSIGN_OR_RETURN(
      SegmentHeader header,
      PlanSegment(contents.layout_version, contents.content_id, contents.key, specs));

  const std::string tmp = dir + "/" + TempName(name);
  const std::string final_path = dir + "/" + std::string(name);
  UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (!fd.valid()) return ErrnoStatus("create", tmp, errno);
  Status st = WriteContents(fd.get(), tmp, contents, &header);
  fd.Reset();
  if (st.ok() && ::rename(tmp.c_str(), final_path.c_str()) != 0) {
    st = ErrnoStatus("rename to " + final_path, tmp, errno);
  }
  if (!st.ok()) {
    ::unlink(tmp.c_str());
    return st;
  }
  ORRERY_RETURN_IF_ERROR(FsyncDir(dir));
  return header;
}

namespace {

// Calls f(name, d_type) for every entry of `dir` except "." and "..".
template <typename F>
Status ForEachEntry(const std::string& dir, F&& f) {
  std::unique_ptr<DIR, int (*)(DIR*)> d(::opendir(dir.c_str()), &::closedir);
  if (!d) return ErrnoStatus("open directory", dir, errno);
  errno = 0;
  while (dirent* e = ::readdir(d.get())) {
    std::string_view n = e->d_name;
    if (n != "." && n != "..") ORRERY_RETURN_IF_ERROR(f(n, e->d_type));
    errno = 0;
  }
  if (errno != 0) return ErrnoStatus("read directory", dir, errno);
  return Status::Ok();
}

bool IsRegular(const std::string& dir, std::string_view name, unsigned char d_type) {
  if (d_type == DT_REG) return true;
  if (d_type != DT_UNKNOWN) return false;
  struct stat st;
  const std::string path = dir + "/" + std::string(name);
  return ::lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

}  // namespace

Result<std::vector<std::string>> ListSegmentFiles(const std::string& dir) {
  std::vector<std::string> out;
  ORRERY_RETURN_IF_ERROR(ForEachEntry(dir, [&](std::string_view n, unsigned char type) {
    if (IsValidSegmentName(n) && IsRegular(dir, n, type)) out.emplace_back(n);
    return Status::Ok();
  }));
  std::sort(out.begin(), out.end());
  return out;
}

Result<size_t> RemoveStaleSegmentTempFiles(const std::string& dir) {
  std::vector<std::string> stale;
  ORRERY_RETURN_IF_ERROR(ForEachEntry(dir, [&](std::string_view n, unsigned char type) {
    if (IsTempName(n) && !IsOwnTempName(n) && IsRegular(dir, n, type)) stale.emplace_back(n);
    return Status::Ok();
  }));
  size_t removed = 0;
  for (const auto& n : stale) {
    const std::string path = dir + "/" + n;
    if (::unlink(path.c_str()) == 0) {
      ++removed;
    } else if (errno != ENOENT) {
      return ErrnoStatus("remove", path, errno);
    }
  }
  if (removed > 0) ORRERY_RETURN_IF_ERROR(FsyncDir(dir));
  return removed;
}

Status RemoveSegmentFile(const std::string& dir, std::string_view name) {
  if (!IsValidSegmentName(name)) {
    return Status::InvalidArgument("bad segment file name \"" + std::string(name) + "\"");
  }
  const std::string path = dir + "/" + std::string(name);
  if (::unlink(path.c_str()) != 0) return ErrnoStatus("remove", path, errno);
  return FsyncDir(dir);
}

}  // namespace orrery
