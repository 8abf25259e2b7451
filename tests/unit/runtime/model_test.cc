#include "runtime/model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <algorithm>
#include <cstring>
#include <thread>

#include "model_builder.h"

namespace orrery {
namespace {

using testing::kFloat;
using testing::kInt64;
using testing::ModelBuilder;
using testing::TinyMlp;

Tensor F32(Shape shape, const std::vector<float>& v) {
  Tensor t(DType::kFloat32, std::move(shape));
  EXPECT_EQ(static_cast<size_t>(t.num_elements()), v.size());
  if (!v.empty()) std::memcpy(t.raw_data(), v.data(), v.size() * sizeof(float));
  return t;
}

Tensor I64(Shape shape, const std::vector<int64_t>& v) {
  Tensor t(DType::kInt64, std::move(shape));
  EXPECT_EQ(static_cast<size_t>(t.num_elements()), v.size());
  if (!v.empty()) std::memcpy(t.raw_data(), v.data(), v.size() * sizeof(int64_t));
  return t;
}

std::vector<float> Floats(const Tensor& t) {
  return std::vector<float>(t.data<float>(), t.data<float>() + t.num_elements());
}

void ExpectNear(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5f) << "at " << i;
}

std::unique_ptr<CompiledModel> MustCompile(const ModelBuilder& b) {
  auto m = CompiledModel::Compile(b.Bytes());
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return m.ok() ? std::move(m).value() : nullptr;
}

Status CompileError(const ModelBuilder& b) { return CompiledModel::Compile(b.Bytes()).status(); }

bool Contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

TEST(ModelTest, MlpEndToEnd) {
  auto model = MustCompile(TinyMlp());
  ASSERT_NE(model, nullptr);
  const ModelSignature& sig = model->signature();
  ASSERT_EQ(sig.inputs.size(), 1u);  // initializers are not inputs
  EXPECT_EQ(sig.inputs[0].name, "X");
  EXPECT_EQ(sig.inputs[0].dtype, DType::kFloat32);
  EXPECT_EQ(sig.inputs[0].shape, (Shape{-1, 2}));
  ASSERT_EQ(sig.outputs.size(), 1u);
  EXPECT_EQ(sig.outputs[0].name, "Y");
  EXPECT_EQ(sig.opset, 13);
  EXPECT_EQ(sig.node_count, 4u);

  auto out = model->Run({{"X", F32({2, 2}, {1, 1, 0, -1})}});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_EQ(out->size(), 1u);
  EXPECT_EQ((*out)[0].name, "Y");
  EXPECT_EQ((*out)[0].tensor.shape(), (Shape{2, 2}));
  ExpectNear(Floats((*out)[0].tensor), {0.9820138f, 0.0179862f, 0.5f, 0.5f});

  // Dynamic batch: one row.
  out = model->Run({{"X", F32({1, 2}, {0, -1})}});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ExpectNear(Floats((*out)[0].tensor), {0.5f, 0.5f});
}

TEST(ModelTest, RunIsThreadSafe) {
  auto model = MustCompile(TinyMlp());
  ASSERT_NE(model, nullptr);
  std::vector<std::vector<float>> results(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        auto out = model->Run({{"X", F32({2, 2}, {1, 1, 0, -1})}});
        if (out.ok()) results[t] = Floats((*out)[0].tensor);
      }
    });
  }
  for (auto& th : threads) th.join();
  for (const auto& r : results) ExpectNear(r, {0.9820138f, 0.0179862f, 0.5f, 0.5f});
}

TEST(ModelTest, MatMulBatchedBroadcast) {
  ModelBuilder b(13);
  b.Input("A", kFloat, {2, 1, 2, 3});
  std::vector<float> bv(3 * 3 * 2);
  for (size_t i = 0; i < bv.size(); ++i) bv[i] = static_cast<float>(i) - 5.0f;
  b.FloatInit("B", {3, 3, 2}, bv);
  b.Node("MatMul", {"A", "B"}, {"Y"});
  b.Output("Y", kFloat, {2, 3, 2, 2});
  auto model = MustCompile(b);
  ASSERT_NE(model, nullptr);
  std::vector<float> av(12);
  for (size_t i = 0; i < av.size(); ++i) av[i] = 0.5f * static_cast<float>(i);
  auto out = model->Run({{"A", F32({2, 1, 2, 3}, av)}});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_EQ((*out)[0].tensor.shape(), (Shape{2, 3, 2, 2}));
  std::vector<float> want;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int m = 0; m < 2; ++m)
        for (int n = 0; n < 2; ++n) {
          float s = 0;
          for (int k = 0; k < 3; ++k) s += av[(i * 2 + m) * 3 + k] * bv[(j * 3 + k) * 2 + n];
          want.push_back(s);
        }
  ExpectNear(Floats((*out)[0].tensor), want);
}

