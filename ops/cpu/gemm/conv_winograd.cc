#include "ops/cpu/gemm/conv_winograd.h"

#include <algorithm>
#include <array>
#include <cstring>

#include "ops/cpu/gemm/conv_direct.h"
#include "ops/cpu/gemm/conv_winograd_f4.h"
#include "ops/cpu/gemm/kernels.h"

namespace orrery::ops::cpu::gemm_internal {
namespace {

int64_t RoundUp(int64_t v, int64_t to) { return (v + to - 1) / to * to; }

// Whether a plane's slices are sized for the phased way (all channels'
// products of a block in thread 0's slice).
bool Shareable(const WinogradGeometry& g) { return g.blocks() <= kWinogradSharedMaxBlocks; }

// One thread's scratch slice, each region 64-byte aligned: its padded rows,
// the GEMM tail's B and Sgemm's scratch (local), then V and the products.
// A block alone in a slice holds one chunk's products; shared by the
// threads (in thread 0's slice) all channels' (only planes of at most
// kWinogradSharedMaxBlocks blocks are sized for that).
struct Layout {
  bool shareable;
  int64_t rows_floats, tail_floats, gemm_bytes, v_floats, prod_floats;

  explicit Layout(const WinogradGeometry& g)
      : shareable(Shareable(g)),
        rows_floats(RoundUp((4 + g.tile * g.block_rows) * g.padded_w, 16)),
        tail_floats(RoundUp(ConvTailFloats(g.c, kConvTailMaxCols), 16)),
        gemm_bytes(RoundUp(SgemmScratchBytes({std::min(g.m, kWinogradChunk), g.block_tiles(), g.c},
                                             /*a_packed=*/true, /*b_packed=*/false),
                           64)),
        v_floats(RoundUp(g.terms() * g.c * g.block_tiles(), 16)),
        prod_floats(
            RoundUp(g.terms() * g.block_tiles() * (shareable ? g.m : std::min(g.m, kWinogradChunk)), 16)) {}
  int64_t local_bytes() const { return (rows_floats + tail_floats) * static_cast<int64_t>(sizeof(float)) + gemm_bytes; }
  int64_t bytes() const { return local_bytes() + (v_floats + prod_floats) * static_cast<int64_t>(sizeof(float)); }
};

// The regions of one slice.
struct Slice {
  float* rows;
  float* tail_b;
  std::span<std::byte> gemm;
  float* v;
  float* prod;

