// The math of Orrery's CUDA kernels, one output element (or one row) at a
// time, as inline functions compiled by both nvcc (device and host) and g++.
// ops/cuda/kernels.cu launches one GPU thread per element and calls these;
// tests/unit/cuda/kernel_math_test.cc calls the same functions on the CPU and
// compares them with the CPU kernels on odd shapes, so the index arithmetic
// (pooling windows, broadcasting offsets, softmax rows, concat offsets) is
// tested on machines without a GPU.
//
// Rules for this header: no allocation, no Status, no exceptions, no std
// containers; plain structs of integers passed by value to kernels. Window
// arithmetic comes from ops/conv_util.h (constexpr, shared with the CPU
// kernels; nvcc needs --expt-relaxed-constexpr for it).
#pragma once

#include <cmath>
#include <cstdint>

#include "ops/conv_util.h"

#if defined(__CUDACC__)
#define ORRERY_HD __host__ __device__ inline
#else
#define ORRERY_HD inline
#endif

namespace orrery::ops::cuda {

// Highest rank the broadcasting kernels handle (more: the plan refuses the op).
inline constexpr int kMaxRank = 8;

// ---------------- Broadcasting ----------------

// Maps a linear index of the output to the offset of the element an input
// reads under numpy broadcasting: `strides` are the input's row-major strides
// aligned to the output's last axes, 0 on broadcast (size-1 or missing) axes.
struct BroadcastIndex {
  int rank = 0;
  int64_t out_dims[kMaxRank] = {};
  int64_t strides[kMaxRank] = {};
};

ORRERY_HD int64_t BroadcastOffset(const BroadcastIndex& b, int64_t linear) {
  int64_t offset = 0;
  for (int d = b.rank - 1; d >= 0; --d) {
    const int64_t i = linear % b.out_dims[d];
    linear /= b.out_dims[d];
    offset += i * b.strides[d];
  }
  return offset;
}

// Fills `b` for an input of shape in[0..in_rank) read at an output of shape
// out[0..out_rank). False when a rank exceeds kMaxRank or the shapes do not
// broadcast (the caller then refuses the op).
ORRERY_HD bool MakeBroadcastIndex(const int64_t* out, int out_rank, const int64_t* in,
                                  int in_rank, BroadcastIndex* b) {
  if (out_rank > kMaxRank || in_rank > out_rank) return false;
  b->rank = out_rank;
  int64_t stride = 1;
  for (int d = out_rank - 1; d >= 0; --d) {
    b->out_dims[d] = out[d];
    const int id = d - (out_rank - in_rank);
    if (id < 0) {
      b->strides[d] = 0;
      continue;
    }
    if (in[id] == out[d]) {
      b->strides[d] = in[id] == 1 ? 0 : stride;
    } else if (in[id] == 1) {
      b->strides[d] = 0;
    } else {
      return false;
    }
    stride *= in[id];
  }
  return true;
}

// ---------------- Elementwise ----------------

enum class BinaryOp : int { kAdd, kSub, kMul, kDiv, kMax, kMin };

ORRERY_HD float ApplyBinary(BinaryOp op, float a, float b) {
  switch (op) {
    case BinaryOp::kAdd: return a + b;
    case BinaryOp::kSub: return a - b;
    case BinaryOp::kMul: return a * b;
    case BinaryOp::kDiv: return a / b;
    // NaN propagates, as in the CPU kernels (fmaxf would drop it).
    case BinaryOp::kMax: return (a != a || a > b) ? a : b;
    case BinaryOp::kMin: return (a != a || a < b) ? a : b;
  }
  return 0.0f;
}

// The activations the runtime may fuse (ops/registry.h FusionFlags) plus a
// few plain unary ops. alpha / beta: LeakyRelu alpha, Clip min / max,
// HardSigmoid alpha / beta.
enum class UnaryOp : int {
  kIdentity,
  kRelu,
  kLeakyRelu,
  kClip,
  kSigmoid,
  kTanh,
  kHardSigmoid,
  kHardSwish,
  kExp,
  kNeg,
  kAbs,
  kSqrt,
};

ORRERY_HD float ApplyUnary(UnaryOp op, float x, float alpha, float beta) {
  switch (op) {
    case UnaryOp::kIdentity: return x;
    case UnaryOp::kRelu: return x > 0.0f ? x : 0.0f;
    case UnaryOp::kLeakyRelu: return x >= 0.0f ? x : alpha * x;
    case UnaryOp::kClip: return x < alpha ? alpha : (x > beta ? beta : x);
    case UnaryOp::kSigmoid: return 1.0f / (1.0f + ::expf(-x));
    case UnaryOp::kTanh: return ::tanhf(x);
    case UnaryOp::kHardSigmoid: {
      const float y = alpha * x + beta;
      return y < 0.0f ? 0.0f : (y > 1.0f ? 1.0f : y);
    }
    case UnaryOp::kHardSwish: {
      const float y = x / 6.0f + 0.5f;
      return x * (y < 0.0f ? 0.0f : (y > 1.0f ? 1.0f : y));
    }
    case UnaryOp::kExp: return ::expf(x);
    case UnaryOp::kNeg: return -x;
    case UnaryOp::kAbs: return ::fabsf(x);
    case UnaryOp::kSqrt: return ::sqrtf(x);
  }
  return 0.0f;
}

// ---------------- BatchNormalization (inference) ----------------

// Channel of linear index `i` in an [N, C, spatial...] tensor.
ORRERY_HD int64_t ChannelOf(int64_t i, int64_t channels, int64_t spatial) {
  return (i / spatial) % channels;
}

ORRERY_HD float BatchNormAt(float x, float scale, float bias, float mean, float var,
                            float epsilon) {
  return (x - mean) * (scale / ::sqrtf(var + epsilon)) + bias;
}

// ---------------- Pooling (2-D, NCHW) ----------------

// Explicit geometry of one 2-D pooling window (auto_pad already resolved).
struct Pool2d {
  int64_t in_h = 0, in_w = 0;
  int64_t out_h = 0, out_w = 0;
  int64_t k_h = 1, k_w = 1;
  int64_t stride_h = 1, stride_w = 1;
  int64_t dil_h = 1, dil_w = 1;
  int64_t pad_top = 0, pad_left = 0, pad_bottom = 0, pad_right = 0;
  bool count_include_pad = false;  // AveragePool
};

// Max over the taps of output (oh, ow) inside the input `plane` (in_h x in_w).
// A window with no valid tap gives the lowest float, as the CPU kernel.
ORRERY_HD float MaxPool2dAt(const float* plane, const Pool2d& g, int64_t oh, int64_t ow) {
  const IndexRange th = ValidTaps(oh, g.in_h, g.k_h, g.stride_h, g.dil_h, g.pad_top);
  const IndexRange tw = ValidTaps(ow, g.in_w, g.k_w, g.stride_w, g.dil_w, g.pad_left);
  float best = -3.402823466e+38f;
  for (int64_t a = th.begin; a < th.end; ++a) {
    const float* row = plane + (oh * g.stride_h - g.pad_top + a * g.dil_h) * g.in_w;
    for (int64_t b = tw.begin; b < tw.end; ++b) {
      const float v = row[ow * g.stride_w - g.pad_left + b * g.dil_w];
      if (v > best || v != v) best = v;
    }
  }
  return best;
}

// Mean over the valid taps, or with count_include_pad over the taps inside
// the padded input (not those past it in ceil_mode), as ONNX specifies.
ORRERY_HD float AveragePool2dAt(const float* plane, const Pool2d& g, int64_t oh, int64_t ow) {
  const IndexRange th = ValidTaps(oh, g.in_h, g.k_h, g.stride_h, g.dil_h, g.pad_top);
  const IndexRange tw = ValidTaps(ow, g.in_w, g.k_w, g.stride_w, g.dil_w, g.pad_left);
  float sum = 0.0f;
  for (int64_t a = th.begin; a < th.end; ++a) {
    const float* row = plane + (oh * g.stride_h - g.pad_top + a * g.dil_h) * g.in_w;
    for (int64_t b = tw.begin; b < tw.end; ++b) sum += row[ow * g.stride_w - g.pad_left + b * g.dil_w];
  }
  int64_t count = th.size() * tw.size();
  if (g.count_include_pad) {
    count = ValidTaps(oh, g.in_h + g.pad_top + g.pad_bottom, g.k_h, g.stride_h, g.dil_h, 0).size() *
            ValidTaps(ow, g.in_w + g.pad_left + g.pad_right, g.k_w, g.stride_w, g.dil_w, 0).size();
  }
  return count == 0 ? 0.0f : sum / static_cast<float>(count);
}

// GlobalAveragePool over one plane of n elements.
ORRERY_HD float MeanOf(const float* plane, int64_t n) {
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) sum += plane[i];
  return n == 0 ? 0.0f : sum / static_cast<float>(n);
}

