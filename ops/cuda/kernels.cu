// Orrery's CUDA kernels: thin grid-stride loops around ops/cuda/kernel_math.h,
// where the arithmetic lives (and is tested on the CPU). Simple and correct
// rather than tuned: one thread per element, one thread per Softmax row.
#include "ops/cuda/kernels.h"

#include <string>

namespace orrery::ops::cuda {
namespace {

constexpr int kThreads = 256;
// Grid-stride loops cover any n with a bounded grid.
constexpr int64_t kMaxBlocks = 65535;

int Blocks(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<int>(b < 1 ? 1 : (b > kMaxBlocks ? kMaxBlocks : b));
}

Status Launched(const char* what) {
  const cudaError_t err = cudaGetLastError();
  if (err == cudaSuccess) return Status::Ok();
  return Status::Internal(std::string("CUDA kernel ") + what + ": " + cudaGetErrorString(err));
}

#define ORRERY_GRID_LOOP(i, n)                                                        \
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)

__global__ void UnaryKernel(const float* x, float* y, int64_t n, UnaryOp op, float alpha,
                            float beta) {
  ORRERY_GRID_LOOP(i, n) { y[i] = ApplyUnary(op, x[i], alpha, beta); }
}

__global__ void BinaryKernel(const float* a, BroadcastIndex ia, const float* b,
                             BroadcastIndex ib, float* y, int64_t n, BinaryOp op, UnaryOp post,
                             float alpha, float beta) {
  ORRERY_GRID_LOOP(i, n) {
    const float v = ApplyBinary(op, a[BroadcastOffset(ia, i)], b[BroadcastOffset(ib, i)]);
    y[i] = ApplyUnary(post, v, alpha, beta);
  }
}

__global__ void ScaledBroadcastKernel(const float* x, BroadcastIndex ix, float scale, float* y,
                                      int64_t n) {
  ORRERY_GRID_LOOP(i, n) { y[i] = scale * x[BroadcastOffset(ix, i)]; }
}

__global__ void BatchNormKernel(const float* x, const float* scale, const float* bias,
                                const float* mean, const float* var, float epsilon, float* y,
                                int64_t n, int64_t channels, int64_t spatial) {
  ORRERY_GRID_LOOP(i, n) {
    const int64_t c = ChannelOf(i, channels, spatial);
    y[i] = BatchNormAt(x[i], scale[c], bias[c], mean[c], var[c], epsilon);
  }
}

__global__ void MaxPoolKernel(const float* x, float* y, int64_t n, Pool2d g) {
  ORRERY_GRID_LOOP(i, n) {
    const int64_t plane = i / (g.out_h * g.out_w);
    const int64_t pos = i % (g.out_h * g.out_w);
    y[i] = MaxPool2dAt(x + plane * g.in_h * g.in_w, g, pos / g.out_w, pos % g.out_w);
  }
}

__global__ void AveragePoolKernel(const float* x, float* y, int64_t n, Pool2d g) {
  ORRERY_GRID_LOOP(i, n) {
    const int64_t plane = i / (g.out_h * g.out_w);
    const int64_t pos = i % (g.out_h * g.out_w);
    y[i] = AveragePool2dAt(x + plane * g.in_h * g.in_w, g, pos / g.out_w, pos % g.out_w);
  }
}

__global__ void GlobalAveragePoolKernel(const float* x, float* y, int64_t planes,
                                        int64_t plane_size) {
  ORRERY_GRID_LOOP(i, planes) { y[i] = MeanOf(x + i * plane_size, plane_size); }
}

__global__ void SoftmaxKernel(const float* x, float* y, SoftmaxRows s) {
  ORRERY_GRID_LOOP(row, SoftmaxRowCount(s)) {
    const int64_t base = SoftmaxRowBase(s, row);
    SoftmaxRow(x + base, y + base, s.axis_dim, s.inner);
  }
}

__global__ void ConcatKernel(const float* x, float* y, int64_t n, int64_t in_block,
                             int64_t out_block, int64_t offset) {
  ORRERY_GRID_LOOP(i, n) { y[ConcatDest(i, in_block, out_block, offset)] = x[i]; }
}

}  // namespace

