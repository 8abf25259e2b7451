#include "runtime/plan.h"

#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cstring>

#include "model_builder.h"
#include "runtime/graph.h"

namespace orrery::runtime {
namespace {

using orrery::testing::kFloat;
using orrery::testing::ModelBuilder;

Result<Plan> Build(const ModelBuilder& b, Graph* graph_out = nullptr) {
  ORRERY_ASSIGN_OR_RETURN(Graph g, ImportModel(const_cast<ModelBuilder&>(b).model(),
                                               ops::OpRegistry::Global()));
  ORRERY_ASSIGN_OR_RETURN(Plan p, CompilePlan(g, ops::OpRegistry::Global()));
  if (graph_out != nullptr) *graph_out = std::move(g);
  return p;
}

bool Releases(const Step& s, int slot) {
  return std::find(s.release.begin(), s.release.end(), slot) != s.release.end();
}

TEST(PlanTest, LivenessReleasesIntermediatesAfterLastUse) {
  ModelBuilder b(13);
  b.Input("X", kFloat, {4});
  b.Node("Relu", {"X"}, {"a"});
  b.Node("Tanh", {"a"}, {"b"});
  b.Node("Add", {"a", "b"}, {"c"});
  b.Node("Sigmoid", {"c"}, {"Y"});
  b.Output("Y", kFloat, {4});
  Graph g;
  auto plan = Build(b, &g);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  ASSERT_EQ(plan->steps.size(), 4u);
  const int x = g.FindValue("X"), a = g.FindValue("a"), bb = g.FindValue("b"),
            c = g.FindValue("c"), y = g.FindValue("Y");
  EXPECT_TRUE(Releases(plan->steps[0], x));   // X last read by Relu
  EXPECT_FALSE(Releases(plan->steps[1], a));  // a still needed by Add
  EXPECT_TRUE(Releases(plan->steps[2], a));
  EXPECT_TRUE(Releases(plan->steps[2], bb));
  EXPECT_TRUE(Releases(plan->steps[3], c));
  for (const Step& s : plan->steps) EXPECT_FALSE(Releases(s, y));  // graph output kept
  for (const Step& s : plan->steps) {
    EXPECT_NE(s.infer, nullptr);
    EXPECT_NE(s.compute, nullptr);
  }
}

TEST(PlanTest, ConstantsAreFoldedAndTypesInferred) {
  ModelBuilder b(13);
  b.Input("X", kFloat, {-1, 4});
  auto* c = b.Node("Constant", {}, {"shape"});
  auto* attr = c->add_attribute();
  attr->set_name("value_ints");
  attr->set_type(onnx::AttributeProto::INTS);
  attr->add_ints(-1);
  attr->add_ints(2);
  b.Node("Reshape", {"X", "shape"}, {"Y"});
  b.Output("Y", kFloat, {-1, 2});
  Graph g;
  auto plan = Build(b, &g);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  ASSERT_EQ(plan->steps.size(), 1u);  // only Reshape remains
  EXPECT_EQ(plan->steps[0].op_type, "Reshape");
  auto types = InferPlanTypes(*plan, {ops::TensorType{DType::kFloat32, {3, 4}}});
  ASSERT_TRUE(types.ok()) << types.status().ToString();
  const auto& yt = (*types)[static_cast<size_t>(g.FindValue("Y"))];
  ASSERT_TRUE(yt.has_value());
  EXPECT_EQ(yt->shape, (Shape{6, 2}));
}

TEST(PlanTest, TopologicalOrderSortsAndDetectsCycles) {
  std::vector<Value> values(3);
  values[0].name = "in";
  values[1].name = "mid";
  values[1].producer = 1;
  values[2].name = "out";
  values[2].producer = 0;
  std::vector<Node> nodes(2);
  nodes[0].name = "second";
  nodes[0].inputs = {1};
  nodes[0].outputs = {2};
  nodes[1].name = "first";
  nodes[1].index = 1;
  nodes[1].inputs = {0};
  nodes[1].outputs = {1};
  auto order = TopologicalOrder(nodes, values);
  ASSERT_TRUE(order.ok());
  EXPECT_EQ(*order, (std::vector<size_t>{1, 0}));
  nodes[1].inputs = {2};  // first reads out, produced by second: a cycle
  order = TopologicalOrder(nodes, values);
  EXPECT_EQ(order.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(order.status().message().find("cycle"), std::string::npos);
}

TEST(PlanTest, ExecutePlanChecksInputCount) {
  ModelBuilder b(13);
  b.Input("X", kFloat, {1});
  b.Node("Relu", {"X"}, {"Y"});
  b.Output("Y", kFloat, {1});
  auto plan = Build(b);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(ExecutePlan(*plan, {}).status().code(), StatusCode::kInvalidArgument);
  Tensor x(DType::kFloat32, {1});
  x.data<float>()[0] = -3;
  auto out = ExecutePlan(*plan, {x});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].data<float>()[0], 0.0f);
}

}  // namespace
}  // namespace orrery::runtime
