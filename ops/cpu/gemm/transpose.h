// Internal to ops/cpu: the out-of-place float transpose that turns the
// transposed GEMM's Y^T [positions x channels] into Y [channels x
// positions] (conv.cc's RunTransposed). A scalar column walk cost ~1-2
// cycles an element (ResNet-50's layer4 conv3: 49 x 2048); AVX-512 moves
// 16 x 16 blocks through registers instead. Also the packing of a raw
// row-major left operand into 8-row panels, by 8 x 16 register transposes.
#pragma once

#include <cstdint>

namespace orrery::ops::cpu::gemm_internal {

// dst[j * ldd + i] = src[i * lds + j] for i < rows, j < cols. Scalar; any
// host.
inline void TransposePortable(const float* src, int64_t lds, int64_t rows, int64_t cols,
                              float* dst, int64_t ldd) {
  for (int64_t j = 0; j < cols; ++j) {
    float* __restrict d = dst + j * ldd;
    for (int64_t i = 0; i < rows; ++i) d[i] = src[i * lds + j];
  }
}

// The same by 16 x 16 register blocks (masked at the edges); call only
// when ActiveGemmIsa() is kAvx512 (transpose_avx512.cc, built with
// -mavx512f). Reads and writes nothing outside the two rectangles.
void TransposeAvx512(const float* src, int64_t lds, int64_t rows, int64_t cols, float* dst,
                     int64_t ldd);

// Left panel packing (PackLeftPanel, not transposed) by the same register
// transposes: dst[k * 8 + i] = a[i * lda + k] for i < rows (<= 8; rows past
// it are zero) and k < kc. Eight row loads and 32 shuffles make 16 k steps
// of the panel, where the scalar walk stored one float at a time (~20% of a
// MatMul whose left operand is an activation; see dispatch.cc). Call only
// when ActiveGemmIsa() is kAvx512; reads nothing past row rows - 1, column
// kc - 1.
void PackLeftRowsAvx512(const float* a, int64_t lda, int64_t rows, int64_t kc, float* dst);

}  // namespace orrery::ops::cpu::gemm_internal
