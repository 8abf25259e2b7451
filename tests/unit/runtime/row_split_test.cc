// Large batches whose rows a model computes apart run one row at a time
// (runtime/row_split.h): which plans qualify, and that such a run gives
// each row exactly what a run of that row alone gives.
#include "runtime/row_split.h"

#include <gtest/gtest.h>

#include <cstring>

#include "model_builder.h"
#include "plan_util.h"
#include "runtime/execution.h"
#include "runtime/lane_group.h"
#include "runtime/model.h"

namespace orrery {
namespace {

using testing::ExpectAllNear;
using testing::F32;
using testing::Floats;
using testing::kFloat;
using testing::ModelBuilder;
using testing::Ramp;
using testing::Reference;
using testing::SpecializeModel;

// X[N,3,S,S] -> Conv 3x3 to 24 channels -> Relu -> MaxPool 2x2 -> Conv 1x1 to
// 8 -> GlobalAveragePool -> Flatten -> Gemm to 5 = Y[N,5]; then, with
// `mix_rows`, a Softmax over dim 0 (across the batch) = Z[N,5]. Without
// `head`, the 1x1 Conv's output is Y[N,8,S/2,S/2].
ModelBuilder Cnn(bool mix_rows = false, bool head = true) {
  ModelBuilder b(13);
  b.Input("X", kFloat, {-1, 3, -1, -1});
  b.FloatInit("W1", {24, 3, 3, 3}, Ramp(24 * 27, 1));
  b.FloatInit("B1", {24}, Ramp(24, 2));
  b.FloatInit("W2", {8, 24, 1, 1}, Ramp(8 * 24, 3));
  b.FloatInit("W3", {8, 5}, Ramp(40, 4));
  auto* c1 = b.Node("Conv", {"X", "W1", "B1"}, {"c1"}, "conv1");
  ModelBuilder::AttrInts(c1, "kernel_shape", {3, 3});
  ModelBuilder::AttrInts(c1, "pads", {1, 1, 1, 1});
  b.Node("Relu", {"c1"}, {"r1"}, "relu1");
  auto* mp = b.Node("MaxPool", {"r1"}, {"p1"}, "pool1");
  ModelBuilder::AttrInts(mp, "kernel_shape", {2, 2});
  ModelBuilder::AttrInts(mp, "strides", {2, 2});
  auto* c2 = b.Node("Conv", {"p1", "W2"}, {head ? "c2" : "Y"}, "conv2");
  ModelBuilder::AttrInts(c2, "kernel_shape", {1, 1});
  if (!head) {
    b.Output("Y", kFloat, {-1, 8, -1, -1});
    return b;
  }
  b.Node("GlobalAveragePool", {"c2"}, {"g"}, "gap");
  b.Node("Flatten", {"g"}, {"f"}, "flatten");
  b.Node("Gemm", {"f", "W3"}, {"Y"}, "fc");
  if (mix_rows) {
    ModelBuilder::AttrInt(b.Node("Softmax", {"Y"}, {"Z"}, "softmax_over_batch"), "axis", 0);
    b.Output("Z", kFloat, {-1, 5});
  } else {
    b.Output("Y", kFloat, {-1, 5});
  }
  return b;
}

ops::TensorType Type(Shape shape) { return ops::TensorType{DType::kFloat32, std::move(shape)}; }

std::unique_ptr<CompiledModel> MustCompile(const ModelBuilder& b) {
  auto m = CompiledModel::Compile(b.Bytes());
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return m.ok() ? std::move(m).value() : nullptr;
}

// Row `r` of a float tensor as a tensor of its own.
Tensor Row(const Tensor& batch, int64_t r) {
  Shape shape = batch.shape();
  const int64_t rows = shape[0];
  shape[0] = 1;
  const size_t bytes = batch.byte_size() / static_cast<size_t>(rows);
  auto t = Tensor::FromBytes(batch.dtype(), shape, batch.bytes().substr(bytes * static_cast<size_t>(r), bytes));
  EXPECT_TRUE(t.ok());
  return t.ok() ? std::move(t).value() : Tensor();
}

TEST(RowSplitTest, WhichPlansRunRowByRow) {
  // 4 rows of 24 x 160 x 160 activations: a ~10 MB arena, split.
  auto big = SpecializeModel(Cnn(), {Type({4, 3, 160, 160})});
  ASSERT_TRUE(big.ok()) << big.status().ToString();
  EXPECT_EQ(runtime::SeparableRows(**big), 4);
  EXPECT_EQ((*big)->split_rows, 4);
  // From the pooling on the batch runs whole (the classifier writes 5
  // floats a row from 40 weights; conv2 applies its weights at 6400
  // positions): steps conv1 (+ Relu), pool1, conv2 by rows, then gap and
  // fc batched, from conv2's output.
  ASSERT_EQ((*big)->steps.size(), 5u);
  EXPECT_EQ((*big)->split_cut, 3u);
  ASSERT_GE((*big)->split_cut_entry, 0);
  EXPECT_EQ((*big)->entries[static_cast<size_t>((*big)->split_cut_entry)].type.shape, (Shape{4, 8, 80, 80}));
  // The batch plan only runs that tail: its arena holds conv2's output and
  // what comes after, not the rows' 24 x 160 x 160 activations (left
  // unbound), and still passes the memory plan's checks.
  const int64_t cut_bytes = 4 * 8 * 80 * 80 * 4;
  EXPECT_GE((*big)->memory.peak_bytes, cut_bytes);
  EXPECT_LT((*big)->memory.peak_bytes, 2 * cut_bytes);
  EXPECT_EQ((*big)->stats.arena_bytes, (*big)->memory.peak_bytes);
  EXPECT_TRUE(runtime::CheckMemoryPlan((*big)->buffers, (*big)->memory).ok())
      << runtime::CheckMemoryPlan((*big)->buffers, (*big)->memory).ToString();
  EXPECT_EQ((*big)->entries[(*big)->steps[0].out_begin].kind, runtime::EntryKind::kKernel);
  // Without the head every step's weights serve 6400+ positions a row:
  // rows to the end.
  auto headless = SpecializeModel(Cnn(false, /*head=*/false), {Type({4, 3, 160, 160})});
  ASSERT_TRUE(headless.ok()) << headless.status().ToString();
  EXPECT_EQ((*headless)->split_rows, 4);
  EXPECT_EQ((*headless)->split_cut, (*headless)->steps.size());
  EXPECT_EQ((*headless)->split_cut_entry, -1);
  EXPECT_GE((*headless)->memory.peak_bytes, runtime::kRowSplitMinArenaBytes);
  // The same model on small images stays in cache: one batch.
  auto small = SpecializeModel(Cnn(), {Type({4, 3, 32, 32})});
  ASSERT_TRUE(small.ok());
  EXPECT_EQ(runtime::SeparableRows(**small), 4);
  EXPECT_EQ((*small)->split_rows, 0);
  // A Softmax across the batch mixes rows.
  auto mixed = SpecializeModel(Cnn(/*mix_rows=*/true), {Type({4, 3, 160, 160})});
  ASSERT_TRUE(mixed.ok());
  EXPECT_EQ(runtime::SeparableRows(**mixed), 0);
  EXPECT_EQ((*mixed)->split_rows, 0);
  // One row: nothing to split.
  auto one = SpecializeModel(Cnn(), {Type({1, 3, 160, 160})});
  ASSERT_TRUE(one.ok());
  EXPECT_EQ((*one)->split_rows, 0);
}

TEST(RowSplitTest, MatrixProductsThatShareWeightsAcrossRowsStayBatched) {
  // X[N,64] -> Gemm to 512 -> Relu -> Gemm to 16: every row uses each
  // weight once, so rows share the weight loads batched, however large
  // the arena (4096 rows: 8 MiB for the hidden layer alone).
  ModelBuilder b(13);
  b.Input("X", kFloat, {-1, 64});
  b.FloatInit("W1", {64, 512}, Ramp(64 * 512, 1));
  b.FloatInit("W2", {512, 16}, Ramp(512 * 16, 2));
  b.Node("Gemm", {"X", "W1"}, {"h"}, "fc1");
  b.Node("Relu", {"h"}, {"r"}, "relu");
  b.Node("Gemm", {"r", "W2"}, {"Y"}, "fc2");
  b.Output("Y", kFloat, {-1, 16});
  auto sp = SpecializeModel(b, {Type({4096, 64})});
  ASSERT_TRUE(sp.ok()) << sp.status().ToString();
  EXPECT_GE((*sp)->memory.peak_bytes, runtime::kRowSplitMinArenaBytes);
  EXPECT_EQ(runtime::SeparableRows(**sp), 4096);
  EXPECT_EQ((*sp)->split_rows, 0);

  // A transposed left operand puts rows in columns.
  ModelBuilder t(13);
  t.Input("X", kFloat, {64, -1});
  t.FloatInit("W1", {64, 512}, Ramp(64 * 512, 1));
  ModelBuilder::AttrInt(t.Node("Gemm", {"X", "W1"}, {"Y"}, "fc1"), "transA", 1);
  t.Output("Y", kFloat, {-1, 512});
  auto tsp = SpecializeModel(t, {Type({64, 64})});
  ASSERT_TRUE(tsp.ok()) << tsp.status().ToString();
  EXPECT_EQ(runtime::SeparableRows(**tsp), 0);
}

// SeparableRows of a one-node model over X[4, 3, 5] (and Y, when the node
// reads a second input: another X-shaped value or the given constant).
int64_t RowsOfOneNode(const std::string& op, const std::vector<int64_t>& constant_dims,
                      void (*attrs)(onnx::NodeProto*) = nullptr, bool second_input = false) {
  ModelBuilder b(13);
  b.Input("X", kFloat, {-1, 3, 5});
  std::vector<std::string> inputs{"X"};
  if (second_input) {
    b.Input("Y", kFloat, {-1, 3, 5});
    inputs.push_back("Y");
  }
  if (!constant_dims.empty()) {
    int64_t n = 1;
    for (int64_t d : constant_dims) n *= d;
    b.FloatInit("C", constant_dims, Ramp(static_cast<size_t>(n), 5));
    inputs.push_back("C");
  }
  onnx::NodeProto* node = b.Node(op, inputs, {"Z"}, "node");
  if (attrs != nullptr) attrs(node);
  b.OutputNoShape("Z", kFloat);
  std::vector<ops::TensorType> types{Type({4, 3, 5})};
  if (second_input) types.push_back(Type({4, 3, 5}));
  auto sp = SpecializeModel(b, types);
  EXPECT_TRUE(sp.ok()) << op << ": " << sp.status().ToString();
  return sp.ok() ? runtime::SeparableRows(**sp) : -1;
}

TEST(RowSplitTest, KernelsThatMixRowsAreNotSeparable) {
  // Broadcast operands: one value per row would be indexed by something else.
  EXPECT_EQ(RowsOfOneNode("Add", {5}), 4);
  EXPECT_EQ(RowsOfOneNode("Add", {1, 3, 5}), 4);
  EXPECT_EQ(RowsOfOneNode("Add", {4, 3, 5}), 0);
  EXPECT_EQ(RowsOfOneNode("Mul", {}, nullptr, /*second_input=*/true), 4);
  // Concat and Softmax keep rows apart unless along dim 0.
  EXPECT_EQ(RowsOfOneNode("Concat", {}, [](onnx::NodeProto* n) { ModelBuilder::AttrInt(n, "axis", 1); }, true), 4);
  EXPECT_EQ(RowsOfOneNode("Concat", {}, [](onnx::NodeProto* n) { ModelBuilder::AttrInt(n, "axis", 0); }, true), 0);
  EXPECT_EQ(RowsOfOneNode("Concat", {}, [](onnx::NodeProto* n) { ModelBuilder::AttrInt(n, "axis", -3); }, true), 0);
  EXPECT_EQ(RowsOfOneNode("Softmax", {}, [](onnx::NodeProto* n) { ModelBuilder::AttrInt(n, "axis", -1); }), 4);
  EXPECT_EQ(RowsOfOneNode("Softmax", {}, [](onnx::NodeProto* n) { ModelBuilder::AttrInt(n, "axis", 0); }), 0);
  // Transpose keeps rows only with dim 0 first.
  EXPECT_EQ(RowsOfOneNode("Transpose", {}, [](onnx::NodeProto* n) { ModelBuilder::AttrInts(n, "perm", {0, 2, 1}); }), 4);
  EXPECT_EQ(RowsOfOneNode("Transpose", {}, [](onnx::NodeProto* n) { ModelBuilder::AttrInts(n, "perm", {1, 0, 2}); }), 0);
  // MatMul: constant weights [5, k] are shared; a constant [4, 5, k] is
  // batched against the rows.
  EXPECT_EQ(RowsOfOneNode("MatMul", {5, 2}), 4);
  EXPECT_EQ(RowsOfOneNode("MatMul", {4, 5, 2}), 0);
  // Kernels outside the list (here a reduction that could be over dim 0).
  EXPECT_EQ(RowsOfOneNode("ReduceSum", {}), 0);
}

// A batch run row by row gives every row the bits a run of that row alone
// gives, with rows starting at aligned offsets (views) or not (copies), one
// row at a time or `threads` at once (a row per thread, the last wave
// short when they do not divide the rows). With the head, the rows run
// conv1 to conv2 and each thread the pooling and the classifier for its
// rows at once (a GEMM over several rows: equal to each row's within
// rounding), unless the threads do not divide the rows.
void ExpectRowByRowEqualsRowsAlone(int64_t side, int64_t rows = 4, int threads = 1, bool head = true) {
  SCOPED_TRACE("side " + std::to_string(side) + ", rows " + std::to_string(rows) + ", threads " +
               std::to_string(threads) + (head ? ", head" : ""));
  const ModelBuilder b = Cnn(false, head);
  auto model = MustCompile(b);
  ASSERT_NE(model, nullptr);
  const int64_t kRows = rows;
  const Tensor x = F32({kRows, 3, side, side}, Ramp(static_cast<size_t>(kRows * 3 * side * side), 7));
  std::unique_ptr<runtime::LaneGroup> group;
  if (threads > 1) group = std::make_unique<runtime::LaneGroup>(runtime::LaneGroupOptions{.threads = threads});
  const size_t waves = static_cast<size_t>((kRows + threads - 1) / threads);

  auto one = Execution::Start(*model, {{"X", Row(x, 0)}});
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  const size_t steps = one->num_steps();
  const PlanStats row_stats = one->plan_stats();
  // The head's two steps (gap, fc) run once per thread for its rows, when
  // the threads divide the rows (two or more each).
  const bool tail = head && kRows % threads == 0 && kRows / threads >= 2;
  const size_t per_row = tail ? steps - 2 : steps;
  const size_t total = waves * per_row + (steps - per_row);

  auto ex = Execution::Start(*model, {{"X", x}}, {.threads = threads});
  ASSERT_TRUE(ex.ok()) << ex.status().ToString();
  EXPECT_EQ(ex->num_steps(), total);
  EXPECT_EQ(ex->plan_stats().num_steps, total);
  EXPECT_EQ(ex->plan_stats().flops, kRows * row_stats.flops);
  if (tail) {
    EXPECT_GT(ex->plan_stats().arena_bytes, threads * row_stats.arena_bytes);
  } else {
    EXPECT_EQ(ex->plan_stats().arena_bytes, threads * row_stats.arena_bytes);
  }
  while (!ex->done()) ASSERT_TRUE(ex->Step(group.get()).ok());
  const std::vector<StepProfile> profile = ex->Profile();
  ASSERT_EQ(profile.size(), total);
  for (size_t s = 0; s < profile.size(); ++s) {
    if (s + per_row < waves * per_row) {
      EXPECT_EQ(profile[s].name, profile[s + per_row].name);
    }
    EXPECT_GT(ex->step_ns(s), 0);
  }
  if (tail) {
    EXPECT_EQ(profile[waves * per_row].name, "gap");
    EXPECT_EQ(profile.back().name, "fc");
  }
  auto outs = ex->TakeOutputs();
  ASSERT_TRUE(outs.ok()) << outs.status().ToString();
  ASSERT_EQ(outs->size(), 1u);
  const Tensor& y = (*outs)[0].tensor;
  ASSERT_EQ(y.shape()[0], kRows);
  const int64_t row_floats = y.num_elements() / kRows;
  for (int64_t r = 0; r < kRows; ++r) {
    auto alone = model->Run({{"X", Row(x, r)}});
    ASSERT_TRUE(alone.ok()) << alone.status().ToString();
    const float* got = y.data<float>() + r * row_floats;
    if (tail) {
      const std::vector<float> got_row(got, got + row_floats);
      ExpectAllNear(got_row, Floats((*alone)[0].tensor), 1e-5f);
    } else {
      EXPECT_EQ(std::memcmp(got, (*alone)[0].tensor.data<float>(), static_cast<size_t>(row_floats) * sizeof(float)), 0)
          << "row " << r;
    }
  }
  const std::vector<Tensor> want = Reference(b, {x});
  ASSERT_EQ(want.size(), 1u);
  ExpectAllNear(Floats(y), Floats(want[0]), 1e-3f);
}

TEST(RowSplitTest, RowByRowEqualsEachRowAloneWithViewsOfTheInput) { ExpectRowByRowEqualsRowsAlone(160); }

TEST(RowSplitTest, RowByRowEqualsEachRowAloneWithCopiesOfUnalignedRows) {
  // 3 x 161 x 161 floats a row: rows start at offsets no tensor buffer may.
  ExpectRowByRowEqualsRowsAlone(161);
}

TEST(RowSplitTest, TwoThreadsRunTwoRowsAtOnce) {
  ExpectRowByRowEqualsRowsAlone(160, /*rows=*/4, /*threads=*/2);
  // 3 rows: a wave of two, then one row that the group shares.
  ExpectRowByRowEqualsRowsAlone(161, /*rows=*/3, /*threads=*/2);
}

TEST(RowSplitTest, WithoutABatchedTailEveryStepRunsRowByRow) {
  ExpectRowByRowEqualsRowsAlone(160, /*rows=*/4, /*threads=*/1, /*head=*/false);
  ExpectRowByRowEqualsRowsAlone(161, /*rows=*/3, /*threads=*/2, /*head=*/false);
}

TEST(RowSplitTest, RowsMixedAcrossTheBatchRunAsOneBatch) {
  const ModelBuilder b = Cnn(/*mix_rows=*/true);
  auto model = MustCompile(b);
  ASSERT_NE(model, nullptr);
  const Tensor x = F32({4, 3, 160, 160}, Ramp(4 * 3 * 160 * 160, 8));
  auto one = Execution::Start(*model, {{"X", Row(x, 0)}});
  ASSERT_TRUE(one.ok());
  auto ex = Execution::Start(*model, {{"X", x}});
  ASSERT_TRUE(ex.ok());
  EXPECT_EQ(ex->num_steps(), one->num_steps());
  auto outs = model->Run({{"X", x}});
  ASSERT_TRUE(outs.ok()) << outs.status().ToString();
  const std::vector<Tensor> want = Reference(b, {x});
  ASSERT_EQ(want.size(), 1u);
  ExpectAllNear(Floats((*outs)[0].tensor), Floats(want[0]), 1e-4f);
}

}  // namespace
}  // namespace orrery
