#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "ops/cpu/cpu_kernels.h"
#include "ops/registry.h"
#include "op_test_util.h"

namespace orrery::ops {
namespace {

using testing::ExpectNear;
using testing::F32;
using testing::I64;
using testing::RunOp;
using testing::Values;

// ---------------- Registry ----------------

TEST(RegistryTest, GlobalHasEveryV0Kernel) {
  const OpRegistry& r = OpRegistry::Global();
  for (const char* op : {"Gemm", "MatMul", "Add", "Sub", "Mul", "Div", "Relu", "Sigmoid", "Tanh",
                         "Softmax", "Flatten", "Reshape", "Identity", "Constant"}) {
    const KernelDef* def = r.Find(op, Backend::kCpu);
    ASSERT_NE(def, nullptr) << op;
    EXPECT_EQ(def->op_type, op);
    EXPECT_NE(def->infer, nullptr);
    EXPECT_NE(def->compute, nullptr);
  }
  EXPECT_EQ(r.Find("NoSuchOp", Backend::kCpu), nullptr);  // Conv exists since issue 3
  EXPECT_GE(r.OpTypes(Backend::kCpu).size(), 14u);  // later issues add more
}

TEST(RegistryTest, RejectsDuplicatesAndIncompleteDefs) {
  OpRegistry r;
  ASSERT_TRUE(RegisterCpuKernels(&r).ok());
  Status dup = cpu::RegisterGemmKernels(&r);
  EXPECT_EQ(dup.code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(r.Register(KernelDef{.op_type = "Foo"}).code(), StatusCode::kInvalidArgument);
}

// ---------------- Gemm ----------------

TEST(GemmTest, RowBroadcastC) {
  Tensor a = F32({2, 2}, {1, 2, 3, 4});
  Tensor b = F32({2, 2}, {5, 6, 7, 8});
  Tensor c = F32({2}, {1, 2});
  auto out = RunOp("Gemm", {&a, &b, &c});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].shape(), (Shape{2, 2}));
  ExpectNear(Values<float>((*out)[0]), {20, 24, 44, 52});
}

TEST(GemmTest, AlphaBetaColumnC) {
  Tensor a = F32({2, 2}, {1, 2, 3, 4});
  Tensor b = F32({2, 2}, {5, 6, 7, 8});
  Tensor c = F32({2, 1}, {10, 20});
  Attributes attrs;
  attrs.Set("alpha", 2.0f);
  attrs.Set("beta", 0.5f);
  auto out = RunOp("Gemm", {&a, &b, &c}, attrs);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ExpectNear(Values<float>((*out)[0]), {43, 49, 96, 110});
}

TEST(GemmTest, Transposes) {
  Tensor a = F32({2, 2}, {1, 2, 3, 4});
  Tensor b = F32({2, 2}, {5, 6, 7, 8});
  Attributes ta;
  ta.Set("transA", int64_t{1});
  auto out = RunOp("Gemm", {&a, &b}, ta);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ExpectNear(Values<float>((*out)[0]), {26, 30, 38, 44});
  Attributes tb;
  tb.Set("transB", int64_t{1});
  out = RunOp("Gemm", {&a, &b}, tb);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ExpectNear(Values<float>((*out)[0]), {17, 23, 39, 53});
}

TEST(GemmTest, BothTransposedNonSquareScalarC) {
  Tensor a = F32({3, 2}, {1, 4, 2, 5, 3, 6});  // A^T = [[1,2,3],[4,5,6]]
  Tensor b = F32({1, 3}, {1, 0, -1});         // B^T = [[1],[0],[-1]]
  Tensor c = F32({}, {10});
  Attributes attrs;
  attrs.Set("transA", int64_t{1});
  attrs.Set("transB", int64_t{1});
  auto out = RunOp("Gemm", {&a, &b, &c}, attrs);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].shape(), (Shape{2, 1}));
  ExpectNear(Values<float>((*out)[0]), {8, 8});
}

