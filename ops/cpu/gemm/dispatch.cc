// Sgemm's driver: ISA choice, cache blocking, packing of the non-constant
// operand into scratch, task split across the caller's threads.
//
// Blocking (BLIS-style): per K block, the right operand is packed kc x nc at
// a time and the left one 256 x kc (unless prepacked); each right panel then
// meets every left panel of the block (with one K block and a residual, each
// left panel meets every right panel instead). The epilogue runs on each tile right
// after its last K block, while it is still in L1. Prepacked weights are
// prefetched one panel (right) or one left block (left) ahead (NextPanel).
// Against <= 128 rows of prepacked weights a raw row-major right operand is
// read in place (b_in_place), not packed.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ops/cpu/gemm/kernels.h"
#include "ops/cpu/gemm/sgemm.h"
#include "ops/cpu/gemm/transpose.h"

namespace orrery::ops::cpu {
namespace {

using gemm_internal::GemmKernels;
using gemm_internal::PanelWidth;

// The kc x 48 right panel (<= 36 KiB) and one left panel (<= 6 KiB) stay
// in a 48 KiB L1 while the kernel walks the left block (kMcPanels x 8 x kc,
// <= 192 KiB, in L2); the kc x nc right block (<= 756 KiB) stays in L2 too.
// kc 192 measured 5-7% faster than 256 on ResNet-18's 3x3 convolutions once
// the im2col panels got cheap (256 overflowed L1; 128 doubles the passes
// over C; 384 was no better than 256).
constexpr int64_t kMaxKc = 192;
// AVX2 hosts measured here (AMD Zen 3, 32 KiB L1D): the 192 x 48 right
// panel (36 KiB) does not fit L1 with the left panel; 96 (18 KiB) does.
// 96 vs 192 on the packed-A shapes of ResNet's 3x3 layers (sgemm_bench,
// best of 10, 4 alternated rounds): 64x3136x576 ~66 -> ~75, 128x784x1152
// ~76 -> ~85, 256x196x2304 ~72 -> ~80 GFLOP/s; 128 was between, 64 worse.
constexpr int64_t kMaxKcAvx2 = 96;
constexpr int64_t kMaxNc = 21 * kPanelCols;  // 1008 columns
// The narrowest N chunk when the left operand is packed here and the right
// one is prepacked (a MatMul on weights). ChooseBlocking keeps the C chunk
// and the right block within 1 MiB for later K blocks, which for many rows
// makes narrow chunks, and each chunk packs every row of A again (a
// transformer's 1024 x 1024 x 256 linear1 at batch 8: 6 chunks of 192,
// A packed 6 times). Intel Xeon (2 MiB L2), one thread, sgemm_bench packed
// B, GFLOP/s, 192-column chunks -> this: 1024x256x1024 171 -> 189-192,
// 1024x768x256 180 -> 190-191, 1024x1024x256 180 -> 183-186, 2048^3 152
// -> 180-182; the transformer at batch 8, p50 of 3 alternated rounds:
// one thread 43.1-44.6 -> 41.8-42.7 ms, two 25.1-25.3 -> 24.3-24.5.
constexpr int64_t kPrepackedRightMinNc = 8 * kPanelCols;  // 384 columns
constexpr int64_t kMcPanels = 32;            // 256 rows
constexpr double kMinParallelFlops = 5e5;
constexpr int64_t kRowsOuterMaxK = 32;  // see rows_outer in Sgemm
// Right panels read in place (see b_in_place in Sgemm) up to 128 rows of
// prepacked weights. Zen 5, one thread, ResNet-50 per-step minima of 3
// alternated rounds: layer1 1x1 256 -> 64 at 56x56 0.49 -> 0.43-0.44 ms,
// layer2 512 -> 128 at 28x28 0.450 -> 0.429, 256 -> 128 at 56x56 0.90 ->
// 0.85; sgemm_bench packed A 64x3136x256 ~208 -> ~244, 128x3136x256 ~230 ->
// ~249 GFLOP/s. 256 rows and more measured even (each packed panel then
// serves 32 tiles).
constexpr int64_t kInPlaceMaxPanels = 16;
// With rows outer (a residual, C over 2 MiB) and K up to this, the right
// operand is read in place for one left block of weights (<= 256 rows):
// each tile streams its 3 x K lines from L2 instead of a packed copy made
// first. Zen 5, per-step minima of two A/Bs of 8 alternated rounds,
// ResNet-50's layer1 conv3 (1x1 64 -> 256 at 56x56 + Add): one thread
// 0.476-0.482 -> 0.466 ms, the downsample + Add 0.498-0.511 -> 0.492-0.500;
// two threads even.
constexpr int64_t kInPlaceRowsOuterMaxK = 64;
// Prepacked left weights against a right operand packed here, with a
// residual to add: K up to this runs as one K block on AVX-512, rows
// outer (the 256 x 48 right panel overflows L1 a little, but C is stored
// once, with the residual, instead of stored, reloaded and stored again).
// Zen 5, per-step minima of 4-5 alternated rounds, ResNet-50's layer3
// conv3 (1x1 256 -> 1024 at 14x14 + Add): one thread 0.462-0.468 ->
// 0.438-0.446 ms (one block without rows outer: 0.450-0.461), two threads
// 0.244-0.245 -> 0.227-0.230. kc 256 everywhere was even over the model
// (layer4's transposed GEMMs on prepacked right weights 1-2% slower).
constexpr int64_t kResidualOneBlockMaxK = 256;
int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t RoundUp(int64_t a, int64_t b) { return CeilDiv(a, b) * b; }

GemmIsa DetectIsa() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("fma")) {
    return GemmIsa::kAvx512;
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return GemmIsa::kAvx2;
  return GemmIsa::kPortable;
}

GemmIsa EnvCap() {
  const char* v = std::getenv("ORRERY_GEMM_ISA");
  if (v == nullptr) return GemmIsa::kAvx512;
  const std::string s(v);
  if (s == "portable") return GemmIsa::kPortable;
  if (s == "avx2") return GemmIsa::kAvx2;
  return GemmIsa::kAvx512;
}

std::atomic<int> g_test_cap{static_cast<int>(GemmIsa::kAvx512)};
std::atomic<int64_t> g_scratch_shortfalls{0};

bool DetectInPlaceConv() {
  if (const char* v = std::getenv("ORRERY_CONV_KERNELS"); v != nullptr) {
    if (std::string_view(v) == "gemm") return false;
    if (std::string_view(v) == "inplace") return true;
  }
  __builtin_cpu_init();
  return !__builtin_cpu_is("intel");
}

bool DetectWinogradConv() {
  const char* v = std::getenv("ORRERY_CONV_WINOGRAD");
  return v == nullptr || std::string_view(v) != "off";
}

// A choice detected once per process that a test may force (nullopt: back
// to the detected one).
class TestOverride {
 public:
  bool Or(bool detected) const {
    const int forced = forced_.load(std::memory_order_relaxed);
    return forced < 0 ? detected : forced != 0;
  }
  void Set(std::optional<bool> on) {
    forced_.store(on.has_value() ? static_cast<int>(*on) : -1, std::memory_order_relaxed);
  }

