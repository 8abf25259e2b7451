// Binary, variadic, comparison/logic, unary math and Cast kernels
// (ops/cpu/elementwise.cc, variadic.cc, compare_logic.cc, unary.cc, cast.cc).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "op_test_util.h"
#include "ops/registry.h"

namespace orrery::ops {
namespace {

using testing::ExpectNear;
using testing::F32;
using testing::I64;
using testing::Make;
using testing::RunOp;
using testing::Values;

Tensor Bool(Shape shape, std::vector<uint8_t> values) {
  return Make<uint8_t>(DType::kBool, std::move(shape), std::move(values));
}

Tensor RunOne(const std::string& op, const std::vector<const Tensor*>& inputs,
              const Attributes& attrs = {}, int64_t opset = 13) {
  auto out = RunOp(op, inputs, attrs, opset);
  EXPECT_TRUE(out.ok()) << op << ": " << out.status().ToString();
  if (!out.ok()) return Tensor();
  return (*out)[0];
}

void ExpectUnsupported(const Status& st, const std::string& op) {
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
  EXPECT_NE(st.message().find("unsupported"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find(op), std::string::npos) << st.message();
}

// Reference numpy broadcasting: the input offset for output flat index i.
int64_t BroadcastOffset(const Shape& in, const Shape& out, int64_t i) {
  int64_t off = 0, stride = 1;
  for (size_t d = out.size(); d-- > 0;) {
    const int64_t coord = i % out[d];
    i /= out[d];
    const size_t back = out.size() - 1 - d;
    if (back < in.size()) {
      const int64_t dim = in[in.size() - 1 - back];
      if (dim != 1) off += coord * stride;
      stride *= dim;
    }
  }
  return off;
}

Tensor Random(Shape shape, std::mt19937& rng) {
  Tensor t(DType::kFloat32, std::move(shape));
  std::uniform_real_distribution<float> dist(-4.0f, 4.0f);
  for (int64_t i = 0; i < t.num_elements(); ++i) t.data<float>()[i] = dist(rng);
  return t;
}

// ---------------- Binary arithmetic ----------------

TEST(BinaryTest, BroadcastingMatchesReferenceOnManyShapes) {
  std::mt19937 rng(7);
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{3, 4, 5}, {3, 4, 5}}, {{3, 4, 5}, {5}},       {{3, 4, 5}, {}},
      {{}, {2, 3}},           {{1, 4, 1, 6}, {3, 1, 5, 6}}, {{3, 1}, {1, 3}},
      {{2, 1, 3}, {4, 1}},    {{5, 1, 1}, {1, 1, 7}}, {{2, 3, 1, 2}, {3, 4, 1}},
      {{0, 3}, {1, 3}},       {{1}, {2, 0}},          {{4, 1, 3, 1}, {1, 2, 1, 5}},
  };
  for (const auto& [sa, sb] : cases) {
    Tensor a = Random(sa, rng);
    Tensor b = Random(sb, rng);
    for (const char* op : {"Add", "Sub", "Mul", "Div", "Pow", "Max", "Min"}) {
      Tensor y = RunOne(op, {&a, &b});
      ASSERT_FALSE(y.empty()) << op;
      for (int64_t i = 0; i < y.num_elements(); ++i) {
        const float av = a.data<float>()[BroadcastOffset(sa, y.shape(), i)];
        const float bv = b.data<float>()[BroadcastOffset(sb, y.shape(), i)];
        float want = 0;
        const std::string o = op;
        if (o == "Add") want = av + bv;
        if (o == "Sub") want = av - bv;
        if (o == "Mul") want = av * bv;
        if (o == "Div") want = av / bv;
        if (o == "Pow") want = std::pow(av, bv);
        if (o == "Max") want = std::max(av, bv);
        if (o == "Min") want = std::min(av, bv);
        const float got = y.data<float>()[i];
        if (std::isnan(want)) {
          EXPECT_TRUE(std::isnan(got)) << op << " at " << i;
        } else {
          EXPECT_FLOAT_EQ(got, want) << op << " " << ShapeToString(sa) << " " << ShapeToString(sb)
                                     << " at " << i;
        }
      }
    }
  }
}

TEST(BinaryTest, ThreeInputBroadcastMatchesReference) {
  std::mt19937 rng(11);
  const std::vector<std::vector<Shape>> cases = {
      {{2, 3, 4}, {4}, {3, 1}},         {{1, 5}, {3, 1}, {}},
      {{2, 1, 1, 3}, {1, 4, 1}, {5, 1, 1}}, {{6}, {6}, {6}},
      {{0, 2}, {2}, {1, 1}},
  };
  for (const auto& shapes : cases) {
    Tensor a = Random(shapes[0], rng), b = Random(shapes[1], rng), c = Random(shapes[2], rng);
    Tensor cond(DType::kBool, shapes[0]);
    for (int64_t i = 0; i < cond.num_elements(); ++i) cond.data<uint8_t>()[i] = (i * 7) % 3;
    Tensor sum = RunOne("Sum", {&a, &b, &c});
    Tensor mn = RunOne("Min", {&a, &b, &c});
    Tensor where = RunOne("Where", {&cond, &b, &c});
    ASSERT_EQ(sum.shape(), where.shape());
    for (int64_t i = 0; i < sum.num_elements(); ++i) {
      const float av = a.data<float>()[BroadcastOffset(shapes[0], sum.shape(), i)];
      const float bv = b.data<float>()[BroadcastOffset(shapes[1], sum.shape(), i)];
      const float cv = c.data<float>()[BroadcastOffset(shapes[2], sum.shape(), i)];
      const uint8_t k = cond.data<uint8_t>()[BroadcastOffset(shapes[0], sum.shape(), i)];
      EXPECT_FLOAT_EQ(sum.data<float>()[i], av + bv + cv) << i;
      EXPECT_EQ(mn.data<float>()[i], std::min(std::min(av, bv), cv)) << i;
      EXPECT_EQ(where.data<float>()[i], k != 0 ? bv : cv) << i;
    }
  }
}

TEST(BinaryTest, SmallIntegerTypesWrap) {
  Tensor a = Make<uint8_t>(DType::kUint8, {3}, {250, 3, 0});
  Tensor b = Make<uint8_t>(DType::kUint8, {3}, {10, 5, 1});
  EXPECT_EQ(Values<uint8_t>(RunOne("Add", {&a, &b})), (std::vector<uint8_t>{4, 8, 1}));
  EXPECT_EQ(Values<uint8_t>(RunOne("Sub", {&a, &b})), (std::vector<uint8_t>{240, 254, 255}));
  Tensor u = Make<uint16_t>(DType::kUint16, {1}, {65535});
  EXPECT_EQ(Values<uint16_t>(RunOne("Mul", {&u, &u})), (std::vector<uint16_t>{1}));
  Tensor i8 = Make<int8_t>(DType::kInt8, {2}, {-128, 7});
  Tensor m1 = Make<int8_t>(DType::kInt8, {}, {-1});
  EXPECT_EQ(Values<int8_t>(RunOne("Div", {&i8, &m1})), (std::vector<int8_t>{-128, -7}));
  Tensor d = Make<double>(DType::kFloat64, {2}, {1.5, -2});
  EXPECT_EQ(Values<double>(RunOne("Mul", {&d, &d})), (std::vector<double>{2.25, 4}));
}

TEST(BinaryTest, IntegerDivisionTruncatesAndRejectsZero) {
  Tensor a = Make<int32_t>(DType::kInt32, {4}, {7, -7, 7, -7});
  Tensor b = Make<int32_t>(DType::kInt32, {4}, {2, 2, -2, -2});
  EXPECT_EQ(Values<int32_t>(RunOne("Div", {&a, &b})), (std::vector<int32_t>{3, -3, -3, 3}));
  Tensor z = Make<int32_t>(DType::kInt32, {}, {0});
  Status st = RunOp("Div", {&a, &z}).status();
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("division by zero"), std::string::npos);
  Tensor f = F32({2}, {1, -1});
  Tensor fz = F32({}, {0});
  std::vector<float> q = Values<float>(RunOne("Div", {&f, &fz}));
  EXPECT_EQ(q[0], std::numeric_limits<float>::infinity());
  EXPECT_EQ(q[1], -std::numeric_limits<float>::infinity());
}