TEST(GemmTest, RejectsMismatchedInnerDimsAndBadC) {
  Tensor a = F32({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor b = F32({2, 2}, {1, 2, 3, 4});
  auto out = RunOp("Gemm", {&a, &b});
  EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(out.status().message().find("inner dimensions"), std::string::npos);
  Tensor b2 = F32({3, 2}, {1, 2, 3, 4, 5, 6});
  Tensor c = F32({3}, {1, 2, 3});
  out = RunOp("Gemm", {&a, &b2, &c});
  EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(out.status().message().find("does not broadcast"), std::string::npos);
}

// ---------------- MatMul ----------------

TEST(MatMulTest, BatchTimesMatrix) {
  Tensor a = F32({2, 2, 2}, {1, 0, 0, 1, 2, 0, 0, 2});
  Tensor b = F32({2, 2}, {1, 2, 3, 4});
  auto out = RunOp("MatMul", {&a, &b});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].shape(), (Shape{2, 2, 2}));
  ExpectNear(Values<float>((*out)[0]), {1, 2, 3, 4, 2, 4, 6, 8});
}

TEST(MatMulTest, OneDimensionalPromotion) {
  Tensor v3a = F32({3}, {1, 2, 3});
  Tensor v3b = F32({3}, {4, 5, 6});
  auto out = RunOp("MatMul", {&v3a, &v3b});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].shape(), Shape{});
  ExpectNear(Values<float>((*out)[0]), {32});

  Tensor v2 = F32({2}, {1, 1});
  Tensor m23 = F32({2, 3}, {1, 2, 3, 4, 5, 6});
  out = RunOp("MatMul", {&v2, &m23});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].shape(), Shape{3});
  ExpectNear(Values<float>((*out)[0]), {5, 7, 9});

  Tensor v = F32({3}, {1, 0, 1});
  out = RunOp("MatMul", {&m23, &v});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].shape(), Shape{2});
  ExpectNear(Values<float>((*out)[0]), {4, 10});
}

TEST(MatMulTest, BatchedBroadcastMatchesReference) {
  // A [2,1,3,4] x B [5,4,2] -> [2,5,3,2]
  std::vector<float> av(2 * 3 * 4), bv(5 * 4 * 2);
  for (size_t i = 0; i < av.size(); ++i) av[i] = static_cast<float>(i % 7) - 3.0f;
  for (size_t i = 0; i < bv.size(); ++i) bv[i] = static_cast<float>(i % 5) * 0.5f - 1.0f;
  Tensor a = F32({2, 1, 3, 4}, av);
  Tensor b = F32({5, 4, 2}, bv);
  auto out = RunOp("MatMul", {&a, &b});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_EQ((*out)[0].shape(), (Shape{2, 5, 3, 2}));
  std::vector<float> want;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 5; ++j)
      for (int m = 0; m < 3; ++m)
        for (int n = 0; n < 2; ++n) {
          float s = 0;
          for (int k = 0; k < 4; ++k) s += av[(i * 3 + m) * 4 + k] * bv[(j * 4 + k) * 2 + n];
          want.push_back(s);
        }
  ExpectNear(Values<float>((*out)[0]), want);
}

TEST(MatMulTest, RejectsBadShapes) {
  Tensor a = F32({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor b = F32({2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_EQ(RunOp("MatMul", {&a, &b}).status().code(), StatusCode::kInvalidArgument);
  Tensor a3 = F32({2, 2, 3}, std::vector<float>(12, 1));
  Tensor b3 = F32({3, 3, 2}, std::vector<float>(18, 1));
  auto out = RunOp("MatMul", {&a3, &b3});  // batch 2 vs 3
  EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(out.status().message().find("broadcastable"), std::string::npos);
  Tensor s = F32({}, {1});
  EXPECT_EQ(RunOp("MatMul", {&s, &a}).status().code(), StatusCode::kInvalidArgument);
}

// ---------------- Elementwise ----------------

TEST(ElementwiseTest, AddRowBroadcast) {
  Tensor a = F32({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor b = F32({3}, {10, 20, 30});
  auto out = RunOp("Add", {&a, &b});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].shape(), (Shape{2, 3}));
  ExpectNear(Values<float>((*out)[0]), {11, 22, 33, 14, 25, 36});
  // Commutes with the broadcast operand first.
  out = RunOp("Add", {&b, &a});
  ASSERT_TRUE(out.ok());
  ExpectNear(Values<float>((*out)[0]), {11, 22, 33, 14, 25, 36});
}

TEST(ElementwiseTest, MulOuterBroadcast) {
  Tensor a = F32({2, 1}, {1, 2});
  Tensor b = F32({1, 3}, {1, 2, 3});
  auto out = RunOp("Mul", {&a, &b});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].shape(), (Shape{2, 3}));
  ExpectNear(Values<float>((*out)[0]), {1, 2, 3, 2, 4, 6});
}

TEST(ElementwiseTest, MiddleDimBroadcast3D) {
  Tensor a = F32({2, 1, 3}, {0, 1, 2, 3, 4, 5});
  Tensor b = F32({1, 2, 1}, {100, 200});
  auto out = RunOp("Add", {&a, &b});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].shape(), (Shape{2, 2, 3}));
  ExpectNear(Values<float>((*out)[0]),
             {100, 101, 102, 200, 201, 202, 103, 104, 105, 203, 204, 205});
}

