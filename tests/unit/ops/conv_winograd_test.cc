// Winograd's F(2x2, 3x3) internals (ops/cpu/gemm/conv_winograd.h): which
// layers fit, how planes are cut into blocks, the AVX-512 transforms against
// the portable ones (bit for bit), and whole blocks against a direct sum on
// every GEMM instruction set. (Conv choosing it: conv_test.cc.)
#include "ops/cpu/gemm/conv_winograd.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "op_test_util.h"
#include "ops/cpu/gemm/sgemm.h"

namespace orrery::ops::cpu::gemm_internal {
namespace {

using ops::testing::AlignedScratch;
using ops::testing::RandomFloats;

TEST(WinogradTest, FitsOnlyThreeByThreeStrideOneOnWidePlanes) {
  // kh kw sh sw dh dw pads (t l b r) h_out w_out
  EXPECT_TRUE(WinogradFits(3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 56, 56));
  EXPECT_TRUE(WinogradFits(3, 3, 1, 1, 1, 1, 0, 0, 0, 0, 2, 13));
  EXPECT_TRUE(WinogradFits(3, 3, 1, 1, 1, 1, 0, 1, 1, 0, 28, 28));
  EXPECT_TRUE(WinogradFits(3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 13, 13));
  EXPECT_FALSE(WinogradFits(3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 7, 7)) << "narrow plane";
  EXPECT_FALSE(WinogradFits(3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 28, 28)) << "stride 2";
  EXPECT_FALSE(WinogradFits(3, 3, 1, 1, 2, 2, 2, 2, 2, 2, 28, 28)) << "dilated";
  EXPECT_FALSE(WinogradFits(3, 3, 1, 1, 1, 1, 2, 2, 2, 2, 30, 30)) << "pad 2";
  EXPECT_FALSE(WinogradFits(5, 5, 1, 1, 1, 1, 2, 2, 2, 2, 28, 28)) << "5x5";
  EXPECT_FALSE(WinogradFits(3, 1, 1, 1, 1, 1, 1, 0, 1, 0, 28, 28)) << "3x1";
}

TEST(WinogradTest, BlocksFillTheGemmPanels) {
  // 56x56: 28 tiles a row; 5 rows = 140 tiles of 144 columns.
  const WinogradGeometry a = MakeWinogradGeometry(64, 64, 56, 56, 56, 56, 1, 1);
  EXPECT_EQ(a.tiles_h, 28);
  EXPECT_EQ(a.tiles_w, 28);
  EXPECT_EQ(a.block_rows, 5);
  EXPECT_EQ(a.blocks(), 6);
  // 28x28 at 128 channels: 7 rows of 14, 98 tiles = two panels and 2
  // columns for the GEMM tail kernel (V is capped at ~1 MiB, 128 tiles).
  const WinogradGeometry b = MakeWinogradGeometry(128, 128, 28, 28, 28, 28, 1, 1);
  EXPECT_EQ(b.tiles_w, 14);
  EXPECT_EQ(b.block_rows, 7);
  EXPECT_EQ(MakeWinogradGeometry(512, 128, 28, 28, 28, 28, 1, 1).block_rows, 2) << "512 deep: V capped at 32 tiles";
  // Odd planes round their tiles up; one block when the plane is small.
  const WinogradGeometry c = MakeWinogradGeometry(32, 70, 5, 29, 3, 27, 0, 0);
  EXPECT_EQ(c.tiles_h, 2);
  EXPECT_EQ(c.tiles_w, 14);
  EXPECT_EQ(c.blocks(), 1);
  EXPECT_EQ(c.chunks(), 2);
  // 14x14: the whole plane, 49 tiles (48 + a tail column).
  const WinogradGeometry d = MakeWinogradGeometry(256, 256, 14, 14, 14, 14, 1, 1);
  EXPECT_EQ(d.block_tiles(), 49);
  EXPECT_EQ(d.blocks(), 1);
  // F(4x4, 3x3): 56x56 is 14x14 tiles, two blocks of 7 rows (98 tiles: two
  // panels and 2 tail columns); 28x28 at 128 channels is one block of 49.
  const WinogradGeometry e = MakeWinogradGeometry(64, 64, 56, 56, 56, 56, 1, 1, 4);
  EXPECT_EQ(e.terms(), kWinogradTerms4);
  EXPECT_EQ(e.tiles_w, 14);
  EXPECT_EQ(e.block_rows, 7);
  EXPECT_EQ(e.blocks(), 2);
  const WinogradGeometry f = MakeWinogradGeometry(128, 128, 28, 28, 28, 28, 1, 1, 4);
  EXPECT_EQ(f.block_tiles(), 49);
  EXPECT_EQ(f.blocks(), 1);
}

TEST(WinogradTest, FourByFourTilesOnWidePlanes) {
  SetGemmIsaCapForTesting(GemmIsa::kPortable);
  EXPECT_EQ(WinogradTileFor(56), 2) << "portable GEMMs: Conv takes no Winograd, the tests F(2x2, 3x3)";
  SetGemmIsaCapForTesting(GemmIsa::kAvx512);
  if (ActiveGemmIsa() == GemmIsa::kPortable) GTEST_SKIP() << "no AVX2 on this CPU";
  EXPECT_EQ(WinogradTileFor(56), 4);
  EXPECT_EQ(WinogradTileFor(kWinograd4MinWidth), 4);
  EXPECT_EQ(WinogradTileFor(kWinograd4MinWidth - 1), 2);
  EXPECT_EQ(WinogradTileFor(14), 2);
}

TEST(WinogradTest, ThreadsSplitBlocksAndChunksEvenlyOrRunPhased) {
  // One thread: blocks in order. Six blocks: a block per task.
  const WinogradGeometry six = MakeWinogradGeometry(64, 64, 56, 56, 56, 56, 1, 1);
  EXPECT_FALSE(WinogradRunsPhased(six, 1));
  EXPECT_FALSE(WinogradRunsPhased(six, 2));
  // 14x14: one block for two threads.
  const WinogradGeometry one = MakeWinogradGeometry(256, 256, 14, 14, 14, 14, 1, 1);
  EXPECT_TRUE(WinogradRunsPhased(one, 2));
  EXPECT_FALSE(WinogradRunsPhased(one, 1));
  // 27x27 (SqueezeNet's 32 -> 128): two blocks x two chunks, four tasks.
  const WinogradGeometry two = MakeWinogradGeometry(32, 128, 27, 27, 27, 27, 1, 1);
  EXPECT_EQ(two.blocks(), 2);
  EXPECT_FALSE(WinogradRunsPhased(two, 2));
  EXPECT_TRUE(WinogradRunsPhased(two, 3)) << "two blocks for three threads";
  // 40x28, one chunk: three blocks, three tasks for two threads.
  const WinogradGeometry three = MakeWinogradGeometry(32, 40, 40, 28, 40, 28, 1, 1);
  EXPECT_EQ(three.blocks(), 3);
  EXPECT_TRUE(WinogradRunsPhased(three, 2));
  EXPECT_FALSE(WinogradRunsPhased(MakeWinogradGeometry(32, 128, 40, 28, 40, 28, 1, 1), 2)) << "six tasks";
  // The planes of ThreadedKernelsTest.ConvolutionPaths.
  const WinogradGeometry f2a = MakeWinogradGeometry(32, 130, 40, 14, 40, 14, 1, 1);
  EXPECT_EQ(f2a.blocks() * f2a.chunks(), 6);
  EXPECT_FALSE(WinogradRunsPhased(f2a, 2));
  const WinogradGeometry f2b = MakeWinogradGeometry(32, 40, 60, 14, 60, 14, 1, 1);
  EXPECT_EQ(f2b.blocks(), 3);
  EXPECT_TRUE(WinogradRunsPhased(f2b, 2));
  const WinogradGeometry f4a = MakeWinogradGeometry(32, 130, 28, 28, 28, 28, 1, 1, 4);
  EXPECT_EQ(f4a.blocks(), 1);
  EXPECT_TRUE(WinogradRunsPhased(f4a, 2));
  const WinogradGeometry f4b = MakeWinogradGeometry(32, 130, 56, 56, 56, 56, 1, 1, 4);
  EXPECT_EQ(f4b.blocks() * f4b.chunks(), 6);
  EXPECT_FALSE(WinogradRunsPhased(f4b, 2));
}

// Pads (top, left) and the output each geometry gets; bottom / right pads
// follow from the sizes.
struct Plane {
  int64_t h_in, w_in, ph, pw, h_out, w_out;
};
const Plane kPlanes[] = {
    {29, 27, 1, 1, 29, 27},  // odd both ways: half tiles at the edges
    {30, 31, 0, 0, 28, 29},  // no padding
    {28, 30, 0, 1, 27, 29},  // uneven padding
    {56, 56, 1, 1, 56, 56},  // several blocks, 28 tiles a row (16 + 12)
    {3, 40, 1, 1, 3, 40},    // one tile row and a half
    {14, 14, 1, 1, 14, 14},  // 49 tiles: 48 by Sgemm, 1 by the GEMM tail kernel (AVX-512)
};

TEST(WinogradTest, Avx512TransformsMatchThePortableOnes) {
  SetGemmIsaCapForTesting(GemmIsa::kAvx512);
  if (ActiveGemmIsa() != GemmIsa::kAvx512) GTEST_SKIP() << "no AVX-512 on this CPU: the portable transforms only";
  for (const int64_t tile : {2, 4})
  for (const Plane& pl : kPlanes) {
    SCOPED_TRACE(::testing::Message() << "F(" << tile << "x" << tile << ", 3x3) " << pl.h_in << "x" << pl.w_in);
    const WinogradGeometry g =
        MakeWinogradGeometry(1, 1, pl.h_in, pl.w_in, pl.h_out, pl.w_out, pl.ph, pl.pw, tile);
    const std::vector<float> x = RandomFloats(pl.h_in * pl.w_in, 7);
    std::vector<float> rows(static_cast<size_t>((4 + tile * g.tiles_h) * g.padded_w));
    // Input: the whole plane as one range of tile rows, then per block.
    const int64_t ld = g.tiles_h * g.tiles_w;
    std::vector<float> v_port(static_cast<size_t>(g.terms() * ld), -7.0f), v_avx = v_port;
    const WinogradTransforms port = WinogradTransformsPortable(g), avx = WinogradTransformsAvx512(g);
    WinogradPadRows(g, x.data(), 0, g.tiles_h, rows.data());
    port.input(g, 0, g.tiles_h, v_port.data(), ld, rows.data());
    avx.input(g, 0, g.tiles_h, v_avx.data(), ld, rows.data());
    EXPECT_EQ(v_avx, v_port);
    EXPECT_EQ(std::count(v_port.begin(), v_port.end(), -7.0f), 0) << "every term of every tile written";
    // Output: products back to the plane.
    const std::vector<float> prod = RandomFloats(g.terms() * ld, 8);
    std::vector<float> y_port(static_cast<size_t>(pl.h_out * pl.w_out), -7.0f), y_avx = y_port;
    for (int64_t ty0 = 0; ty0 < g.tiles_h; ty0 += g.block_rows) {
      const int64_t ty1 = std::min(g.tiles_h, ty0 + g.block_rows);
      const float* p = prod.data() + ty0 * g.tiles_w;
      port.output(g, p, ld, ty0, ty1, y_port.data());
      avx.output(g, p, ld, ty0, ty1, y_avx.data());
    }
    EXPECT_EQ(y_avx, y_port);
    EXPECT_EQ(std::count(y_port.begin(), y_port.end(), -7.0f), 0) << "every output written";
  }
  SetGemmIsaCapForTesting(GemmIsa::kAvx512);
}

// y = relu(conv(x, w) + bias + z) by the direct sum in double.
std::vector<float> Direct(const WinogradGeometry& g, const std::vector<float>& x, const std::vector<float>& w,
                          const std::vector<float>& bias, const std::vector<float>& z) {
  std::vector<float> y(static_cast<size_t>(g.m * g.h_out * g.w_out));
  for (int64_t m = 0; m < g.m; ++m) {
    for (int64_t oh = 0; oh < g.h_out; ++oh) {
      for (int64_t ow = 0; ow < g.w_out; ++ow) {
        double acc = 0.0;
        for (int64_t c = 0; c < g.c; ++c) {
          for (int64_t r = 0; r < 3; ++r) {
            for (int64_t s = 0; s < 3; ++s) {
              const int64_t ih = oh - g.ph + r, iw = ow - g.pw + s;
              if (ih < 0 || ih >= g.h_in || iw < 0 || iw >= g.w_in) continue;
              acc += static_cast<double>(x[static_cast<size_t>((c * g.h_in + ih) * g.w_in + iw)]) *
                     w[static_cast<size_t>(((m * g.c + c) * 3 + r) * 3 + s)];
            }
          }
        }
        const size_t i = static_cast<size_t>((m * g.h_out + oh) * g.w_out + ow);
        y[i] = std::max(0.0f, static_cast<float>(acc) + bias[static_cast<size_t>(m)] + z[i]);
      }
    }
  }
  return y;
}

TEST(WinogradTest, BlocksMatchTheDirectSumOnEveryIsa) {
  for (const GemmIsa isa : {GemmIsa::kPortable, GemmIsa::kAvx2, GemmIsa::kAvx512}) {
    SetGemmIsaCapForTesting(isa);
    if (ActiveGemmIsa() != isa) continue;  // the CPU lacks it
    SCOPED_TRACE(GemmIsaName(isa));
    for (const int64_t tile : {2, 4})
    for (const Plane& pl : kPlanes) {
      SCOPED_TRACE(::testing::Message() << "F(" << tile << "x" << tile << ", 3x3) " << pl.h_in << "x" << pl.w_in);
      // 70 output channels: a chunk of 64 and one of 6.
      const WinogradGeometry g =
          MakeWinogradGeometry(5, 70, pl.h_in, pl.w_in, pl.h_out, pl.w_out, pl.ph, pl.pw, tile);
      const std::vector<float> x = RandomFloats(g.c * pl.h_in * pl.w_in, 1);
      const std::vector<float> w = RandomFloats(g.m * g.c * 9, 2);
      const std::vector<float> bias = RandomFloats(g.m, 3);
      const std::vector<float> z = RandomFloats(g.m * pl.h_out * pl.w_out, 4);
      const std::vector<PackedMatrix> u = PackWinogradWeights(g, w.data());
      ASSERT_EQ(static_cast<int64_t>(u.size()), g.terms() * g.chunks());
      Epilogue ep;
      ep.row_bias = bias.data();
      ep.residual = z.data();
      ep.ld_residual = pl.h_out * pl.w_out;
      ep.act = Activation::kRelu;
      AlignedScratch scratch(static_cast<size_t>(WinogradScratchBytes(g)));
      std::vector<float> y(z.size(), -7.0f);
      // Chunks one at a time in some blocks, together in others.
      for (int64_t b = 0; b < g.blocks(); ++b) {
        if (b % 2 == 0) {
          RunWinogradBlock(g, x.data(), u, y.data(), b, 0, g.chunks(), ep, scratch.span());
        } else {
          for (int64_t ch = g.chunks(); ch-- > 0;) {
            RunWinogradBlock(g, x.data(), u, y.data(), b, ch, ch + 1, ep, scratch.span());
          }
        }
      }
      const std::vector<float> want = Direct(g, x, w, bias, z);
      double err = 0.0, norm = 0.0;
      for (size_t i = 0; i < y.size(); ++i) {
        err += (static_cast<double>(y[i]) - want[i]) * (static_cast<double>(y[i]) - want[i]);
        norm += static_cast<double>(want[i]) * want[i];
      }
      // Measured 1.2-1.3e-7 for F(2x2, 3x3), 4.4-7.7e-7 for F(4x4, 3x3).
      EXPECT_LT(std::sqrt(err / norm), tile == 4 ? 2e-6 : 5e-7) << "relative L2 error";
    }
  }
  SetGemmIsaCapForTesting(GemmIsa::kAvx512);
}

}  // namespace
}  // namespace orrery::ops::cpu::gemm_internal
