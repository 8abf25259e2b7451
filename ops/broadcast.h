// Numpy-style broadcasting helpers shared by the elementwise kernels,
// MatMul's batch dimensions and Gemm's C input.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/status.h"
#include "ops/small_vec.h"
#include "ops/tensor.h"

namespace orrery::ops {

// Multidirectional (numpy) broadcast of two shapes; INVALID_ARGUMENT naming
// both shapes when they are incompatible.
Result<Shape> BroadcastShapes(const Shape& a, const Shape& b);
// The same over any number of shapes (Where, Sum, Max, ...); {} for none.
Result<Shape> BroadcastShapes(std::span<const Shape> shapes);

// True when `from` broadcasts to exactly `to` (ONNX unidirectional broadcast).
bool IsUnidirectionalBroadcastable(const Shape& from, const Shape& to);

// Element strides of a row-major tensor of shape `in` indexed by coordinates of
// `out` (right-aligned; 0 on broadcast dims). Requires `in` to broadcast to `out`.
std::vector<int64_t> BroadcastStrides(const Shape& in, const Shape& out);

// A broadcast binary iteration, simplified: size-1 output dims dropped and
// adjacent dims merged when both inputs stay contiguous across them. Iterating
// dims (outermost first) with the strides visits the output in row-major order.
// Inline storage: building and running one allocates nothing up to rank 12.
struct BinaryLoop {
  SmallVec<int64_t> dims;
  SmallVec<int64_t> a_strides;
  SmallVec<int64_t> b_strides;
};
BinaryLoop MakeBinaryLoop(const Shape& a, const Shape& b, const Shape& out);

// Calls fn(a_offset, b_offset, out_offset, n, a_step, b_step) for each
// innermost run of the loop; steps are 0 or 1 for the innermost dim.
template <typename Fn>
void ForEachRun(const BinaryLoop& loop, Fn&& fn) {
  const size_t rank = loop.dims.size();
  if (rank == 0) {
    fn(int64_t{0}, int64_t{0}, int64_t{0}, int64_t{1}, int64_t{0}, int64_t{0});
    return;
  }
  for (int64_t d : loop.dims) {
    if (d == 0) return;
  }
  const int64_t n = loop.dims[rank - 1];
  const int64_t sa = loop.a_strides[rank - 1];
  const int64_t sb = loop.b_strides[rank - 1];
  SmallVec<int64_t> idx(rank, 0);
  int64_t a_off = 0, b_off = 0, out_off = 0;
  while (true) {
    fn(a_off, b_off, out_off, n, sa, sb);
    out_off += n;
    // Advance the odometer over dims [0, rank-1).
    size_t i = rank - 1;
    while (i > 0) {
      --i;
      ++idx[i];
      a_off += loop.a_strides[i];
      b_off += loop.b_strides[i];
      if (idx[i] < loop.dims[i]) break;
      a_off -= loop.a_strides[i] * loop.dims[i];
      b_off -= loop.b_strides[i] * loop.dims[i];
      idx[i] = 0;
      if (i == 0) return;
    }
    if (rank == 1) return;
  }
}

// BinaryLoop for any number of inputs: stride(k, i) is input k's stride
// along loop dim i. Inline storage up to 64 strides (e.g. 4 inputs of rank 16).
struct MultiLoop {
  SmallVec<int64_t> dims;
  size_t num_inputs = 0;
  SmallVec<int64_t, 64> strides;  // [num_inputs][dims.size()], filled by dim
  int64_t stride(size_t k, size_t i) const { return strides[i * num_inputs + k]; }
};
// Shapes given as pointers so callers need not copy them.
MultiLoop MakeMultiLoop(std::span<const Shape* const> inputs, const Shape& out);

// Calls fn(offsets, out_offset, n, steps) for each innermost run: offsets[k]
// is input k's first element, steps[k] (0 or 1) its step along the run.
template <typename Fn>
void ForEachMultiRun(const MultiLoop& loop, Fn&& fn) {
  const size_t rank = loop.dims.size();
  const size_t k = loop.num_inputs;
  SmallVec<int64_t, 16> off(k, 0), steps(k, 0);
  if (rank == 0) {
    fn(off.data(), int64_t{0}, int64_t{1}, steps.data());
    return;
  }
  for (int64_t d : loop.dims) {
    if (d == 0) return;
  }
  const int64_t n = loop.dims[rank - 1];
  for (size_t j = 0; j < k; ++j) steps[j] = loop.stride(j, rank - 1);
  SmallVec<int64_t> idx(rank, 0);
  int64_t out_off = 0;
  while (true) {
    fn(off.data(), out_off, n, steps.data());
    out_off += n;
    size_t i = rank - 1;
    while (true) {
      if (i == 0) return;
      --i;
      ++idx[i];
      if (idx[i] < loop.dims[i]) {
        for (size_t j = 0; j < k; ++j) off[j] += loop.stride(j, i);
        break;
      }
      for (size_t j = 0; j < k; ++j) off[j] -= loop.stride(j, i) * (loop.dims[i] - 1);
      idx[i] = 0;
    }
  }
}

}  // namespace orrery::ops