 private:
  std::atomic<int> forced_{-1};  // -1: not set by a test
};

TestOverride g_inplace_conv_override;
TestOverride g_winograd_conv_override;

struct Blocking {
  int64_t kc = 1;           // depth of one K block
  int64_t nchunks = 1;       // N chunks (ChunkStart)
  int64_t nc = kPanelCols;   // the widest chunk's columns, rounded up to a panel
};

// The K block limit of the active kernels (the same for every thread count,
// so that results do not depend on it).
int64_t MaxKc(GemmIsa isa) { return isa == GemmIsa::kAvx2 ? kMaxKcAvx2 : kMaxKc; }

// Whether the shape runs as one K block of kResidualOneBlockMaxK (see
// there) given a residual; shape, operand kinds and ISA only, so that
// every thread count sums in the same order.
bool ResidualOneBlock(GemmShape s, bool a_packed, bool b_packed, GemmIsa isa) {
  return a_packed && !b_packed && s.k > kMaxKc && s.k <= kResidualOneBlockMaxK &&
         isa == GemmIsa::kAvx512;
}

// Even K blocks of at most max_kc; N chunks of at most kMaxNc and, as L2
// allows, at least min_nc columns; more of them (down to 4 panels) when
// several threads need tasks.
Blocking ChooseBlocking(GemmShape s, int threads, int64_t max_kc, int64_t min_nc = 2 * kPanelCols) {
  Blocking b;
  const int64_t kblocks = std::max<int64_t>(1, CeilDiv(s.k, max_kc));
  b.kc = std::max<int64_t>(1, CeilDiv(s.k, kblocks));
  // The C chunk (m x nc) and the right block (kc x nc) together stay within
  // ~1 MiB of L2, so that later K blocks find C still cached.
  const int64_t fit = (int64_t{1} << 18) / std::max<int64_t>(1, s.m + b.kc);
  const int64_t max_nc = std::clamp(fit / kPanelCols * kPanelCols, min_nc, kMaxNc);
  int64_t nchunks = std::max<int64_t>(1, CeilDiv(s.n, max_nc));
  if (threads > 1) {
    const int64_t want = 4 * static_cast<int64_t>(threads);
    nchunks = std::max(nchunks, std::min(want, CeilDiv(s.n, 4 * kPanelCols)));
    // A multiple of the thread count balances better when chunks are few
    // (13 chunks of a 112x112 plane on two threads: 7 + 6), as long as
    // every chunk keeps a whole panel (ChunkStart).
    if (nchunks < 4 * want) nchunks = RoundUp(nchunks, threads);
    nchunks = std::min(nchunks, std::max<int64_t>(1, s.n / kPanelCols));
  }
  b.nchunks = nchunks;
  b.nc = RoundUp(CeilDiv(s.n, nchunks), kPanelCols);
  return b;
}

// First column of N chunk i of `chunks`: i * n / chunks rounded to the
// nearest panel boundary, so that chunks differ by at most about a panel
// (196 columns in two: 96 + 100, where chunks of a fixed width made
// 144 + 52), but never so late that the chunks after it would need more
// than CeilDiv(panels, chunks) panels each. So no chunk is wider than
// RoundUp(CeilDiv(n, chunks), kPanelCols) (the scratch of ChooseBlocking's
// nc) and, while chunks <= n / kPanelCols, none is empty.
int64_t ChunkStart(int64_t i, int64_t n, int64_t chunks) {
  if (i >= chunks) return n;
  const int64_t panels = CeilDiv(n, kPanelCols);
  const int64_t most = CeilDiv(panels, chunks);
  const int64_t nearest = (2 * i * n + chunks * kPanelCols) / (2 * chunks * kPanelCols);
  return std::max(nearest, panels - (chunks - i) * most) * kPanelCols;
}

// First column of N chunk i of `chunks` for prepacked right operands
// (ChooseSplit's few_rows): i * n / chunks rounded to the nearest multiple
// of 16, so that a chunk may start inside a packed panel (a tile then
// reads the panel's last 32 or 16 columns, TileArgs::w < ldb). Two chunks
// of 512 columns are 256 + 256, where whole panels made 240 + 272 (ResNet's
// 7x7 layers, the thread with 272 finishing 13% later).
int64_t FineChunkStart(int64_t i, int64_t n, int64_t chunks) {
  if (i >= chunks) return n;
  constexpr int64_t kStep = 16;
  return std::min(n, (2 * i * n + chunks * kStep) / (2 * chunks * kStep) * kStep);
}

// The split: N chunks (ChunkStart, or FineChunkStart when `fine`) times M
// chunks of whole left panels.
struct Split {
  Blocking bl;
  int64_t n_chunks = 1, m_chunks = 1, panels_per_chunk = 1;
  bool fine = false;
};

// The L2 cache of one core (sysconf), 1 MiB when the OS does not say.
int64_t L2Bytes() {
  static const int64_t bytes = [] {
    const long v = sysconf(_SC_LEVEL2_CACHE_SIZE);
    return v > 0 ? static_cast<int64_t>(v) : int64_t{1} << 20;
  }();
  return bytes;
}

// Usually N chunks first (each thread packs distinct right columns), then M
// chunks when the N chunks are too few to give every thread one. Three
// shapes split otherwise, so that no thread streams weights another one
// streams too and the operand packed on the fly is packed no more often
// than the weights' split needs:
// - left operand packed on the fly, right one prepacked (a MatMul / Gemm on
//   weights), rows enough for four chunks per thread, and weights narrow
//   (under 8 panels per thread) or within L2, or rows many (want full left blocks): M
//   chunks; each thread packs distinct rows and the N blocking stays that
//   of one thread (a transformer's 128 x 256 x 1024 linear2 and 128 x 256 x
//   256 output projection: a column split leaves 3 + 2.3 panels);
// - the same with fewer rows or wider weights over L2 (the transposed GEMM of 7x7
//   convolutions, a classifier's GEMV, a transformer's 128 x 1024 x 256
//   linear1): N chunks of the weights, rounded up to a multiple of the
//   threads, each packing the rows of A for itself; the chunks split at
//   multiples of 16 columns (FineChunkStart), not whole panels;
// - prepacked left weights bigger than the packed right operand (3x3
//   convolutions on 14x14 and 7x7 planes): one M chunk per thread, N
//   blocked as for one thread, each thread packing the whole right operand
//   for itself (ResNet-18's layer3 3x3 at two threads: 0.85 -> 0.72 ms).
// The last two replace a path that packed the on-the-fly operand once,
// shared by the threads in two phases, which measured 10-20% slower on
// most such layers of ResNet-18 / 50 and GoogLeNet at two threads (its
// second phase read half the packed operand from the other core's cache);
// only strided 1x1 downsamples, whose gathered panels cost more to pack
// twice, lost (ResNet-50: +0.03-0.05 ms on 0.7-0.8 ms).
Split ChooseSplit(GemmShape s, int nthreads, bool a_packed, bool b_packed, int64_t max_kc,
                  int64_t panel_rows) {
  Split sp;
  const int64_t m_panels = CeilDiv(s.m, panel_rows);
  const int64_t want = 4 * static_cast<int64_t>(nthreads);
  const bool several = nthreads > 1;
  // Wide prepacked weights bigger than L2 and rows fewer than want full
  // left blocks: each row chunk would stream all of B from L3 for a few
  // panels of rows (the transformer's 128 x 768 x 256 and 128 x 1024 x 256
  // layers read B eight times per call at two threads, once at one), so the
  // N chunks below stream each column of B once (AMD Zen 3, 512 KiB L2, two
  // threads, minimum ms: 0.39 -> 0.31 and 0.47-0.51 -> 0.41, now ~2.0x the
  // one-thread time). Where B fits in L2 the row chunks re-read it from
  // there and measured faster (Intel Xeon, AVX-512).
  const bool wide_weights = CeilDiv(s.n, kPanelCols) >= 8 * static_cast<int64_t>(nthreads) &&
                            m_panels < want * kMcPanels &&
                            s.k * s.n * static_cast<int64_t>(sizeof(float)) > L2Bytes();
  const bool rows_first = several && !a_packed && b_packed && m_panels >= want && !wide_weights;
  const bool few_rows = several && !a_packed && b_packed && !rows_first;
  const bool split_weights = several && a_packed && !b_packed &&
                             RoundUp(s.m, kPanelRows) > RoundUp(s.n, 16) &&
                             m_panels >= nthreads;
  // Rows packed here against prepacked weights (but few_rows, which splits
  // the weights' columns among the threads): each N chunk packs all of its
  // rows again, so chunks of at least kPrepackedRightMinNc (see there).
  const int64_t min_nc =
      b_packed && !a_packed && !few_rows ? kPrepackedRightMinNc : 2 * kPanelCols;
  sp.bl = ChooseBlocking(s, several && !rows_first && !split_weights && !few_rows ? nthreads : 1,
                         max_kc, min_nc);
  // Few rows: one thread's N chunks, rounded up to a multiple of the threads.
  sp.n_chunks = few_rows ? std::min(RoundUp(sp.bl.nchunks, nthreads), std::max<int64_t>(1, s.n / kPanelCols))
                         : sp.bl.nchunks;
  sp.fine = few_rows;
  if (rows_first) {
    sp.m_chunks = want;
  } else if (split_weights) {
    sp.m_chunks = nthreads;
  } else if (several && sp.n_chunks < nthreads) {
    sp.m_chunks = std::min(m_panels, CeilDiv(2 * static_cast<int64_t>(nthreads), sp.n_chunks));
  }
  sp.panels_per_chunk = CeilDiv(m_panels, sp.m_chunks);
  sp.m_chunks = CeilDiv(m_panels, sp.panels_per_chunk);
  return sp;
}

struct ScratchLayout {
  int64_t b_floats = 0, a_floats = 0;
  int64_t bytes() const { return (b_floats + a_floats) * 4 + 2 * 64; }
};

// Enough for either K block limit: the ISA may be capped (tests) between
// sizing the scratch and running. And enough for any smaller M or N with
// the same K: callers size once and then run parts of the shape (a conv's
// columns before its GEMM tail, Winograd's last chunk of rows or block of
// tiles), and ChooseBlocking's N chunks are not monotonic in either: fewer
// rows leave more of L2 to the right block, fewer columns may need one
// chunk fewer (196 columns against 1024 rows: two chunks of 144; 192: one
// of 192). No chunk is wider than kMaxNc or than N's whole panels.
ScratchLayout Layout(GemmShape s, bool a_packed, bool b_packed) {
  ScratchLayout l;
  const int64_t nc_bound = std::min(RoundUp(s.n, kPanelCols), kMaxNc);
  for (const int64_t max_kc : {kMaxKc, kMaxKcAvx2, kResidualOneBlockMaxK}) {
    if (max_kc == kResidualOneBlockMaxK &&
        !ResidualOneBlock(s, a_packed, b_packed, GemmIsa::kAvx512)) {
      continue;
    }
    const Blocking bl = ChooseBlocking(s, 1, max_kc);  // for its K block (nc_bound is the width)
    if (!b_packed) l.b_floats = std::max(l.b_floats, RoundUp(bl.kc * nc_bound, 16));
    // One full-depth panel (see full_depth in Sgemm).
    if (!b_packed && a_packed && s.k <= gemm_internal::kConvFullDepthMax) {
      l.b_floats = std::max(l.b_floats, RoundUp(s.k * kPanelCols, 16));
    }
    if (!a_packed) {
      l.a_floats = std::max(l.a_floats, RoundUp(bl.kc * kPanelRows * kMcPanels, 16));
    }
  }
  return l;
}

float* AlignUp(std::byte* p) {
  const auto v = reinterpret_cast<uintptr_t>(p);
  return reinterpret_cast<float*>((v + 63) & ~uintptr_t{63});
}

// Packs op(B)[pc, pc + kc) x [j0, j1) into panels at dst (panel stride
// kc * kPanelCols).
void PackRightBlock(const RightOperand& b, int64_t n, int64_t pc, int64_t kc, int64_t j0,
                    int64_t j1, float* dst, const GemmKernels& kern) {
  if (b.panels != nullptr) {
    for (int64_t q0 = j0; q0 < j1; q0 += kPanelCols) {
      const int64_t cols = std::min(kPanelCols, n - q0);
      const int64_t w = PanelWidth(n - q0);
      float* d = dst + (q0 - j0) * kc;
      (*b.panels)(pc, kc, q0, cols, w, d);
      if (cols < w) {
        for (int64_t k = 0; k < kc; ++k) {
          for (int64_t j = cols; j < w; ++j) d[k * w + j] = 0.0f;
        }
      }
    }
    return;
  }
  if (!b.trans) return kern.pack_right(b.data, b.ld, n, pc, kc, j0, j1, dst);
  for (int64_t q0 = j0; q0 < j1; q0 += kPanelCols) {
    const int64_t cols = std::min(kPanelCols, n - q0);
    gemm_internal::PackRightPanel(b.data, b.ld, true, pc, kc, q0, cols, PanelWidth(n - q0),
                                  dst + (q0 - j0) * kc);
  }
}

// Packs rows [i0, i0 + rows) x depth [pc, pc + kc) of op(A) into one left
// panel at dst (dst[k * kPanelRows + i]; missing rows zero).
void PackLeftBlockPanel(const LeftOperand& a, int64_t i0, int64_t rows, int64_t pc, int64_t kc,
                        float* dst) {
  if (a.panels != nullptr) {
    (*a.panels)(pc, kc, i0, rows, kPanelRows, dst);
    for (int64_t k = 0; rows < kPanelRows && k < kc; ++k) {
      for (int64_t i = rows; i < kPanelRows; ++i) dst[k * kPanelRows + i] = 0.0f;
    }
  } else if (!a.trans && ActiveGemmIsa() == GemmIsa::kAvx512) {
    // By 8 x 16 register transposes: the scalar walk cost ~20% of a
    // MatMul on activations (transformer, one thread, step minima: linear2
    // 128 x 256 x 1024 0.286 -> 0.266 ms, attention context 0.0475 -> 0.0376).
    gemm_internal::PackLeftRowsAvx512(a.data + i0 * a.ld + pc, a.ld, rows, kc, dst);
  } else {
    gemm_internal::PackLeftPanel(a.data, a.ld, a.trans, i0, rows, pc, kc, dst);
  }
}

// Weights streamed from L3 / memory: while the tiles of one packed right
// panel run, each prefetches its share of the next panel into L2
// (TileArgs::prefetch), so that the next panel's first tile does not wait
// on memory (ResNet-18's 7x7 layers: ~90 -> ~130 GFLOP/s).
struct NextPanel {
  const float* data = nullptr;
  int64_t lines = 0;  // 64-byte lines
};

// The right panel (packed whole at `b`, PackedMatrix layout) a task reads
// after (q0, pc): the next panel of the chunk [j0, j1), else the chunk's
// first one in the next K block.
NextPanel NextRightPanel(const float* b, GemmShape s, int64_t max_kc, int64_t pc,
                         int64_t q0, int64_t j0, int64_t j1) {
  // Panel starts: a fine chunk (FineChunkStart) may start or end inside one.
  int64_t q = q0 - q0 % kPanelCols + kPanelCols, k0 = pc;
  if (q >= j1) {
    q = j0 - j0 % kPanelCols;
    k0 = pc + max_kc;
    if (k0 >= s.k) return {};
  }
  const int64_t w = PanelWidth(s.n - q);
  const int64_t kc = std::min(max_kc, s.k - k0);
  return {b + q * s.k + k0 * w, kc * w / 16};
}

// The packed left panel (packed whole at `a`) that follows the tile of
// panel p of the left block [pb, pe) (of the task's panels [p0, p1)) at
// depth pc in the next block: the next left block at pc, else the first one
// at the next K block.
NextPanel NextLeftPanel(const float* a, GemmShape s, int64_t max_kc, int64_t pc, int64_t p,
                        int64_t pb, int64_t pe, int64_t p0, int64_t p1) {
  const int64_t k0 = pe < p1 ? pc : pc + max_kc;
  const int64_t np = (pe < p1 ? pe : p0) + (p - pb);
  if (np >= p1 || k0 >= s.k) return {};
  const int64_t kc = std::min(max_kc, s.k - k0);
  return {a + np * kPanelRows * s.k + k0 * kPanelRows, kc * kPanelRows / 16};
}

// Tile `i` of `n` prefetches this share of `next`.
NextPanel PrefetchShare(const NextPanel& next, int64_t i, int64_t n) {
  const int64_t per = CeilDiv(next.lines, n);
  const int64_t first = std::min(next.lines, i * per);
  return {next.data + first * 16, std::min(per, next.lines - first)};
}

// Output for K == 0: the product is zero.
void ZeroDepth(GemmShape s, float* c, int64_t ldc, const Epilogue& ep, const GemmKernels& kern) {
  if (!ep.accumulate) {
    for (int64_t i = 0; i < s.m; ++i) std::memset(c + i * ldc, 0, static_cast<size_t>(s.n) * 4);
  }
  if (ep.has_post()) kern.epilogue(ep, c, ldc, 0, 0, s.m, s.n);
}

}  // namespace