TEST(ElementwiseTest, SubScalarAndDivBroadcast) {
  Tensor a = F32({2, 2}, {2, 4, 6, 8});
  Tensor one = F32({}, {1});
  auto out = RunOp("Sub", {&a, &one});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ExpectNear(Values<float>((*out)[0]), {1, 3, 5, 7});
  out = RunOp("Sub", {&one, &a});
  ASSERT_TRUE(out.ok());
  ExpectNear(Values<float>((*out)[0]), {-1, -3, -5, -7});
  Tensor d = F32({2}, {2, 4});
  out = RunOp("Div", {&a, &d});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ExpectNear(Values<float>((*out)[0]), {1, 1, 3, 2});
}

TEST(ElementwiseTest, Int64ArithmeticWrapsAndTruncates) {
  Tensor a = I64({3}, {7, -7, 9});
  Tensor two = I64({1}, {2});
  auto out = RunOp("Div", {&a, &two});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].dtype(), DType::kInt64);
  EXPECT_EQ(Values<int64_t>((*out)[0]), (std::vector<int64_t>{3, -3, 4}));
  out = RunOp("Add", {&a, &two});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(Values<int64_t>((*out)[0]), (std::vector<int64_t>{9, -5, 11}));
  Tensor big = I64({2}, {std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min()});
  out = RunOp("Mul", {&big, &two});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(Values<int64_t>((*out)[0]), (std::vector<int64_t>{-2, 0}));
  Tensor minus1 = I64({}, {-1});
  out = RunOp("Div", {&big, &minus1});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(Values<int64_t>((*out)[0]),
            (std::vector<int64_t>{-std::numeric_limits<int64_t>::max(),
                                  std::numeric_limits<int64_t>::min()}));
}

TEST(ElementwiseTest, IntegerDivisionByZeroIsAnError) {
  Tensor a = I64({2}, {1, 2});
  Tensor z = I64({2}, {1, 0});
  auto out = RunOp("Div", {&a, &z});
  EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(out.status().message().find("division by zero"), std::string::npos);
}

