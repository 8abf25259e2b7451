// Dtype-generic helpers for the data-movement kernels (Transpose, Slice,
// Concat, Split, Expand, Tile, Pad, Gather, DepthToSpace, ...). They move
// elements by size, so one implementation serves every numeric dtype; string
// tensors (size 0) are rejected as unsupported before any of them runs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "ops/parallel.h"
#include "ops/registry.h"
#include "ops/tensor.h"

namespace orrery::ops::cpu {

// INVALID_ARGUMENT "<op>: unsupported dtype ..." unless `t` is present with a
// fixed-size dtype (every numeric dtype and bool).
Status RequireMovable(const TensorType& t, const char* op, const char* what);

// Input i of an inference context, nullptr when absent (trailing optional
// inputs are trimmed, so i may be past the end).
inline const TensorType* OptionalInput(const InferContext& ctx, size_t i) {
  if (i >= ctx.inputs.size() || !ctx.inputs[i].present()) return nullptr;
  return &ctx.inputs[i];
}
inline const Tensor* OptionalInput(const KernelContext& ctx, size_t i) {
  return i < ctx.inputs.size() ? ctx.inputs[i] : nullptr;
}

// The values of a 0-D or 1-D int32/int64 tensor (shape-like inputs: Reshape's
// shape, Slice's starts, Tile's repeats, ...), widened to int64.
Result<std::vector<int64_t>> ReadInts(const Tensor& t, const char* op, const char* what);
// The single value of an int32/int64 tensor with one element.
Result<int64_t> ReadScalarInt(const Tensor& t, const char* op, const char* what);

// a * b, INVALID_ARGUMENT on int64 overflow or a negative operand.
Result<int64_t> CheckedDimMul(int64_t a, int64_t b, const char* op);

// Copies a strided view into the contiguous `dst`, visiting `dims` in
// row-major order. `src` points at the view's first element; strides are in
// elements and may be negative (reversed slices) or zero (broadcast).
// Dims are collapsed where possible; contiguous runs use memcpy and a
// transpose of the two innermost dims is done in cache-sized tiles.
// With `threads`, a copy of at least kParallelCopyBytes splits its
// outermost dim into tasks (bytes move the same either way).
void StridedCopy(const void* src, std::span<const int64_t> dims,
                 std::span<const int64_t> src_strides, size_t elem_size, void* dst,
                 ThreadGroup* threads = nullptr);
// Smallest copy StridedCopy splits across threads.
inline constexpr int64_t kParallelCopyBytes = int64_t{256} << 10;

// INTERNAL unless a preallocated output has the shape compute derived from
// the input values: a guard against writing past a buffer sized by an
// inference that saw different values.
Status CheckOutputShape(const Tensor& y, const Shape& want, const char* op);

// Writes `n` copies of the element at `value` to `dst`.
void FillElements(void* dst, int64_t n, const void* value, size_t elem_size);

// Row-major element strides of `shape`.
std::vector<int64_t> ContiguousStrides(const Shape& shape);

// Writes the value 1 (or true) in `dtype` to `dst` (float16: 0x3C00).
Status WriteOne(DType dtype, void* dst);

}  // namespace orrery::ops::cpu
