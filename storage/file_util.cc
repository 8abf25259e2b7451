#include "storage/file_util.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace orrery {

void UniqueFd::Reset() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

Status ErrnoStatus(std::string_view op, std::string_view path, int err) {
  std::string msg = std::string(op) + " " + std::string(path) + ": " + std::strerror(err);
  switch (err) {
    case ENOENT:
      return Status::NotFound(std::move(msg));
    case ENOSPC:
    case EDQUOT:
      return Status::ResourceExhausted(std::move(msg));
    default:
      return Status::Unavailable(std::move(msg));
  }
}

Status FsyncDir(const std::string& dir) {
  UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd.valid()) return ErrnoStatus("open directory", dir, errno);
  if (::fsync(fd.get()) != 0) return ErrnoStatus("fsync directory", dir, errno);
  return Status::Ok();
}

}  // namespace orrery