std::string_view GemmIsaName(GemmIsa isa) {
  switch (isa) {
    case GemmIsa::kPortable: return "portable";
    case GemmIsa::kAvx2: return "avx2";
    case GemmIsa::kAvx512: return "avx512";
  }
  return "?";
}

GemmIsa ActiveGemmIsa() {
  static const GemmIsa detected = DetectIsa();
  static const GemmIsa env = EnvCap();
  const int cap = std::min(static_cast<int>(env), g_test_cap.load(std::memory_order_relaxed));
  return static_cast<GemmIsa>(std::min(static_cast<int>(detected), cap));
}

void SetGemmIsaCapForTesting(GemmIsa cap) {
  g_test_cap.store(static_cast<int>(cap), std::memory_order_relaxed);
}

bool InPlaceConvKernels() {
  static const bool detected = DetectInPlaceConv();
  return g_inplace_conv_override.Or(detected);
}

void SetInPlaceConvKernelsForTesting(std::optional<bool> on) { g_inplace_conv_override.Set(on); }

bool WinogradConvs() {
  static const bool detected = DetectWinogradConv();
  return g_winograd_conv_override.Or(detected);
}

void SetWinogradConvsForTesting(std::optional<bool> on) { g_winograd_conv_override.Set(on); }

namespace gemm_internal {
const GemmKernels& ActiveKernels() {
  switch (ActiveGemmIsa()) {
    case GemmIsa::kAvx512: return Avx512Kernels();
    case GemmIsa::kAvx2: return Avx2Kernels();
    case GemmIsa::kPortable: break;
  }
  return PortableKernels();
}
}  // namespace gemm_internal