// ---------------- Softmax ----------------

// A softmax is `outer * inner` rows of `axis_dim` elements with stride
// `inner` (opset >= 13: one axis; opset < 13: the input flattened to 2-D at
// `axis`, i.e. inner = 1 and axis_dim = the product of the trailing dims).
struct SoftmaxRows {
  int64_t outer = 1;
  int64_t axis_dim = 1;
  int64_t inner = 1;
};

ORRERY_HD int64_t SoftmaxRowCount(const SoftmaxRows& s) { return s.outer * s.inner; }

// Offset of the first element of row `row`.
ORRERY_HD int64_t SoftmaxRowBase(const SoftmaxRows& s, int64_t row) {
  return (row / s.inner) * s.axis_dim * s.inner + row % s.inner;
}

// out[i * stride] = exp(in[i * stride] - max) / sum, i in [0, n); the max is
// subtracted first so large inputs do not overflow.
ORRERY_HD void SoftmaxRow(const float* in, float* out, int64_t n, int64_t stride) {
  float m = -3.402823466e+38f;
  for (int64_t i = 0; i < n; ++i) m = in[i * stride] > m ? in[i * stride] : m;
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    const float e = ::expf(in[i * stride] - m);
    out[i * stride] = e;
    sum += e;
  }
  const float inv = 1.0f / sum;
  for (int64_t i = 0; i < n; ++i) out[i * stride] *= inv;
}