TEST(ModelTest, ReshapeWithConstantShapeZeroAndMinusOne) {
  ModelBuilder b(14);
  b.Input("X", kFloat, {2, 3, 4});
  auto* c = b.Node("Constant", {}, {"shape"}, "shape_const");
  onnx::TensorProto* t = ModelBuilder::AttrTensor(c, "value");
  t->set_data_type(onnx::TensorProto::INT64);
  t->add_dims(2);
  t->add_int64_data(0);
  t->add_int64_data(-1);
  b.Node("Reshape", {"X", "shape"}, {"Y"});
  b.Int64Init("shape2", {3}, {-1, 2, 2});
  b.Node("Reshape", {"X", "shape2"}, {"Z"});
  b.Output("Y", kFloat, {2, 12});
  b.Output("Z", kFloat, {6, 2, 2});
  auto model = MustCompile(b);
  ASSERT_NE(model, nullptr);
  std::vector<float> xv(24);
  for (size_t i = 0; i < xv.size(); ++i) xv[i] = static_cast<float>(i);
  auto out = model->Run({{"X", F32({2, 3, 4}, xv)}});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].tensor.shape(), (Shape{2, 12}));
  EXPECT_EQ((*out)[1].tensor.shape(), (Shape{6, 2, 2}));
  EXPECT_EQ(Floats((*out)[0].tensor), xv);
  EXPECT_EQ(Floats((*out)[1].tensor), xv);
}

ModelBuilder SoftmaxModel(int64_t opset) {
  ModelBuilder b(opset);
  b.Input("X", kFloat, {1, 2, 2});
  b.Node("Softmax", {"X"}, {"Y"});
  b.Output("Y", kFloat, {1, 2, 2});
  return b;
}

TEST(ModelTest, SoftmaxOpset11VersusOpset13) {
  auto m11 = MustCompile(SoftmaxModel(11));
  auto m13 = MustCompile(SoftmaxModel(13));
  ASSERT_NE(m11, nullptr);
  ASSERT_NE(m13, nullptr);
  Tensor x = F32({1, 2, 2}, {1, 2, 3, 4});
  auto o11 = m11->Run({{"X", x}});
  auto o13 = m13->Run({{"X", x}});
  ASSERT_TRUE(o11.ok()) << o11.status().ToString();
  ASSERT_TRUE(o13.ok()) << o13.status().ToString();
  ExpectNear(Floats((*o11)[0].tensor), {0.0320586f, 0.0871443f, 0.2368828f, 0.6439142f});
  ExpectNear(Floats((*o13)[0].tensor), {0.2689414f, 0.7310586f, 0.2689414f, 0.7310586f});
}

TEST(ModelTest, Int64ArithmeticAndFlattenIdentity) {
  ModelBuilder b(13);
  b.Input("I", kInt64, {2, 2});
  b.Int64Init("K", {2}, {10, 20});
  b.Node("Add", {"I", "K"}, {"s"});
  b.Node("Flatten", {"s"}, {"f"});
  b.Node("Identity", {"f"}, {"Y"});
  b.Output("Y", kInt64, {2, 2});
  auto model = MustCompile(b);
  ASSERT_NE(model, nullptr);
  auto out = model->Run({{"I", I64({2, 2}, {1, 2, 3, 4})}});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  const Tensor& y = (*out)[0].tensor;
  ASSERT_EQ(y.dtype(), DType::kInt64);
  EXPECT_EQ(std::vector<int64_t>(y.data<int64_t>(), y.data<int64_t>() + 4),
            (std::vector<int64_t>{11, 22, 13, 24}));
}