TEST(BinaryTest, UnsupportedAndMismatchedDTypes) {
  Tensor h(DType::kFloat16, {2});
  ExpectUnsupported(RunOp("Add", {&h, &h}).status(), "Add");
  Tensor b = Bool({2}, {1, 0});
  ExpectUnsupported(RunOp("Mul", {&b, &b}).status(), "Mul");
  Tensor f = F32({2}, {1, 2});
  Tensor d = Make<double>(DType::kFloat64, {2}, {1, 2});
  Status st = RunOp("Sub", {&f, &d}).status();
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("different dtypes"), std::string::npos);
}

TEST(PowTest, MixedTypesAndEdgeCases) {
  Tensor x = F32({3}, {1, 2, 3});
  Tensor e64 = I64({3}, {4, 5, 6});
  Tensor y = RunOne("Pow", {&x, &e64});
  EXPECT_EQ(y.dtype(), DType::kFloat32);
  ExpectNear(Values<float>(y), {1, 32, 729});
  Tensor xi = I64({3}, {1, 2, 3});
  Tensor ef = F32({3}, {4, 5, 6});
  y = RunOne("Pow", {&xi, &ef});
  EXPECT_EQ(y.dtype(), DType::kInt64);
  EXPECT_EQ(Values<int64_t>(y), (std::vector<int64_t>{1, 32, 729}));
  Tensor x32 = Make<int32_t>(DType::kInt32, {5}, {2, -1, -1, 3, 0});
  Tensor n32 = Make<int32_t>(DType::kInt32, {5}, {10, 3, -3, -1, 0});
  EXPECT_EQ(Values<int32_t>(RunOne("Pow", {&x32, &n32})),
            (std::vector<int32_t>{1024, -1, -1, 0, 1}));
  Tensor eu = Make<uint64_t>(DType::kUint64, {3}, {4, 5, 6});
  ExpectNear(Values<float>(RunOne("Pow", {&x, &eu})), {1, 32, 729});
  // Negative base with a fractional exponent is NaN; with an integral one it is exact.
  Tensor neg = F32({2}, {-2, -2});
  Tensor fe = F32({2}, {0.5f, 3});
  std::vector<float> p = Values<float>(RunOne("Pow", {&neg, &fe}));
  EXPECT_TRUE(std::isnan(p[0]));
  EXPECT_EQ(p[1], -8.0f);
  // Before opset 12 the exponent must match the base.
  EXPECT_EQ(RunOp("Pow", {&x, &e64}, {}, 11).status().code(), StatusCode::kInvalidArgument);
  Tensor h(DType::kFloat16, {3});
  ExpectUnsupported(RunOp("Pow", {&h, &x}).status(), "Pow");
}

