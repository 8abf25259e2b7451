#include "ops/cpu/sgemm.h"

#include <algorithm>

namespace orrery::ops::cpu {
namespace {

constexpr int64_t kBlockK = 128;

// C += alpha * op(A) * B with B row-major K x N (ldb).
void SgemmNN(bool trans_a, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
             int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc) {
  for (int64_t k0 = 0; k0 < k; k0 += kBlockK) {
    const int64_t k1 = std::min(k, k0 + kBlockK);
    for (int64_t i = 0; i < m; ++i) {
      float* __restrict crow = c + i * ldc;
      for (int64_t kk = k0; kk < k1; ++kk) {
        const float av = alpha * (trans_a ? a[kk * lda + i] : a[i * lda + kk]);
        const float* __restrict brow = b + kk * ldb;
        for (int64_t j = 0; j < n; ++j) crow[j] += av * brow[j];
      }
    }
  }
}

// C += alpha * op(A) * B^T with B row-major N x K (ldb). Eight partial sums
// let the compiler vectorise the dot product without reassociating freely.
void SgemmNT(bool trans_a, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
             int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc) {
  constexpr int kLanes = 8;
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      const float* __restrict brow = b + j * ldb;
      float acc[kLanes] = {};
      int64_t kk = 0;
      if (!trans_a) {
        const float* __restrict arow = a + i * lda;
        for (; kk + kLanes <= k; kk += kLanes) {
          for (int l = 0; l < kLanes; ++l) acc[l] += arow[kk + l] * brow[kk + l];
        }
      }
      float sum = 0.0f;
      for (; kk < k; ++kk) sum += (trans_a ? a[kk * lda + i] : a[i * lda + kk]) * brow[kk];
      for (float v : acc) sum += v;
      c[i * ldc + j] += alpha * sum;
    }
  }
}

}  // namespace

void Sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
           const float* a, int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc) {
  if (m <= 0 || n <= 0 || k <= 0) return;
  if (!trans_b) {
    SgemmNN(trans_a, m, n, k, alpha, a, lda, b, ldb, c, ldc);
    return;
  }
  // B is stored N x K: each C element is a dot product of two contiguous
  // rows (no per-call transposed copy of B, so nothing is allocated).
  SgemmNT(trans_a, m, n, k, alpha, a, lda, b, ldb, c, ldc);
}

}  // namespace orrery::ops::cpu
