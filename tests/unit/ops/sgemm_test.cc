// The packed GEMM (ops/cpu/gemm) against a naive reference, on every ISA the
// machine has, odd shapes, transposes, packed operands and every epilogue.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <vector>

#include "op_test_util.h"
#include "ops/cpu/gemm/sgemm.h"
#include "ops/cpu/gemm/transpose.h"
#include "ops/registry.h"
#include "parallel_test_util.h"

namespace orrery::ops::cpu {
namespace {

using ops::testing::RandomFloats;

float RefActivate(Activation act, float x, float alpha, float beta) {
  switch (act) {
    case Activation::kNone: return x;
    case Activation::kRelu: return std::max(x, 0.0f);
    case Activation::kClip: return std::min(std::max(x, alpha), beta);
    case Activation::kLeakyRelu: return x >= 0 ? x : alpha * x;
    case Activation::kHardSigmoid: return std::max(0.0f, std::min(1.0f, alpha * x + beta));
    case Activation::kHardSwish: return x * std::max(0.0f, std::min(1.0f, x / 6 + 0.5f));
    case Activation::kSigmoid: return 1.0f / (1.0f + std::exp(-x));
    case Activation::kTanh: return std::tanh(x);
    case Activation::kGelu: return 0.5f * x * (1.0f + std::erf(x / std::sqrt(2.0f)));
  }
  return x;
}

struct Case {
  int64_t m, n, k;
  bool ta = false, tb = false;
  float alpha = 1.0f;
};

// op(A) element (i, kk) of a matrix stored with leading dimension ld.
float At(const std::vector<float>& x, int64_t ld, bool trans, int64_t r, int64_t c) {
  return trans ? x[static_cast<size_t>(c * ld + r)] : x[static_cast<size_t>(r * ld + c)];
}

class SgemmIsaTest : public ::testing::TestWithParam<GemmIsa> {
 protected:
  void SetUp() override {
    SetGemmIsaCapForTesting(GetParam());
    if (ActiveGemmIsa() != GetParam()) GTEST_SKIP() << "CPU lacks " << GemmIsaName(GetParam());
  }
  void TearDown() override { SetGemmIsaCapForTesting(GemmIsa::kAvx512); }