TEST(ModTest, SignRulesFollowFmodAttribute) {
  Tensor a = I64({6}, {-4, 7, 5, 4, -7, 8});
  Tensor b = I64({6}, {2, -3, 8, -2, 3, 5});
  EXPECT_EQ(Values<int64_t>(RunOne("Mod", {&a, &b})),
            (std::vector<int64_t>{0, -2, 5, 0, 2, 3}));
  Attributes fmod;
  fmod.Set("fmod", int64_t{1});
  EXPECT_EQ(Values<int64_t>(RunOne("Mod", {&a, &b}, fmod)),
            (std::vector<int64_t>{0, 1, 5, 0, -1, 3}));
  Tensor fa = Make<double>(DType::kFloat64, {6}, {-4.3, 7.2, 5.0, 4.3, -7.2, 8.0});
  Tensor fb = Make<double>(DType::kFloat64, {6}, {2.1, -3.4, 8.0, -2.1, 3.4, 5.0});
  std::vector<double> r = Values<double>(RunOne("Mod", {&fa, &fb}, fmod));
  const std::vector<double> want = {-0.1, 0.4, 5.0, 0.1, -0.4, 3.0};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(r[i], want[i], 1e-9) << i;
  // fmod = 0 on floats follows numpy.mod (divisor's sign).
  r = Values<double>(RunOne("Mod", {&fa, &fb}));
  EXPECT_NEAR(r[0], 2.0, 1e-9);
  EXPECT_NEAR(r[1], -3.0, 1e-9);
  Tensor ua = Make<uint32_t>(DType::kUint32, {3}, {4, 7, 5});
  Tensor ub = Make<uint32_t>(DType::kUint32, {3}, {2, 3, 8});
  EXPECT_EQ(Values<uint32_t>(RunOne("Mod", {&ua, &ub})), (std::vector<uint32_t>{0, 1, 5}));
  Tensor imin = Make<int32_t>(DType::kInt32, {1}, {std::numeric_limits<int32_t>::min()});
  Tensor m1 = Make<int32_t>(DType::kInt32, {1}, {-1});
  EXPECT_EQ(Values<int32_t>(RunOne("Mod", {&imin, &m1})), (std::vector<int32_t>{0}));
  Tensor z = I64({1}, {0});
  EXPECT_EQ(RunOp("Mod", {&a, &z}).status().code(), StatusCode::kInvalidArgument);
  Attributes bad;
  bad.Set("fmod", int64_t{2});
  EXPECT_EQ(RunOp("Mod", {&a, &b}, bad).status().code(), StatusCode::kInvalidArgument);
}

