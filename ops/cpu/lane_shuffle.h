// Compile-time lane shuffles of GCC/Clang vector-extension types, written
// with __builtin_shufflevector (GCC >= 12 and Clang both have it; GCC's
// __builtin_shuffle is unknown to Clang, which builds the fuzz targets).
// Internal linkage on purpose: each ISA's file instantiates these with its
// own -m flags, and vector types mangle alike across files, so shared
// (inline) instantiations could let the linker pick an AVX-512 copy for
// the portable path.
#pragma once

#include <cstddef>
#include <utility>

namespace orrery::ops::cpu {

// Lanes 0, 2, 4, ... of the concatenation a:b (W lanes each).
template <typename V, size_t... I>
static inline V EvenLanesOf(V a, V b, std::index_sequence<I...>) {
  return __builtin_shufflevector(a, b, static_cast<int>(2 * I)...);
}

// The stride-2 gather of two overlapping loads, where b starts W - 1
// elements after a: element 2l is lane 2l of a for l < W / 2, and lane
// 2l + 1 - W of b (index 2l + 1 into a:b) after that.
template <size_t W, typename V, size_t... I>
static inline V StrideTwoOf(V a, V b, std::index_sequence<I...>) {
  return __builtin_shufflevector(a, b, static_cast<int>(I < W / 2 ? 2 * I : 2 * I + 1)...);
}

// The even lanes of a:b within each 128-bit block: block k holds a[4k],
// a[4k + 2], b[4k], b[4k + 2] (one vshufps, where EvenLanesOf needs
// cross-block permutes). With W = 4 this is EvenLanesOf; wider, apply
// BlocksInOrder once to the result of lane-wise ops on such vectors.
template <size_t W, typename V, size_t... I>
static inline V EvenLanesInBlocksOf(V a, V b, std::index_sequence<I...>) {
  return __builtin_shufflevector(
      a, b, static_cast<int>((I % 4 < 2 ? 0 : W) + I / 4 * 4 + I % 2 * 2)...);
}
// Likewise the odd lanes: a[4k + 1], a[4k + 3], b[4k + 1], b[4k + 3].
template <size_t W, typename V, size_t... I>
static inline V OddLanesInBlocksOf(V a, V b, std::index_sequence<I...>) {
  return __builtin_shufflevector(
      a, b, static_cast<int>((I % 4 < 2 ? 0 : W) + I / 4 * 4 + I % 2 * 2 + 1)...);
}
// Reorders the 64-bit pairs of an *InBlocksOf result into the order of
// EvenLanesOf / its odd counterpart (one vpermpd for W = 8).
template <size_t W, typename V, size_t... I>
static inline V BlocksInOrder(V v, std::index_sequence<I...>) {
  return __builtin_shufflevector(
      v, v,
      static_cast<int>(2 * (I / 2 < W / 4 ? 2 * (I / 2) : 2 * (I / 2 - W / 4) + 1) + I % 2)...);
}

}  // namespace orrery::ops::cpu