// ---------------- Concat ----------------

// Concat along an axis as [outer, axis * inner] blocks: element `i` of an
// input whose block is `in_block` (its axis extent x inner) lands at this
// output offset; `out_block` is the output's block and `offset` the sum of
// the blocks of the inputs before it.
ORRERY_HD int64_t ConcatDest(int64_t i, int64_t in_block, int64_t out_block, int64_t offset) {
  return (i / in_block) * out_block + offset + i % in_block;
}

// ---------------- GEMM through cuBLAS ----------------

// cuBLAS is column-major. A row-major C[M, N] = op(A) op(B) is, read as
// column-major, C^T[N, M] = op(B)^T op(A)^T: cuBLAS is called with B first
// and A second, m = N, n = M, and the leading dimensions of the row-major
// buffers. `trans_*` say whether cuBLAS should transpose that operand.
struct ColumnMajorGemm {
  bool trans_first = false;   // applies to B
  bool trans_second = false;  // applies to A
  int64_t m = 0, n = 0, k = 0;
  int64_t ld_first = 0, ld_second = 0, ld_c = 0;
};

ORRERY_HD ColumnMajorGemm RowMajorGemmAsColumnMajor(bool trans_a, bool trans_b, int64_t m,
                                                    int64_t n, int64_t k) {
  ColumnMajorGemm g;
  g.trans_first = trans_b;
  g.trans_second = trans_a;
  g.m = n;
  g.n = m;
  g.k = k;
  g.ld_first = trans_b ? k : n;   // B is [K, N], or [N, K] when transposed
  g.ld_second = trans_a ? m : k;  // A is [M, K], or [K, M] when transposed
  g.ld_c = n;
  return g;
}

}  // namespace orrery::ops::cuda