TEST(BitShiftTest, DirectionsAndOversizedShifts) {
  Tensor x = Make<uint8_t>(DType::kUint8, {4}, {16, 4, 1, 255});
  Tensor s = Make<uint8_t>(DType::kUint8, {4}, {1, 2, 3, 9});
  Attributes left, right;
  left.Set("direction", std::string("LEFT"));
  right.Set("direction", std::string("RIGHT"));
  EXPECT_EQ(Values<uint8_t>(RunOne("BitShift", {&x, &s}, left)),
            (std::vector<uint8_t>{32, 16, 8, 0}));
  EXPECT_EQ(Values<uint8_t>(RunOne("BitShift", {&x, &s}, right)),
            (std::vector<uint8_t>{8, 1, 0, 0}));
  Tensor x64 = Make<uint64_t>(DType::kUint64, {2}, {1, 1});
  Tensor s64 = Make<uint64_t>(DType::kUint64, {2}, {63, 64});
  EXPECT_EQ(Values<uint64_t>(RunOne("BitShift", {&x64, &s64}, left)),
            (std::vector<uint64_t>{uint64_t{1} << 63, 0}));
  EXPECT_EQ(RunOp("BitShift", {&x, &s}).status().code(), StatusCode::kInvalidArgument);
  Tensor i = I64({1}, {1});
  ExpectUnsupported(RunOp("BitShift", {&i, &i}, left).status(), "BitShift");
}

// ---------------- Variadic ----------------

TEST(VariadicTest, ThreeInputsBroadcast) {
  Tensor a = F32({2, 1}, {1, 5});
  Tensor b = F32({3}, {2, 4, 6});
  Tensor c = F32({}, {3});
  Tensor y = RunOne("Max", {&a, &b, &c});
  EXPECT_EQ(y.shape(), (Shape{2, 3}));
  ExpectNear(Values<float>(y), {3, 4, 6, 5, 5, 6});
  ExpectNear(Values<float>(RunOne("Min", {&a, &b, &c})), {1, 1, 1, 2, 3, 3});
  ExpectNear(Values<float>(RunOne("Sum", {&a, &b, &c})), {6, 8, 10, 10, 12, 14});
  ExpectNear(Values<float>(RunOne("Mean", {&a, &b, &c})), {2, 8.0f / 3, 10.0f / 3, 10.0f / 3, 4,
                                                           14.0f / 3});
  ExpectNear(Values<float>(RunOne("Sum", {&b})), {2, 4, 6});
}

TEST(VariadicTest, NaNPropagatesAndIntegersWork) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor a = F32({3}, {nan, 1, 2});
  Tensor b = F32({3}, {0, nan, 1});
  std::vector<float> mx = Values<float>(RunOne("Max", {&a, &b}));
  EXPECT_TRUE(std::isnan(mx[0]));
  EXPECT_TRUE(std::isnan(mx[1]));
  EXPECT_EQ(mx[2], 2.0f);
  for (DType dt : {DType::kInt8, DType::kUint16, DType::kInt32, DType::kUint64}) {
    Tensor x(dt, {3}), z(dt, {3});
    // Fill as bytes of little integers: 3,2,1 and 1,4,4 in the low byte.
    uint8_t* xb = static_cast<uint8_t*>(x.raw_data());
    uint8_t* zb = static_cast<uint8_t*>(z.raw_data());
    const size_t w = DTypeSize(dt);
    const uint8_t xv[] = {3, 2, 1}, zv[] = {1, 4, 4};
    for (size_t i = 0; i < 3; ++i) {
      xb[i * w] = xv[i];
      zb[i * w] = zv[i];
    }
    Tensor y = RunOne("Max", {&x, &z});
    ASSERT_EQ(y.dtype(), dt);
    const uint8_t* yb = static_cast<const uint8_t*>(y.raw_data());
    EXPECT_EQ(yb[0], 3);
    EXPECT_EQ(yb[w], 4);
    EXPECT_EQ(yb[2 * w], 4);
  }
  Tensor i = I64({1}, {1});
  ExpectUnsupported(RunOp("Sum", {&i, &i}).status(), "Sum");
  EXPECT_EQ(RunOp("Max", {&a, &i}).status().code(), StatusCode::kInvalidArgument);
}