Result<Activation> ParseActivation(std::string_view name) {
  static constexpr std::pair<std::string_view, Activation> kNames[] = {
      {"Relu", Activation::kRelu},           {"Clip", Activation::kClip},
      {"LeakyRelu", Activation::kLeakyRelu}, {"HardSigmoid", Activation::kHardSigmoid},
      {"HardSwish", Activation::kHardSwish}, {"Sigmoid", Activation::kSigmoid},
      {"Tanh", Activation::kTanh},           {"Gelu", Activation::kGelu}};
  for (const auto& [n, a] : kNames) {
    if (n == name) return a;
  }
  return Status::InvalidArgument("unknown fused activation '" + std::string(name) + "'");
}

int64_t SgemmScratchShortfalls() { return g_scratch_shortfalls.load(std::memory_order_relaxed); }

int64_t SgemmScratchBytes(GemmShape s, bool a_packed, bool b_packed) {
  if (s.m <= 0 || s.n <= 0 || s.k <= 0) return 0;
  return Layout(s, a_packed, b_packed).bytes();
}

void Sgemm(GemmShape s, const LeftOperand& a, const RightOperand& b, float* c, int64_t ldc,
           const Epilogue& ep, std::span<std::byte> scratch, ThreadGroup* threads) {
  if (s.m <= 0 || s.n <= 0) return;
  const GemmKernels& kern = gemm_internal::ActiveKernels();
  if (s.k <= 0) return ZeroDepth(s, c, ldc, ep, kern);

  // Below ~0.5 MFLOP waking other threads costs more than it saves.
  if (2.0 * static_cast<double>(s.m) * static_cast<double>(s.n) * static_cast<double>(s.k) <
      kMinParallelFlops) {
    threads = nullptr;
  }
  const int nthreads = NumThreads(threads);
  // Rows per left panel: a.panel_rows when A is packed here, else 8.
  const int64_t pr =
      a.packed != nullptr ? kPanelRows : std::clamp<int64_t>(a.panel_rows, 1, kPanelRows);
  const bool one_block = ep.residual != nullptr &&
                         ResidualOneBlock(s, a.packed != nullptr, b.packed != nullptr,
                                          ActiveGemmIsa());
  const Split split =
      ChooseSplit(s, nthreads, a.packed != nullptr, b.packed != nullptr,
                  one_block ? kResidualOneBlockMaxK : MaxKc(ActiveGemmIsa()), pr);
  const Blocking& bl = split.bl;
  const bool post_in_tile = ep.has_post() && kern.tile_post && gemm_internal::PostInTile(ep);
  const bool post_after = ep.has_post() && !post_in_tile;
  const ScratchLayout layout = Layout(s, a.packed != nullptr, b.packed != nullptr);
  size_t stride = scratch.size() / static_cast<size_t>(nthreads);
  // A slice smaller than SgemmScratchBytes is the caller's sizing bug: run
  // on heap scratch rather than write past it, and count it (tests hold
  // SgemmScratchShortfalls at 0).
  std::vector<std::byte> heap;
  if (stride < static_cast<size_t>(layout.bytes())) {
    g_scratch_shortfalls.fetch_add(1, std::memory_order_relaxed);
    stride = static_cast<size_t>(layout.bytes());
    heap.resize(stride * static_cast<size_t>(nthreads));
    scratch = std::span<std::byte>(heap);
  }

  const int64_t m_panels = CeilDiv(s.m, pr);
  const int64_t n_chunks = split.n_chunks;
  const int64_t m_chunks = split.m_chunks;
  const int64_t panels_per_chunk = split.panels_per_chunk;
  // Rows first only where it measured faster: one K block, a residual to
  // read and C bigger than L2 (ResNet-50 layer1 conv3 + Add, 256 x 3136:
  // 0.78 -> 0.68 ms). Without a residual, or with C 512 x 784 (layer2),
  // the right panels read from L2 cost more than the order saves (+2-5%),
  // except for a tiny K, where the short tiles wait on their stores
  // (SqueezeNet's 3x3 stem, K = 27, 64 x 12321, 8 images: 5.2 -> 4.3 ms;
  // one image and ResNet's 7x7 stem, K = 147, even).
  // Also the one K block of kResidualOneBlockMaxK at any size.
  const bool rows_outer = b.packed == nullptr && bl.kc >= s.k &&
                          (ep.residual != nullptr || s.k <= kRowsOuterMaxK) &&
                          (s.m * s.n > (int64_t{1} << 19) || one_block);

  // Convolution panels made on demand against prepacked weights of one
  // left block, on AVX-512: K in one block up to kConvFullDepthMax
  // (kernels.h), as the im2col-free tile sums it, each panel made right
  // before the tiles that read it, into one full-depth panel of scratch
  // read from L2 (ResNet-18's 3x3 layers over these panels, one thread:
  // 56x56 64 -> 64 1.00 -> 0.97 ms, 28x28 0.96 -> 0.95). The choice depends
  // on the shape and ISA only, not on the thread count.
  const bool full_depth = b.panels != nullptr && a.packed != nullptr && !rows_outer &&
                          s.k <= gemm_internal::kConvFullDepthMax &&
                          m_panels <= kMcPanels && ActiveGemmIsa() == GemmIsa::kAvx512;
  const int64_t kc_step = full_depth ? s.k : bl.kc;
  // Few rows of prepacked weights (<= kInPlaceMaxPanels left panels)
  // against a raw row-major right operand: each packed right panel would
  // meet only that few tiles, so packing B cost more than the tiles save
  // on it; they read its full panels in place (ldb = b.ld) instead, only a
  // partial last panel is packed.
  // Rows outer reads them in place too for a shallow K and one left block
  // (see kInPlaceRowsOuterMaxK).
  const bool b_in_place = b.packed == nullptr && b.panels == nullptr && !b.trans &&
                          a.packed != nullptr &&
                          (rows_outer ? s.k <= kInPlaceRowsOuterMaxK && m_panels <= kMcPanels
                                      : m_panels <= kInPlaceMaxPanels);
  const int64_t q_tail = s.n / kPanelCols * kPanelCols;  // first column of a partial panel

  ParallelFor(threads, m_chunks * n_chunks, [&](int64_t task, int thread) {
    std::byte* base = scratch.data() + static_cast<size_t>(thread) * stride;
    float* bbuf = AlignUp(base);
    float* abuf = AlignUp(reinterpret_cast<std::byte*>(bbuf + layout.b_floats));
    const int64_t p0 = (task % m_chunks) * panels_per_chunk;
    const int64_t p1 = std::min(m_panels, p0 + panels_per_chunk);
    const auto chunk_start = split.fine ? FineChunkStart : ChunkStart;
    const int64_t j0 = chunk_start(task / m_chunks, s.n, n_chunks);
    const int64_t j1 = chunk_start(task / m_chunks + 1, s.n, n_chunks);
    // The end of the piece of [j0, j1) that starts at q0: the end of q0's
    // panel or j1 (q0 is a panel start unless the chunk is fine).
    const auto piece_end = [&](int64_t q0) {
      return std::min(j1, q0 - q0 % kPanelCols + kPanelCols);
    };
    for (int64_t pc = 0; pc < s.k; pc += kc_step) {
      const int64_t kc = std::min(kc_step, s.k - pc);
      const bool last = pc + kc == s.k;
      if (b_in_place) {
        if (q_tail < s.n && q_tail >= j0 && q_tail < j1) {
          PackRightBlock(b, s.n, pc, kc, q_tail, j1, bbuf + (q_tail - j0) * kc, kern);
        }
      } else if (b.packed == nullptr && !full_depth) {
        PackRightBlock(b, s.n, pc, kc, j0, j1, bbuf, kern);
      }
      for (int64_t pb = p0; pb < p1; pb += kMcPanels) {
        const int64_t pe = std::min(p1, pb + kMcPanels);
        if (a.packed == nullptr) {
          for (int64_t p = pb; p < pe; ++p) {
            const int64_t i0 = p * pr;
            PackLeftBlockPanel(a, i0, std::min(pr, s.m - i0), pc, kc,
                               abuf + (p - pb) * kc * kPanelRows);
          }
        }
        auto tile = [&](int64_t p, int64_t q0, NextPanel pf) {
          // Columns [q0, piece_end(q0)) of the panel starting at `panel`:
          // `off` > 0 only in a fine chunk's piece of a prepacked panel.
          const int64_t off = q0 % kPanelCols, panel = q0 - off;
          const int64_t w = PanelWidth(s.n - panel);
          const bool in_place = b_in_place && q0 < q_tail;
          const float* bp = b.packed != nullptr ? b.packed->data() + panel * s.k + pc * w + off
                            : full_depth        ? bbuf
                            : in_place          ? b.data + pc * b.ld + q0
                                                : bbuf + (q0 - j0) * kc;
          const int cols = static_cast<int>(std::min(piece_end(q0), s.n) - q0);
          const int64_t i0 = p * pr;
          const int64_t rows = std::min(pr, s.m - i0);
          const float* ap = a.packed != nullptr ? a.packed->data() + i0 * s.k + pc * kPanelRows
                                                : abuf + (p - pb) * kc * kPanelRows;
          float* ct = c + i0 * ldc + q0;
          kern.tile({.kc = kc,
                     .a = ap,
                     .b = bp,
                     .w = w - off,
                     .ldb = in_place ? b.ld : w,
                     .rows = static_cast<int>(rows),
                     .cols = cols,
                     .c = ct,
                     .ldc = ldc,
                     .alpha = ep.alpha,
                     .load_c = ep.accumulate || pc > 0,
                     .post = last && post_in_tile ? &ep : nullptr,
                     .i0 = i0,
                     .j0 = q0,
                     .prefetch = pf.data,
                     .prefetch_lines = pf.lines});
          if (last && post_after) kern.epilogue(ep, ct, ldc, i0, q0, rows, cols);
        };
        if (rows_outer) {
          // Each left panel (in L1) meets every right panel of the chunk
          // (in L2), so that C's rows are written (and the residual read)
          // left to right: 16 sequential streams the hardware prefetcher
          // follows, not 8 x 3 lines of every row of the block per panel.
          const int64_t nq = CeilDiv(j1 - j0, kPanelCols);
          for (int64_t p = pb; p < pe; ++p) {
            const NextPanel next =
                a.packed != nullptr && p + 1 < p1
                    ? NextPanel{a.packed->data() + (p + 1) * kPanelRows * s.k + pc * kPanelRows,
                                kc * kPanelRows / 16}
                    : NextPanel{};
            for (int64_t q0 = j0; q0 < j1; q0 += kPanelCols) {
              tile(p, q0, PrefetchShare(next, (q0 - j0) / kPanelCols, nq));
            }
          }
          continue;
        }
        // Each right panel (kc x 48, in L1) meets every left panel of the
        // block (in L2).
        for (int64_t q0 = j0; q0 < j1; q0 = piece_end(q0)) {
          if (b_in_place && q0 + kPanelCols < q_tail) {
            // The next in-place panel's rows into L2 (strided: no
            // hardware prefetcher follows them).
            const float* nb = b.data + pc * b.ld + q0 + kPanelCols;
            for (int64_t k = 0; k < kc; ++k) {
              const float* r = nb + k * b.ld;
              __builtin_prefetch(r, 0, 2);
              __builtin_prefetch(r + 16, 0, 2);
              __builtin_prefetch(r + 32, 0, 2);
            }
          }
          const NextPanel next =
              b.packed != nullptr ? NextRightPanel(b.packed->data(), s, kc_step, pc, q0, j0, j1)
                                  : NextPanel{};
          if (full_depth) {
            PackRightBlock(b, s.n, pc, kc, q0, std::min(j1, q0 + kPanelCols), bbuf, kern);
          }
          // Prepacked left weights (right operand packed here): on the
          // chunk's last right panel, each tile prefetches its successor in
          // the next left block (ResNet-18's 14x14 layers in the model, where
          // the weights come from memory: +20%).
          const bool next_left =
              b.packed == nullptr && a.packed != nullptr && q0 + kPanelCols >= j1;
          for (int64_t p = pb; p < pe; ++p) {
            tile(p, q0,
                 next_left ? NextLeftPanel(a.packed->data(), s, kc_step, pc, p, pb, pe, p0, p1)
                           : PrefetchShare(next, p - pb, pe - pb));
          }
        }
      }
    }
  });
}

void SgemmAccumulate(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                     const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
                     int64_t ldc) {
  const GemmShape s{m, n, k};
  const size_t bytes = static_cast<size_t>(SgemmScratchBytes(s, false, false));
  std::vector<std::byte> heap(bytes + 64);
  const auto aligned = reinterpret_cast<std::byte*>(AlignUp(heap.data()));
  Epilogue ep;
  ep.alpha = alpha;
  ep.accumulate = true;
  Sgemm(s, LeftOperand{.data = a, .ld = lda, .trans = trans_a},
        RightOperand{.data = b, .ld = ldb, .trans = trans_b}, c, ldc, ep,
        std::span<std::byte>(aligned, bytes), nullptr);
}

void ApplyEpilogue(const Epilogue& ep, float* c, int64_t ldc, int64_t i0, int64_t j0, int64_t rows,
                   int64_t cols) {
  if (rows <= 0 || cols <= 0 || !ep.has_post()) return;
  gemm_internal::ActiveKernels().epilogue(ep, c, ldc, i0, j0, rows, cols);
}

}  // namespace orrery::ops::cpu