  // Runs one case with the given operand forms and compares with a double
  // reference; `ep` may carry biases / residual / activation.
  // `out` (optional) receives C.
  void Check(const Case& cs, bool pack_a, bool pack_b, bool use_rows, Epilogue ep,
             ThreadGroup* threads = nullptr, std::vector<float>* out = nullptr) {
    const int64_t lda = cs.ta ? cs.m + 3 : cs.k + 1;  // padded leading dimensions
    const int64_t ldb = cs.tb ? cs.k + 2 : cs.n + 5;
    const int64_t ldc = cs.n + 7;
    const std::vector<float> a = RandomFloats((cs.ta ? cs.k : cs.m) * lda, 1);
    const std::vector<float> b = RandomFloats((cs.tb ? cs.n : cs.k) * ldb, 2);
    std::vector<float> c = RandomFloats(std::max<int64_t>(cs.m, 1) * ldc, 3);
    const std::vector<float> c0 = c;
    ep.alpha = cs.alpha;

    PackedMatrix pa, pb;
    LeftOperand left{.data = a.data(), .ld = lda, .trans = cs.ta};
    RightOperand right{.data = b.data(), .ld = ldb, .trans = cs.tb};
    if (pack_a) {
      pa = PackedMatrix::PackLeft(a.data(), lda, cs.ta, cs.m, cs.k);
      left.packed = &pa;
    }
    if (pack_b) {
      pb = PackedMatrix::PackRight(b.data(), ldb, cs.tb, cs.k, cs.n);
      right.packed = &pb;
    }
    auto panel_fn = [&](int64_t k0, int64_t kc, int64_t j0, int64_t cols, int64_t w, float* dst) {
      for (int64_t k = 0; k < kc; ++k) {
        for (int64_t j = 0; j < cols; ++j) dst[k * w + j] = At(b, ldb, cs.tb, k0 + k, j0 + j);
        for (int64_t j = cols; j < w; ++j) dst[k * w + j] = 12345.0f;  // must be ignored
      }
    };
    PanelSource panels(panel_fn);
    if (use_rows) right.panels = &panels;
    auto left_fn = [&](int64_t k0, int64_t kc, int64_t i0, int64_t rows, int64_t w, float* dst) {
      for (int64_t k = 0; k < kc; ++k) {
        for (int64_t i = 0; i < rows; ++i) dst[k * w + i] = At(a, lda, cs.ta, i0 + i, k0 + k);
        for (int64_t i = rows; i < w; ++i) dst[k * w + i] = 12345.0f;  // must be ignored
      }
    };
    PanelSource left_panels(left_fn);
    if (use_rows && !pack_a) left.panels = &left_panels;

    const GemmShape shape{cs.m, cs.n, cs.k};
    const int nthreads = NumThreads(threads);
    const size_t per = ScratchStride(SgemmScratchBytes(shape, pack_a, pack_b));
    ops::testing::AlignedScratch scratch(per * static_cast<size_t>(nthreads));
    Sgemm(shape, left, right, c.data(), ldc, ep, scratch.span(), threads);

    for (int64_t i = 0; i < cs.m; ++i) {
      for (int64_t j = 0; j < cs.n; ++j) {
        double acc = 0;
        for (int64_t kk = 0; kk < cs.k; ++kk) {
          acc += double(At(a, lda, cs.ta, i, kk)) * At(b, ldb, cs.tb, kk, j);
        }
        double v = cs.alpha * acc;
        if (ep.accumulate) v += c0[static_cast<size_t>(i * ldc + j)];
        if (ep.row_bias) v += ep.row_bias[i];
        if (ep.col_bias) v += ep.col_bias[j];
        if (ep.residual) v += ep.residual[i * ep.ld_residual + j];
        const float want = RefActivate(ep.act, static_cast<float>(v), ep.act_alpha, ep.act_beta);
        const float got = c[static_cast<size_t>(i * ldc + j)];
        ASSERT_NEAR(got, want, 2e-5 * (1 + std::abs(want)) + 1e-6 * std::sqrt(double(cs.k)))
            << "m=" << cs.m << " n=" << cs.n << " k=" << cs.k << " at " << i << "," << j;
      }
      // Padding columns of C are never written.
      for (int64_t j = cs.n; j < ldc; ++j) {
        ASSERT_EQ(c[static_cast<size_t>(i * ldc + j)], c0[static_cast<size_t>(i * ldc + j)]);
      }
    }
    if (out != nullptr) *out = c;
  }
  // Rows packed on the fly against prepacked weights, on one thread and on
  // two recorded ones: the same bits, one ParallelFor of `tasks` tasks, each
  // run once.
  void ExpectTwoThreadTasks(const Case& cs, int64_t tasks);
};

TEST_P(SgemmIsaTest, OddShapesAllOperandForms) {
  const std::vector<Case> cases = {
      {1, 1, 1},       {1, 1, 7},          {7, 1, 5},          {1, 13, 9},
      {8, 48, 16},     {9, 49, 17},        {15, 47, 33},       {17, 97, 300, true},
      {3, 200, 513, false, true, 0.5f},    {33, 65, 1, true, true, -2.0f},
      {64, 1100, 40},  {8, 16, 257, true}, {5, 33, 100, false, true}};
  for (const Case& cs : cases) {
    for (int form = 0; form < 6; ++form) {
      // 4: both operands made by panel sources; 5: packed A, right panels.
      const bool pack_a = form == 1 || form == 3 || form == 5;
      const bool pack_b = form == 2 || form == 3;
      const bool use_rows = form >= 4;
      Check(cs, pack_a, pack_b, use_rows, Epilogue{});
      if (HasFatalFailure()) return;
    }
  }
}

TEST_P(SgemmIsaTest, AccumulatesOntoC) {
  Epilogue ep;
  ep.accumulate = true;
  Check({19, 53, 270, false, false, 1.5f}, false, false, false, ep);
  Check({19, 53, 270, true, true}, true, true, false, ep);
}

TEST_P(SgemmIsaTest, ZeroDepthWritesEpilogueOnly) {
  const std::vector<float> bias = RandomFloats(20, 9);
  Epilogue ep;
  ep.row_bias = bias.data();
  ep.act = Activation::kRelu;
  Check({6, 10, 0}, false, false, false, ep);
}

TEST_P(SgemmIsaTest, EveryEpilogue) {
  const Case cs{21, 70, 37};
  const std::vector<float> row_bias = RandomFloats(cs.m, 4);
  const std::vector<float> col_bias = RandomFloats(cs.n, 5);
  const std::vector<float> residual = RandomFloats(cs.m * (cs.n + 2), 6);
  const struct {
    Activation act;
    float alpha, beta;
  } acts[] = {{Activation::kNone, 0, 0},        {Activation::kRelu, 0, 0},
              {Activation::kClip, -0.5f, 0.7f}, {Activation::kLeakyRelu, 0.1f, 0},
              {Activation::kHardSigmoid, 0.2f, 0.5f}, {Activation::kHardSwish, 0, 0},
              {Activation::kSigmoid, 0, 0},     {Activation::kTanh, 0, 0},
              {Activation::kGelu, 0, 0}};
  for (const auto& a : acts) {
    for (int mask = 0; mask < 8; ++mask) {
      Epilogue ep;
      ep.act = a.act;
      ep.act_alpha = a.alpha;
      ep.act_beta = a.beta;
      if (mask & 1) ep.row_bias = row_bias.data();
      if (mask & 2) ep.col_bias = col_bias.data();
      if (mask & 4) {
        ep.residual = residual.data();
        ep.ld_residual = cs.n + 2;
      }
      Check(cs, mask & 1, mask & 2, false, ep);
      if (HasFatalFailure()) return;
    }
  }
}

// The epilogue (in the tile's registers on AVX-512, after the tile
// elsewhere) only on the last of several K blocks (250 deep: three blocks
// of 96 on AVX2, two of 192 elsewhere), after alpha and C's earlier blocks
// (and C's old content when accumulating): row / column bias, residual and Clip on a tile whose rows
// (13: 8 + 5) and columns (61: 48 + 13) both have tails.
TEST_P(SgemmIsaTest, EpilogueAfterSeveralDepthBlocks) {
  const Case cs{13, 61, 250, false, false, 0.75f};
  const std::vector<float> row_bias = RandomFloats(cs.m, 10);
  const std::vector<float> col_bias = RandomFloats(cs.n, 11);
  const std::vector<float> residual = RandomFloats(cs.m * (cs.n + 1), 12);
  for (bool accumulate : {false, true}) {
    Epilogue ep;
    ep.accumulate = accumulate;
    ep.row_bias = row_bias.data();
    ep.col_bias = col_bias.data();
    ep.residual = residual.data();
    ep.ld_residual = cs.n + 1;
    ep.act = Activation::kClip;
    ep.act_alpha = -0.6f;
    ep.act_beta = 0.4f;
    Check(cs, true, false, false, ep);
    if (HasFatalFailure()) return;
    Check(cs, false, true, false, ep);
    if (HasFatalFailure()) return;
  }
}

// One K block with a residual and C over 2^19 floats walks each left panel
// across its N chunk (rows first): several left blocks (> 256 rows),
// several N chunks, a tail panel, packed and raw left operands, and the
// same bits at 1-3 threads.
TEST_P(SgemmIsaTest, ResidualOneDepthBlockRowsFirst) {
  // 264 rows: two left blocks (right panels packed); 256 (one block, K <=
  // 64): the right operand read in place, its last partial panel packed.
  for (const Case& cs : {Case{264, 2000, 64}, Case{256, 2100, 64}, Case{200, 2700, 40}}) {
    const std::vector<float> residual = RandomFloats(cs.m * (cs.n + 3), 7);
    const std::vector<float> row_bias = RandomFloats(cs.m, 8);
    Epilogue ep;
    ep.residual = residual.data();
    ep.ld_residual = cs.n + 3;
    ep.row_bias = row_bias.data();
    ep.act = Activation::kRelu;
    for (bool pack_a : {true, false}) {
      std::vector<float> one;
      Check(cs, pack_a, false, false, ep, nullptr, &one);
      if (HasFatalFailure()) return;
      for (int n : {2, 3}) {
        testing::SpawnThreads lanes(n);
        std::vector<float> got;
        Check(cs, pack_a, false, false, ep, &lanes, &got);
        ASSERT_EQ(got, one) << "pack_a=" << pack_a << ", " << n << " threads";
      }
    }
  }
}

// Prepacked weights, a residual and K in (192, 256] (ResNet-50's 1x1 256
// -> 1024 at 14x14 + Add): one K block on AVX-512, rows first, at any C
// size; the scratch SgemmScratchBytes asks for is enough (nothing written
// past it); right operand raw or made by panels; the same bits at 1-3
// threads.
TEST_P(SgemmIsaTest, ResidualDepthUpTo256OneBlock) {
  for (const Case& cs : {Case{264, 196, 256}, Case{40, 100, 200}}) {
    const std::vector<float> residual = RandomFloats(cs.m * (cs.n + 3), 17);
    const std::vector<float> row_bias = RandomFloats(cs.m, 18);
    Epilogue ep;
    ep.residual = residual.data();
    ep.ld_residual = cs.n + 3;
    ep.row_bias = row_bias.data();
    ep.act = Activation::kRelu;
    const GemmShape shape{cs.m, cs.n, cs.k};
    const std::vector<float> a = RandomFloats(cs.m * cs.k, 19), b = RandomFloats(cs.k * cs.n, 20);
    const PackedMatrix pa = PackedMatrix::PackLeft(a.data(), cs.k, false, cs.m, cs.k);
    std::vector<float> c(static_cast<size_t>(cs.m * cs.n));
    const size_t bytes = static_cast<size_t>(SgemmScratchBytes(shape, true, false));
    constexpr size_t kGuard = size_t{256} << 10;  // more than a K block too few
    std::vector<std::byte> heap(bytes + 64 + kGuard, std::byte{0x5a});
    auto* base = reinterpret_cast<std::byte*>(
        (reinterpret_cast<uintptr_t>(heap.data()) + 63) & ~uintptr_t{63});
    Sgemm(shape, {.packed = &pa}, {.data = b.data(), .ld = cs.n}, c.data(), cs.n, ep,
          std::span<std::byte>(base, bytes), nullptr);
    for (size_t i = 0; i < kGuard; ++i) {
      ASSERT_EQ(base[bytes + i], std::byte{0x5a}) << "scratch overrun at +" << i;
    }
    for (bool use_rows : {false, true}) {
      std::vector<float> one;
      Check(cs, true, false, use_rows, ep, nullptr, &one);
      if (HasFatalFailure()) return;
      for (int n : {2, 3}) {
        testing::SpawnThreads lanes(n);
        std::vector<float> got;
        Check(cs, true, false, use_rows, ep, &lanes, &got);
        ASSERT_EQ(got, one) << "m=" << cs.m << " k=" << cs.k << ", " << n << " threads";
      }
    }
  }
}

// The same order without a residual for a tiny K (<= 32, a 3-channel
// stem): bias and Relu only, and no epilogue at all.
TEST_P(SgemmIsaTest, TinyDepthRowsFirst) {
  const Case cs{264, 2000, 27};
  const std::vector<float> row_bias = RandomFloats(cs.m, 9);
  Epilogue ep;
  ep.row_bias = row_bias.data();
  ep.act = Activation::kRelu;
  for (const Epilogue& e : {ep, Epilogue{}}) {
    for (bool pack_a : {true, false}) {
      Check(cs, pack_a, false, false, e, nullptr, nullptr);
      if (HasFatalFailure()) return;
    }
  }
}

TEST_P(SgemmIsaTest, ActivationsAcrossRange) {
  // Wide inputs exercise exp saturation and tanh's two branches.
  for (Activation act : {Activation::kSigmoid, Activation::kTanh, Activation::kGelu}) {
    std::vector<float> c(801);
    for (size_t i = 0; i < c.size(); ++i) c[i] = -100.0f + 0.25f * static_cast<float>(i);
    c.push_back(1e-4f);
    c.push_back(-3e-3f);
    const std::vector<float> x = c;
    Epilogue ep;
    ep.act = act;
    ApplyEpilogue(ep, c.data(), static_cast<int64_t>(c.size()), 0, 0, 1,
                  static_cast<int64_t>(c.size()));
    for (size_t i = 0; i < c.size(); ++i) {
      const float want = RefActivate(act, x[i], 0, 0);
      ASSERT_NEAR(c[i], want, 1e-6f + 2e-6f * std::abs(want)) << x[i];
    }
  }
}

TEST_P(SgemmIsaTest, ThreadsGiveIdenticalResults) {
  testing::SpawnThreads lanes(2);
  const Case cs{70, 500, 300};
  const std::vector<float> bias = RandomFloats(cs.m, 7);
  Epilogue ep;
  ep.row_bias = bias.data();
  ep.act = Activation::kRelu;
  Check(cs, true, false, false, ep, &lanes);
  Check({3, 2000, 64}, false, true, false, Epilogue{}, &lanes);
}

// Every way Sgemm splits work among threads gives the single-thread
// result bit for bit: the row split (left operand packed on the fly, right
// prepacked), its N chunks for few rows (49 transposed, 20 rows over 2100
// columns: one thread's 3 chunks rounded up to the threads), one row chunk
// per thread for prepacked weights bigger than the right operand (200 x
// 100, 104 x 49: 13 panels, uneven), and N chunks balanced to whole panels
// (241 columns in three, 196 in two, a wide 3000).
TEST_P(SgemmIsaTest, EverySplitMatchesOneThreadExactly) {
  struct Form {
    Case cs;
    bool pack_a, pack_b;
  };
  const Form forms[] = {{{72, 200, 300}, false, true},  {{130, 90, 70}, false, true},
                        {{200, 100, 300}, true, false}, {{16, 241, 50}, true, false},
                        {{40, 196, 40}, true, false},   {{24, 3000, 64}, true, false},
                        {{49, 160, 200, true}, false, true}, {{20, 2100, 64}, false, true},
                        {{104, 49, 300}, true, false},
                        // Few rows on prepacked weights: chunks start inside
                        // packed panels at multiples of 16 (80 of 150 at two
                        // threads; 256 of 512, ResNet's 7x7 layers; 496 of a
                        // classifier's 1000) and end in a partial tail panel.
                        {{9, 150, 70}, false, true}, {{30, 40, 33}, false, true},
                        {{49, 512, 40}, false, true}, {{1, 1000, 24}, false, true}};
  for (const Form& f : forms) {
    std::vector<float> one;
    Check(f.cs, f.pack_a, f.pack_b, false, Epilogue{}, nullptr, &one);
    for (int n : {2, 3}) {
      testing::SpawnThreads lanes(n);
      std::vector<float> got;
      Check(f.cs, f.pack_a, f.pack_b, false, Epilogue{}, &lanes, &got);
      ASSERT_EQ(got, one) << "m=" << f.cs.m << " n=" << f.cs.n << " k=" << f.cs.k << ", "
                          << n << " threads";
    }
  }
}

// A ThreadGroup that records how each ParallelFor was split.
class RecordingThreads : public ThreadGroup {
 public:
  explicit RecordingThreads(int n) : inner_(n) {}
  int size() const override { return inner_.size(); }
  void ParallelFor(int64_t num_tasks, FunctionRef<void(int64_t, int)> fn) override {
    tasks.push_back(num_tasks);
    std::vector<std::atomic<int>> runs(static_cast<size_t>(num_tasks));
    inner_.ParallelFor(num_tasks, [&](int64_t t, int thread) {
      runs[static_cast<size_t>(t)].fetch_add(1);
      fn(t, thread);
    });
    for (const std::atomic<int>& r : runs) once = once && r.load() == 1;
  }
  std::vector<int64_t> tasks;  // num_tasks of every call
  bool once = true;            // every task ran exactly once

