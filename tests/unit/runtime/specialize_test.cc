// Plan preparation: compile-time constant folding, dead-node removal,
// per-shape specialisation (shape-computation folding, views, dynamic
// steps) and the memory plan.
#include "runtime/specialize.h"

#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "model_builder.h"
#include "plan_util.h"
#include "runtime/fold.h"
#include "runtime/model.h"

namespace orrery::runtime {
namespace {

using testing::CompileBase;
using testing::ExpectAllNear;
using testing::F32;
using testing::Floats;
using testing::I64;
using testing::kFloat;
using testing::kInt64;
using testing::OpTypes;
using testing::ModelBuilder;
using testing::Ramp;
using testing::Reference;
using testing::SpecializeModel;

// What PyTorch exports for x.view(x.size(0), -1) @ W:
//   r = Relu(X); s = Shape(r); n = Gather(s, 0); n1 = Unsqueeze(n, [0]);
//   shape = Concat(n1, [-1]); flat = Reshape(r, shape); Y = MatMul(flat, W)
ModelBuilder FlattenChain() {
  ModelBuilder b(13);
  b.Input("X", kFloat, {-1, 2, 3});
  b.Int64Init("zero", {}, {0});
  b.Int64Init("axes0", {1}, {0});
  b.Int64Init("minus1", {1}, {-1});
  b.FloatInit("W", {6, 2}, Ramp(12, 7));
  b.Node("Relu", {"X"}, {"r"}, "relu");
  b.Node("Shape", {"r"}, {"s"}, "shape");
  ModelBuilder::AttrInt(b.Node("Gather", {"s", "zero"}, {"n"}, "gather"), "axis", 0);
  b.Node("Unsqueeze", {"n", "axes0"}, {"n1"}, "unsqueeze");
  ModelBuilder::AttrInt(b.Node("Concat", {"n1", "minus1"}, {"shape_out"}, "concat"), "axis", 0);
  b.Node("Reshape", {"r", "shape_out"}, {"flat"}, "reshape");
  b.Node("MatMul", {"flat", "W"}, {"Y"}, "matmul");
  b.Output("Y", kFloat, {-1, 2});
  return b;
}

TEST(SpecializeTest, ShapeChainFoldsToConstantsAndReshapeBecomesAView) {
  const ModelBuilder b = FlattenChain();
  // Without input shapes nothing but constants can fold.
  auto base = CompileBase(b);
  ASSERT_TRUE(base.ok()) << base.status().ToString();
  EXPECT_EQ((*base)->steps.size(), 7u);
  EXPECT_EQ((*base)->folded_nodes, 0u);

  auto sp = SpecializeModel(b, {ops::TensorType{DType::kFloat32, {4, 2, 3}}});
  ASSERT_TRUE(sp.ok()) << sp.status().ToString();
  // Shape, Gather, Unsqueeze, Concat folded; Reshape aliases Relu's output.
  EXPECT_EQ(OpTypes(**sp), (std::vector<std::string>{"Relu", "MatMul"}));
  EXPECT_EQ((*sp)->stats.folded_nodes, 4u);
  EXPECT_EQ((*sp)->stats.view_nodes, 1u);
  EXPECT_EQ((*sp)->stats.dynamic_steps, 0u);
  EXPECT_EQ((*sp)->entries[static_cast<size_t>((*sp)->step_inputs[(*sp)->steps[1].in_begin])]
                .type.shape,
            (Shape{4, 6}));

  // End to end through CompiledModel, for two batch sizes.
  auto model = CompiledModel::Compile(b.Bytes());
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  for (int64_t n : {4, 1}) {
    const Tensor x = F32({n, 2, 3}, Ramp(static_cast<size_t>(n * 6), static_cast<uint32_t>(n)));
    auto out = (*model)->Run({{"X", x}});
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    const std::vector<Tensor> want = Reference(b, {x});
    ASSERT_EQ(want.size(), 1u);
    EXPECT_EQ((*out)[0].tensor.shape(), (Shape{n, 2}));
    ExpectAllNear(Floats((*out)[0].tensor), Floats(want[0]));
  }
}

TEST(SpecializeTest, ConstantSubgraphFoldsAtCompileTime) {
  // Weight preprocessing typical of exports: W' = Transpose(W0) * 2 + 1.
  ModelBuilder b(13);
  b.Input("X", kFloat, {-1, 3});
  b.FloatInit("W0", {2, 3}, {1, 2, 3, 4, 5, 6});
  b.FloatInit("two", {}, {2});
  b.FloatInit("one", {}, {1});
  b.Node("Transpose", {"W0"}, {"wt"}, "transpose");
  b.Node("Mul", {"wt", "two"}, {"w2"}, "mul");
  b.Node("Add", {"w2", "one"}, {"w"}, "add");
  b.Node("MatMul", {"X", "w"}, {"Y"}, "matmul");
  b.Output("Y", kFloat, {-1, 2});
  auto base = CompileBase(b);
  ASSERT_TRUE(base.ok()) << base.status().ToString();
  ASSERT_EQ((*base)->steps.size(), 1u);
  EXPECT_EQ((*base)->steps[0].op_type, "MatMul");
  EXPECT_EQ((*base)->folded_nodes, 3u);
  // Only the folded weight stays; W0, two and one are no longer read.
  ASSERT_EQ((*base)->constants.size(), 1u);
  EXPECT_EQ((*base)->slot_names[static_cast<size_t>((*base)->constants[0].first)], "w");
  EXPECT_EQ(Floats((*base)->constants[0].second), (std::vector<float>{3, 9, 5, 11, 7, 13}));

  auto model = CompiledModel::Compile(b.Bytes());
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  auto out = (*model)->Run({{"X", F32({1, 3}, {1, 0, -1})}});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ExpectAllNear(Floats((*out)[0].tensor), {3 - 7, 9 - 13});
}

TEST(SpecializeTest, FoldingIsBounded) {
  // Expand to 4100 x 4100 floats (67.2 MB > 64 MiB) must stay a step.
  ModelBuilder b(13);
  b.Input("X", kFloat, {1});
  b.FloatInit("c", {1}, {1});
  b.Int64Init("big", {2}, {4100, 4100});
  b.Int64Init("small", {2}, {2, 2});
  b.Node("Expand", {"c", "big"}, {"e_big"}, "expand_big");
  b.Node("Expand", {"c", "small"}, {"e_small"}, "expand_small");
  b.Node("Add", {"X", "e_big"}, {"Y"});
  b.Node("Add", {"X", "e_small"}, {"Z"});
  b.Output("Y", kFloat, {4100, 4100});
  b.Output("Z", kFloat, {2, 2});
  auto base = CompileBase(b);
  ASSERT_TRUE(base.ok()) << base.status().ToString();
  EXPECT_EQ((*base)->folded_nodes, 1u);
  std::vector<std::string> ops;
  for (const Step& s : (*base)->steps) ops.push_back(s.name.empty() ? s.op_type : s.name);
  EXPECT_EQ(ops, (std::vector<std::string>{"expand_big", "Add", "Add"}));
}

TEST(SpecializeTest, ConstantNodeErrorsRejectAtCompileTime) {
  // Inference fails on constant-only inputs: every run would fail.
  ModelBuilder b(13);
  b.Input("X", kFloat, {2});
  b.FloatInit("a", {3}, {1, 2, 3});
  b.FloatInit("c", {2}, {1, 2});
  b.Node("Add", {"a", "c"}, {"bad"}, "bad_add");
  b.Node("Add", {"X", "bad"}, {"Y"});
  b.Output("Y", kFloat, {2});
  Status st = CompiledModel::Compile(b.Bytes()).status();
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("node 'bad_add' (#0)"), std::string::npos) << st.message();
}

TEST(SpecializeTest, DeadNodesAreRemoved) {
  ModelBuilder b(13);
  b.Input("X", kFloat, {2});
  b.Node("Relu", {"X"}, {"Y"}, "live");
  b.Node("Tanh", {"X"}, {"t"}, "dead1");
  b.Node("Sigmoid", {"t"}, {"u"}, "dead2");
  b.Node("Add", {"u", "X"}, {"v"}, "dead3");
  b.Output("Y", kFloat, {2});
  auto base = CompileBase(b);
  ASSERT_TRUE(base.ok()) << base.status().ToString();
  ASSERT_EQ((*base)->steps.size(), 1u);
  EXPECT_EQ((*base)->steps[0].name, "live");
  EXPECT_EQ((*base)->removed_nodes, 3u);
  auto model = CompiledModel::Compile(b.Bytes());
  ASSERT_TRUE(model.ok());
  EXPECT_EQ((*model)->signature().node_count, 4u);  // the model as uploaded
  auto out = (*model)->Run({{"X", F32({2}, {-1, 2})}});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ExpectAllNear(Floats((*out)[0].tensor), {0, 2});
}

// X -> Relu -> Tanh -> Sigmoid -> Relu -> Tanh -> Y, 1 KB values.
ModelBuilder Chain(int length) {
  ModelBuilder b(13);
  b.Input("X", kFloat, {-1, 256});
  std::string prev = "X";
  const char* ops[] = {"Relu", "Tanh", "Sigmoid"};
  for (int i = 0; i < length; ++i) {
    std::string out = "Y";
    if (i + 1 < length) out = std::string("v") + char('a' + i);
    b.Node(ops[i % 3], {prev}, {out});
    prev = out;
  }
  b.Output("Y", kFloat, {-1, 256});
  return b;
}

TEST(SpecializeTest, ChainMemoryPlanReusesBuffers) {
  auto sp = SpecializeModel(Chain(8), {ops::TensorType{DType::kFloat32, {1, 256}}});
  ASSERT_TRUE(sp.ok()) << sp.status().ToString();
  const SpecializedPlan& p = **sp;
  ASSERT_EQ(p.steps.size(), 8u);
  // 7 intermediates of 1 KiB in the arena; Y gets its own buffer.
  ASSERT_EQ(p.buffers.size(), 7u);
  EXPECT_EQ(p.stats.naive_bytes, 7 * 1024);
  EXPECT_EQ(p.stats.arena_bytes, 2 * 1024);
  EXPECT_LT(p.stats.arena_bytes, p.stats.naive_bytes);
  EXPECT_EQ(p.stats.output_bytes, 1024);
  EXPECT_TRUE(CheckMemoryPlan(p.buffers, p.memory).ok())
      << CheckMemoryPlan(p.buffers, p.memory).ToString();
  // Arena entries know their offsets.
  for (size_t b = 0; b < p.buffers.size(); ++b) {
    EXPECT_EQ(p.entries[static_cast<size_t>(p.buffer_entries[b])].offset, p.memory.offsets[b]);
  }
}

TEST(SpecializeTest, ViewsExtendTheirRootsLifetime) {
  // a = Relu(X) (step 0), v = Flatten(a) (view), b = Sigmoid(X), c = Tanh(b),
  // Y = Add(v, c): a is last read through v at the last step, so it must
  // not share bytes with b or c.
  ModelBuilder b(13);
  b.Input("X", kFloat, {4, 8});
  b.Node("Relu", {"X"}, {"a"});
  b.Node("Flatten", {"a"}, {"v"});
  b.Node("Sigmoid", {"X"}, {"s"});
  b.Node("Tanh", {"s"}, {"c"});
  b.Node("Add", {"v", "c"}, {"Y"});
  b.Output("Y", kFloat, {4, 8});
  auto sp = SpecializeModel(b, {ops::TensorType{DType::kFloat32, {4, 8}}});
  ASSERT_TRUE(sp.ok()) << sp.status().ToString();
  const SpecializedPlan& p = **sp;
  EXPECT_EQ(OpTypes(p), (std::vector<std::string>{"Relu", "Sigmoid", "Tanh", "Add"}));
  EXPECT_EQ(p.stats.view_nodes, 1u);
  ASSERT_EQ(p.buffers.size(), 3u);  // a, s, c
  EXPECT_EQ(p.buffers[0].first, 0);
  EXPECT_EQ(p.buffers[0].last, 3);
  EXPECT_TRUE(CheckMemoryPlan(p.buffers, p.memory).ok());
  EXPECT_EQ(p.stats.arena_bytes, 3 * 128);

  auto model = CompiledModel::Compile(b.Bytes());
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const Tensor x = F32({4, 8}, Ramp(32, 3));
  auto out = (*model)->Run({{"X", x}});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ExpectAllNear(Floats((*out)[0].tensor), Floats(Reference(b, {x})[0]));
}

TEST(SpecializeTest, OutputViewOfAnIntermediateIsNotClobbered) {
  // Y = Reshape(Relu(X)) is a graph output aliasing an intermediate: that
  // intermediate gets the output's own buffer, not an arena slot.
  ModelBuilder b(13);
  b.Input("X", kFloat, {2, 3});
  b.Int64Init("shape", {1}, {6});
  b.Node("Relu", {"X"}, {"r"});
  b.Node("Reshape", {"r", "shape"}, {"Y"});
  b.Node("Tanh", {"r"}, {"t"});
  b.Node("Sigmoid", {"t"}, {"Z"});
  b.Output("Y", kFloat, {6});
  b.Output("Z", kFloat, {2, 3});
  auto sp = SpecializeModel(b, {ops::TensorType{DType::kFloat32, {2, 3}}});
  ASSERT_TRUE(sp.ok()) << sp.status().ToString();
  EXPECT_EQ((*sp)->output_buffers.size(), 2u);  // Relu's output and Z
  auto model = CompiledModel::Compile(b.Bytes());
  ASSERT_TRUE(model.ok());
  auto first = (*model)->Run({{"X", F32({2, 3}, {1, -2, 3, -4, 5, -6})}});
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  auto second = (*model)->Run({{"X", F32({2, 3}, {9, 9, 9, 9, 9, 9})}});
  ASSERT_TRUE(second.ok());
  ExpectAllNear(Floats((*first)[0].tensor), {1, 0, 3, 0, 5, 0});
  ExpectAllNear(Floats((*second)[0].tensor), {9, 9, 9, 9, 9, 9});
}

TEST(SpecializeTest, ShapesFromTensorValuesStayDynamic) {
  ModelBuilder b(13);
  b.Input("X", kFloat, {2, 3});
  b.Input("S", kInt64, {2});
  b.Node("Relu", {"X"}, {"r"});
  b.Node("Reshape", {"r", "S"}, {"y"}, "reshape");
  b.Node("Tanh", {"y"}, {"Y"});
  b.Output("Y", kFloat, {-1, -1});
  auto sp = SpecializeModel(b, {ops::TensorType{DType::kFloat32, {2, 3}},
                                ops::TensorType{DType::kInt64, {2}}});
  ASSERT_TRUE(sp.ok()) << sp.status().ToString();
  EXPECT_EQ(OpTypes(**sp), (std::vector<std::string>{"Relu", "Reshape", "Tanh"}));
  EXPECT_FALSE((*sp)->steps[0].dynamic);
  EXPECT_TRUE((*sp)->steps[1].dynamic);
  EXPECT_TRUE((*sp)->steps[2].dynamic);
  EXPECT_EQ((*sp)->stats.dynamic_steps, 2u);
  // The Reshape may alias Relu's arena slot: it lives to the end.
  ASSERT_EQ((*sp)->buffers.size(), 1u);
  EXPECT_EQ((*sp)->buffers[0].last, 2);

  auto model = CompiledModel::Compile(b.Bytes());
  ASSERT_TRUE(model.ok());
  for (auto shape : {std::vector<int64_t>{3, 2}, std::vector<int64_t>{1, 6}}) {
    auto out = (*model)->Run({{"X", F32({2, 3}, {1, -2, 3, -4, 5, -6})}, {"S", I64({2}, shape)}});
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    EXPECT_EQ((*out)[0].tensor.shape(), (Shape{shape[0], shape[1]}));
    ExpectAllNear(Floats((*out)[0].tensor),
                  {std::tanh(1.0f), 0, std::tanh(3.0f), 0, std::tanh(5.0f), 0});
  }
}

TEST(SpecializeTest, RunTimeIndicesAreCheckedOnEveryRun) {
  // Gather with indices from the request: planned once, its values checked
  // by its Compute on every run (out of range is INVALID_ARGUMENT, not a
  // crash), so the runtime need not re-run inference (no recheck).
  ModelBuilder b(13);
  b.Input("I", kInt64, {2});
  b.FloatInit("table", {3, 2}, {0, 1, 10, 11, 20, 21});
  b.Node("Gather", {"table", "I"}, {"Y"}, "lookup");
  b.Output("Y", kFloat, {2, 2});
  auto sp = SpecializeModel(b, {ops::TensorType{DType::kInt64, {2}}});
  ASSERT_TRUE(sp.ok()) << sp.status().ToString();
  ASSERT_EQ((*sp)->steps.size(), 1u);
  EXPECT_FALSE((*sp)->steps[0].recheck);  // values_checked_in_compute
  auto model = CompiledModel::Compile(b.Bytes());
  ASSERT_TRUE(model.ok());
  auto ok = (*model)->Run({{"I", I64({2}, {2, -3})}});
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  ExpectAllNear(Floats((*ok)[0].tensor), {20, 21, 0, 1});
  for (int64_t bad : {int64_t{3}, int64_t{-4}, int64_t{1} << 40}) {
    auto out = (*model)->Run({{"I", I64({2}, {0, bad})}});
    ASSERT_FALSE(out.ok());
    EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument) << out.status().ToString();
    EXPECT_NE(out.status().message().find("lookup"), std::string::npos) << out.status().message();
  }
}

