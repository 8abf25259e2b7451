// Concat inputs written in place into the Concat's output
// (runtime/specialize.cc AliasConcats): when it applies, what the memory
// plan and the checker see, and that outputs equal the reference executor.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "model_builder.h"
#include "plan_util.h"
#include "runtime/memory_plan.h"
#include "runtime/model.h"
#include "runtime/specialize.h"

namespace orrery::runtime {
namespace {

using testing::ExpectAllNear;
using testing::F32;
using testing::Floats;
using testing::kFloat;
using testing::ModelBuilder;
using testing::OpTypes;
using testing::Ramp;
using testing::Reference;
using testing::SpecializeModel;

struct Variant {
  bool extra_reader = false;  // "a" is also read by another node
  bool concat_is_output = false;
  int64_t axis = 1;
};

// An inception block in miniature: three branches of X [N, C, H, W]
// concatenated along `axis`, then Tanh.
ModelBuilder Inception(const Variant& v) {
  ModelBuilder b(13);
  b.Input("X", kFloat, {-1, -1, -1, -1});
  b.Node("Relu", {"X"}, {"a"});
  auto* pool = b.Node("MaxPool", {"X"}, {"p"});
  ModelBuilder::AttrInts(pool, "kernel_shape", {3, 3});
  ModelBuilder::AttrInts(pool, "pads", {1, 1, 1, 1});
  b.Node("Sigmoid", {"X"}, {"s"});
  ModelBuilder::AttrInt(b.Node("Concat", {"a", "p", "s"}, {v.concat_is_output ? "Y" : "c"}), "axis",
                        v.axis);
  if (!v.concat_is_output) b.Node("Tanh", {"c"}, {"Y"});
  b.Output("Y", kFloat, {-1, -1, -1, -1});
  if (v.extra_reader) {
    b.Node("Neg", {"a"}, {"Z"});
    b.Output("Z", kFloat, {-1, -1, -1, -1});
  }
  return b;
}

// Runs the compiled model and the reference executor on one input.
void ExpectReferenceOutputs(const ModelBuilder& b, const Shape& shape) {
  auto model = CompiledModel::Compile(const_cast<ModelBuilder&>(b).Bytes());
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const Tensor x = F32(shape, Ramp(static_cast<size_t>(NumElements(shape)), 7));
  const std::vector<Tensor> want = Reference(b, {x});
  for (int run = 0; run < 2; ++run) {  // the second run reuses the arena
    auto out = (*model)->Run({{"X", x}});
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    ASSERT_EQ(out->size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_EQ((*out)[i].tensor.shape(), want[i].shape());
      ExpectAllNear(Floats((*out)[i].tensor), Floats(want[i]), 0.0f);
    }
  }
}

Result<std::shared_ptr<SpecializedPlan>> Plan(const Variant& v, const Shape& shape) {
  return SpecializeModel(Inception(v), {ops::TensorType{DType::kFloat32, shape}});
}

TEST(ConcatAliasTest, ChannelConcatAtBatchOneIsWrittenInPlace) {
  const Shape shape{1, 4, 8, 8};  // 1 KiB per branch: 64-byte aligned slices
  auto sp = Plan({}, shape);
  ASSERT_TRUE(sp.ok()) << sp.status().ToString();
  const SpecializedPlan& p = **sp;
  EXPECT_EQ(OpTypes(p), (std::vector<std::string>{"Relu", "MaxPool", "Sigmoid", "Tanh"}));
  EXPECT_EQ(p.stats.view_nodes, 1u);
  ASSERT_TRUE(CheckMemoryPlan(p.buffers, p.memory).ok())
      << CheckMemoryPlan(p.buffers, p.memory).ToString();
  // The branches sit back to back in the Concat's buffer, in input order,
  // which lives from the first branch's step to Tanh.
  int parent = -1;
  std::vector<int64_t> offsets;
  for (size_t b = 0; b < p.buffers.size(); ++b) {
    if (p.buffers[b].parent < 0) continue;
    parent = p.buffers[b].parent;
    offsets.push_back(p.buffers[b].parent_offset);
    EXPECT_EQ(p.entries[static_cast<size_t>(p.buffer_entries[b])].offset,
              p.memory.offsets[static_cast<size_t>(parent)] + p.buffers[b].parent_offset);
  }
  ASSERT_GE(parent, 0);
  std::sort(offsets.begin(), offsets.end());
  EXPECT_EQ(offsets, (std::vector<int64_t>{0, 1024, 2048}));
  EXPECT_EQ(p.buffers[static_cast<size_t>(parent)].bytes, 3 * 1024);
  EXPECT_EQ(p.buffers[static_cast<size_t>(parent)].first, 0);
  EXPECT_EQ(p.buffers[static_cast<size_t>(parent)].last, 3);
  ExpectReferenceOutputs(Inception({}), shape);
}

TEST(ConcatAliasTest, UnitDimsBeforeAnyAxisAlsoQualify) {
  // [1, 1, 16, 8] along axis 2 (or -2): still back to back.
  for (int64_t axis : {2, -2}) {
    auto sp = Plan({.axis = axis}, {1, 1, 16, 8});
    ASSERT_TRUE(sp.ok()) << sp.status().ToString();
    EXPECT_EQ((*sp)->stats.view_nodes, 1u) << axis;
    EXPECT_TRUE(CheckMemoryPlan((*sp)->buffers, (*sp)->memory).ok());
    ExpectReferenceOutputs(Inception({.axis = axis}), {1, 1, 16, 8});
  }
}

TEST(ConcatAliasTest, StaysAStepWhenSlicesAreNotPlain) {
  struct Case {
    const char* what;
    Variant v;
    Shape shape;
  };
  const Case cases[] = {
      {"batch 2: interleaved slices", {}, {2, 4, 8, 8}},
      {"an input with another reader", {.extra_reader = true}, {1, 4, 8, 8}},
      {"the Concat is a graph output", {.concat_is_output = true}, {1, 4, 8, 8}},
      {"slices not 64-byte aligned", {}, {1, 1, 3, 3}},
      {"axis 2 after a channel dim of 4", {.axis = 2}, {1, 4, 8, 8}},
  };
  for (const Case& c : cases) {
    auto sp = Plan(c.v, c.shape);
    ASSERT_TRUE(sp.ok()) << c.what << ": " << sp.status().ToString();
    const std::vector<std::string> ops = OpTypes(**sp);
    EXPECT_NE(std::find(ops.begin(), ops.end(), "Concat"), ops.end()) << c.what;
    EXPECT_EQ((*sp)->stats.view_nodes, 0u) << c.what;
    for (const BufferRequest& r : (*sp)->buffers) EXPECT_LT(r.parent, 0) << c.what;
    EXPECT_TRUE(CheckMemoryPlan((*sp)->buffers, (*sp)->memory).ok()) << c.what;
    ExpectReferenceOutputs(Inception(c.v), c.shape);
  }
}

}  // namespace
}  // namespace orrery::runtime