TEST(ModelTest, NewerOpsetThanCheckerKnowsIsAccepted) {
  ModelBuilder b(18);
  b.Input("X", kFloat, {3});
  b.Node("Relu", {"X"}, {"Y"});
  b.OutputNoShape("Y", 0);  // no declared type: inferred
  auto model = MustCompile(b);
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(model->signature().opset, 18);
  EXPECT_EQ(model->signature().outputs[0].dtype, DType::kFloat32);
  EXPECT_EQ(model->signature().outputs[0].shape, Shape{3});
  auto out = model->Run({{"X", F32({3}, {-1, 0, 1})}});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ExpectNear(Floats((*out)[0].tensor), {0, 0, 1});
}

// ---------------- Reject paths at compile time ----------------

TEST(ModelRejectTest, UnsupportedOpNamesNodeAndOp) {
  ModelBuilder b(13);
  b.Input("X", kFloat, {1, 3, 8, 8});
  b.FloatInit("W", {4, 3, 3, 3}, std::vector<float>(108, 0.1f));
  b.Node("Relu", {"X"}, {"r"}, "relu0");
  // Ops Orrery has no kernel for (string and text ops).
  b.Node("TfIdfVectorizer", {"r", "W"}, {"c"}, "tfidf1");
  b.Node("StringNormalizer", {"c"}, {"Y"});
  b.Output("Y", kFloat, {-1, -1});
  Status st = CompileError(b);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(st.message(), "node 'tfidf1' (#1): unsupported op 'TfIdfVectorizer'"))
      << st.message();
  EXPECT_TRUE(Contains(st.message(), "StringNormalizer")) << st.message();

  ModelBuilder u(13);
  u.Input("X", kFloat, {1});
  u.Node("Foo", {"X"}, {"Y"});
  u.Output("Y", kFloat, {1});
  st = CompileError(u);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(st.message(), "node #0: unsupported op 'Foo'")) << st.message();
}

TEST(ModelRejectTest, NonDefaultDomain) {
  ModelBuilder b(13);
  auto* ms = b.model().add_opset_import();
  ms->set_domain("com.microsoft");
  ms->set_version(1);
  b.Input("X", kFloat, {1});
  b.Node("Relu", {"X"}, {"Y"}, "fused")->set_domain("com.microsoft");
  b.Output("Y", kFloat, {1});
  Status st = CompileError(b);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(st.message(), "node 'fused' (#0)")) << st.message();
  EXPECT_TRUE(Contains(st.message(), "com.microsoft")) << st.message();
}

TEST(ModelRejectTest, ControlFlow) {
  ModelBuilder b(13);
  b.Input("cond", onnx::TensorProto::BOOL, {});
  auto* n = b.Node("If", {"cond"}, {"Y"}, "branch");
  for (const char* name : {"then_branch", "else_branch"}) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::GRAPH);
    a->mutable_g()->set_name(name);
  }
  b.Output("Y", kFloat, {1});
  Status st = CompileError(b);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(st.message(), "control flow not supported")) << st.message();
  EXPECT_TRUE(Contains(st.message(), "node 'branch' (#0)")) << st.message();
}

TEST(ModelRejectTest, ExternalDataInitializer) {
  ModelBuilder b(13);
  b.Input("X", kFloat, {2});
  onnx::TensorProto* w = b.graph()->add_initializer();
  w->set_name("W");
  w->set_data_type(onnx::TensorProto::FLOAT);
  w->add_dims(2);
  w->set_data_location(onnx::TensorProto::EXTERNAL);
  auto* e = w->add_external_data();
  e->set_key("location");
  e->set_value("weights.bin");
  b.Node("Add", {"X", "W"}, {"Y"});
  b.Output("Y", kFloat, {2});
  Status st = CompileError(b);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(st.message(), "external data")) << st.message();
  EXPECT_TRUE(Contains(st.message(), "'W'")) << st.message();
}

TEST(ModelRejectTest, OpsetTooOldOrTooNew) {
  Status st = CompileError(SoftmaxModel(6));
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(st.message(), "opset 6")) << st.message();
  st = CompileError(SoftmaxModel(99));
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(st.message(), "opset 99")) << st.message();
}

TEST(ModelRejectTest, GarbageBytes) {
  for (std::string bytes : {std::string("this is not an onnx model \xff\xfe\x01"), std::string()}) {
    auto m = CompiledModel::Compile(bytes);
    EXPECT_EQ(m.status().code(), StatusCode::kInvalidArgument);
  }
  // Truncated valid model.
  std::string good = TinyMlp().Bytes();
  auto m = CompiledModel::Compile(std::string_view(good).substr(0, good.size() / 2));
  EXPECT_EQ(m.status().code(), StatusCode::kInvalidArgument);
}

