#include "storage/aligned_buffer.h"

#include <sys/mman.h>

#include <string>

namespace orrery {

Status AlignedBuffer::Resize(size_t n) {
  if (n <= capacity_) {
    size_ = n;
    return Status::Ok();
  }
  // Large buffers get 2 MiB alignment and MADV_HUGEPAGE: filling a fresh
  // 100 MB buffer otherwise spends much of its time in 4 KiB page faults
  // (THP is often in "madvise" mode). aligned_alloc wants a size that is a
  // multiple of the alignment.
  const size_t align = n >= kHugePage ? kHugePage : kAlignment;
  const size_t cap = (n + align - 1) / align * align;
  data_.reset();
  size_ = capacity_ = 0;
  auto* p = static_cast<std::byte*>(std::aligned_alloc(align, cap));
  if (p == nullptr) {
    return Status::ResourceExhausted("cannot allocate " + std::to_string(cap) +
                                     " bytes for a segment buffer");
  }
  if (align == kHugePage) ::madvise(p, cap, MADV_HUGEPAGE);  // a hint; failure is harmless
  data_.reset(p);
  size_ = n;
  capacity_ = cap;
  return Status::Ok();
}

}  // namespace orrery
