// Kernels that split work across the lent threads give the same results as
// on one thread. A fake two-thread group runs the tasks serially in reverse
// order, so every task boundary and per-thread scratch slice is exercised.
#include <gtest/gtest.h>

#include <cmath>

#include "op_test_util.h"
#include "ops/parallel.h"

namespace orrery::ops {
namespace {

using testing::F32;
using testing::RunOp;
using testing::Values;

class ReversedPair final : public ThreadGroup {
 public:
  int size() const override { return 2; }
  void ParallelFor(int64_t num_tasks, FunctionRef<void(int64_t, int)> fn) override {
    ++calls;
    for (int64_t t = num_tasks; t-- > 0;) fn(t, static_cast<int>(t % 2));
  }
  int calls = 0;
};

std::vector<float> Wave(size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = 3.0f * std::sin(0.013f * static_cast<float>(i));
  return v;
}

// Runs op on one thread and on the fake pair; expects identical outputs (all
// of them) and that the pair was used.
void ExpectSameOnTwoThreads(const std::string& op, const std::vector<const Tensor*>& inputs,
                            const Attributes& attrs = {}, int64_t opset = 17) {
  SCOPED_TRACE(op);
  auto one = RunOp(op, inputs, attrs, opset);
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  ReversedPair pair;
  auto two = RunOp(op, inputs, attrs, opset, &pair);
  ASSERT_TRUE(two.ok()) << two.status().ToString();
  EXPECT_GT(pair.calls, 0) << "not split across threads";
  ASSERT_EQ(one->size(), two->size());
  for (size_t k = 0; k < one->size(); ++k) {
    const std::vector<float> a = Values<float>((*one)[k]), b = Values<float>((*two)[k]);
    ASSERT_EQ(a.size(), b.size()) << "output " << k;
    for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], b[i]) << "output " << k << " at " << i;
  }
}

// Guided chunks cover the units once, largest first (claim order), single
// units last; one chunk for one thread.
TEST(ThreadedKernelsTest, GuidedBounds) {
  int64_t b[kMaxGuidedChunks + 1];
  ASSERT_EQ(GuidedBounds(66, 1, b), 1);
  EXPECT_EQ(b[1], 66);
  const int64_t n = GuidedBounds(66, 2, b);
  std::vector<int64_t> sizes;
  for (int64_t i = 0; i < n; ++i) sizes.push_back(b[i + 1] - b[i]);
  EXPECT_EQ(b[n], 66);
  EXPECT_EQ(sizes, (std::vector<int64_t>{17, 13, 9, 7, 5, 4, 3, 2, 2, 1, 1, 1, 1}));
  // Far more units than kMaxGuidedChunks allows: the last chunk takes the rest.
  const int64_t many = GuidedBounds(1'000'000, 2, b);
  EXPECT_LE(many, kMaxGuidedChunks);
  EXPECT_EQ(b[many], 1'000'000);
}

TEST(ThreadedKernelsTest, ElementwiseAndBroadcast) {
  const int64_t big = (int64_t{1} << 21) + 37;  // above the memory-bound threshold
  const Tensor x = F32({big}, Wave(static_cast<size_t>(big)));
  ExpectSameOnTwoThreads("Relu", {&x});
  ExpectSameOnTwoThreads("Sigmoid", {&x});
  ExpectSameOnTwoThreads("Add", {&x, &x});
  const Tensor img = F32({1, 33, 256, 250}, Wave(33 * 256 * 250));
  const Tensor bias = F32({33, 1, 1}, Wave(33));
  ExpectSameOnTwoThreads("Mul", {&img, &bias});
}

