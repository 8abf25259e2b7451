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
#include <span>
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

// A model's weights on the GPU: every constant of one plan at its offset of
// the model's weight layout (runtime/cuda/weight_layout.h) in one device
// range, uploaded once through the context's staging buffers on the copy
// stream. With the pages the device cache assigned the model, the range is
// those pages mapped into one virtual range (runtime/cuda/page_mapping.h),
// so the cache's accounting is the GPU memory really used; without (a plan
// compiled on its own, an upload the device tier did not ask for) it is one
// cudaMalloc of the layout's size, outside the pages. What the device
// tier's transfer of a model performs (runtime/cuda/cuda_executor.h,
// Upload); the CudaPlans of that model for any input types borrow it
// (shared_ptr). Destruction unmaps the pages (or frees the buffer).
class CudaWeights {
 public:
  // Lays out and copies every constant of `plan`; blocks until they are on
  // the device (the calling thread performs the link action). `pages`: the
  // model's device pages, exactly the layout's page count (else
  // FAILED_PRECONDITION naming both), or empty for a cudaMalloc'ed range.
  // UNAVAILABLE without a context or CUDA backend; CUDA errors as Status; on
  // any error whatever was mapped is unmapped.
  static Result<std::shared_ptr<const CudaWeights>> Upload(std::shared_ptr<const Plan> plan, CudaContext* context,
                                                           std::span<const uint32_t> pages = {});
  ~CudaWeights();
  CudaWeights(const CudaWeights&) = delete;
  CudaWeights& operator=(const CudaWeights&) = delete;

  const Plan& plan() const;
  // Device memory the constants' range holds (whole pages when paged).
  int64_t device_bytes() const;
  // The device pages mapped under the range, in offset order; empty when
  // the range was cudaMalloc'ed.
  const std::vector<uint32_t>& pages() const;
  // Device address of constant slot `slot`; null for a slot that is not a constant.
  void* at(int slot) const;

  struct Impl;

 private:
  explicit CudaWeights(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

class CudaPlan {
 public:
  // Specialises `plan` for these input types on `context`: CheckCudaPlan,
  // then the constants (`weights`, uploaded for this same plan, else
  // INVALID_ARGUMENT; null: uploaded here, owned by this plan, blocking),
  // one device buffer per other value (cudaMalloc here, never during Run;
  // views alias their input), cuDNN descriptors and algorithms chosen per
  // Conv, one shared cuDNN workspace. The context must outlive the plan.
  static Result<std::unique_ptr<CudaPlan>> Compile(std::shared_ptr<const Plan> plan,
                                                   const std::vector<ops::TensorType>& input_types,
                                                   CudaContext* context,
                                                   std::shared_ptr<const CudaWeights> weights = nullptr);
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

  // Device memory this plan holds beyond its weights (values, workspace).
  int64_t device_bytes() const;

  struct Impl;

 private:
  explicit CudaPlan(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace orrery::runtime
