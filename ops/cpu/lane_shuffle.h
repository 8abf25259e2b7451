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

}  // namespace orrery::ops::cpu
