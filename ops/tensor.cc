#include "ops/tensor.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <new>

namespace orrery {
namespace {

constexpr size_t kAlignment = kTensorAlignment;

std::atomic<uint64_t> g_buffer_allocations{0};

struct AlignedFree {
  void operator()(uint8_t* p) const { std::free(p); }
};

// Never returns a null buffer for a successful allocation (even of 0 bytes),
// so kernels and memcpy never see nullptr. The buffer starts as `init`
// (init.size() <= bytes), zeros after it: a copy is written once, not
// zeroed first (a 224x224 image's 602 KB request input).
std::shared_ptr<uint8_t[]> AllocateBuffer(size_t bytes, std::string_view init = {}) {
  size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  if (rounded == 0) rounded = kAlignment;
  g_buffer_allocations.fetch_add(1, std::memory_order_relaxed);
  auto* p = static_cast<uint8_t*>(std::aligned_alloc(kAlignment, rounded));
  if (p == nullptr) return nullptr;
  if (!init.empty()) std::memcpy(p, init.data(), init.size());
  std::memset(p + init.size(), 0, rounded - init.size());
  return std::shared_ptr<uint8_t[]>(p, AlignedFree());
}

}  // namespace

uint64_t TensorBufferAllocationCount() {
  return g_buffer_allocations.load(std::memory_order_relaxed);
}

size_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return 4;
    case DType::kUint8: return 1;
    case DType::kInt8: return 1;
    case DType::kUint16: return 2;
    case DType::kInt16: return 2;
    case DType::kInt32: return 4;
    case DType::kInt64: return 8;
    case DType::kBool: return 1;
    case DType::kFloat16: return 2;
    case DType::kFloat64: return 8;
    case DType::kUint32: return 4;
    case DType::kUint64: return 8;
    case DType::kString:
    case DType::kUndefined: return 0;
  }
  return 0;
}

std::string_view DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kUndefined: return "undefined";
    case DType::kFloat32: return "float32";
    case DType::kUint8: return "uint8";
    case DType::kInt8: return "int8";
    case DType::kUint16: return "uint16";
    case DType::kInt16: return "int16";
    case DType::kInt32: return "int32";
    case DType::kInt64: return "int64";
    case DType::kString: return "string";
    case DType::kBool: return "bool";
    case DType::kFloat16: return "float16";
    case DType::kFloat64: return "float64";
    case DType::kUint32: return "uint32";
    case DType::kUint64: return "uint64";
  }
  return "unknown";
}

std::string_view DTypeToOipName(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return "FP32";
    case DType::kUint8: return "UINT8";
    case DType::kInt8: return "INT8";
    case DType::kUint16: return "UINT16";
    case DType::kInt16: return "INT16";
    case DType::kInt32: return "INT32";
    case DType::kInt64: return "INT64";
    case DType::kString: return "BYTES";
    case DType::kBool: return "BOOL";
    case DType::kFloat16: return "FP16";
    case DType::kFloat64: return "FP64";
    case DType::kUint32: return "UINT32";
    case DType::kUint64: return "UINT64";
    case DType::kUndefined: return "";
  }
  return "";
}

DType DTypeFromOipName(std::string_view name) {
  static constexpr DType kAll[] = {
      DType::kFloat32, DType::kUint8,  DType::kInt8,    DType::kUint16, DType::kInt16,
      DType::kInt32,   DType::kInt64,  DType::kString,  DType::kBool,   DType::kFloat16,
      DType::kFloat64, DType::kUint32, DType::kUint64,
  };
  for (DType d : kAll) {
    if (DTypeToOipName(d) == name) return d;
  }
  return DType::kUndefined;
}

int64_t NumElements(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string ShapeToString(const Shape& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(shape[i]);
  }
  out += "]";
  return out;
}

Result<int64_t> CheckedNumElements(const Shape& shape, DType dtype) {
  int64_t n = 1;
  bool zero = false;
  for (int64_t d : shape) {
    if (d < 0) {
      return Status::InvalidArgument("negative dimension in shape " + ShapeToString(shape));
    }
    if (d == 0) zero = true;
  }
  if (zero) return int64_t{0};
  const int64_t elem = dtype == DType::kUndefined ? 1 : static_cast<int64_t>(DTypeSize(dtype));
  const int64_t limit = kMaxTensorBytes / (elem == 0 ? 1 : elem);
  for (int64_t d : shape) {
    if (d != 0 && n > limit / d) {
      return Status::ResourceExhausted("tensor of shape " + ShapeToString(shape) +
                                       " exceeds the limit of " +
                                       std::to_string(kMaxTensorBytes) + " bytes");
    }
    n *= d;
  }
  return n;
}

Tensor::Tensor(DType dtype, Shape shape) : dtype_(dtype), shape_(std::move(shape)) {
  data_ = AllocateBuffer(byte_size());
  if (data_ == nullptr) throw std::bad_alloc();
}

