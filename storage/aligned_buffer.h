// A heap buffer aligned to 4096 bytes, as O_DIRECT reads require, owned RAII.
//
// Resize keeps no contents (it is for reading into) and reallocates only when
// the capacity is too small, so a caller can reuse one buffer across reads.
// Memory is not zeroed. Buffers of 2 MiB or more are 2 MiB-aligned and
// advised as transparent huge pages (fewer page faults when first filled).
// Move-only; not thread-safe.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <memory>
#include <span>

#include "base/status.h"

namespace orrery {

class AlignedBuffer {
 public:
  static constexpr size_t kAlignment = 4096;
  static constexpr size_t kHugePage = size_t{2} << 20;

  AlignedBuffer() = default;

  // Makes size() == n; contents are unspecified afterwards.
  // RESOURCE_EXHAUSTED if the allocation fails.
  Status Resize(size_t n);

  std::byte* data() { return data_.get(); }
  const std::byte* data() const { return data_.get(); }
  size_t size() const { return size_; }
  size_t capacity() const { return capacity_; }
  std::span<std::byte> span() { return {data(), size_}; }
  std::span<const std::byte> span() const { return {data(), size_}; }

 private:
  struct Free {
    void operator()(std::byte* p) const { std::free(p); }
  };
  std::unique_ptr<std::byte, Free> data_;
  size_t size_ = 0;
  size_t capacity_ = 0;
};

}  // namespace orrery
