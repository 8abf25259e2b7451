#include "storage/aligned_buffer.h"

#include <string>

namespace orrery {

Status AlignedBuffer::Resize(size_t n) {
  if (n <= capacity_) {
    size_ = n;
    return Status::Ok();
  }
  // aligned_alloc wants a size that is a multiple of the alignment.
  const size_t cap = (n + kAlignment - 1) / kAlignment * kAlignment;
  data_.reset();
  size_ = capacity_ = 0;
  auto* p = static_cast<std::byte*>(std::aligned_alloc(kAlignment, cap));
  if (p == nullptr) {
    return Status::ResourceExhausted("cannot allocate " + std::to_string(cap) +
                                     " bytes for a segment buffer");
  }
  data_.reset(p);
  size_ = n;
  capacity_ = cap;
  return Status::Ok();
}

}  // namespace orrery
