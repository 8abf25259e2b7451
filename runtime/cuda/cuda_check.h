// CUDA, cuBLAS and cuDNN error codes as Status values (CUDA builds only).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <string>

#include "base/status.h"

namespace orrery::runtime::cuda_detail {

inline Status Check(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return Status::Ok();
  const StatusCode code = err == cudaErrorMemoryAllocation ? StatusCode::kResourceExhausted
                                                           : StatusCode::kInternal;
  return Status(code, std::string(what) + ": " + cudaGetErrorString(err));
}

inline Status Check(cublasStatus_t err, const char* what) {
  if (err == CUBLAS_STATUS_SUCCESS) return Status::Ok();
  return Status::Internal(std::string(what) + ": cuBLAS status " +
                          std::to_string(static_cast<int>(err)));
}

inline Status Check(cudnnStatus_t err, const char* what) {
  if (err == CUDNN_STATUS_SUCCESS) return Status::Ok();
  return Status::Internal(std::string(what) + ": " + cudnnGetErrorString(err));
}

}  // namespace orrery::runtime::cuda_detail