TEST(SpecializeTest, KernelsThatDoNotCheckValuesInComputeAreRechecked) {
  // OneHot's indices come from the request; OneHot does not declare
  // values_checked_in_compute, so its inference re-runs every run.
  ModelBuilder b(13);
  b.Input("I", kInt64, {2});
  b.Int64Init("depth", {}, {3});
  b.FloatInit("values", {2}, {0, 1});
  b.Node("OneHot", {"I", "depth", "values"}, {"Y"}, "onehot");
  b.Output("Y", kFloat, {2, 3});
  auto sp = SpecializeModel(b, {ops::TensorType{DType::kInt64, {2}}});
  ASSERT_TRUE(sp.ok()) << sp.status().ToString();
  ASSERT_EQ((*sp)->steps.size(), 1u);
  EXPECT_TRUE((*sp)->steps[0].recheck);
  auto model = CompiledModel::Compile(b.Bytes());
  ASSERT_TRUE(model.ok());
  auto out = (*model)->Run({{"I", I64({2}, {2, 0})}});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ExpectAllNear(Floats((*out)[0].tensor), {0, 0, 1, 1, 0, 0});
}

TEST(SpecializeTest, SpecialisationErrorsNameTheStep) {
  ModelBuilder b(13);
  b.Input("A", kFloat, {-1});
  b.Input("B", kFloat, {-1});
  b.Node("Add", {"A", "B"}, {"Y"}, "add");
  b.Output("Y", kFloat, {-1});
  auto sp = SpecializeModel(b, {ops::TensorType{DType::kFloat32, {2}},
                                ops::TensorType{DType::kFloat32, {3}}});
  ASSERT_FALSE(sp.ok());
  EXPECT_EQ(sp.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(sp.status().message().find("node 'add' (#0)"), std::string::npos);
}

}  // namespace
}  // namespace orrery::runtime