// Copies of at least kParallelCopyBytes split their outermost dim: the
// transformer's batch-first swap and per-head split at batch 8, a 2-D
// transpose whose outer dim is the source's contiguous one (chunks of whole
// tiles, 100 rows: a partial last one), a slice of a third of the last
// axis, a reversed slice, Split, Expand and Tile.
TEST(ThreadedKernelsTest, LargeCopies) {
  const Tensor seq = F32({128, 8, 256}, Wave(128 * 8 * 256));
  Attributes swap;
  swap.Set("perm", std::vector<int64_t>{1, 0, 2});
  ExpectSameOnTwoThreads("Transpose", {&seq}, swap);
  const Tensor heads = F32({8, 128, 4, 64}, Wave(8 * 128 * 4 * 64));
  Attributes split_heads;
  split_heads.Set("perm", std::vector<int64_t>{0, 2, 1, 3});
  ExpectSameOnTwoThreads("Transpose", {&heads}, split_heads);
  const Tensor square = F32({700, 100}, Wave(700 * 100));
  ExpectSameOnTwoThreads("Transpose", {&square});
  const Tensor qkv = F32({8, 128, 768}, Wave(8 * 128 * 768));
  const Tensor starts = testing::I64({1}, {256}), ends = testing::I64({1}, {512});
  const Tensor axes = testing::I64({1}, {2});
  ExpectSameOnTwoThreads("Slice", {&qkv, &starts, &ends, &axes});
  const Tensor rstarts = testing::I64({1}, {-1}), rends = testing::I64({1}, {-1000});
  const Tensor raxes = testing::I64({1}, {1}), rsteps = testing::I64({1}, {-1});
  ExpectSameOnTwoThreads("Slice", {&qkv, &rstarts, &rends, &raxes, &rsteps});
  Attributes last;
  last.Set("axis", int64_t{-1});
  last.Set("num_outputs", int64_t{3});
  ExpectSameOnTwoThreads("Split", {&qkv}, last, 18);
  const Tensor row = F32({1, 1, 768}, Wave(768));
  const Tensor shape = testing::I64({3}, {8, 128, 768});
  ExpectSameOnTwoThreads("Expand", {&row, &shape});
  const Tensor repeats = testing::I64({3}, {8, 128, 1});
  ExpectSameOnTwoThreads("Tile", {&row, &repeats});
}

TEST(ThreadedKernelsTest, RowsAndPlanes) {
  const Tensor rows = F32({700, 129}, Wave(700 * 129));
  Attributes last;
  last.Set("axis", int64_t{-1});
  ExpectSameOnTwoThreads("Softmax", {&rows}, last);
  ExpectSameOnTwoThreads("LogSoftmax", {&rows}, last);
  const Tensor scale = F32({129}, Wave(129)), b = F32({129}, Wave(129));
  ExpectSameOnTwoThreads("LayerNormalization", {&rows, &scale, &b}, last);
  Attributes axes;
  axes.Set("axes", std::vector<int64_t>{-1});
  ExpectSameOnTwoThreads("ReduceMean", {&rows}, axes);
  const Tensor cube = F32({4, 700, 129}, Wave(4 * 700 * 129));
  Attributes mid;
  mid.Set("axis", int64_t{1});
  ExpectSameOnTwoThreads("Softmax", {&cube}, mid);  // columns: per-thread scratch

  const Tensor x = F32({2, 16, 67, 61}, Wave(2 * 16 * 67 * 61));
  Attributes pool;
  pool.Set("kernel_shape", std::vector<int64_t>{3, 3});
  pool.Set("pads", std::vector<int64_t>{1, 1, 1, 1});
  ExpectSameOnTwoThreads("MaxPool", {&x}, pool);
  ExpectSameOnTwoThreads("AveragePool", {&x}, pool);
  // Small planes pooled flat across planes, split between the threads.
  const Tensor small = F32({1, 96, 14, 14}, Wave(96 * 14 * 14));
  ExpectSameOnTwoThreads("MaxPool", {&small}, pool);
  ExpectSameOnTwoThreads("AveragePool", {&small}, pool);
  Attributes stride2;
  stride2.Set("kernel_shape", std::vector<int64_t>{3, 3});
  stride2.Set("strides", std::vector<int64_t>{2, 2});
  stride2.Set("ceil_mode", int64_t{1});
  ExpectSameOnTwoThreads("MaxPool", {&x}, stride2);
  // Global pooling of 32 planes of 67 x 61, split by planes.
  ExpectSameOnTwoThreads("GlobalAveragePool", {&x});
  ExpectSameOnTwoThreads("GlobalMaxPool", {&x});
  const Tensor s16 = F32({16}, Wave(16)), v16 = F32({16}, std::vector<float>(16, 2.0f));
  ExpectSameOnTwoThreads("InstanceNormalization", {&x, &s16, &s16});
  const Tensor bn = F32({1, 40, 256, 256}, Wave(40 * 256 * 256));
  const Tensor s40 = F32({40}, Wave(40)), v40 = F32({40}, std::vector<float>(40, 2.0f));
  ExpectSameOnTwoThreads("BatchNormalization", {&bn, &s40, &s40, &s40, &v40});
}