// ---------------- Comparison and logic ----------------

TEST(CompareTest, ComparisonsProduceBool) {
  Tensor a = Make<int32_t>(DType::kInt32, {2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor b = Make<int32_t>(DType::kInt32, {3}, {2, 2, 2});
  struct Case {
    const char* op;
    std::vector<uint8_t> want;
  };
  for (const Case& c : {Case{"Equal", {0, 1, 0, 0, 0, 0}}, Case{"Greater", {0, 0, 1, 1, 1, 1}},
                        Case{"Less", {1, 0, 0, 0, 0, 0}},
                        Case{"GreaterOrEqual", {0, 1, 1, 1, 1, 1}},
                        Case{"LessOrEqual", {1, 1, 0, 0, 0, 0}}}) {
    Tensor y = RunOne(c.op, {&a, &b});
    EXPECT_EQ(y.dtype(), DType::kBool) << c.op;
    EXPECT_EQ(Values<uint8_t>(y), c.want) << c.op;
  }
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor f = F32({2}, {nan, 1});
  EXPECT_EQ(Values<uint8_t>(RunOne("Equal", {&f, &f})), (std::vector<uint8_t>{0, 1}));
  // Bool inputs compare by truth: byte 2 is true.
  Tensor p = Bool({3}, {2, 0, 1});
  Tensor q = Bool({3}, {1, 0, 0});
  EXPECT_EQ(Values<uint8_t>(RunOne("Equal", {&p, &q})), (std::vector<uint8_t>{1, 1, 0}));
  ExpectUnsupported(RunOp("Greater", {&p, &q}).status(), "Greater");
}

TEST(LogicTest, AndOrXorNot) {
  Tensor a = Bool({2, 2}, {1, 1, 0, 0});
  Tensor b = Bool({2}, {1, 0});
  EXPECT_EQ(Values<uint8_t>(RunOne("And", {&a, &b})), (std::vector<uint8_t>{1, 0, 0, 0}));
  EXPECT_EQ(Values<uint8_t>(RunOne("Or", {&a, &b})), (std::vector<uint8_t>{1, 1, 1, 0}));
  EXPECT_EQ(Values<uint8_t>(RunOne("Xor", {&a, &b})), (std::vector<uint8_t>{0, 1, 1, 0}));
  Tensor odd = Bool({3}, {7, 0, 1});
  EXPECT_EQ(Values<uint8_t>(RunOne("Not", {&odd})), (std::vector<uint8_t>{0, 1, 0}));
  Tensor f = F32({2}, {1, 0});
  ExpectUnsupported(RunOp("And", {&f, &f}).status(), "And");
  ExpectUnsupported(RunOp("Not", {&f}).status(), "Not");
}

TEST(WhereTest, ThreeWayBroadcastAndAnyDType) {
  Tensor c = Bool({2, 1}, {1, 0});
  Tensor x = F32({3}, {1, 2, 3});
  Tensor y = F32({2, 3}, {9, 8, 7, 6, 5, 4});
  Tensor out = RunOne("Where", {&c, &x, &y});
  EXPECT_EQ(out.shape(), (Shape{2, 3}));
  ExpectNear(Values<float>(out), {1, 2, 3, 6, 5, 4});
  Tensor c2 = Bool({2, 2}, {1, 0, 1, 1});
  Tensor xi = I64({2, 2}, {1, 2, 3, 4});
  Tensor yi = I64({2, 2}, {9, 8, 7, 6});
  EXPECT_EQ(Values<int64_t>(RunOne("Where", {&c2, &xi, &yi})),
            (std::vector<int64_t>{1, 8, 3, 4}));
  // float16 moves as raw 2-byte elements.
  Tensor xh = Make<uint16_t>(DType::kFloat16, {2}, {0x3c00, 0x4000});
  Tensor yh = Make<uint16_t>(DType::kFloat16, {2}, {0, 0});
  Tensor c3 = Bool({2}, {0, 1});
  EXPECT_EQ(Values<uint16_t>(RunOne("Where", {&c3, &xh, &yh})),
            (std::vector<uint16_t>{0, 0x4000}));
  Tensor ci = I64({2}, {1, 0});
  ExpectUnsupported(RunOp("Where", {&ci, &xh, &yh}).status(), "Where");
  EXPECT_EQ(RunOp("Where", {&c3, &x, &yh}).status().code(), StatusCode::kInvalidArgument);
}

// ---------------- Unary math ----------------

TEST(UnaryTest, FloatFunctions) {
  Tensor x = F32({4}, {0.25f, 1, 4, 9});
  ExpectNear(Values<float>(RunOne("Sqrt", {&x})), {0.5f, 1, 2, 3});
  ExpectNear(Values<float>(RunOne("Reciprocal", {&x})), {4, 1, 0.25f, 1.0f / 9});
  ExpectNear(Values<float>(RunOne("Log", {&x})), {std::log(0.25f), 0, std::log(4.0f),
                                                  std::log(9.0f)});
  Tensor e = Make<double>(DType::kFloat64, {3}, {0, 1, -1});
  std::vector<double> ev = Values<double>(RunOne("Exp", {&e}));
  EXPECT_DOUBLE_EQ(ev[1], std::exp(1.0));
  std::vector<double> erf = Values<double>(RunOne("Erf", {&e}));
  EXPECT_DOUBLE_EQ(erf[2], std::erf(-1.0));
  Tensor r = F32({15}, {0.1f, 0.5f, 0.9f, 1.2f, 1.5f, 1.8f, 2.3f, 2.5f, 2.7f, -1.1f, -1.5f, -1.9f,
                        -2.2f, -2.5f, -2.8f});
  ExpectNear(Values<float>(RunOne("Round", {&r})),
             {0, 0, 1, 1, 2, 2, 2, 2, 3, -1, -2, -2, -2, -2, -3});
  ExpectNear(Values<float>(RunOne("Floor", {&r})),
             {0, 0, 0, 1, 1, 1, 2, 2, 2, -2, -2, -2, -3, -3, -3});
  ExpectNear(Values<float>(RunOne("Ceil", {&r})), {1, 1, 1, 2, 2, 2, 3, 3, 3, -1, -1, -1, -2, -2,
                                                   -2});
  Tensor t = F32({2}, {0, 0.5f});
  ExpectNear(Values<float>(RunOne("Sin", {&t})), {0, std::sin(0.5f)});
  ExpectNear(Values<float>(RunOne("Cos", {&t})), {1, std::cos(0.5f)});
  ExpectNear(Values<float>(RunOne("Atanh", {&t})), {0, std::atanh(0.5f)});
  Tensor i = I64({1}, {1});
  ExpectUnsupported(RunOp("Sqrt", {&i}).status(), "Sqrt");
}

TEST(UnaryTest, AbsNegSignOverIntegers) {
  Tensor i8 = Make<int8_t>(DType::kInt8, {4}, {-128, -5, 0, 7});
  EXPECT_EQ(Values<int8_t>(RunOne("Abs", {&i8})), (std::vector<int8_t>{-128, 5, 0, 7}));
  EXPECT_EQ(Values<int8_t>(RunOne("Neg", {&i8})), (std::vector<int8_t>{-128, 5, 0, -7}));
  EXPECT_EQ(Values<int8_t>(RunOne("Sign", {&i8})), (std::vector<int8_t>{-1, -1, 0, 1}));
  Tensor u = Make<uint32_t>(DType::kUint32, {2}, {0, 9});
  EXPECT_EQ(Values<uint32_t>(RunOne("Abs", {&u})), (std::vector<uint32_t>{0, 9}));
  EXPECT_EQ(Values<uint32_t>(RunOne("Sign", {&u})), (std::vector<uint32_t>{0, 1}));
  ExpectUnsupported(RunOp("Neg", {&u}).status(), "Neg");
  Tensor f = F32({3}, {-2, 0, 3});
  ExpectNear(Values<float>(RunOne("Sign", {&f})), {-1, 0, 1});
  ExpectNear(Values<float>(RunOne("Neg", {&f})), {2, 0, -3});
}

TEST(UnaryTest, IsNaNAndIsInf) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor x = F32({5}, {-1.2f, nan, inf, 2.8f, -inf});
  Tensor y = RunOne("IsNaN", {&x});
  EXPECT_EQ(y.dtype(), DType::kBool);
  EXPECT_EQ(Values<uint8_t>(y), (std::vector<uint8_t>{0, 1, 0, 0, 0}));
  EXPECT_EQ(Values<uint8_t>(RunOne("IsInf", {&x})), (std::vector<uint8_t>{0, 0, 1, 0, 1}));
  Attributes pos;
  pos.Set("detect_negative", int64_t{0});
  EXPECT_EQ(Values<uint8_t>(RunOne("IsInf", {&x}, pos)), (std::vector<uint8_t>{0, 0, 1, 0, 0}));
  Attributes neg;
  neg.Set("detect_positive", int64_t{0});
  EXPECT_EQ(Values<uint8_t>(RunOne("IsInf", {&x}, neg)), (std::vector<uint8_t>{0, 0, 0, 0, 1}));
}

// ---------------- Cast ----------------

Attributes To(DType d) {
  Attributes a;
  a.Set("to", static_cast<int64_t>(d));
  return a;
}

TEST(CastTest, NumericConversions) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor x = F32({6}, {1.9f, -1.9f, 3e10f, -3e10f, nan, 0});
  Tensor y = RunOne("Cast", {&x}, To(DType::kInt32));
  EXPECT_EQ(y.dtype(), DType::kInt32);
  EXPECT_EQ(Values<int32_t>(y), (std::vector<int32_t>{1, -1, std::numeric_limits<int32_t>::max(),
                                                      std::numeric_limits<int32_t>::min(), 0, 0}));
  EXPECT_EQ(Values<uint8_t>(RunOne("Cast", {&x}, To(DType::kUint8))),
            (std::vector<uint8_t>{1, 0, 255, 0, 0, 0}));
  EXPECT_EQ(Values<uint8_t>(RunOne("Cast", {&x}, To(DType::kBool))),
            (std::vector<uint8_t>{1, 1, 1, 1, 1, 0}));
  Tensor d = RunOne("Cast", {&x}, To(DType::kFloat64));
  EXPECT_EQ(Values<double>(d)[0], static_cast<double>(1.9f));
  Tensor i = I64({2}, {300, -1});
  EXPECT_EQ(Values<int8_t>(RunOne("Cast", {&i}, To(DType::kInt8))), (std::vector<int8_t>{44, -1}));
  EXPECT_EQ(Values<uint16_t>(RunOne("Cast", {&i}, To(DType::kUint16))),
            (std::vector<uint16_t>{300, 65535}));
  Tensor b = Bool({3}, {0, 1, 5});
  ExpectNear(Values<float>(RunOne("Cast", {&b}, To(DType::kFloat32))), {0, 1, 1});
  EXPECT_EQ(Values<uint8_t>(RunOne("Cast", {&b}, To(DType::kBool))),
            (std::vector<uint8_t>{0, 1, 1}));
  Tensor same = RunOne("Cast", {&i}, To(DType::kInt64));
  EXPECT_EQ(Values<int64_t>(same), (std::vector<int64_t>{300, -1}));
}