 private:
  testing::SpawnThreads inner_;
};

void SgemmIsaTest::ExpectTwoThreadTasks(const Case& cs, int64_t tasks) {
  std::vector<float> one;
  Check(cs, false, true, false, Epilogue{}, nullptr, &one);
  if (HasFatalFailure()) return;
  RecordingThreads lanes(2);
  std::vector<float> got;
  Check(cs, false, true, false, Epilogue{}, &lanes, &got);
  EXPECT_EQ(got, one);
  ASSERT_EQ(lanes.tasks.size(), 1u);
  EXPECT_EQ(lanes.tasks[0], tasks);
  EXPECT_TRUE(lanes.once);
}

// Rows packed on the fly against wide prepacked weights bigger than L2 (a
// transformer's 128 x 1024 x 256 linear layer on a 512 KiB L2, here 72 x
// 800 x 1100, 3.5 MB): one N chunk per thread, so each thread streams its
// own half of the weights (a row split streamed all of them once per row
// chunk), with the single-thread bits.
TEST_P(SgemmIsaTest, WideWeightsSplitColumnsPerThread) {
  ExpectTwoThreadTasks({72, 800, 1100}, 2);  // the row split made 5 (9 panels in chunks of 2)
  // Narrow weights (5.3 panels: a column split would leave 3 + 2.3) keep
  // the row chunks.
  ExpectTwoThreadTasks({72, 256, 1100}, 5);
}

// Many rows packed on the fly against prepacked weights (a transformer's
// MatMuls at batch 8): N chunks of at least 384 columns, since each chunk
// packs all of its rows again. 704 x 768 x 64 at two threads: 8 row chunks
// times 2 column chunks (the C-in-L2 bound alone made 3 of 288), with the
// single-thread bits.
TEST_P(SgemmIsaTest, ManyRowsOnPrepackedWeightsTakeWideChunks) {
  ExpectTwoThreadTasks({704, 768, 64}, 16);
}

INSTANTIATE_TEST_SUITE_P(Isa, SgemmIsaTest,
                         ::testing::Values(GemmIsa::kPortable, GemmIsa::kAvx2, GemmIsa::kAvx512),
                         [](const auto& info) { return std::string(GemmIsaName(info.param)); });

// The transposed convolution's Y^T -> Y (conv.cc): full 16 x 16 blocks,
// edges in both directions, strided source and destination; nothing
// outside the destination rectangle written.
TEST(TransposeTest, BlocksAndEdgesMatchScalar) {
  const bool avx512 = ActiveGemmIsa() == GemmIsa::kAvx512;
  for (const auto& [rows, cols] : {std::pair<int64_t, int64_t>{1, 1}, {49, 16}, {16, 16},
                                  {7, 33}, {196, 20}, {17, 48}, {33, 5}}) {
    const int64_t lds = cols + 3, ldd = rows + 5;
    std::vector<float> src(static_cast<size_t>(rows * lds));
    for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<float>(i) * 0.5f - 7.0f;
    std::vector<float> want(static_cast<size_t>(cols * ldd), -1.0f), got = want;
    gemm_internal::TransposePortable(src.data(), lds, rows, cols, want.data(), ldd);
    for (int64_t j = 0; j < cols; ++j) {
      for (int64_t i = 0; i < rows; ++i) {
        ASSERT_EQ(want[static_cast<size_t>(j * ldd + i)], src[static_cast<size_t>(i * lds + j)]);
      }
    }
    if (!avx512) continue;
    gemm_internal::TransposeAvx512(src.data(), lds, rows, cols, got.data(), ldd);
    EXPECT_EQ(got, want) << rows << " x " << cols;
  }
}

// The AVX-512 left panel packing (dispatch.cc, raw row-major left
// operands): every row count of a panel, depths around the 16-column
// blocks; missing rows are zero and nothing past the panel is written.
TEST(TransposeTest, PackLeftRowsMatchesLayout) {
  if (ActiveGemmIsa() != GemmIsa::kAvx512) GTEST_SKIP() << "no AVX-512";
  for (int64_t rows = 1; rows <= 8; ++rows) {
    for (const int64_t kc : {1, 2, 7, 15, 16, 17, 31, 32, 33, 40}) {
      const int64_t lda = kc + 5;
      // Exactly the rows read: the last row ends at column kc.
      std::vector<float> a(static_cast<size_t>((rows - 1) * lda + kc));
      for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i) + 1.0f;
      std::vector<float> got(static_cast<size_t>(kc * 8 + 24), -1.0f);
      gemm_internal::PackLeftRowsAvx512(a.data(), lda, rows, kc, got.data());
      for (int64_t k = 0; k < kc; ++k) {
        for (int64_t i = 0; i < 8; ++i) {
          const float want = i < rows ? a[static_cast<size_t>(i * lda + k)] : 0.0f;
          ASSERT_EQ(got[static_cast<size_t>(k * 8 + i)], want)
              << "rows " << rows << " kc " << kc << " k " << k << " i " << i;
        }
      }
      for (size_t j = static_cast<size_t>(kc * 8); j < got.size(); ++j) {
        ASSERT_EQ(got[j], -1.0f) << "rows " << rows << " kc " << kc << " wrote past the panel";
      }
    }
  }
}

TEST(PackedMatrixTest, SerializeRoundTrip) {
  const std::vector<float> w = RandomFloats(13 * 50, 8);
  for (bool left : {true, false}) {
    const PackedMatrix p = left ? PackedMatrix::PackLeft(w.data(), 50, false, 13, 50)
                                : PackedMatrix::PackRight(w.data(), 50, false, 13, 50);
    const std::vector<std::byte> bytes = p.Serialize();
    Result<PackedMatrix> back = PackedMatrix::Deserialize(bytes);
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(back->side(), p.side());
    EXPECT_EQ(back->rows(), p.rows());
    EXPECT_EQ(back->cols(), p.cols());
    ASSERT_EQ(back->num_floats(), p.num_floats());
    EXPECT_EQ(reinterpret_cast<uintptr_t>(back->data()) % 64, 0u);
    for (int64_t i = 0; i < p.num_floats(); ++i) ASSERT_EQ(back->data()[i], p.data()[i]);
    // Truncated or altered bytes are rejected, not misread.
    std::vector<std::byte> bad = bytes;
    bad.pop_back();
    EXPECT_EQ(PackedMatrix::Deserialize(bad).status().code(), StatusCode::kInvalidArgument);
    bad = bytes;
    bad[8] = std::byte{9};  // version
    EXPECT_EQ(PackedMatrix::Deserialize(bad).status().code(), StatusCode::kInvalidArgument);
  }
  EXPECT_FALSE(PackedMatrix::Deserialize({}).ok());
}

TEST(PackedMatrixTest, LayoutIsDocumented) {
  // Right operand 2 x 50: panel 0 is 48 wide, panel 1 holds 2 columns padded to 16.
  std::vector<float> b(100);
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(i);
  const PackedMatrix p = PackedMatrix::PackRight(b.data(), 50, false, 2, 50);
  ASSERT_EQ(p.num_floats(), 2 * 96);
  EXPECT_EQ(p.data()[0 * 48 + 5], 5.0f);           // (k=0, j=5)
  EXPECT_EQ(p.data()[1 * 48 + 5], 55.0f);          // (k=1, j=5)
  EXPECT_EQ(p.data()[2 * 48 + 1 * 16 + 1], 99.0f);  // (k=1, j=49) in panel 1, w=16
  EXPECT_EQ(p.data()[2 * 48 + 1 * 16 + 2], 0.0f);   // padding
  EXPECT_EQ(ParseActivation("Gelu").value(), Activation::kGelu);
  EXPECT_FALSE(ParseActivation("Swish").ok());
}

}  // namespace
}  // namespace orrery::ops::cpu
