// Internal to ops/cpu: 3x3 stride-1 convolutions by Winograd's minimal
// filtering F(2x2, 3x3) (Lavin and Gray, "Fast Algorithms for Convolutional
// Neural Networks", 2016). Each 2x2 block of outputs (a tile) comes from the
// 4x4 input block under it: Y = A^T [sum over c of (G g G^T) .* (B^T d B)] A.
// The 16 element-wise products summed over the input channels are 16 GEMMs,
// U[xi] (m x c, the transformed weights, packed once) times V[xi] (c x tiles,
// the transformed input), so a tile costs 16 multiplies per channel pair
// where the direct convolution costs 36: 2.25x fewer FLOPs, plus the
// transforms (a few adds per value). The transforms use only 1 and 1/2, so
// the result stays within a few float32 roundings of the direct sum
// (relative L2 ~3e-7 on random 64..512-channel layers).
//
// Work goes by blocks of tile rows (up to kWinogradMaxBlockTiles tiles, so
// that a block's V and products stay in L2) and chunks of kWinogradChunk
// output channels: a task transforms its block's input, runs the 16 GEMMs
// of each chunk (Sgemm on one thread) and transforms their products back
// into Y, then applies the epilogue there. With several threads and fewer
// than two blocks each, a task is one block's one chunk (a thread that
// transformed that block's input for its previous task keeps it) when
// those tasks divide evenly among the threads; otherwise (a 14x14 plane is
// one block) each block runs in three phases, each split finely over the
// threads: the input's channels, the chunks x 16 GEMMs, the output's
// channels (whole chunks per task measured up to 32% slower than the
// direct path on GoogLeNet's 14x14 layers at two threads: 5 chunks do not
// split evenly in two). The phases cost three hand-offs per block and move
// the products between the cores: on SqueezeNet's 27x27 layers (two
// blocks, two chunks) at two threads they ran 18-25% slower than a task
// per block and chunk. Every output is computed the same way whatever the
// thread count.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "ops/cpu/gemm/sgemm.h"
#include "ops/parallel.h"

namespace orrery::ops::cpu::gemm_internal {

inline constexpr int64_t kWinogradChunk = 64;          // output channels per packed U matrix
inline constexpr int64_t kWinogradMaxBlockTiles = 144;  // tiles per block at most
inline constexpr int64_t kWinogradTerms = 16;          // 4x4 products per tile
// Planes of at most this many blocks get scratch for the phased way (all
// channels' products of a block in one slice).
inline constexpr int64_t kWinogradSharedMaxBlocks = 3;
// Output planes at least this wide (7 tiles a row). On a 7x7 plane each
// transformed weight serves 16 tiles, and U (16/9 of W's bytes: 16 MiB for
// ResNet's 512 -> 512) streams from memory. Intel Xeon, ResNet-18 layer4's
// 3x3s, one thread, step minima: 16 tiles as the GEMMs' columns 2.42 ms,
// as their rows (U^T packed as right operands) 1.70-1.78, the direct path
// 1.61.
inline constexpr int64_t kWinogradMinWidth = 13;

struct WinogradGeometry {
  int64_t c = 0, m = 0;  // input / output channels (one group)
  int64_t h_in = 0, w_in = 0, h_out = 0, w_out = 0;
  int64_t ph = 0, pw = 0;          // top / left padding (0 or 1)
  int64_t tiles_h = 0, tiles_w = 0;  // 2x2 output tiles per column / row
  int64_t block_rows = 1;            // tile rows per block
  // Floats per row of a channel's padded input rows (see the .cc).
  int64_t padded_w = 0;

