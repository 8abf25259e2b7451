// Single-precision row-major matrix multiply used by Gemm and MatMul:
//   C[M x N] += alpha * op(A) * op(B),  op(X) = X or X^T.
// A plain cache-blocked i-k-j loop; to be replaced by packed AVX-512 kernels.
#pragma once

#include <cstdint>

namespace orrery::ops::cpu {

void Sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
           const float* a, int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc);

}  // namespace orrery::ops::cpu