  Slice(const Layout& l, std::span<std::byte> s)
      : rows(reinterpret_cast<float*>(s.data())),
        tail_b(rows + l.rows_floats),
        gemm(s.subspan(static_cast<size_t>((l.rows_floats + l.tail_floats) * static_cast<int64_t>(sizeof(float))),
                       static_cast<size_t>(l.gemm_bytes))),
        v(reinterpret_cast<float*>(s.data() + l.local_bytes())),
        prod(v + l.v_floats) {}
};

// Tile rows [ty0, ty1) of a block and its tile count.
struct BlockRows {
  int64_t ty0, ty1, tiles;
  BlockRows(const WinogradGeometry& g, int64_t block)
      : ty0(block * g.block_rows),
        ty1(std::min(g.tiles_h, ty0 + g.block_rows)),
        tiles((ty1 - ty0) * g.tiles_w) {}
};

// The transforms of g's tile on the active ISA: AVX-512's, else portable.
WinogradTransforms ActiveTransforms(const WinogradGeometry& g) {
  return ActiveGemmIsa() == GemmIsa::kAvx512 ? WinogradTransformsAvx512(g) : WinogradTransformsPortable(g);
}

// Input channels [c0, c1) of `block` transformed into v [terms][c][ldv].
void InputChannels(const WinogradGeometry& g, const float* x, int64_t block, int64_t c0, int64_t c1, float* v,
                   float* rows) {
  const BlockRows b(g, block);
  const int64_t ldv = g.block_tiles();
  const WinogradTransforms t = ActiveTransforms(g);
  for (int64_t c = c0; c < c1; ++c) {
    WinogradPadRows(g, x + c * g.h_in * g.w_in, b.ty0, b.ty1, rows);
    t.input(g, b.ty0, b.ty1, v + c * ldv, g.c * ldv, rows);
  }
}

// Terms [xi0, xi1) of chunk `ch`'s products: U[xi] V[xi] into prod, whose
// row for channel m is at (m - prod_m0) * ldv, term xi at xi * prod_term.
// The last 1..4 tiles past whole panels (a 14x14 plane's 49th) go to the
// GEMM tail kernel, not a 16-column panel.
void Products(const WinogradGeometry& g, std::span<const PackedMatrix> u, const float* v, int64_t block, int64_t ch,
              int64_t xi0, int64_t xi1, float* prod, int64_t prod_m0, int64_t prod_term, const Slice& sl) {
  const BlockRows b(g, block);
  const int64_t ldv = g.block_tiles();
  const GemmKernels& kern = ActiveKernels();
  const int64_t tail = GemmTailCols(b.tiles, kern);
  const int64_t j0 = b.tiles - tail;
  const int64_t m0 = ch * kWinogradChunk;
  const int64_t mc = std::min(kWinogradChunk, g.m - m0);
  for (int64_t xi = xi0; xi < xi1; ++xi) {
    const PackedMatrix& a = u[static_cast<size_t>(ch * g.terms() + xi)];
    const float* vx = v + xi * g.c * ldv;
    float* px = prod + xi * prod_term + (m0 - prod_m0) * ldv;
    Sgemm({mc, j0, g.c}, LeftOperand{.packed = &a}, RightOperand{.data = vx, .ld = ldv}, px, ldv, Epilogue{},
          sl.gemm, nullptr);
    if (tail > 0) {
      for (int64_t k = 0; k < g.c; ++k) {
        for (int64_t j = 0; j < tail; ++j) sl.tail_b[k * tail + j] = vx[k * ldv + j0 + j];
      }
      kern.conv_tail({.a = a.data(), .k = g.c, .b = sl.tail_b, .cols = static_cast<int>(tail), .rows = mc,
                      .c = px + j0, .ldc = ldv});
    }
  }
}

// Output channels [m0, m1) of `block` from prod (as in Products), then the
// epilogue on their rows.
void OutputChannels(const WinogradGeometry& g, const float* prod, int64_t prod_m0, int64_t prod_term,
                    int64_t block, int64_t m0, int64_t m1, float* y, const Epilogue& ep) {
  const BlockRows b(g, block);
  const int64_t ldv = g.block_tiles();
  const int64_t plane_out = g.h_out * g.w_out;
  const WinogradTransforms t = ActiveTransforms(g);
  for (int64_t m = m0; m < m1; ++m) t.output(g, prod + (m - prod_m0) * ldv, prod_term, b.ty0, b.ty1, y + m * plane_out);
  // The block's output rows (the last tile row may have fewer).
  const int64_t oh0 = g.tile * b.ty0;
  const int64_t oh1 = std::min(g.h_out, g.tile * b.ty1);
  if (ep.has_post()) {
    ApplyEpilogue(ep, y + m0 * plane_out + oh0 * g.w_out, plane_out, m0, oh0 * g.w_out, m1 - m0,
                  (oh1 - oh0) * g.w_out);
  }
}

// A block's output channel chunks [chunk0, chunk1) in one slice, whose V
// holds the block's transformed input already unless `transform_input`.
void RunBlockAlone(const WinogradGeometry& g, const float* x, std::span<const PackedMatrix> u, float* y,
                   int64_t block, int64_t chunk0, int64_t chunk1, bool transform_input, const Epilogue& ep,
                   const Slice& sl) {
  if (transform_input) InputChannels(g, x, block, 0, g.c, sl.v, sl.rows);
  const int64_t prod_term = std::min(g.m, kWinogradChunk) * g.block_tiles();
  for (int64_t ch = chunk0; ch < chunk1; ++ch) {
    const int64_t m0 = ch * kWinogradChunk;
    const int64_t m1 = std::min(g.m, m0 + kWinogradChunk);
    Products(g, u, sl.v, block, ch, 0, g.terms(), sl.prod, m0, prod_term, sl);
    OutputChannels(g, sl.prod, m0, prod_term, block, m0, m1, y, ep);
  }
}

// Threads whose V a task may reuse (RunWinograd keeps the block each one
// transformed last); more threads than this transform every time.
constexpr int kMaxVThreads = 64;

}  // namespace

bool WinogradFits(int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t dh, int64_t dw, int64_t pad_top,
                  int64_t pad_left, int64_t pad_bottom, int64_t pad_right, int64_t h_out, int64_t w_out) {
  const auto pad_ok = [](int64_t p) { return p == 0 || p == 1; };
  return kh == 3 && kw == 3 && sh == 1 && sw == 1 && dh == 1 && dw == 1 && pad_ok(pad_top) &&
         pad_ok(pad_left) && pad_ok(pad_bottom) && pad_ok(pad_right) && h_out >= 2 &&
         w_out >= kWinogradMinWidth;
}

int64_t WinogradTileFor(int64_t w_out) {
  return w_out >= kWinograd4MinWidth && ActiveGemmIsa() != GemmIsa::kPortable ? 4 : 2;
}

WinogradGeometry MakeWinogradGeometry(int64_t c, int64_t m, int64_t h_in, int64_t w_in, int64_t h_out,
                                      int64_t w_out, int64_t ph, int64_t pw, int64_t tile) {
  WinogradGeometry g;
  g.c = c;
  g.m = m;
  g.h_in = h_in;
  g.w_in = w_in;
  g.h_out = h_out;
  g.w_out = w_out;
  g.ph = ph;
  g.pw = pw;
  g.tile = tile;
  g.tiles_h = (h_out + tile - 1) / tile;
  g.tiles_w = (w_out + tile - 1) / tile;
  // Blocks of whole tile rows whose tile count fills the GEMM's 48-column
  // panels best (Sgemm rounds its last panel up: 84 tiles cost 96), of at
  // most kWinogradMaxBlockTiles tiles and ~1 MiB of V.
  const int64_t max_tiles =
      std::max<int64_t>(g.tiles_w, std::min<int64_t>(kWinogradMaxBlockTiles, (int64_t{1} << 18) / (g.terms() * c)));
  // Up to kConvTailMaxCols columns past whole panels go to the GEMM tail
  // kernel (49 = 48 + 1 costs 49).
  double best = -1.0;
  for (int64_t r = 1; r <= g.tiles_h && r * g.tiles_w <= max_tiles; ++r) {
    const int64_t t = r * g.tiles_w;
    const int64_t cost = t > kPanelCols && t % kPanelCols <= kConvTailMaxCols ? t : RoundUp(t, kPanelCols);
    const double fill = static_cast<double>(t) / static_cast<double>(cost);
    if (fill >= best) {
      best = fill;
      g.block_rows = r;
    }
  }
  // Padded column t is input column t - pw; a row of 16 tiles from tile tx0
  // reads whole vectors up to column tile (tx0 + 16) + 4, so up to tile
  // times the tiles rounded to 16, + 4.
  g.padded_w = tile * RoundUp(g.tiles_w, 16) + 16;
  return g;
}

int64_t WinogradScratchBytes(const WinogradGeometry& g) { return Layout(g).bytes(); }

bool WinogradRunsPhased(const WinogradGeometry& g, int64_t threads) {
  const int64_t blocks = g.blocks();
  if (threads <= 1 || blocks >= 2 * threads || !Shareable(g)) return false;
  return blocks < threads || (blocks * g.chunks()) % threads != 0;
}

namespace {

// U = G k G^T of one 3x3 kernel k (row-major) into u[xi * stride] for the
// tile's terms, in double, rounded once. F(2x2, 3x3): G = [1 0 0; .5 .5 .5;
// .5 -.5 .5; 0 0 1]. F(4x4, 3x3): G = [1/4 0 0; -1/6 -1/6 -1/6;
// -1/6 1/6 -1/6; 1/24 1/12 1/6; 1/24 -1/12 1/6; 0 0 1].
void TransformKernel(int64_t tile, const float* k, float* u, int64_t stride) {
  static constexpr double kG2[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};
  static constexpr double kG4[6][3] = {{0.25, 0, 0},
                                       {-1.0 / 6, -1.0 / 6, -1.0 / 6},
                                       {-1.0 / 6, 1.0 / 6, -1.0 / 6},
                                       {1.0 / 24, 1.0 / 12, 1.0 / 6},
                                       {1.0 / 24, -1.0 / 12, 1.0 / 6},
                                       {0, 0, 1}};
  const int n = static_cast<int>(tile) + 2;
  const double(*gm)[3] = tile == 4 ? kG4 : kG2;
  double t[6][3];  // G k
  for (int r = 0; r < n; ++r) {
    for (int j = 0; j < 3; ++j) t[r][j] = gm[r][0] * k[j] + gm[r][1] * k[3 + j] + gm[r][2] * k[6 + j];
  }
  for (int r = 0; r < n; ++r) {
    for (int s = 0; s < n; ++s) {
      u[(r * n + s) * stride] = static_cast<float>(t[r][0] * gm[s][0] + t[r][1] * gm[s][1] + t[r][2] * gm[s][2]);
    }
  }
}

}  // namespace

std::vector<PackedMatrix> PackWinogradWeights(const WinogradGeometry& g, const float* w) {
  const int64_t terms = g.terms();
  std::vector<PackedMatrix> out;
  out.reserve(static_cast<size_t>(terms * g.chunks()));
  std::vector<float> u(static_cast<size_t>(terms * kWinogradChunk * g.c));
  for (int64_t ch = 0; ch < g.chunks(); ++ch) {
    const int64_t m0 = ch * kWinogradChunk;
    const int64_t rows = std::min(kWinogradChunk, g.m - m0);
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t c = 0; c < g.c; ++c) {
        TransformKernel(g.tile, w + ((m0 + i) * g.c + c) * 9, u.data() + i * g.c + c, rows * g.c);
      }
    }
    for (int64_t xi = 0; xi < terms; ++xi) {
      out.push_back(PackedMatrix::PackLeft(u.data() + xi * rows * g.c, g.c, false, rows, g.c));
    }
  }
  return out;
}

