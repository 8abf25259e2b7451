#include "ops/cpu/sgemm.h"

#include <algorithm>
#include <vector>

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

}  // namespace

void Sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
           const float* a, int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc) {
  if (m <= 0 || n <= 0 || k <= 0) return;
  if (!trans_b) {
    SgemmNN(trans_a, m, n, k, alpha, a, lda, b, ldb, c, ldc);
    return;
  }
  // B is stored N x K: transpose it once into K x N.
  std::vector<float> bt(static_cast<size_t>(k) * static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t kk = 0; kk < k; ++kk) bt[kk * n + j] = b[j * ldb + kk];
  }
  SgemmNN(trans_a, m, n, k, alpha, a, lda, bt.data(), n, c, ldc);
}

}  // namespace orrery::ops::cpu
