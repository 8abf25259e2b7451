// Hostile models at import: every malformed construct is INVALID_ARGUMENT
// naming the problem, decided before anything sized by the file is allocated.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include "runtime/model.h"
#include "runtime/tensor_proto.h"
#include "tests/unit/runtime/model_builder.h"

namespace orrery {
namespace {

using testing::ModelBuilder;
constexpr int kFloat = onnx::TensorProto::FLOAT;

Status CompileStatus(const ModelBuilder& b) { return CompiledModel::Compile(b.Bytes()).status(); }

void ExpectInvalid(const Status& st, const std::string& part) {
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
  EXPECT_NE(st.message().find(part), std::string::npos) << st.message();
}

TEST(HostileImportTest, ExternalDataIsNeverFollowed) {
  // Even with the external_data entries alone (no data_location) and a path
  // that leaves the directory.
  ModelBuilder b(13);
  b.Input("X", kFloat, {2});
  onnx::TensorProto* w = b.graph()->add_initializer();
  w->set_name("W");
  w->set_data_type(onnx::TensorProto::FLOAT);
  w->add_dims(2);
  auto* e = w->add_external_data();
  e->set_key("location");
  e->set_value("../../../../etc/passwd");
  b.Node("Add", {"X", "W"}, {"Y"});
  b.Output("Y", kFloat, {2});
  ExpectInvalid(CompileStatus(b), "external data");
}

TEST(HostileImportTest, CycleThroughThreeNodes) {
  ModelBuilder b(13);
  b.Input("X", kFloat, {1});
  b.Node("Add", {"X", "c"}, {"a"}, "n1");
  b.Node("Relu", {"a"}, {"b"}, "n2");
  b.Node("Relu", {"b"}, {"c"}, "n3");
  b.Output("c", kFloat, {1});
  ExpectInvalid(CompileStatus(b), "cycle");
}

TEST(HostileImportTest, SelfLoop) {
  ModelBuilder b(13);
  b.Input("X", kFloat, {1});
  b.Node("Add", {"X", "a"}, {"a"}, "loop");
  b.Output("a", kFloat, {1});
  EXPECT_EQ(CompileStatus(b).code(), StatusCode::kInvalidArgument);
}

TEST(HostileImportTest, DanglingInput) {
  ModelBuilder b(13);
  b.Input("X", kFloat, {1});
  b.Node("Add", {"X", "ghost"}, {"Y"}, "adder");
  b.Output("Y", kFloat, {1});
  ExpectInvalid(CompileStatus(b), "'ghost'");
}

TEST(HostileImportTest, DuplicateNodeOutputName) {
  ModelBuilder b(13);
  b.Input("X", kFloat, {1});
  b.Node("Relu", {"X"}, {"Y"}, "r1");
  b.Node("Relu", {"X"}, {"Y"}, "r2");
  b.Output("Y", kFloat, {1});
  ExpectInvalid(CompileStatus(b), "'Y'");
}

TEST(HostileImportTest, DuplicateGraphOutputName) {
  ModelBuilder b(13);
  b.Input("X", kFloat, {1});
  b.Node("Relu", {"X"}, {"Y"}, "r");
  b.Output("Y", kFloat, {1});
  b.Output("Y", kFloat, {1});
  ExpectInvalid(CompileStatus(b), "listed twice");
}

TEST(HostileImportTest, AbsurdDeclaredDims) {
  ModelBuilder b(13);
  b.Input("X", kFloat, {int64_t{1} << 40, int64_t{1} << 40});
  b.Node("Relu", {"X"}, {"Y"});
  b.Output("Y", kFloat, {-1, -1});
  ExpectInvalid(CompileStatus(b), "absurd dims");
}

TEST(HostileImportTest, AbsurdInitializerDimsAreInvalidNotAllocated) {
  onnx::TensorProto huge;
  huge.set_name("big");
  huge.set_data_type(onnx::TensorProto::FLOAT);
  huge.add_dims(int64_t{1} << 62);
  huge.add_dims(4);  // overflows int64
  ExpectInvalid(TensorFromProto(huge).status(), "absurd dims");
}

TEST(HostileImportTest, HugeDimsBesideAZeroDim) {
  // Zero elements, but the other dims overflow int64 when multiplied (found
  // by the import fuzzer: NumElements overflowed later).
  onnx::TensorProto t;
  t.set_name("z");
  t.set_data_type(onnx::TensorProto::UINT64);
  t.add_dims(int64_t{1} << 62);
  t.add_dims(114);
  t.add_dims(0);
  ExpectInvalid(TensorFromProto(t).status(), "absurd dims");
}

TEST(HostileImportTest, InitializerDataThatDisagreesWithDims) {
  // 2^30 floats (4 GiB) declared, 1 value present: refused from the count,
  // before a 4 GiB buffer is allocated.
  onnx::TensorProto typed;
  typed.set_name("w");
  typed.set_data_type(onnx::TensorProto::FLOAT);
  typed.add_dims(int64_t{1} << 30);
  typed.add_float_data(1.0f);
  ExpectInvalid(TensorFromProto(typed).status(), "float_data has 1 values");

  onnx::TensorProto raw;
  raw.set_name("r");
  raw.set_data_type(onnx::TensorProto::FLOAT);
  raw.add_dims(int64_t{1} << 30);
  raw.set_raw_data(std::string(8, '\0'));
  ExpectInvalid(TensorFromProto(raw).status(), "raw_data has 8 bytes");

  // And inside a model: the initializer is named.
  ModelBuilder b(13);
  b.Input("X", kFloat, {4});
  b.FloatInit("W", {4}, {1, 2, 3});
  b.Node("Add", {"X", "W"}, {"Y"});
  b.Output("Y", kFloat, {4});
  ExpectInvalid(CompileStatus(b), "'W'");
}

}  // namespace
}  // namespace orrery