  int64_t blocks() const { return (tiles_h + block_rows - 1) / block_rows; }
  int64_t block_tiles() const { return block_rows * tiles_w; }
  int64_t chunks() const { return (m + kWinogradChunk - 1) / kWinogradChunk; }
};

// Whether a 3x3, stride-1, undilated layer with these pads (each 0 or 1)
// and output plane (at least kWinogradMinWidth wide) runs here.
bool WinogradFits(int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t dh, int64_t dw,
                  int64_t pad_top, int64_t pad_left, int64_t pad_bottom, int64_t pad_right,
                  int64_t h_out, int64_t w_out);

WinogradGeometry MakeWinogradGeometry(int64_t c, int64_t m, int64_t h_in, int64_t w_in, int64_t h_out,
                                      int64_t w_out, int64_t ph, int64_t pw);

// Whether RunWinograd on `threads` threads runs each block in the three
// phases (see above): with several threads, fewer than two blocks each
// and a task per block and chunk that would leave them unevenly loaded
// (fewer blocks than threads, or a task count they do not divide), on a
// plane of at most kWinogradSharedMaxBlocks blocks.
bool WinogradRunsPhased(const WinogradGeometry& g, int64_t threads);

// Scratch bytes one thread needs (its padded rows, Sgemm's scratch, a
// block's V and products: one chunk's, or on planes of few blocks all
// channels').
int64_t WinogradScratchBytes(const WinogradGeometry& g);

// W [m][c][3][3] -> U = G w G^T as kWinogradTerms * chunks() packed left
// operands: entry chunk * 16 + xi holds rows [64 chunk, 64 chunk + 64) (or
// fewer in the last chunk) x c of U[xi]. Cost: one pass over W, 16/9 of its
// floats stored.
std::vector<PackedMatrix> PackWinogradWeights(const WinogradGeometry& g, const float* w);

// One image: y[m][oh][ow] = epilogue(sum over c, taps of x * w) on
// `threads` (see above), `scratch` holding NumThreads(threads) slices of
// equal size, each at least WinogradScratchBytes and 64-byte aligned (the
// layout of KernelContext::scratch). Allocates nothing.
void RunWinograd(const WinogradGeometry& g, const float* x, std::span<const PackedMatrix> u, float* y,
                 const Epilogue& ep, std::span<std::byte> scratch, ThreadGroup* threads);

// Output channel chunks [chunk0, chunk1) of the tile rows of `block` of one
// image, in one thread's scratch: y[m][oh][ow] = epilogue(sum over c, taps
// of x * w), the epilogue as ApplyEpilogue's (row bias, residual with
// ld_residual, activation; no alpha or accumulate). `u` from
// PackWinogradWeights; `scratch` of WinogradScratchBytes, 64-byte aligned.
// The transforms are AVX-512 when that ISA is active, portable C++
// otherwise; the GEMMs are Sgemm's.
void RunWinogradBlock(const WinogradGeometry& g, const float* x, std::span<const PackedMatrix> u, float* y,
                      int64_t block, int64_t chunk0, int64_t chunk1, const Epilogue& ep,
                      std::span<std::byte> scratch);

// Padded rows of one channel plane x for tile rows [ty0, ty1): row r holds
// input row 2 ty0 - ph + r at columns [pw, pw + w_in), zeros elsewhere
// (2 (ty1 - ty0) + 2 rows of padded_w floats).
void WinogradPadRows(const WinogradGeometry& g, const float* x, int64_t ty0, int64_t ty1, float* rows);

// The input transform of tile rows [ty0, ty1) of one channel plane x:
// v[xi * ldv_term + q] for the block's tiles q, and the output transform of
// one output channel's products back into its plane y (rows of those tile
// rows). Per ISA: portable (conv_winograd.cc) and AVX-512
// (conv_winograd_avx512.cc); `rows` is WinogradPadRows' scratch.
void WinogradInputPortable(const WinogradGeometry& g, const float* x, int64_t ty0, int64_t ty1, float* v,
                           int64_t ldv_term, float* rows);
void WinogradOutputPortable(const WinogradGeometry& g, const float* prod, int64_t ld_term, int64_t ty0,
                            int64_t ty1, float* y);
void WinogradInputAvx512(const WinogradGeometry& g, const float* x, int64_t ty0, int64_t ty1, float* v,
                         int64_t ldv_term, float* rows);
void WinogradOutputAvx512(const WinogradGeometry& g, const float* prod, int64_t ld_term, int64_t ty0,
                          int64_t ty1, float* y);

}  // namespace orrery::ops::cpu::gemm_internal