TEST(ElementwiseTest, RejectsIncompatibleShapesAndDtypes) {
  Tensor a = F32({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor b = F32({2}, {1, 2});
  auto out = RunOp("Add", {&a, &b});
  EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(out.status().message().find("[2, 3] and [2]"), std::string::npos);
  Tensor i = I64({3}, {1, 2, 3});
  out = RunOp("Mul", {&a, &i});
  EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(out.status().message().find("different dtypes"), std::string::npos);
}

// ---------------- Activations ----------------

TEST(ActivationTest, ReluSigmoidTanh) {
  Tensor x = F32({4}, {-1, 0, 2, -100});
  auto out = RunOp("Relu", {&x});
  ASSERT_TRUE(out.ok());
  ExpectNear(Values<float>((*out)[0]), {0, 0, 2, 0});
  Tensor s = F32({4}, {0, 2, -2, -100});
  out = RunOp("Sigmoid", {&s});
  ASSERT_TRUE(out.ok());
  ExpectNear(Values<float>((*out)[0]), {0.5f, 0.8807971f, 0.1192029f, 0.0f});
  EXPECT_FALSE(std::isnan(Values<float>((*out)[0])[3]));
  Tensor t = F32({3}, {0, 1, -1});
  out = RunOp("Tanh", {&t});
  ASSERT_TRUE(out.ok());
  ExpectNear(Values<float>((*out)[0]), {0.0f, 0.7615942f, -0.7615942f});
}

TEST(ActivationTest, RejectsNonFloat) {
  Tensor i = I64({2}, {1, 2});
  auto out = RunOp("Relu", {&i});
  EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(out.status().message().find("float32"), std::string::npos);
}

// ---------------- Softmax ----------------

TEST(SoftmaxTest, LastAxis) {
  Tensor x = F32({2, 2}, {1, 2, 3, 3});
  auto out = RunOp("Softmax", {&x});
  ASSERT_TRUE(out.ok());
  ExpectNear(Values<float>((*out)[0]), {0.2689414f, 0.7310586f, 0.5f, 0.5f});
}

TEST(SoftmaxTest, Opset11CoercesTo2DWhileOpset13UsesOneAxis) {
  Tensor x = F32({1, 2, 2}, {1, 2, 3, 4});
  auto legacy = RunOp("Softmax", {&x}, {}, /*opset=*/11);  // axis=1: rows of 4
  ASSERT_TRUE(legacy.ok()) << legacy.status().ToString();
  ExpectNear(Values<float>((*legacy)[0]), {0.0320586f, 0.0871443f, 0.2368828f, 0.6439142f});
  auto modern = RunOp("Softmax", {&x}, {}, /*opset=*/13);  // axis=-1: pairs
  ASSERT_TRUE(modern.ok());
  ExpectNear(Values<float>((*modern)[0]), {0.2689414f, 0.7310586f, 0.2689414f, 0.7310586f});
  Attributes axis1;
  axis1.Set("axis", int64_t{1});
  auto mid = RunOp("Softmax", {&x}, axis1, /*opset=*/13);  // along dim 1 only
  ASSERT_TRUE(mid.ok());
  ExpectNear(Values<float>((*mid)[0]), {0.1192029f, 0.1192029f, 0.8807971f, 0.8807971f});
}

TEST(SoftmaxTest, LargeValuesAreStableAndBadAxisRejected) {
  Tensor x = F32({2}, {1000, 1000});
  auto out = RunOp("Softmax", {&x});
  ASSERT_TRUE(out.ok());
  ExpectNear(Values<float>((*out)[0]), {0.5f, 0.5f});
  Attributes bad;
  bad.Set("axis", int64_t{3});
  EXPECT_EQ(RunOp("Softmax", {&x}, bad).status().code(), StatusCode::kInvalidArgument);
}

// ---------------- Shape ops ----------------

TEST(ShapeOpsTest, Flatten) {
  Tensor x(DType::kFloat32, {2, 3, 4});
  Attributes a2;
  a2.Set("axis", int64_t{2});
  auto out = RunOp("Flatten", {&x}, a2);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].shape(), (Shape{6, 4}));
  EXPECT_EQ((*out)[0].raw_data(), x.raw_data());  // a view
  Attributes a0;
  a0.Set("axis", int64_t{0});
  out = RunOp("Flatten", {&x}, a0);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].shape(), (Shape{1, 24}));
  out = RunOp("Flatten", {&x});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].shape(), (Shape{2, 12}));
  Attributes neg;
  neg.Set("axis", int64_t{-1});
  out = RunOp("Flatten", {&x}, neg);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].shape(), (Shape{6, 4}));
  Attributes bad;
  bad.Set("axis", int64_t{4});
  EXPECT_EQ(RunOp("Flatten", {&x}, bad).status().code(), StatusCode::kInvalidArgument);
}

TEST(ShapeOpsTest, ReshapeZeroAndMinusOne) {
  Tensor x = F32({2, 3, 4}, std::vector<float>(24, 1.5f));
  Tensor s1 = I64({2}, {0, -1});
  auto out = RunOp("Reshape", {&x, &s1});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].shape(), (Shape{2, 12}));
  EXPECT_EQ((*out)[0].raw_data(), x.raw_data());
  Tensor s2 = I64({2}, {-1, 4});
  out = RunOp("Reshape", {&x, &s2});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].shape(), (Shape{6, 4}));
  Tensor s3 = I64({4}, {0, 0, 2, 2});
  out = RunOp("Reshape", {&x, &s3});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].shape(), (Shape{2, 3, 2, 2}));
}

