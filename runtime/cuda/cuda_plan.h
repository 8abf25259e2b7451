// A plan compiled for a CUDA GPU: cuDNN for Conv, cuBLAS SGEMM for Gemm and
// MatMul, Orrery's own kernels (ops/cuda/kernels.h) for elementwise ops,
// BatchNormalization, pooling, Softmax and Concat; Flatten / Reshape /
// Squeeze / Unsqueeze / Identity are views of their input's device buffer.
//
// CheckCudaPlan is plain C++ and runs in every build: it says whether every
// step of a plan can run on the GPU for given input types, or names the
// first step and op that cannot (UNIMPLEMENTED), so placement keeps that
// model on the CPU. CudaPlan needs the CUDA backend and a device (see
// runtime/cuda/cuda_context.h); without them Compile returns UNAVAILABLE.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "base/status.h"
#include "ops/registry.h"
#include "ops/tensor.h"
#include "runtime/cuda/cuda_context.h"
#include "runtime/plan.h"

namespace orrery::runtime {

// OK when every step of `plan` runs on the CUDA backend with these graph
// input types; else UNIMPLEMENTED "<step label>: <op> on CUDA: <why>" for the
// first step that does not (also when a type depends on values computed at
// run time). Errors of type inference pass through. O(steps); no device.
Status CheckCudaPlan(const Plan& plan, const std::vector<ops::TensorType>& input_types);

class CudaPlan {
 public:
  // Specialises `plan` for these input types on `context`: CheckCudaPlan,
  // then constants uploaded once (through the context's staging buffers),
  // one device buffer per value (cudaMalloc here, never during Run; views
  // alias their input), cuDNN descriptors and algorithms chosen per Conv,
  // one shared cuDNN workspace. Blocks for the uploads. The context must
  // outlive the plan.
  static Result<std::unique_ptr<CudaPlan>> Compile(std::shared_ptr<const Plan> plan,
                                                   const std::vector<ops::TensorType>& input_types,
                                                   CudaContext* context);
  ~CudaPlan();
  CudaPlan(const CudaPlan&) = delete;
  CudaPlan& operator=(const CudaPlan&) = delete;

  // One inference: inputs (graph-input order, the compiled types, else
  // INVALID_ARGUMENT naming the input) copied on the copy stream, the steps
  // enqueued on the compute stream under the context's compute mutex (so
  // another plan's copies overlap these kernels), then the outputs copied
  // back. Blocks until the outputs are on the host. Runs of one CudaPlan
  // are serialised (its buffers are shared).
  Result<std::vector<Tensor>> Run(const std::vector<Tensor>& inputs);

  // Device memory this plan holds (constants, values, workspace).
  int64_t device_bytes() const;

  struct Impl;

 private:
  explicit CudaPlan(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace orrery::runtime