void WinogradPadRows(const WinogradGeometry& g, const float* x, int64_t ty0, int64_t ty1, float* rows) {
  const int64_t n = g.tile * (ty1 - ty0) + 2;
  for (int64_t r = 0; r < n; ++r) {
    float* dst = rows + r * g.padded_w;
    const int64_t ih = g.tile * ty0 - g.ph + r;
    if (ih < 0 || ih >= g.h_in) {
      std::memset(dst, 0, static_cast<size_t>(g.padded_w) * sizeof(float));
      continue;
    }
    std::memset(dst, 0, static_cast<size_t>(g.pw) * sizeof(float));
    std::memcpy(dst + g.pw, x + ih * g.w_in, static_cast<size_t>(g.w_in) * sizeof(float));
    std::memset(dst + g.pw + g.w_in, 0, static_cast<size_t>(g.padded_w - g.pw - g.w_in) * sizeof(float));
  }
}

namespace {

// F(2x2, 3x3)'s transforms on padded rows, one tile at a time.
void InputF2(const WinogradGeometry& g, int64_t ty0, int64_t ty1, float* v, int64_t ldv_term,
             const float* rows) {
  for (int64_t ty = ty0; ty < ty1; ++ty) {
    const float* base = rows + 2 * (ty - ty0) * g.padded_w;
    for (int64_t tx = 0; tx < g.tiles_w; ++tx) {
      float d[4][4];
      for (int i = 0; i < 4; ++i) {
        for (int j = 0; j < 4; ++j) d[i][j] = base[i * g.padded_w + 2 * tx + j];
      }
      // B^T d B; B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1].
      float e[4][4];
      for (int j = 0; j < 4; ++j) {
        e[0][j] = d[0][j] - d[2][j];
        e[1][j] = d[1][j] + d[2][j];
        e[2][j] = d[2][j] - d[1][j];
        e[3][j] = d[1][j] - d[3][j];
      }
      const int64_t q = (ty - ty0) * g.tiles_w + tx;
      for (int i = 0; i < 4; ++i) {
        float* vi = v + i * 4 * ldv_term + q;
        vi[0] = e[i][0] - e[i][2];
        vi[ldv_term] = e[i][1] + e[i][2];
        vi[2 * ldv_term] = e[i][2] - e[i][1];
        vi[3 * ldv_term] = e[i][1] - e[i][3];
      }
    }
  }
}

void OutputF2(const WinogradGeometry& g, const float* prod, int64_t ld_term, int64_t ty0, int64_t ty1,
              float* y) {
  for (int64_t ty = ty0; ty < ty1; ++ty) {
    for (int64_t tx = 0; tx < g.tiles_w; ++tx) {
      const int64_t q = (ty - ty0) * g.tiles_w + tx;
      float p[4][4];
      for (int i = 0; i < 4; ++i) {
        for (int j = 0; j < 4; ++j) p[i][j] = prod[(i * 4 + j) * ld_term + q];
      }
      // A^T p A; A^T = [1 1 1 0; 0 1 -1 -1].
      float r[2][4];
      for (int j = 0; j < 4; ++j) {
        r[0][j] = p[0][j] + p[1][j] + p[2][j];
        r[1][j] = p[1][j] - p[2][j] - p[3][j];
      }
      for (int i = 0; i < 2; ++i) {
        const int64_t oh = 2 * ty + i;
        if (oh >= g.h_out) break;
        float* yr = y + oh * g.w_out + 2 * tx;
        yr[0] = r[i][0] + r[i][1] + r[i][2];
        if (2 * tx + 1 < g.w_out) yr[1] = r[i][1] - r[i][2] - r[i][3];
      }
    }
  }
}

// F(4x4, 3x3)'s: B^T d B down the block's rows first, then along them
// (conv_winograd_f4.h, in the AVX-512 kernel's order).
void InputF4(const WinogradGeometry& g, int64_t ty0, int64_t ty1, float* v, int64_t ldv_term,
             const float* rows) {
  for (int64_t ty = ty0; ty < ty1; ++ty) {
    const float* base = rows + 4 * (ty - ty0) * g.padded_w;
    for (int64_t tx = 0; tx < g.tiles_w; ++tx) {
      float e[6][6];  // e[r][j] = (B^T d)[r][j]
      for (int j = 0; j < 6; ++j) {
        float col[6], out[6];
        for (int i = 0; i < 6; ++i) col[i] = base[i * g.padded_w + 4 * tx + j];
        WinogradInputF4(col, out);
        for (int r = 0; r < 6; ++r) e[r][j] = out[r];
      }
      const int64_t q = (ty - ty0) * g.tiles_w + tx;
      for (int r = 0; r < 6; ++r) {
        float out[6];
        WinogradInputF4(e[r], out);
        for (int k = 0; k < 6; ++k) v[(r * 6 + k) * ldv_term + q] = out[k];
      }
    }
  }
}

void OutputF4(const WinogradGeometry& g, const float* prod, int64_t ld_term, int64_t ty0, int64_t ty1,
              float* y) {
  for (int64_t ty = ty0; ty < ty1; ++ty) {
    for (int64_t tx = 0; tx < g.tiles_w; ++tx) {
      const int64_t q = (ty - ty0) * g.tiles_w + tx;
      float e[4][6];  // e[r][j] = (A^T p)[r][j]
      for (int j = 0; j < 6; ++j) {
        float col[6], out[4];
        for (int i = 0; i < 6; ++i) col[i] = prod[(i * 6 + j) * ld_term + q];
        WinogradOutputF4(col, out);
        for (int r = 0; r < 4; ++r) e[r][j] = out[r];
      }
      for (int r = 0; r < 4; ++r) {
        const int64_t oh = 4 * ty + r;
        if (oh >= g.h_out) break;
        float out[4];
        WinogradOutputF4(e[r], out);
        float* yr = y + oh * g.w_out + 4 * tx;
        for (int k = 0; k < 4 && 4 * tx + k < g.w_out; ++k) yr[k] = out[k];
      }
    }
  }
}

}  // namespace