TEST(ShapeOpsTest, ReshapeAllowZero) {
  Tensor x(DType::kFloat32, {0, 3});
  Tensor s = I64({2}, {3, 0});
  Attributes az;
  az.Set("allowzero", int64_t{1});
  auto out = RunOp("Reshape", {&x, &s}, az);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].shape(), (Shape{3, 0}));
  // Without allowzero the 0 copies dim 1 (3): 3*3 != 0 elements.
  EXPECT_EQ(RunOp("Reshape", {&x, &s}).status().code(), StatusCode::kInvalidArgument);
  Tensor s2 = I64({2}, {0, -1});
  out = RunOp("Reshape", {&x, &s2}, az);
  EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(out.status().message().find("allowzero"), std::string::npos);
}

TEST(ShapeOpsTest, ReshapeRejectsHostileShapes) {
  Tensor x(DType::kFloat32, {2, 3});
  struct Case {
    std::vector<int64_t> shape;
    StatusCode code;
  };
  const int64_t huge = int64_t{1} << 40;
  for (const Case& c : std::vector<Case>{
           {{-1, -1}, StatusCode::kInvalidArgument},
           {{0, 0, 0}, StatusCode::kInvalidArgument},  // 0 beyond the input rank
           {{5, 5}, StatusCode::kInvalidArgument},
           {{-2, 3}, StatusCode::kInvalidArgument},
           {{huge, huge}, StatusCode::kResourceExhausted},
           {{huge, huge, -1}, StatusCode::kResourceExhausted},
       }) {
    Tensor s = I64({static_cast<int64_t>(c.shape.size())}, c.shape);
    EXPECT_EQ(RunOp("Reshape", {&x, &s}).status().code(), c.code) << ShapeToString(c.shape);
  }
  Tensor f = F32({2}, {2, 3});
  EXPECT_EQ(RunOp("Reshape", {&x, &f}).status().code(), StatusCode::kInvalidArgument);
}

TEST(ShapeOpsTest, IdentitySharesBuffer) {
  Tensor x = I64({2}, {4, 5});
  auto out = RunOp("Identity", {&x});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].raw_data(), x.raw_data());
  EXPECT_EQ(Values<int64_t>((*out)[0]), (std::vector<int64_t>{4, 5}));
}

TEST(ShapeOpsTest, ConstantForms) {
  Attributes floats;
  floats.Set("value_floats", std::vector<float>{1.5f, -2.0f});
  auto out = RunOp("Constant", {}, floats);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].shape(), Shape{2});
  ExpectNear(Values<float>((*out)[0]), {1.5f, -2.0f});

  Attributes integer;
  integer.Set("value_int", int64_t{42});
  out = RunOp("Constant", {}, integer);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].dtype(), DType::kInt64);
  EXPECT_EQ((*out)[0].shape(), Shape{});
  EXPECT_EQ(Values<int64_t>((*out)[0]), std::vector<int64_t>{42});

  Attributes tensor;
  tensor.Set("value", I64({3}, {1, 2, 3}));
  out = RunOp("Constant", {}, tensor);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(Values<int64_t>((*out)[0]), (std::vector<int64_t>{1, 2, 3}));

  Attributes two = tensor;
  two.Set("value_int", int64_t{1});
  EXPECT_EQ(RunOp("Constant", {}, two).status().code(), StatusCode::kInvalidArgument);
  Attributes none;
  EXPECT_EQ(RunOp("Constant", {}, none).status().code(), StatusCode::kInvalidArgument);
  Attributes str;
  str.Set("value_string", std::string("x"));
  EXPECT_EQ(RunOp("Constant", {}, str).status().code(), StatusCode::kInvalidArgument);
}

TEST(AttributesTest, TypeMismatchIsAnError) {
  Attributes a;
  a.Set("alpha", int64_t{2});
  auto f = a.GetFloat("alpha", 1.0f);
  EXPECT_EQ(f.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(f.status().message().find("alpha"), std::string::npos);
  auto missing = a.GetFloat("beta", 3.0f);
  ASSERT_TRUE(missing.ok());
  EXPECT_EQ(*missing, 3.0f);
}

}  // namespace
}  // namespace orrery::ops
