// Small POSIX helpers shared by the segment writer and reader (storage/
// internal): an owning file descriptor and errno -> Status.
#pragma once

#include <string>
#include <string_view>
#include <utility>

#include "base/status.h"

namespace orrery {

// Owns a file descriptor; closes it on destruction (close errors ignored:
// every durable write is fdatasync'ed and checked before the close).
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() { Reset(); }
  UniqueFd(UniqueFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) {
      Reset();
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  void Reset();

 private:
  int fd_ = -1;
};

// "<op> <path>: <strerror>" with a code for `err`: ENOENT -> NOT_FOUND,
// ENOSPC / EDQUOT -> RESOURCE_EXHAUSTED, anything else (EIO included) ->
// UNAVAILABLE, as the catalog maps RocksDB I/O errors.
Status ErrnoStatus(std::string_view op, std::string_view path, int err);

// fsync of a directory, so a rename or unlink in it is durable.
Status FsyncDir(const std::string& dir);

}  // namespace orrery
