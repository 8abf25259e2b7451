// Host side of the CUDA backend: which nodes it can run, and ONNX
// attributes + input shapes turned into the plain parameter structs of
// ops/cuda/kernel_math.h. Compiled by g++ whether or not CUDA is present, so
// the plan's refusals and the parameter derivation are tested everywhere.
// Cost: each call is O(rank) or O(inputs), allocation only in the results.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "ops/attributes.h"
#include "ops/cuda/kernel_math.h"
#include "ops/registry.h"
#include "ops/tensor.h"

namespace orrery::ops::cuda {

// The op types the CUDA backend implements (for some attributes and types).
std::vector<std::string> CudaOpTypes();

// OK when the CUDA backend runs this node with these types (and constant
// `values`, nullptr where unknown), else UNIMPLEMENTED naming the op and
// why ("MaxPool on CUDA: the Indices output is not supported"); the caller
// keeps such a node (and so the plan) on the CPU.
Status CheckCudaSupport(std::string_view op_type, const Attributes& attrs, int64_t opset,
                        std::span<const TensorType> inputs,
                        std::span<const Tensor* const> values,
                        std::span<const TensorType> outputs);

struct UnaryParams {
  UnaryOp op = UnaryOp::kIdentity;
  float alpha = 0.0f;
  float beta = 0.0f;
};

// Relu, LeakyRelu, Clip (attributes before opset 11, constant inputs from
// 11), Sigmoid, Tanh, HardSigmoid, HardSwish, Exp, Neg, Abs, Sqrt.
Result<UnaryParams> MakeUnary(std::string_view op_type, const Attributes& attrs, int64_t opset,
                              std::span<const Tensor* const> values);

// The `_fused_activation` of a Conv / Gemm / MatMul (kIdentity when none).
Result<UnaryParams> MakeFusedActivation(std::string_view op_type, const Attributes& attrs);

// Add, Sub, Mul, Div, Max, Min.
Result<BinaryOp> MakeBinary(std::string_view op_type);

// An input of shape `in` read at an output of shape `out`.
Result<BroadcastIndex> MakeBroadcast(const Shape& out, const Shape& in);

// MaxPool / AveragePool on an NCHW input (auto_pad, ceil_mode resolved).
Result<Pool2d> MakePool2d(std::string_view op_type, const Attributes& attrs, const Shape& x);

// A 2-D convolution as cuDNN takes it: symmetric pads only (cuDNN has no
// asymmetric padding; SAME_* with an odd total pad is refused), groups.
struct Conv2dParams {
  int64_t pad_h = 0, pad_w = 0;
  int64_t stride_h = 1, stride_w = 1;
  int64_t dil_h = 1, dil_w = 1;
  int64_t group = 1;
  int64_t out_h = 0, out_w = 0;
};
Result<Conv2dParams> MakeConv2d(const Attributes& attrs, const Shape& x, const Shape& w);

// Softmax rows for the opset's axis semantics.
Result<SoftmaxRows> MakeSoftmaxRows(const Shape& x, const Attributes& attrs, int64_t opset);

// Concat as [outer, block] slabs: blocks[i] = input i's axis extent x inner.
struct ConcatLayout {
  int64_t outer = 1;
  int64_t out_block = 0;
  std::vector<int64_t> blocks;
  std::vector<int64_t> offsets;  // sum of the blocks before input i
};
Result<ConcatLayout> MakeConcat(std::span<const Shape> inputs, const Attributes& attrs);

}  // namespace orrery::ops::cuda