TEST(ModelRejectTest, Cycle) {
  ModelBuilder b(13);
  b.Input("X", kFloat, {1});
  b.Node("Add", {"X", "b"}, {"a"}, "first");
  b.Node("Relu", {"a"}, {"b"}, "second");
  b.Output("b", kFloat, {1});
  Status st = CompileError(b);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(st.message(), "cycle")) << st.message();
}

TEST(ModelRejectTest, UndefinedInputAndDuplicateOutput) {
  ModelBuilder b(13);
  b.Input("X", kFloat, {1});
  b.Node("Relu", {"nope"}, {"Y"}, "r");
  b.Output("Y", kFloat, {1});
  Status st = CompileError(b);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(st.message(), "'nope'")) << st.message();

  ModelBuilder d(13);
  d.Input("X", kFloat, {1});
  d.Node("Relu", {"X"}, {"Y"});
  d.Node("Tanh", {"X"}, {"Y"}, "t");
  d.Output("Y", kFloat, {1});
  st = CompileError(d);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(st.message(), "'Y'")) << st.message();
}

TEST(ModelRejectTest, InitializerSizeMismatch) {
  ModelBuilder b(13);
  b.Input("X", kFloat, {4});
  onnx::TensorProto* w = b.FloatInit("W", {4}, {1, 2, 3});  // 12 bytes for 4 floats
  (void)w;
  b.Node("Add", {"X", "W"}, {"Y"});
  b.Output("Y", kFloat, {4});
  Status st = CompileError(b);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(st.message(), "initializer 'W'")) << st.message();
}

TEST(ModelRejectTest, StaticShapeErrorsAreFoundAtCompile) {
  ModelBuilder b(13);
  b.Input("X", kFloat, {2, 3});
  b.FloatInit("W", {4, 5}, std::vector<float>(20, 1));
  b.Node("Gemm", {"X", "W"}, {"Y"}, "fc");
  b.Output("Y", kFloat, {2, 5});
  Status st = CompileError(b);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(st.message(), "node 'fc' (#0)")) << st.message();
  EXPECT_TRUE(Contains(st.message(), "inner dimensions")) << st.message();
}

TEST(ModelRejectTest, WrongArity) {
  ModelBuilder b(13);
  b.Input("X", kFloat, {2});
  b.Node("Add", {"X"}, {"Y"}, "half_add");
  b.Output("Y", kFloat, {2});
  Status st = CompileError(b);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(st.message(), "node 'half_add' (#0)")) << st.message();
}

// ---------------- Reject paths at run time ----------------

TEST(ModelRunTest, InputValidation) {
  auto model = MustCompile(TinyMlp());
  ASSERT_NE(model, nullptr);
  struct Case {
    std::vector<NamedTensor> inputs;
    std::vector<std::string> parts;
  };
  std::vector<Case> cases = {
      {{}, {"missing input 'X'"}},
      {{{"X", F32({1, 2}, {0, 0})}, {"Z", F32({1}, {0})}}, {"unknown input 'Z'"}},
      {{{"X", F32({1, 2}, {0, 0})}, {"X", F32({1, 2}, {0, 0})}}, {"'X'", "more than once"}},
      {{{"X", I64({1, 2}, {0, 0})}}, {"'X'", "float32", "int64"}},
      {{{"X", F32({2}, {0, 0})}}, {"'X'", "rank 2", "rank 1"}},
      {{{"X", F32({1, 3}, {0, 0, 0})}}, {"'X'", "dim 1 expected 2, got 3"}},
      {{{"X", Tensor()}}, {"'X'"}},
  };
  for (const Case& c : cases) {
    auto out = model->Run(c.inputs);
    ASSERT_FALSE(out.ok());
    EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
    for (const std::string& p : c.parts) {
      EXPECT_TRUE(Contains(out.status().message(), p)) << out.status().message();
    }
  }
}

