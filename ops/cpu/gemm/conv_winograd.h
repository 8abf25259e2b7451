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
// F(4x4, 3x3) takes 4x4 tiles from 6x6 input blocks: 36 products per 16
// outputs (4x fewer multiplies than the direct sum), on wide planes
// (kWinograd4MinWidth). Intel Xeon, one thread, step minima
// against F(2x2, 3x3): ResNet-18's 56x56 3x3s -32%, its 28x28 ones -12%,
// ResNet-50's -17..-27%, SqueezeNet's 27x27 ones -28%; on 14x14 planes (16
// tiles a plane) +55..+92%.
//
// Work goes by blocks of tile rows (up to kWinogradMaxBlockTiles tiles, so
// that a block's V and products stay in L2) and chunks of kWinogradChunk
// output channels: a task transforms its block's input, runs the GEMMs
// of each chunk (Sgemm on one thread) and transforms their products back
// into Y, then applies the epilogue there. With several threads and fewer
// than two blocks each, a task is one block's one chunk (a thread that
// transformed that block's input for its previous task keeps it) when
// those tasks divide evenly among the threads; otherwise (a 14x14 plane is
// one block) each block runs in three phases, each split finely over the
// threads: the input's channels, the chunks x terms GEMMs, the output's
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
inline constexpr int64_t kWinogradTerms = 16;          // 4x4 products per tile of F(2x2, 3x3)
inline constexpr int64_t kWinogradTerms4 = 36;         // 6x6 products per tile of F(4x4, 3x3)
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
// F(4x4, 3x3) (4x4 output tiles from 6x6 input blocks: 36 products per 16
// outputs, where F(2x2, 3x3) takes 64) for output planes at least this
// wide (27: SqueezeNet's 27x27 planes, 7 tiles a row), when AVX-512 or AVX2
// is active (with AVX2 its transforms are the portable ones: on the Intel
// Xeon capped at AVX2, ResNet-18's 56x56 and 28x28 3x3s still ran 18-24%
// faster than F(2x2, 3x3)'s). Its transforms have
// factors up to 8 (and U's 1/24), so its sums are less exact: relative L2
// ~2-3e-6 against ~3-5e-7 on random 64..256-channel layers (numpy, float32
// against float64); whole models against ONNX Runtime: ResNet-50 3.71e-5
// (1.71e-5 with F(2x2, 3x3) only), GoogLeNet 1.74e-5 (9.22e-6).
inline constexpr int64_t kWinograd4MinWidth = 27;

struct WinogradGeometry {
  int64_t c = 0, m = 0;  // input / output channels (one group)
  int64_t h_in = 0, w_in = 0, h_out = 0, w_out = 0;
  int64_t ph = 0, pw = 0;          // top / left padding (0 or 1)
  int64_t tile = 2;                  // output tile edge: 2, F(2x2, 3x3); 4, F(4x4, 3x3)
  int64_t tiles_h = 0, tiles_w = 0;  // output tiles per column / row
  int64_t block_rows = 1;            // tile rows per block
  // Floats per row of a channel's padded input rows (see the .cc).
  int64_t padded_w = 0;

  int64_t blocks() const { return (tiles_h + block_rows - 1) / block_rows; }
  int64_t block_tiles() const { return block_rows * tiles_w; }
  int64_t chunks() const { return (m + kWinogradChunk - 1) / kWinogradChunk; }
  // Products per tile (GEMMs per chunk): (tile + 2)^2.
  int64_t terms() const { return (tile + 2) * (tile + 2); }
};

// Whether a 3x3, stride-1, undilated layer with these pads (each 0 or 1)
// and output plane (at least kWinogradMinWidth wide) runs here.
bool WinogradFits(int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t dh, int64_t dw,
                  int64_t pad_top, int64_t pad_left, int64_t pad_bottom, int64_t pad_right,
                  int64_t h_out, int64_t w_out);

// The output tile edge for a plane w_out wide: 4 when at least
// kWinograd4MinWidth and AVX-512 or AVX2 is active, else 2.
int64_t WinogradTileFor(int64_t w_out);

WinogradGeometry MakeWinogradGeometry(int64_t c, int64_t m, int64_t h_in, int64_t w_in, int64_t h_out,
                                      int64_t w_out, int64_t ph, int64_t pw, int64_t tile = 2);

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

// W [m][c][3][3] -> U = G w G^T as terms() * chunks() packed left
// operands: entry chunk * terms() + xi holds rows [64 chunk, 64 chunk + 64)
// (or fewer in the last chunk) x c of U[xi]. Cost: one pass over W,
// terms() / 9 of its floats stored (16/9 or 4x).
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
// input row tile ty0 - ph + r at columns [pw, pw + w_in), zeros elsewhere
// (tile (ty1 - ty0) + 2 rows of padded_w floats).
void WinogradPadRows(const WinogradGeometry& g, const float* x, int64_t ty0, int64_t ty1, float* rows);

// The transforms of one tile size on one ISA. input: tile rows [ty0, ty1)
// of one channel, from its WinogradPadRows rows, into v[xi * ldv_term + q]
// for the block's tiles q; output: one output channel's products back into
// its plane y (rows of those tile rows).
struct WinogradTransforms {
  void (*input)(const WinogradGeometry& g, int64_t ty0, int64_t ty1, float* v, int64_t ldv_term,
                const float* rows);
  void (*output)(const WinogradGeometry& g, const float* prod, int64_t ld_term, int64_t ty0, int64_t ty1,
                 float* y);
};
// F(2x2, 3x3)'s or F(4x4, 3x3)'s, by the tile of `g`: portable C++
// (conv_winograd.cc) and AVX-512 (conv_winograd_avx512.cc).
WinogradTransforms WinogradTransformsPortable(const WinogradGeometry& g);
WinogradTransforms WinogradTransformsAvx512(const WinogradGeometry& g);

}  // namespace orrery::ops::cpu::gemm_internal