Result<Tensor> Tensor::AllocateWith(DType dtype, Shape shape, std::string_view init) {
  if (dtype == DType::kUndefined || DTypeSize(dtype) == 0) {
    return Status::InvalidArgument("cannot allocate a tensor of dtype " +
                                   std::string(DTypeName(dtype)));
  }
  ORRERY_ASSIGN_OR_RETURN(int64_t n, CheckedNumElements(shape, dtype));
  const size_t bytes = static_cast<size_t>(n) * DTypeSize(dtype);
  if (init.size() > bytes) return Status::Internal("AllocateWith: more initial bytes than the tensor holds");
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.data_ = AllocateBuffer(bytes, init);
  if (t.data_ == nullptr) {
    return Status::ResourceExhausted("out of memory allocating tensor of shape " +
                                     ShapeToString(t.shape_));
  }
  return t;
}

Result<Tensor> Tensor::Allocate(DType dtype, Shape shape) {
  return AllocateWith(dtype, std::move(shape), {});
}

Result<Tensor> Tensor::FromBytes(DType dtype, Shape shape, std::string_view bytes) {
  // The size is checked before allocating: a request whose shape claims far
  // more than it sends costs no allocation.
  if (dtype != DType::kUndefined && DTypeSize(dtype) != 0) {
    ORRERY_ASSIGN_OR_RETURN(int64_t n, CheckedNumElements(shape, dtype));
    const size_t needed = static_cast<size_t>(n) * DTypeSize(dtype);
    if (bytes.size() != needed) {
      return Status::InvalidArgument("tensor of dtype " + std::string(DTypeName(dtype)) +
                                     " and shape " + ShapeToString(shape) + " needs " +
                                     std::to_string(needed) + " bytes, got " +
                                     std::to_string(bytes.size()));
    }
  }
  return AllocateWith(dtype, std::move(shape), bytes);
}

Result<Tensor> Tensor::Reshaped(Shape shape) const {
  ORRERY_ASSIGN_OR_RETURN(int64_t n, CheckedNumElements(shape, dtype_));
  if (n != num_elements()) {
    return Status::InvalidArgument("cannot reshape " + ShapeToString(shape_) + " (" +
                                   std::to_string(num_elements()) + " elements) to " +
                                   ShapeToString(shape) + " (" + std::to_string(n) +
                                   " elements)");
  }
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

Result<Tensor> Tensor::ViewOf(const Tensor& block, size_t offset, DType dtype, Shape shape) {
  if (DTypeSize(dtype) == 0) {
    return Status::InvalidArgument("cannot view a tensor of dtype " +
                                   std::string(DTypeName(dtype)));
  }
  ORRERY_ASSIGN_OR_RETURN(int64_t n, CheckedNumElements(shape, dtype));
  const size_t bytes = static_cast<size_t>(n) * DTypeSize(dtype);
  if (block.data_ == nullptr || offset % kAlignment != 0 || offset > block.byte_size() ||
      bytes > block.byte_size() - offset) {
    return Status::InvalidArgument("view of " + std::to_string(bytes) + " bytes at offset " +
                                   std::to_string(offset) + " does not fit a block of " +
                                   std::to_string(block.byte_size()) + " bytes");
  }
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.data_ = std::shared_ptr<uint8_t[]>(block.data_, block.data_.get() + offset);
  return t;
}

Result<Tensor> Tensor::Borrow(std::shared_ptr<const void> owner, std::span<const std::byte> bytes,
                             DType dtype, Shape shape) {
  if (DTypeSize(dtype) == 0) {
    return Status::InvalidArgument("cannot borrow a tensor of dtype " + std::string(DTypeName(dtype)));
  }
  ORRERY_ASSIGN_OR_RETURN(int64_t n, CheckedNumElements(shape, dtype));
  if (owner == nullptr || static_cast<size_t>(n) * DTypeSize(dtype) != bytes.size() ||
      reinterpret_cast<uintptr_t>(bytes.data()) % kAlignment != 0) {
    return Status::InvalidArgument("cannot borrow " + std::to_string(bytes.size()) +
                                   " bytes (unaligned, no owner or wrong size)");
  }
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.data_ = std::shared_ptr<uint8_t[]>(std::const_pointer_cast<void>(owner),
                                       reinterpret_cast<uint8_t*>(const_cast<std::byte*>(bytes.data())));
  return t;
}

Tensor Tensor::Unbound(DType dtype, Shape shape) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  return t;
}

Status Tensor::ShareBuffer(const Tensor& src) {
  if (src.data_ == nullptr || src.byte_size() != byte_size()) {
    return Status::InvalidArgument("cannot share a buffer of " + std::to_string(src.byte_size()) +
                                   " bytes as a tensor of " + std::to_string(byte_size()) +
                                   " bytes");
  }
  data_ = src.data_;
  return Status::Ok();
}

}  // namespace orrery