WinogradTransforms WinogradTransformsPortable(const WinogradGeometry& g) {
  return g.tile == 4 ? WinogradTransforms{InputF4, OutputF4} : WinogradTransforms{InputF2, OutputF2};
}

void RunWinogradBlock(const WinogradGeometry& g, const float* x, std::span<const PackedMatrix> u, float* y,
                      int64_t block, int64_t chunk0, int64_t chunk1, const Epilogue& ep,
                      std::span<std::byte> scratch) {
  RunBlockAlone(g, x, u, y, block, chunk0, chunk1, /*transform_input=*/true, ep, Slice(Layout(g), scratch));
}

void RunWinograd(const WinogradGeometry& g, const float* x, std::span<const PackedMatrix> u, float* y,
                 const Epilogue& ep, std::span<std::byte> scratch, ThreadGroup* threads) {
  const Layout layout(g);
  const int64_t nthreads = NumThreads(threads);
  const size_t stride = scratch.size() / static_cast<size_t>(nthreads);
  auto slice = [&](int thread) { return Slice(layout, scratch.subspan(static_cast<size_t>(thread) * stride, stride)); };
  const int64_t blocks = g.blocks();
  const int64_t chunks = g.chunks();
  if (WinogradRunsPhased(g, nthreads)) {
    // Few blocks for the threads: each block in three finely split phases
    // over V and all channels' products in thread 0's slice.
    const Slice shared = slice(0);
    const int64_t prod_term = g.m * g.block_tiles();
    const int64_t in_tasks = std::min(g.c, 4 * nthreads);
    const int64_t out_tasks = std::min((g.m + 15) / 16, 4 * nthreads);
    for (int64_t b = 0; b < blocks; ++b) {
      ParallelFor(threads, in_tasks, [&](int64_t t, int thread) {
        InputChannels(g, x, b, t * g.c / in_tasks, (t + 1) * g.c / in_tasks, shared.v, slice(thread).rows);
      });
      ParallelFor(threads, chunks * g.terms(), [&](int64_t t, int thread) {
        const int64_t xi = t % g.terms();
        Products(g, u, shared.v, b, t / g.terms(), xi, xi + 1, shared.prod, 0, prod_term, slice(thread));
      });
      ParallelFor(threads, out_tasks, [&](int64_t t, int) {
        OutputChannels(g, shared.prod, 0, prod_term, b, t * g.m / out_tasks, (t + 1) * g.m / out_tasks, y, ep);
      });
    }
    return;
  }
  if (nthreads == 1 || blocks >= 2 * nthreads) {
    ParallelFor(threads, blocks, [&](int64_t b, int thread) {
      RunBlockAlone(g, x, u, y, b, 0, chunks, /*transform_input=*/true, ep, slice(thread));
    });
    return;
  }
  // Fewer blocks than twice the threads: a task per block and chunk. A
  // thread whose V holds the block already (its previous task's) skips the
  // input transform.
  std::array<int64_t, kMaxVThreads> v_block;
  v_block.fill(-1);
  ParallelFor(threads, blocks * chunks, [&](int64_t task, int thread) {
    const int64_t b = task / chunks, ch = task % chunks;
    int64_t* held = thread < kMaxVThreads ? &v_block[static_cast<size_t>(thread)] : nullptr;
    RunBlockAlone(g, x, u, y, b, ch, ch + 1, held == nullptr || *held != b, ep, slice(thread));
    if (held != nullptr) *held = b;
  });
}

}  // namespace orrery::ops::cpu::gemm_internal
