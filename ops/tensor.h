// Dense tensors: a dtype, a shape and an owned, 64-byte aligned buffer.
//
// Copying a Tensor is O(1): the buffer is shared and immutable by convention
// once a tensor is handed to another component. Kernels write only into
// tensors they allocated.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace orrery {

// Values match onnx::TensorProto::DataType so conversions are casts.
enum class DType : int32_t {
  kUndefined = 0,
  kFloat32 = 1,
  kUint8 = 2,
  kInt8 = 3,
  kUint16 = 4,
  kInt16 = 5,
  kInt32 = 6,
  kInt64 = 7,
  kString = 8,
  kBool = 9,
  kFloat16 = 10,
  kFloat64 = 11,
  kUint32 = 12,
  kUint64 = 13,
};

// Bytes per element; 0 for kUndefined / kString.
size_t DTypeSize(DType dtype);
// ONNX-style name: "float32", "int64", ...
std::string_view DTypeName(DType dtype);
// Open Inference Protocol datatype: "FP32", "INT64", "BOOL", ...
std::string_view DTypeToOipName(DType dtype);
// Inverse of DTypeToOipName; kUndefined when unknown.
DType DTypeFromOipName(std::string_view name);

using Shape = std::vector<int64_t>;

// Product of dims (1 for a scalar). Dims must be >= 0.
int64_t NumElements(const Shape& shape);
// "[1, 3, 224, 224]"
std::string ShapeToString(const Shape& shape);

// Largest single tensor Orrery will allocate (16 GiB).
inline constexpr int64_t kMaxTensorBytes = int64_t{1} << 34;

// Alignment of every buffer Tensor allocates, and of views into arenas.
inline constexpr size_t kTensorAlignment = 64;

// NumElements with checks, for shapes that come from untrusted data: every dim
// must be >= 0 (INVALID_ARGUMENT) and the element count and byte size must not
// overflow or exceed kMaxTensorBytes (RESOURCE_EXHAUSTED). `dtype` sizes the
// byte check; pass kUndefined to check only the element count.
Result<int64_t> CheckedNumElements(const Shape& shape, DType dtype = DType::kUndefined);
class Tensor {
 public:
  Tensor() = default;
  // Allocates a zero-filled buffer for `shape`.
  Tensor(DType dtype, Shape shape);

  // Like the constructor, but validates `shape` with CheckedNumElements and
  // reports allocation failure instead of throwing. Use for untrusted shapes.
  static Result<Tensor> Allocate(DType dtype, Shape shape);

  // Copies `bytes` (must be exactly NumElements(shape) * DTypeSize(dtype)).
  static Result<Tensor> FromBytes(DType dtype, Shape shape, std::string_view bytes);

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int64_t num_elements() const { return NumElements(shape_); }
  size_t byte_size() const { return static_cast<size_t>(num_elements()) * DTypeSize(dtype_); }
  bool empty() const { return dtype_ == DType::kUndefined; }

  void* raw_data() { return data_.get(); }
  const void* raw_data() const { return data_.get(); }
  template <typename T> T* data() { return static_cast<T*>(raw_data()); }
  template <typename T> const T* data() const { return static_cast<const T*>(raw_data()); }
  std::string_view bytes() const {
    return {static_cast<const char*>(raw_data()), byte_size()};
  }

  // Same buffer, new shape with the same element count.
  Result<Tensor> Reshaped(Shape shape) const;

  // Non-owning views, for memory planned by the runtime (arenas). None of
  // these allocate a buffer, and ShareBuffer / ResetBuffer allocate nothing.
  //
  // A tensor over bytes [offset, offset + its size) of `block`'s buffer. It
  // shares ownership of the whole block (shared_ptr aliasing constructor), so
  // the block outlives the view; the bytes are not zeroed. INVALID_ARGUMENT
  // unless `offset` is a multiple of kTensorAlignment and the range fits.
  static Result<Tensor> ViewOf(const Tensor& block, size_t offset, DType dtype, Shape shape);
  // A tensor over `bytes`, which `owner` keeps alive (e.g. a segment read
  // buffer): no copy. INVALID_ARGUMENT unless the size matches dtype and
  // shape and the bytes are kTensorAlignment-aligned. The bytes must not
  // change while the tensor lives; it is for constants.
  static Result<Tensor> Borrow(std::shared_ptr<const void> owner, std::span<const std::byte> bytes,
                               DType dtype, Shape shape);
  // A tensor with a dtype and shape but no buffer (raw_data() is nullptr)
  // until ShareBuffer gives it one.
  static Tensor Unbound(DType dtype, Shape shape);
  // Bytes to hold but no buffer: Unbound and not yet given one (an arena
  // slot), or a constant a model image keeps only in packed form.
  bool unbound() const { return raw_data() == nullptr && byte_size() > 0; }
  // Points this tensor at `src`'s buffer, keeping its own dtype and shape,
  // which must describe as many bytes as `src` holds (INVALID_ARGUMENT).
  Status ShareBuffer(const Tensor& src);
  // Drops the buffer reference; dtype and shape stay (see Unbound).
  void ResetBuffer() { data_.reset(); }

 private:
  // A tensor whose bytes start as `init` (at most its size), zeros after
  // it: Allocate and FromBytes.
  static Result<Tensor> AllocateWith(DType dtype, Shape shape, std::string_view init);
  DType dtype_ = DType::kUndefined;
  Shape shape_;
  std::shared_ptr<uint8_t[]> data_;
};

// Buffers Tensor has allocated in this process (all threads), so tests can
// check that steady-state inference allocates none.
uint64_t TensorBufferAllocationCount();

struct NamedTensor {
  std::string name;
  Tensor tensor;
};

}  // namespace orrery
