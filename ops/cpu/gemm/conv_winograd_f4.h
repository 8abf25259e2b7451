// Internal to conv_winograd*.cc: the one-dimensional transforms of
// F(4x4, 3x3) on one value (float) or 16 tiles at once (__m512, GCC's
// vector operators), written so that both give the same bits: every
// product is by a power of two (exact), so a fused multiply-add where the
// compiler contracts one rounds as the separate add does, and the sums
// run in the same order. Internal linkage: each file gets its own copy,
// built with its own instruction set.
#pragma once

namespace orrery::ops::cpu::gemm_internal {
namespace {

// out = B^T d for B^T = [4 0 -5 0 1 0; 0 -4 -4 1 1 0; 0 4 -4 -1 1 0;
// 0 -2 -1 2 1 0; 0 2 -1 -2 1 0; 0 4 0 -5 0 1] (Lavin and Gray, points
// 0, +-1, +-2).
template <typename T>
inline void WinogradInputF4(const T d[6], T out[6]) {
  const T d42 = d[4] - d[2], d31 = d[3] - d[1];
  out[0] = (d[0] - d[2]) * 4.0f + d42;
  out[1] = (d[3] + d[4]) - (d[1] + d[2]) * 4.0f;
  out[2] = (d[4] - d[3]) + (d[1] - d[2]) * 4.0f;
  out[3] = d42 + d31 * 2.0f;
  out[4] = d42 - d31 * 2.0f;
  out[5] = (d[1] - d[3]) * 4.0f + (d[5] - d[3]);
}

// out = A^T p for A^T = [1 1 1 1 1 0; 0 1 -1 2 -2 0; 0 1 1 4 4 0;
// 0 1 -1 8 -8 1].
template <typename T>
inline void WinogradOutputF4(const T p[6], T out[4]) {
  const T s12 = p[1] + p[2], d12 = p[1] - p[2];
  const T s34 = p[3] + p[4], d34 = p[3] - p[4];
  out[0] = p[0] + s12 + s34;
  out[1] = d12 + d34 * 2.0f;
  out[2] = s12 + s34 * 4.0f;
  out[3] = d12 + d34 * 8.0f + p[5];
}

}  // namespace
}  // namespace orrery::ops::cpu::gemm_internal
