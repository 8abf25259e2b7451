// Orrery's own CUDA kernels (ops/cuda/kernels.cu), one GPU thread per output
// element (per row for Softmax), each calling the shared math of
// ops/cuda/kernel_math.h. Only built when nvcc is found (ORRERY_HAVE_CUDA).
//
// Every launcher is asynchronous: it enqueues on `stream` and returns; the
// pointers are device memory that must stay valid until the stream reaches
// the kernel. Launch errors (bad configuration) are returned as INTERNAL;
// faults inside a kernel surface at the next synchronisation.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "base/status.h"
#include "ops/cuda/kernel_math.h"

namespace orrery::ops::cuda {

// y[i] = f(x[i]); x may equal y.
Status LaunchUnary(const float* x, float* y, int64_t n, UnaryOp op, float alpha, float beta,
                   cudaStream_t stream);

// y[i] = post(a[A(i)] op b[B(i)]) over the n elements of the output, A / B
// the broadcast offsets; a or b may equal y when it has the output's shape.
Status LaunchBinary(const float* a, const BroadcastIndex& ia, const float* b,
                    const BroadcastIndex& ib, float* y, int64_t n, BinaryOp op, UnaryOp post,
                    float alpha, float beta, cudaStream_t stream);

// y[i] = scale * x[X(i)] (Gemm's beta * C).
Status LaunchScaledBroadcast(const float* x, const BroadcastIndex& ix, float scale, float* y,
                             int64_t n, cudaStream_t stream);

// Inference BatchNormalization over [N, C, spatial] with per-channel params.
Status LaunchBatchNorm(const float* x, const float* scale, const float* bias, const float* mean,
                       const float* var, float epsilon, float* y, int64_t n, int64_t channels,
                       int64_t spatial, cudaStream_t stream);

// 2-D pooling over `planes` (N x C) planes of in_h x in_w.
Status LaunchMaxPool2d(const float* x, float* y, int64_t planes, const Pool2d& g,
                       cudaStream_t stream);
Status LaunchAveragePool2d(const float* x, float* y, int64_t planes, const Pool2d& g,
                           cudaStream_t stream);
Status LaunchGlobalAveragePool(const float* x, float* y, int64_t planes, int64_t plane_size,
                               cudaStream_t stream);

Status LaunchSoftmax(const float* x, float* y, const SoftmaxRows& rows, cudaStream_t stream);

// Copies one Concat input (n elements, blocks as in ConcatDest) into y.
Status LaunchConcatCopy(const float* x, float* y, int64_t n, int64_t in_block, int64_t out_block,
                        int64_t offset, cudaStream_t stream);

}  // namespace orrery::ops::cuda
