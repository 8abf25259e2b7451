#include "ops/cpu/gemm/depthwise_flat.h"

#include <limits>

namespace orrery::ops::cpu::gemm_internal {

void DepthwiseFlatTable::AttachTo(DepthwiseGeometry* g) const {
  g->flat_vectors = vectors;
  g->flat_mask = vectors > 0 ? mask.data() : nullptr;
  g->flat_base = vectors > 0 ? base.data() : nullptr;
  g->flat_slot = vectors > 0 ? slot.data() : nullptr;
  g->flat_gather = vectors > 0 && !gather.empty() ? gather.data() : nullptr;
}

DepthwiseFlatTable BuildDepthwiseFlatTable(const DepthwiseGeometry& g) {
  DepthwiseFlatTable t;
  const int64_t out_vol = g.h_out * g.w_out;
  if (out_vol <= 0 || out_vol > kFlatMaxPositions || g.kh <= 0 || g.kw <= 0 ||
      g.h_in * g.w_in > std::numeric_limits<int32_t>::max()) {
    return t;
  }
  const int64_t vectors = (out_vol + kFlatLanes - 1) / kFlatLanes;
  const int64_t taps = g.kh * g.kw;
  t.mask.assign(static_cast<size_t>(taps * vectors), 0);
  t.base.assign(t.mask.size(), 0);
  t.slot.assign(t.mask.size(), -1);
  for (int64_t kh = 0; kh < g.kh; ++kh) {
    for (int64_t kw = 0; kw < g.kw; ++kw) {
      const int64_t tap = kh * g.kw + kw;
      for (int64_t v = 0; v < vectors; ++v) {
        const size_t e = static_cast<size_t>(tap * vectors + v);
        int32_t lanes[kFlatLanes] = {};
        uint32_t m = 0;
        bool consecutive = true;
        int64_t base = 0;
        bool have_base = false;
        for (int64_t l = 0; l < kFlatLanes; ++l) {
          const int64_t pos = v * kFlatLanes + l;
          if (pos >= out_vol) break;
          const int64_t ih = (pos / g.w_out) * g.sh - g.ph + kh * g.dh;
          const int64_t iw = (pos % g.w_out) * g.sw - g.pw + kw * g.dw;
          if (ih < 0 || ih >= g.h_in || iw < 0 || iw >= g.w_in) continue;
          const int64_t in = ih * g.w_in + iw;
          m |= 1u << l;
          lanes[l] = static_cast<int32_t>(in);
          if (!have_base) {
            base = in - l;
            have_base = true;
          } else if (in != base + l) {
            consecutive = false;
          }
        }
        t.mask[e] = static_cast<uint16_t>(m);
        if (consecutive) {
          // base may be negative or past the plane: masked-off lanes are
          // never read.
          t.base[e] = static_cast<int32_t>(base);
        } else {
          t.slot[e] = static_cast<int32_t>(t.gather.size() / kFlatLanes);
          t.gather.insert(t.gather.end(), lanes, lanes + kFlatLanes);
        }
      }
    }
  }
  // Gathers cost several loads each: worth it only where the row kernel
  // would fill at most half its lanes (w_out <= 8, e.g. 14x14 -> 7x7 with
  // stride 2); measured slower than the rows at 28x28 -> 14x14, and than
  // the rows' stride-2 3-wide path even at 14x14 -> 7x7 (576 channels: 2x).
  if (!t.gather.empty() && (g.w_out > kFlatLanes / 2 || out_vol > kFlatMaxGatherPositions ||
                            RowsSplitStride2Taps3(g))) {
    return DepthwiseFlatTable{};
  }
  t.vectors = vectors;
  return t;
}

}  // namespace orrery::ops::cpu::gemm_internal