Status LaunchUnary(const float* x, float* y, int64_t n, UnaryOp op, float alpha, float beta,
                   cudaStream_t stream) {
  if (n == 0) return Status::Ok();
  UnaryKernel<<<Blocks(n), kThreads, 0, stream>>>(x, y, n, op, alpha, beta);
  return Launched("unary");
}

Status LaunchBinary(const float* a, const BroadcastIndex& ia, const float* b,
                    const BroadcastIndex& ib, float* y, int64_t n, BinaryOp op, UnaryOp post,
                    float alpha, float beta, cudaStream_t stream) {
  if (n == 0) return Status::Ok();
  BinaryKernel<<<Blocks(n), kThreads, 0, stream>>>(a, ia, b, ib, y, n, op, post, alpha, beta);
  return Launched("binary");
}

Status LaunchScaledBroadcast(const float* x, const BroadcastIndex& ix, float scale, float* y,
                             int64_t n, cudaStream_t stream) {
  if (n == 0) return Status::Ok();
  ScaledBroadcastKernel<<<Blocks(n), kThreads, 0, stream>>>(x, ix, scale, y, n);
  return Launched("scaled broadcast");
}

Status LaunchBatchNorm(const float* x, const float* scale, const float* bias, const float* mean,
                       const float* var, float epsilon, float* y, int64_t n, int64_t channels,
                       int64_t spatial, cudaStream_t stream) {
  if (n == 0) return Status::Ok();
  BatchNormKernel<<<Blocks(n), kThreads, 0, stream>>>(x, scale, bias, mean, var, epsilon, y, n,
                                                       channels, spatial);
  return Launched("BatchNormalization");
}

Status LaunchMaxPool2d(const float* x, float* y, int64_t planes, const Pool2d& g,
                       cudaStream_t stream) {
  const int64_t n = planes * g.out_h * g.out_w;
  if (n == 0) return Status::Ok();
  MaxPoolKernel<<<Blocks(n), kThreads, 0, stream>>>(x, y, n, g);
  return Launched("MaxPool");
}

Status LaunchAveragePool2d(const float* x, float* y, int64_t planes, const Pool2d& g,
                           cudaStream_t stream) {
  const int64_t n = planes * g.out_h * g.out_w;
  if (n == 0) return Status::Ok();
  AveragePoolKernel<<<Blocks(n), kThreads, 0, stream>>>(x, y, n, g);
  return Launched("AveragePool");
}

Status LaunchGlobalAveragePool(const float* x, float* y, int64_t planes, int64_t plane_size,
                               cudaStream_t stream) {
  if (planes == 0) return Status::Ok();
  GlobalAveragePoolKernel<<<Blocks(planes), kThreads, 0, stream>>>(x, y, planes, plane_size);
  return Launched("GlobalAveragePool");
}

Status LaunchSoftmax(const float* x, float* y, const SoftmaxRows& rows, cudaStream_t stream) {
  const int64_t n = SoftmaxRowCount(rows);
  if (n == 0 || rows.axis_dim == 0) return Status::Ok();
  SoftmaxKernel<<<Blocks(n), kThreads, 0, stream>>>(x, y, rows);
  return Launched("Softmax");
}

Status LaunchConcatCopy(const float* x, float* y, int64_t n, int64_t in_block, int64_t out_block,
                        int64_t offset, cudaStream_t stream) {
  if (n == 0) return Status::Ok();
  ConcatKernel<<<Blocks(n), kThreads, 0, stream>>>(x, y, n, in_block, out_block, offset);
  return Launched("Concat");
}

}  // namespace orrery::ops::cuda
