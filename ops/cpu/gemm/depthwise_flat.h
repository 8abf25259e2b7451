// Internal to ops/cpu: the lane table of the "flat" depthwise kernel, which
// treats an output plane (h_out * w_out <= kFlatMaxPositions) as one
// flattened row of 16-lane vectors instead of one vector per output row, so
// that 7x7 and 14x14 planes fill their lanes (a 7-wide row fills 7 of 16)
// and no tap needs a per-row range. Built once per shape in Conv's Prepare
// (portable code); the AVX-512 depthwise kernel reads it, the AVX2 one for
// planes of at most 8 columns (7x7: -37%; 14x14 even), the portable one
// keeps its row loops. Measured (CPU time, 3x3, AVX-512) against the
// row kernel: 7x7 -67%, 14x14 -55%, 28x28 -30%, 56x56 -16%, 112x112 even
// (memory-bound; its table would be 70 KiB), hence the 4096 cap.
#pragma once

#include <cstdint>
#include <vector>

#include "ops/cpu/gemm/kernels.h"

namespace orrery::ops::cpu::gemm_internal {

inline constexpr int64_t kFlatLanes = 16;
inline constexpr int64_t kFlatMaxPositions = 4096;
// Planes whose lanes need gathers (stride 2): only up to this size.
inline constexpr int64_t kFlatMaxGatherPositions = 256;

// For tap t (kh * kw order) and output vector v (positions [16 v, 16 v + 16)
// of the flattened plane), entry e = t * vectors + v:
//   mask[e]: lanes whose output position exists and whose tap is inside
//            the input (padding and the plane's tail are masked off);
//   slot[e] < 0: the inside lanes read consecutive inputs, lane l at
//            base[e] + l (one masked load; stride 1 with w_in == w_out);
//   slot[e] >= 0: lane l reads gather[slot * 16 + l] (masked gather).
struct DepthwiseFlatTable {
  int64_t vectors = 0;
  std::vector<uint16_t> mask;
  std::vector<int32_t> base;
  std::vector<int32_t> slot;
  std::vector<int32_t> gather;

  // Pointers for DepthwiseGeometry (valid while the table lives).
  void AttachTo(DepthwiseGeometry* g) const;
};

// Empty (vectors == 0) when the plane is larger than kFlatMaxPositions, an
// input offset does not fit int32, or gathers would be needed for rows of
// more than 8 outputs or planes over kFlatMaxGatherPositions (the row
// kernel is faster there: 28x28 -> 14x14 measured slower with gathers), or
// for planes RowsSplitStride2Taps3 takes.
DepthwiseFlatTable BuildDepthwiseFlatTable(const DepthwiseGeometry& g);

}  // namespace orrery::ops::cpu::gemm_internal
