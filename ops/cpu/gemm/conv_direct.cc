#include "ops/cpu/gemm/conv_direct.h"

#include <algorithm>
#include <cmath>

namespace orrery::ops::cpu::gemm_internal {
namespace {

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// As Sgemm: K blocks of at most 256 (the left block of up to 256 rows stays
// in L2), left blocks of 32 panels; but one block up to kConvFullDepthMax
// (kernels.h; 32 -> 32 3x3 at 56x56, K = 576, one thread, tiles over
// in-cache input: 0.464 -> 0.445 ms; 64 -> 64 in 3 blocks of 192 instead of
// one cost 4-5% in ResNet-18, 128 -> 128 at 28x28 7-9%).
constexpr int64_t kMaxKc = 256;
// The tile's own limit (it runs at every thread count for the shapes of
// PreferConvDirectTile and ...SmallPlane, so it need not match Sgemm's):
// 3x3 over 256 channels at 14x14.
constexpr int64_t kTileFullDepthMax = 2304;
constexpr int64_t kMcPanels = 32;
// Row panels per conv_tail call (its register block: 6 x 4 accumulators).
constexpr int64_t kTailPanels = 6;
constexpr double kMinParallelFlops = 5e5;
// The tile reloads its input rows for every 8 output channels, where
// panels are made once for all of them. Against im2col panels the tile was
// 10-15% faster at 56x56 and 28x28 (64 / 128 channels) and slower at 14x14;
// against the masked-load panels (ConvDirectPanel) it is slower from 64
// channels on (ResNet-18's 56x56 x 64: 153 vs 166 GFLOP/s, 28x28 x 128: 156
// vs 174, GoogLeNet's 28x28 96 -> 128: 161 vs 176) and faster at 16 / 32
// (56x56 x 32: 156 vs 148, 112x112 x 16: 157 vs 117, 5x5 16 -> 32: 160 vs
// 152), one thread, best of 60 runs.
// With the whole depth in one block the tile beats the panels up to 192
// channels on one thread too: 8-24 row panels do not repay the panels'
// packing stores (Zen 5, minima of alternated rounds in the models, ms:
// ResNet-18 56x56 64 -> 64 0.99 -> 0.86-0.88, 28x28 128 -> 128 0.95 ->
// 0.85-0.87; GoogLeNet 56x56 64 -> 192 2.81 -> 2.60, 28x28 128 -> 192
// 1.40 -> 1.30, 96 -> 128 0.71 -> 0.66, 5x5 32 -> 96 0.188 -> 0.170;
// SqueezeNet's 3x3 expands 0.23-0.24 -> 0.21-0.22). Only with one K block,
// which Sgemm's full-depth panels sum in the same order. On two threads,
// since the column chunks differ by at most a panel, the tile beats those
// panels too (Zen 5, per-step minima of alternated rounds, ms: ResNet-18
// 56x56 64 -> 64 0.489 -> 0.456, 28x28 128 -> 128 0.473 -> 0.459; model
// p50 GoogLeNet -3%, SqueezeNet -2%, ResNet-50 -1%), where an older split
// (chunks of CeilDiv(panels, 8): 17 panels in 6 tasks) had measured it
// slower (0.53-0.54 -> 0.57).
// Same-size planes of 160..255 positions (14x14, 13x13) with >= 64
// channels and one K block take the tile too, on any thread count: rows
// (weights) outer, each weight panel read from L3 once and run over the
// plane's 4-5 column panels; two threads split the weights in halves, each
// reading the whole (L2-sized) input. Against the transposed GEMM (zero
// padding 196 -> 200 rows, 12 passes over C at K = 2304), one thread,
// in-cache input, ms: 256 -> 256 0.96 (model step 1.04), 160 -> 320 0.74
// (0.79), 96 -> 208 0.29 (0.33).
// A last panel of 1..4 positions (14x14: 196 = 4 x 48 + 4) cost the tile
// 10% (256 -> 256: 0.93 ms against 0.83 at 12x16, 192 positions); with the
// tail kernel (ConvTailCols) it is 0.84-0.85, and up to 512 channels the
// tile beats the transposed GEMM too (Zen 5, minima of 2 alternated runs,
// ms, one / two threads: 160 -> 320 0.716-0.726 -> 0.666-0.667 / 0.396-0.398
// -> 0.342, 144 -> 288 0.590-0.597 -> 0.540-0.543 / 0.316-0.318 -> 0.277-0.278,
// 256 -> 512 1.815-1.819 -> 1.681-1.682 / 0.972-0.974 -> 0.862-0.864).
constexpr int64_t kSmallPlaneMinPositions = 160;
constexpr int64_t kSmallPlaneMinChannels = 64;
constexpr int64_t kSmallPlaneMaxChannels = 256;
constexpr int64_t kSmallPlaneMaxChannelsWithTail = 512;
constexpr int64_t kDirectMinPositions = 256;
constexpr int64_t kDirectMaxChannels = 32;
constexpr int64_t kDirectMaxChannelsFullDepth = 192;
constexpr double kMaxPlanBytes = 8 << 20;

// Output position `pos` reads tap `tap` (inside the input): its bit in the
// mask table, 3 x 16 lanes per (48-column panel, tap). p->masks sized.
void MarkTap(ConvDirectPlan* p, int64_t pos, int64_t tap) {
  const int64_t q = pos / kPanelCols, l = pos % kPanelCols;
  uint16_t* m = &p->masks[static_cast<size_t>((q * p->k_vol + tap) * 3)];
  m[l / 16] = static_cast<uint16_t>(m[l / 16] | (1u << (l % 16)));
}

}  // namespace

bool BuildConvDirectPlan(const Im2ColGeometry& g, int64_t h_out, bool gather,
                         ConvDirectPlan* plan) {
  if (g.h_in <= 0 || g.w_in <= 0 || h_out <= 0 || g.w_out <= 0 || g.kh <= 0 || g.kw <= 0) {
    return false;
  }
  const bool linear = g.sh == 1 && g.sw == 1 && g.h_in == h_out && g.w_in == g.w_out;
  // The tables grow with the output plane: huge planes keep im2col rather
  // than hold more than kMaxPlanBytes per node.
  const double panels = std::ceil(static_cast<double>(h_out) * static_cast<double>(g.w_out) /
                                  static_cast<double>(kPanelCols));
  const double table_bytes = panels * (static_cast<double>(g.kh) * static_cast<double>(g.kw) *
                                           3 * sizeof(uint16_t) +
                                       (linear ? 0.0 : kPanelCols * sizeof(int32_t)));
  if (table_bytes > kMaxPlanBytes) return false;
  if (!linear) {
    // Gathers index with int32 offsets from the channel's plane: the largest
    // base + tap offset and the most negative tap offset must fit (bounded
    // in double: the attributes are untrusted and the products could
    // overflow int64).
    const auto d = [](int64_t v) { return static_cast<double>(v); };
    const double hi = (d(h_out - 1) * d(g.sh) + d(g.kh - 1) * d(g.dh)) * d(g.w_in) +
                      d(g.w_out - 1) * d(g.sw) + d(g.kw - 1) * d(g.dw);
    const double lo = -(d(g.ph) * d(g.w_in) + d(g.pw));
    constexpr double kLimit = 2147483647.0;
    if (!gather || hi >= kLimit || lo <= -kLimit) return false;
  }
  ConvDirectPlan p;
  p.h = h_out;
  p.w = g.w_out;
  p.k_vol = g.kh * g.kw;
  for (int64_t i = 0; i < g.kh; ++i) {
    for (int64_t j = 0; j < g.kw; ++j) {
      p.off.push_back((i * g.dh - g.ph) * g.w_in + (j * g.dw - g.pw));
    }
  }
  const int64_t n = p.positions();
  if (!linear) {
    // + kPanelRows: left panels from any position read 8 entries.
    p.base.assign(static_cast<size_t>(p.panels() * kPanelCols + kPanelRows), 0);
    for (int64_t pos = 0; pos < n; ++pos) {
      p.base[static_cast<size_t>(pos)] =
          static_cast<int32_t>(pos / p.w * g.sh * g.w_in + pos % p.w * g.sw);
    }
  }
  p.masks.assign(static_cast<size_t>(p.panels() * p.k_vol * 3), 0);
  for (int64_t q = 0; q < p.panels(); ++q) {
    for (int64_t i = 0; i < g.kh; ++i) {
      for (int64_t j = 0; j < g.kw; ++j) {
        const int64_t tap = i * g.kw + j;
        for (int64_t l = 0; l < kPanelCols; ++l) {
          const int64_t pos = q * kPanelCols + l;
          if (pos >= n) break;
          const int64_t ih = pos / p.w * g.sh + i * g.dh - g.ph;
          const int64_t iw = pos % p.w * g.sw + j * g.dw - g.pw;
          if (ih < 0 || ih >= g.h_in || iw < 0 || iw >= g.w_in) continue;
          MarkTap(&p, pos, tap);
        }
      }
    }
  }
  *plan = std::move(p);
  return true;
}

bool BuildConvPhasePlan(const Im2ColGeometry& g, int64_t h_out, ConvDirectPlan* plan,
                        PhaseSplit* split) {
  if (g.sh != 2 || g.sw != 2 || g.dh != 1 || g.dw != 1 || h_out <= 0 || g.w_out <= 0 ||
      g.h_in != 2 * h_out || g.w_in != 2 * g.w_out || g.kh <= 0 || g.kw <= 0) {
    return false;
  }
  // Tap offset t (kernel index - pad) reads parity t mod 2, shifted by
  // floor(t / 2) rows / columns of the parity plane.
  const auto parity = [](int64_t t) { return ((t % 2) + 2) % 2; };
  const auto shift = [&](int64_t t) { return (t - parity(t)) / 2; };
  PhaseSplit sp;
  sp.h_in = g.h_in;
  sp.w_in = g.w_in;
  sp.h_out = h_out;
  sp.w_out = g.w_out;
  for (int64_t i = 0; i < g.kh; ++i) {
    for (int64_t j = 0; j < g.kw; ++j) {
      const int64_t par = 2 * parity(i - g.ph) + parity(j - g.pw);
      if (sp.slot[par] < 0) sp.slot[par] = static_cast<int8_t>(sp.phases++);
    }
  }
  const int64_t vol = h_out * g.w_out;
  // The masks and panels of the linear plan over one parity plane.
  ConvDirectPlan p;
  p.h = h_out;
  p.w = g.w_out;
  p.k_vol = g.kh * g.kw;
  if (static_cast<double>(p.panels()) * static_cast<double>(p.k_vol) * 3 * sizeof(uint16_t) >
      kMaxPlanBytes) {
    return false;
  }
  p.masks.assign(static_cast<size_t>(p.panels() * p.k_vol * 3), 0);
  for (int64_t i = 0; i < g.kh; ++i) {
    for (int64_t j = 0; j < g.kw; ++j) {
      const int64_t tap = i * g.kw + j;
      const int64_t dr = shift(i - g.ph), dc = shift(j - g.pw);
      const int64_t par = 2 * parity(i - g.ph) + parity(j - g.pw);
      p.off.push_back(sp.slot[par] * vol + dr * g.w_out + dc);
      for (int64_t pos = 0; pos < vol; ++pos) {
        const int64_t r = pos / g.w_out + dr, c = pos % g.w_out + dc;
        if (r < 0 || r >= h_out || c < 0 || c >= g.w_out) continue;
        MarkTap(&p, pos, tap);
      }
    }
  }
  *plan = std::move(p);
  *split = sp;
  return true;
}

void SplitPhases(const PhaseSplit& s, const float* x, int64_t channels, float* dst) {
  ForEachPhaseRow(s, x, channels, dst, [&](const float* row, float* out) {
    for (int64_t j = 0; j < s.w_out; ++j) out[j] = row[2 * j];
  });
}

bool PreferConvDirectTile(const ConvDirectPlan& plan, int64_t channels) {
  return plan.linear() && plan.positions() >= kDirectMinPositions &&
         channels <= kDirectMaxChannels;
}

// Shallow pointwise layers: Sgemm's packing of X is a larger share of a
// short K. Zen 5, one thread, step minima of 3 alternated rounds, ms:
// MobileNet-v2's expansions 16 -> 96 at 112x112 0.237-0.244 -> 0.209-0.213,
// 24 -> 144 at 56x56 0.114-0.117 -> 0.103-0.104, 32 -> 192 at 28x28
// 0.047 -> 0.042-0.044 (the whole model's sum of step minima 3.15-3.27 ->
// 3.05-3.13), SqueezeNet's expand1x1 (16 -> 64 at 55x55) 0.037 ->
// 0.034-0.035; ResNet-50's layer1 64 -> 256 at 56x56 mixed (0.461-0.471
// -> 0.482-0.489 without a residual, 0.447-0.449 -> 0.428-0.443 with one;
// alone without 0.433-0.444 -> 0.417-0.426); GoogLeNet even.
bool PreferConvDirectTileShallow(const ConvDirectPlan& plan, int64_t depth) {
  return plan.linear() && plan.positions() >= kDirectMinPositions && depth <= kConvDirectShallowMaxDepth;
}

bool PreferConvDirectTileFullDepth(const ConvDirectPlan& plan, int64_t channels,
                                   int64_t depth) {
  return plan.linear() && plan.positions() >= kDirectMinPositions &&
         channels <= kDirectMaxChannelsFullDepth && depth <= kConvFullDepthMax;
}

bool PreferConvDirectTileSmallPlane(const ConvDirectPlan& plan, int64_t channels,
                                    int64_t depth) {
  const int64_t max_channels = ConvTailCols(plan, depth, ActiveKernels()) > 0
                                   ? kSmallPlaneMaxChannelsWithTail
                                   : kSmallPlaneMaxChannels;
  return plan.linear() && plan.positions() >= kSmallPlaneMinPositions &&
         plan.positions() < kDirectMinPositions && channels >= kSmallPlaneMinChannels &&
         channels <= max_channels && depth <= kTileFullDepthMax;
}

void ConvDirectPanel(const ConvDirectPlan& plan, const float* x, int64_t in_vol, int64_t k0,
                     int64_t kc, int64_t j0, int64_t w, float* dst, const GemmKernels& kern) {
  const int64_t q = j0 / kPanelCols;
  const bool lin = plan.linear();
  kern.conv_panel(lin ? x + j0 : x, in_vol, plan.k_vol, plan.off.data(),
                  plan.masks.data() + q * plan.k_vol * 3, lin ? nullptr : plan.base.data() + j0,
                  k0, kc, w, dst);
}

void ConvDirectLeftPanel(const ConvDirectPlan& plan, const float* x, int64_t in_vol, int64_t k0,
                         int64_t kc, int64_t i0, float* dst, const GemmKernels& kern) {
  const int64_t q = i0 / kPanelCols;
  const bool lin = plan.linear();
  if (i0 % kPanelRows != 0) {
    // Panels of other heights (LeftOperand::panel_rows): the lanes of the
    // 8 positions from i0, which may straddle two 48-column mask panels,
    // as lanes 0..7 of a mask table of their own.
    uint16_t m[3 * kConvLeftPanelMaxTaps] = {};
    const int64_t lane = i0 % kPanelCols;
    const bool next = lane + kPanelRows > kPanelCols && q + 1 < plan.panels();
    const auto bits = [&](int64_t panel, int64_t t) {  // the panel's 48 lanes of tap t
      const uint16_t* w = &plan.masks[static_cast<size_t>((panel * plan.k_vol + t) * 3)];
      return uint64_t{w[0]} | uint64_t{w[1]} << 16 | uint64_t{w[2]} << 32;
    };
    for (int64_t t = 0; t < plan.k_vol; ++t) {
      uint64_t v = bits(q, t) >> lane;
      if (next) v |= bits(q + 1, t) << (kPanelCols - lane);
      m[t * 3] = static_cast<uint16_t>(v & 0xffu);
    }
    kern.conv_rows(lin ? x + i0 : x, in_vol, plan.k_vol, plan.off.data(), m,
                   lin ? nullptr : plan.base.data() + i0, 0, k0, kc, dst);
    return;
  }
  kern.conv_rows(lin ? x + i0 : x, in_vol, plan.k_vol, plan.off.data(),
                 plan.masks.data() + q * plan.k_vol * 3, lin ? nullptr : plan.base.data() + i0,
                 static_cast<int>(i0 - q * kPanelCols), k0, kc, dst);
}

// Software prefetch of the input columns kConvDirectPrefetchPanels panels
// ahead of the tile at column j0, in every input channel [c0, c1) the
// depth block reads: the tiles read one short run per channel (32 streams
// 50 KB apart for a 32-deep 1x1 layer at 112x112), which the hardware
// prefetchers do not follow across 4 KiB pages; with a batch the input
// comes from memory (MobileNet-v2 32 -> 16 at batch 8, one thread). Only
// when the caller asks: on SqueezeNet's L2-resident 64 -> 16 layers at
// batch 1 it cost ~1%.
constexpr int64_t kConvDirectPrefetchPanels = 4;

static void PrefetchAhead(const float* x, int64_t in_vol, int64_t c0, int64_t c1, int64_t j0) {
  const int64_t j = j0 + kConvDirectPrefetchPanels * kPanelCols;
  if (j >= in_vol) return;
  for (int64_t c = c0; c < c1; ++c) {
    const float* r = x + c * in_vol + j;
    for (int64_t l = 0; l < kPanelCols; l += 16) __builtin_prefetch(r + l, 0, 3);
  }
}

int64_t GemmTailCols(int64_t n, const GemmKernels& kern) {
  if (kern.conv_tail == nullptr || n <= kPanelCols) return 0;
  const int64_t cols = n % kPanelCols;
  return cols <= kConvTailMaxCols ? cols : 0;
}

int64_t ConvTailCols(const ConvDirectPlan& plan, int64_t k, const GemmKernels& kern) {
  const int64_t n = plan.positions();
  if (!plan.linear() || n >= kDirectMinPositions || k <= 0 || k > kTileFullDepthMax) return 0;
  return GemmTailCols(n, kern);
}

void RunConvDirect(const ConvDirectPlan& plan, const PackedMatrix& w, int64_t m, int64_t k,
                   int64_t in_vol, const float* x, float* y, const Epilogue& ep,
                   ThreadGroup* threads, const GemmKernels& kern, bool prefetch, const float* tail) {
  const int64_t n = plan.positions();
  if (m <= 0 || n <= 0 || k <= 0) return;
  if (2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) <
      kMinParallelFlops) {
    threads = nullptr;
  }
  const int64_t nthreads = NumThreads(threads);
  const int64_t kblocks = k <= kTileFullDepthMax ? 1 : CeilDiv(k, kMaxKc);
  const int64_t kc_max = CeilDiv(k, kblocks);
  const int64_t m_panels = CeilDiv(m, kPanelRows);
  const int64_t n_panels = plan.panels();
  // Column chunks first (each thread walks distinct input), guided
  // (GuidedBounds: 66 panels of a 56x56 plane at two threads in 13 chunks,
  // 17, 13, 9, ... 1), then row chunks when the columns are too few to give
  // every thread two tasks; chunk i of c rows holds row panels [i * panels
  // / c, (i + 1) * panels / c). Small planes (< kDirectMinPositions): guided
  // row chunks, rows outer (PreferConvDirectTileSmallPlane); each thread
  // reads the whole (L2-sized) input once and keeps it.
  const bool small = n < kDirectMinPositions;
  int64_t bounds[kMaxGuidedChunks + 1];
  const int64_t guided = GuidedBounds(small ? m_panels : n_panels, nthreads, bounds);
  const int64_t n_chunks = small ? 1 : guided;
  int64_t m_chunks = small ? guided : 1;
  if (!small && nthreads > 1 && n_chunks < 2 * nthreads) {
    m_chunks = std::min(m_panels, CeilDiv(2 * nthreads, n_chunks));
  }
  const int64_t tasks = n_chunks * m_chunks;
  const float* wd = w.data();
  const bool post_in_tile = ep.has_post() && kern.tile_post && PostInTile(ep);
  const bool post_after = ep.has_post() && !post_in_tile;
  // A last panel of 1..4 positions (small planes, one K block): by
  // kern.conv_tail over each task's rows, not the tile (ConvTailCols).
  const int64_t tail_cols = tail != nullptr && small ? ConvTailCols(plan, k, kern) : 0;
  const int64_t tail_j0 = (n_panels - 1) * kPanelCols;
  ParallelFor(threads, tasks, [&](int64_t task, int) {
    const int64_t ni = task % n_chunks, mi = task / n_chunks;
    const int64_t q0 = small ? 0 : bounds[ni];
    const int64_t q1 = small ? n_panels - (tail_cols > 0 ? 1 : 0) : bounds[ni + 1];
    const int64_t p0 = small ? bounds[mi] : mi * m_panels / m_chunks;
    const int64_t p1 = small ? bounds[mi + 1] : (mi + 1) * m_panels / m_chunks;
    for (int64_t pc = 0; pc < k; pc += kc_max) {
      const int64_t kc = std::min(kc_max, k - pc);
      const bool last = pc + kc == k;
      // With a tail, blocks of kTailPanels rows, each then run by the tail
      // kernel while its weights are still in L2.
      const int64_t block = tail_cols > 0 ? kTailPanels : kMcPanels;
      for (int64_t pb = p0; pb < p1; pb += block) {
        const int64_t pe = std::min(p1, pb + block);
        for (int64_t it = 0; it < (q1 - q0) * (pe - pb); ++it) {
          const int64_t q = small ? q0 + it % (q1 - q0) : q0 + it / (pe - pb);
          const int64_t p = small ? pb + it / (q1 - q0) : pb + it % (pe - pb);
          const int64_t j0 = q * kPanelCols;
          const int cols = static_cast<int>(std::min(kPanelCols, n - j0));
          if (prefetch && pb == p0 && p == pb) {
            PrefetchAhead(x, in_vol, pc / plan.k_vol, (pc + kc - 1) / plan.k_vol + 1, j0);
          }
          {
            const int64_t i0 = p * kPanelRows;
            const int64_t rows = std::min(kPanelRows, m - i0);
            float* ct = y + i0 * n + j0;
            kern.conv_tile({.kc = kc,
                            .k0 = pc,
                            .a = wd + i0 * k + pc * kPanelRows,
                            .x = x + j0,
                            .in_vol = in_vol,
                            .k_vol = plan.k_vol,
                            .off = plan.off.data(),
                            .masks = plan.masks.data() + q * plan.k_vol * 3,
                            .rows = static_cast<int>(rows),
                            .cols = cols,
                            .c = ct,
                            .ldc = n,
                            .load_c = pc > 0,
                            .post = last && post_in_tile ? &ep : nullptr,
                            .i0 = i0,
                            .j0 = j0});
            if (last && post_after) kern.epilogue(ep, ct, n, i0, j0, rows, cols);
          }
        }
        if (tail_cols > 0) {
          const int64_t i0 = pb * kPanelRows;
          const int64_t rows = std::min(pe * kPanelRows, m) - i0;
          float* ct = y + i0 * n + tail_j0;
          kern.conv_tail({.a = wd + i0 * k, .k = k, .b = tail, .cols = static_cast<int>(tail_cols),
                          .rows = rows, .c = ct, .ldc = n});
          if (ep.has_post()) kern.epilogue(ep, ct, n, i0, tail_j0, rows, tail_cols);
        }
      }
    }
  });
}

}  // namespace orrery::ops::cpu::gemm_internal