TEST(CastTest, UnsupportedTypesAndCastLike) {
  Tensor x = F32({2}, {1, 2});
  ExpectUnsupported(RunOp("Cast", {&x}, To(DType::kFloat16)).status(), "Cast");
  ExpectUnsupported(RunOp("Cast", {&x}, To(DType::kString)).status(), "Cast");
  Attributes bf16;
  bf16.Set("to", int64_t{16});
  Status st = RunOp("Cast", {&x}, bf16).status();
  ExpectUnsupported(st, "Cast");
  EXPECT_NE(st.message().find("bfloat16"), std::string::npos);
  Attributes bad;
  bad.Set("to", int64_t{99});
  EXPECT_EQ(RunOp("Cast", {&x}, bad).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(RunOp("Cast", {&x}).status().code(), StatusCode::kInvalidArgument);
  Tensor h(DType::kFloat16, {2});
  ExpectUnsupported(RunOp("Cast", {&h}, To(DType::kFloat32)).status(), "Cast");
  Tensor like = Make<double>(DType::kFloat64, {1}, {0});
  Tensor y = RunOne("CastLike", {&x, &like});
  EXPECT_EQ(y.dtype(), DType::kFloat64);
  EXPECT_EQ(Values<double>(y), (std::vector<double>{1, 2}));
  ExpectUnsupported(RunOp("CastLike", {&x, &h}).status(), "CastLike");
}

}  // namespace
}  // namespace orrery::ops
