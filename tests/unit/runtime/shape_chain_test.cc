// End-to-end: exported-model shape arithmetic (Shape -> Gather -> Unsqueeze
// -> Concat -> Reshape) whose values are only known at run time, plus
// Transpose / Slice / Resize in the same graph, through CompiledModel.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>

#include "model_builder.h"
#include "runtime/model.h"

namespace orrery {
namespace {

using testing::kFloat;
using testing::kInt64;
using testing::ModelBuilder;

Tensor Floats(Shape shape) {
  Tensor t(DType::kFloat32, std::move(shape));
  for (int64_t i = 0; i < t.num_elements(); ++i) t.data<float>()[i] = static_cast<float>(i);
  return t;
}

// x [N, 3, 4] -> reshape to [N, 12] via computed shape -> transpose -> slice.
std::string ShapeChainModel() {
  ModelBuilder b(13);
  b.Input("x", kFloat, {-1, 3, 4});
  b.Int64Init("zero", {}, {0});
  b.Int64Init("axes0", {1}, {0});
  b.Int64Init("twelve", {1}, {12});
  b.Int64Init("starts", {1}, {1});
  b.Int64Init("ends", {1}, {std::numeric_limits<int64_t>::max()});
  b.Int64Init("slice_axes", {1}, {1});
  b.Node("Shape", {"x"}, {"shape"});
  b.Node("Gather", {"shape", "zero"}, {"n"});
  b.Node("Unsqueeze", {"n", "axes0"}, {"n1"});
  ModelBuilder::AttrInt(b.Node("Concat", {"n1", "twelve"}, {"target"}), "axis", 0);
  b.Node("Reshape", {"x", "target"}, {"flat"});
  b.Node("Transpose", {"flat"}, {"t"});
  b.Node("Slice", {"t", "starts", "ends", "slice_axes"}, {"y"});
  b.Output("y", kFloat, {12, -1});
  return b.Bytes();
}

TEST(ShapeChainTest, RunTimeShapeValuesDriveReshape) {
  auto model = CompiledModel::Compile(ShapeChainModel());
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  for (int64_t n : {2, 5}) {
    auto out = (*model)->Run({NamedTensor{"x", Floats({n, 3, 4})}});
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    const Tensor& y = (*out)[0].tensor;
    ASSERT_EQ(y.shape(), (Shape{12, n - 1}));
    // y[i][j] = flat[j + 1][i] = (j + 1) * 12 + i
    for (int64_t i = 0; i < 12; ++i) {
      for (int64_t j = 0; j < n - 1; ++j) {
        EXPECT_EQ(y.data<float>()[i * (n - 1) + j], static_cast<float>((j + 1) * 12 + i));
      }
    }
  }
}

TEST(ShapeChainTest, ResizeWithConstantScalesAndUpsampleOpset9) {
  ModelBuilder b(13);
  b.Input("x", kFloat, {1, 1, 2, 2});
  b.FloatInit("scales", {4}, {1, 1, 2, 2});
  b.FloatInit("roi", {0}, {});
  auto* n = b.Node("Resize", {"x", "roi", "scales"}, {"y"});
  auto* a = n->add_attribute();
  a->set_name("mode");
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s("nearest");
  b.Output("y", kFloat, {1, 1, 4, 4});
  auto model = CompiledModel::Compile(b.Bytes());
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  auto out = (*model)->Run({NamedTensor{"x", Floats({1, 1, 2, 2})}});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  const Tensor& y = (*out)[0].tensor;
  ASSERT_EQ(y.shape(), (Shape{1, 1, 4, 4}));
  const float want[] = {0, 0, 1, 1, 0, 0, 1, 1, 2, 2, 3, 3, 2, 2, 3, 3};
  for (int i = 0; i < 16; ++i) EXPECT_EQ(y.data<float>()[i], want[i]) << i;
}

TEST(ShapeChainTest, HostileConstantShapesAreRejectedNotAllocated) {
  ModelBuilder b(13);
  b.Input("x", kFloat, {1});
  b.Int64Init("huge", {3}, {int64_t{1} << 30, int64_t{1} << 30, int64_t{1} << 30});
  b.Node("Expand", {"x", "huge"}, {"y"});
  b.Output("y", kFloat, {-1, -1, -1});
  auto model = CompiledModel::Compile(b.Bytes());
  if (model.ok()) {
    auto out = (*model)->Run({NamedTensor{"x", Floats({1})}});
    EXPECT_FALSE(out.ok());
  } else {
    EXPECT_NE(model.status().code(), StatusCode::kOk);
  }
}

}  // namespace
}  // namespace orrery