TEST(ModelRunTest, HostileReshapeShapeFromInput) {
  ModelBuilder b(13);
  b.Input("X", kFloat, {2, 3});
  b.Input("S", kInt64, {-1});
  b.Node("Reshape", {"X", "S"}, {"Y"}, "reshape");
  b.Output("Y", kFloat, {-1, -1});
  auto model = MustCompile(b);
  ASSERT_NE(model, nullptr);
  const Tensor x = F32({2, 3}, {1, 2, 3, 4, 5, 6});
  auto ok = model->Run({{"X", x}, {"S", I64({2}, {3, -1})}});
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ((*ok)[0].tensor.shape(), (Shape{3, 2}));
  const int64_t big = int64_t{1} << 40;
  for (const auto& s : std::vector<std::vector<int64_t>>{
           {big, big}, {-5, 1}, {0, 0, 0, 0}, {7}, {-1, -1}}) {
    auto out = model->Run({{"X", x}, {"S", I64({static_cast<int64_t>(s.size())}, s)}});
    ASSERT_FALSE(out.ok());
    EXPECT_TRUE(out.status().code() == StatusCode::kInvalidArgument ||
                out.status().code() == StatusCode::kResourceExhausted)
        << out.status().ToString();
    EXPECT_TRUE(Contains(out.status().message(), "node 'reshape' (#0)")) << out.status().message();
  }
}

TEST(ModelRunTest, BroadcastMismatchAtRunTimeNamesNode) {
  ModelBuilder b(13);
  b.Input("A", kFloat, {-1});
  b.Input("B", kFloat, {-1});
  b.Node("Add", {"A", "B"}, {"Y"}, "add");
  b.Output("Y", kFloat, {-1});
  auto model = MustCompile(b);
  ASSERT_NE(model, nullptr);
  auto out = model->Run({{"A", F32({2}, {1, 2})}, {"B", F32({3}, {1, 2, 3})}});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(out.status().message(), "node 'add' (#0)")) << out.status().message();
}

TEST(ModelRunTest, GraphOutputMayBeAnInputOrInitializer) {
  ModelBuilder b(13);
  b.Input("X", kFloat, {2});
  b.FloatInit("C", {1}, {7});
  b.Node("Relu", {"X"}, {"R"});
  b.Output("R", kFloat, {2});
  b.Output("X", kFloat, {2});
  b.Output("C", kFloat, {1});
  auto model = MustCompile(b);
  ASSERT_NE(model, nullptr);
  auto out = model->Run({{"X", F32({2}, {-1, 1})}});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_EQ(out->size(), 3u);
  ExpectNear(Floats((*out)[0].tensor), {0, 1});
  ExpectNear(Floats((*out)[1].tensor), {-1, 1});
  ExpectNear(Floats((*out)[2].tensor), {7});
}

}  // namespace
}  // namespace orrery

namespace orrery {
namespace {

// Byte-level mutations of a valid model: Compile and Run must fail cleanly
// (never crash, never report an internal error).
TEST(ModelFuzzTest, MutatedModelsFailCleanly) {
  const std::string good = TinyMlp().Bytes();
  uint64_t state = 0x9E3779B97F4A7C15ull;
  auto next = [&state] {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
  };
  int compiled = 0;
  for (int iter = 0; iter < 400; ++iter) {
    std::string bytes = good;
    const int flips = 1 + static_cast<int>(next() % 4);
    for (int f = 0; f < flips; ++f) {
      bytes[next() % bytes.size()] = static_cast<char>(next() & 0xff);
    }
    auto m = CompiledModel::Compile(bytes);
    if (!m.ok()) {
      EXPECT_NE(m.status().code(), StatusCode::kInternal) << m.status().ToString();
      continue;
    }
    ++compiled;
    std::vector<NamedTensor> inputs;
    for (const TensorSpec& s : (*m)->signature().inputs) {
      Shape shape = s.shape;
      for (int64_t& d : shape) d = d < 0 ? 2 : std::min<int64_t>(d, 64);
      auto t = Tensor::Allocate(s.dtype, shape);
      if (t.ok()) inputs.push_back({s.name, std::move(t).value()});
    }
    auto out = (*m)->Run(inputs);
    if (!out.ok()) {
      EXPECT_NE(out.status().code(), StatusCode::kInternal) << out.status().ToString();
    }
  }
  EXPECT_GT(compiled, 0);  // some mutations (e.g. in weights) stay valid
}

}  // namespace
}  // namespace orrery