// Convolutions split every way the GEMM splits them: few output positions
// (transposed: weights in column chunks, each packing the positions), 14x14
// with 24 channels (column chunks) and with 224 (weights bigger than the
// panels: one row chunk per thread), masked panels per task (32x32 plane,
// 200 channels), the im2col-free tile (20x20 plane, 16 channels: 9 panels in
// 8 chunks; 28x28, 32 channels: 17 in 8; 32x32, 40 channels), stride 2,
// depthwise planes in chunks (two images) and flat small planes.
TEST(ThreadedKernelsTest, ConvolutionPaths) {
  Attributes pad1;
  pad1.Set("pads", std::vector<int64_t>{1, 1, 1, 1});
  const Tensor x7 = F32({1, 32, 7, 7}, Wave(32 * 7 * 7));
  const Tensor w7 = F32({64, 32, 3, 3}, Wave(64 * 32 * 9));
  const Tensor b64 = F32({64}, Wave(64));
  ExpectSameOnTwoThreads("Conv", {&x7, &w7, &b64}, pad1);
  const Tensor x14 = F32({1, 16, 14, 14}, Wave(16 * 14 * 14));
  const Tensor w14 = F32({24, 16, 3, 3}, Wave(24 * 16 * 9));
  ExpectSameOnTwoThreads("Conv", {&x14, &w14}, pad1);
  const Tensor w14_wide = F32({224, 16, 3, 3}, Wave(224 * 16 * 9));
  ExpectSameOnTwoThreads("Conv", {&x14, &w14_wide}, pad1);
  const Tensor x32 = F32({1, 24, 32, 32}, Wave(24 * 32 * 32));
  const Tensor w32 = F32({40, 24, 3, 3}, Wave(40 * 24 * 9));
  ExpectSameOnTwoThreads("Conv", {&x32, &w32}, pad1);
  const Tensor w32_wide = F32({200, 24, 3, 3}, Wave(200 * 24 * 9));
  ExpectSameOnTwoThreads("Conv", {&x32, &w32_wide}, pad1);
  const Tensor x20 = F32({1, 8, 20, 20}, Wave(8 * 20 * 20));
  const Tensor w20 = F32({16, 8, 3, 3}, Wave(16 * 8 * 9));
  ExpectSameOnTwoThreads("Conv", {&x20, &w20}, pad1);
  const Tensor x28 = F32({1, 16, 28, 28}, Wave(16 * 28 * 28));
  const Tensor w28 = F32({32, 16, 3, 3}, Wave(32 * 16 * 9));
  ExpectSameOnTwoThreads("Conv", {&x28, &w28}, pad1);
  Attributes stride2 = pad1;
  stride2.Set("strides", std::vector<int64_t>{2, 2});
  ExpectSameOnTwoThreads("Conv", {&x32, &w32}, stride2);
  const Tensor xp = F32({1, 40, 9, 9}, Wave(40 * 9 * 9));
  const Tensor wp = F32({96, 40, 1, 1}, Wave(96 * 40));
  ExpectSameOnTwoThreads("Conv", {&xp, &wp});
  // 3x3 64 -> 64 (K = 576) and 5x5 16 -> 96 (K = 400): the full-depth
  // tile on one and on two threads (6 panels in 6 column chunks).
  const Tensor x16 = F32({1, 64, 16, 16}, Wave(64 * 16 * 16));
  const Tensor w16 = F32({64, 64, 3, 3}, Wave(64 * 64 * 9));
  ExpectSameOnTwoThreads("Conv", {&x16, &w16, &b64}, pad1);
  // 24x24 (12 panels in 8 chunks of 1 or 2), 64 -> 136 channels (17 row
  // panels, the last one partial) with a bias.
  const Tensor x24 = F32({1, 64, 24, 24}, Wave(64 * 24 * 24));
  const Tensor w24 = F32({136, 64, 3, 3}, Wave(136 * 64 * 9));
  const Tensor b136 = F32({136}, Wave(136));
  ExpectSameOnTwoThreads("Conv", {&x24, &w24, &b136}, pad1);
  Attributes pad2;
  pad2.Set("pads", std::vector<int64_t>{2, 2, 2, 2});
  const Tensor w5 = F32({96, 16, 5, 5}, Wave(96 * 16 * 25));
  ExpectSameOnTwoThreads("Conv", {&x28, &w5}, pad2);
  // Pointwise at 14x14 through Sgemm, its last 4 positions by the tail
  // kernel (AVX-512), row blocks split over the threads.
  const Tensor xpw = F32({1, 40, 14, 14}, Wave(40 * 14 * 14));
  const Tensor wpw = F32({104, 40, 1, 1}, Wave(104 * 40));
  ExpectSameOnTwoThreads("Conv", {&xpw, &wpw}, Attributes());
  // And over Sgemm's panels: 3x3 stride 2 from 56 x 14 to 28 x 7 (196
  // positions; rows under 14 wide stay off the channels kernel).
  const Tensor xs2 = F32({1, 24, 56, 14}, Wave(24 * 56 * 14));
  const Tensor ws2 = F32({136, 24, 3, 3}, Wave(136 * 24 * 9));
  ExpectSameOnTwoThreads("Conv", {&xs2, &ws2}, stride2);
  // 56 -> 28 stride 2 (AVX-512: channels across the lanes, guided chunks
  // of row groups), 72 channels with a bias.
  const Tensor x56 = F32({1, 16, 56, 56}, Wave(16 * 56 * 56));
  const Tensor w56 = F32({72, 16, 3, 3}, Wave(72 * 16 * 9));
  const Tensor b72 = F32({72}, Wave(72));
  ExpectSameOnTwoThreads("Conv", {&x56, &w56, &b72}, stride2);
  // A shallow wide pointwise layer: the im2col-free tile on one thread,
  // Sgemm on two (AVX-512), the same sums.
  const Tensor xsh = F32({1, 40, 16, 20}, Wave(40 * 16 * 20));
  const Tensor wsh = F32({72, 40, 1, 1}, Wave(72 * 40));
  ExpectSameOnTwoThreads("Conv", {&xsh, &wsh, &b72}, Attributes());
  // And 28 -> 14 (groups of two output rows).
  ExpectSameOnTwoThreads("Conv", {&x28, &w28}, stride2);
  // A 14x14 plane, 72 channels (the small-plane tile: one row chunk per
  // thread).
  const Tensor x14b = F32({1, 32, 14, 14}, Wave(32 * 14 * 14));
  const Tensor w14b = F32({72, 32, 3, 3}, Wave(72 * 32 * 9));
  ExpectSameOnTwoThreads("Conv", {&x14b, &w14b}, pad1);
  // Winograd (AVX2 / AVX-512; the splits in conv_winograd_test.cc).
  // F(2x2, 3x3) below 27 wide: 40 x 14, 32 -> 130 channels (two blocks of
  // tile rows, three chunks of channels: a task per block and chunk, a
  // thread keeping its block's transformed input between tasks); 60 x 14,
  // 32 -> 40 (three blocks, one chunk: three tasks would not divide in two,
  // so the phased way); 14x14 (one block, 49 tiles: phased). F(4x4, 3x3)
  // from 27 wide: 28x28, 32 -> 130 (one block of 49 tiles: phased); 56x56,
  // 32 -> 130 (two blocks, three chunks: a task per block and chunk).
  const Tensor ww = F32({130, 32, 3, 3}, Wave(130 * 32 * 9));
  const Tensor b130 = F32({130}, Wave(130));
  const Tensor xw2 = F32({1, 32, 40, 14}, Wave(32 * 40 * 14));
  ExpectSameOnTwoThreads("Conv", {&xw2, &ww, &b130}, pad1);
  const Tensor xw3 = F32({1, 32, 60, 14}, Wave(32 * 60 * 14));
  const Tensor ww40 = F32({40, 32, 3, 3}, Wave(40 * 32 * 9));
  ExpectSameOnTwoThreads("Conv", {&xw3, &ww40}, pad1);
  const Tensor xw14 = F32({1, 96, 14, 14}, Wave(96 * 14 * 14));
  const Tensor ww14 = F32({208, 96, 3, 3}, Wave(208 * 96 * 9));
  ExpectSameOnTwoThreads("Conv", {&xw14, &ww14}, pad1);
  const Tensor xw28 = F32({1, 32, 28, 28}, Wave(32 * 28 * 28));
  ExpectSameOnTwoThreads("Conv", {&xw28, &ww, &b130}, pad1);
  const Tensor xw56 = F32({1, 32, 56, 56}, Wave(32 * 56 * 56));
  ExpectSameOnTwoThreads("Conv", {&xw56, &ww, &b130}, pad1);
  // Pointwise, 16 channels, 32 deep: the tile on one thread, Sgemm on two.
  const Tensor xq = F32({1, 32, 28, 28}, Wave(32 * 28 * 28));
  const Tensor wq = F32({16, 32, 1, 1}, Wave(16 * 32));
  ExpectSameOnTwoThreads("Conv", {&xq, &wq});
  // A 7x7 stride-2 stem on 3 channels (AVX-512: the direct stem kernel in
  // guided row chunks, 29 output rows at two threads).
  Attributes stem;
  stem.Set("pads", std::vector<int64_t>{3, 3, 3, 3});
  stem.Set("strides", std::vector<int64_t>{2, 2});
  const Tensor xs = F32({1, 3, 58, 40}, Wave(3 * 58 * 40));
  const Tensor ws = F32({24, 3, 7, 7}, Wave(24 * 3 * 49));
  const Tensor b24s = F32({24}, Wave(24));
  ExpectSameOnTwoThreads("Conv", {&xs, &ws, &b24s}, stem);
  Attributes dw = pad1;
  dw.Set("group", int64_t{24});
  dw.Set("strides", std::vector<int64_t>{2, 2});
  const Tensor xd = F32({2, 24, 13, 17}, Wave(2 * 24 * 13 * 17));
  const Tensor wd = F32({24, 1, 3, 3}, Wave(24 * 9));
  const Tensor b24 = F32({24}, Wave(24));
  ExpectSameOnTwoThreads("Conv", {&xd, &wd, &b24}, dw);
  Attributes flat = pad1;
  flat.Set("group", int64_t{64});
  const Tensor xf = F32({1, 64, 7, 7}, Wave(64 * 7 * 7));
  const Tensor wf = F32({64, 1, 3, 3}, Wave(64 * 9));
  ExpectSameOnTwoThreads("Conv", {&xf, &wf, &b64}, flat);
}

}  // namespace
}  // namespace orrery::ops
