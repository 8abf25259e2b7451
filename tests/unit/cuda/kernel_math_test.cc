// The CUDA kernels' math (ops/cuda/kernel_math.h) and parameters
// (ops/cuda/kernel_params.h) run on the CPU, element by element as the GPU
// threads would, against the CPU kernels on odd shapes. Always runs: no GPU
// needed.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "ops/cuda/kernel_math.h"
#include "ops/cuda/kernel_params.h"
#include "tests/unit/ops/op_test_util.h"

namespace orrery::ops::cuda {
namespace {

using ops::testing::F32;
using ops::testing::RunOp;
using ops::testing::Values;

Tensor Random(Shape shape, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  std::vector<float> v(static_cast<size_t>(NumElements(shape)));
  for (float& x : v) x = dist(rng);
  return F32(std::move(shape), std::move(v));
}

Attributes Attrs(std::initializer_list<std::pair<std::string, AttrValue>> kv) {
  Attributes a;
  for (const auto& [k, v] : kv) a.Set(k, v);
  return a;
}

std::vector<float> Cpu(const std::string& op, const std::vector<const Tensor*>& in,
                       const Attributes& attrs = {}, int64_t opset = 13) {
  Result<std::vector<Tensor>> out = RunOp(op, in, attrs, opset);
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  return out.ok() ? Values<float>((*out)[0]) : std::vector<float>{};
}

void ExpectClose(const std::vector<float>& got, const std::vector<float>& want, float tol = 1e-5f) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], tol * (1.0f + std::fabs(want[i]))) << "at " << i;
  }
}

TEST(CudaKernelMath, BinaryBroadcastMatchesCpuOnOddShapes) {
  struct Case { Shape a, b; };
  const Case cases[] = {{{3, 1, 5}, {4, 1}},       {{1}, {2, 3, 7}},
                        {{2, 3, 1, 7}, {3, 5, 1}}, {{5, 1, 1, 1, 1, 3}, {1, 2, 1, 4, 1}}};
  for (const char* op : {"Add", "Sub", "Mul", "Div", "Max", "Min"}) {
    for (const Case& c : cases) {
      const Tensor a = Random(c.a, 1), b = Random(c.b, 2);
      const std::vector<float> want = Cpu(op, {&a, &b});
      Result<Shape> out = [&]() -> Result<Shape> {
        Shape s(std::max(c.a.size(), c.b.size()), 1);
        for (size_t i = 0; i < s.size(); ++i) {
          const size_t r = s.size() - 1 - i;
          const int64_t da = i < c.a.size() ? c.a[c.a.size() - 1 - i] : 1;
          const int64_t db = i < c.b.size() ? c.b[c.b.size() - 1 - i] : 1;
          s[r] = std::max(da, db);
        }
        return s;
      }();
      ASSERT_TRUE(out.ok());
      Result<BroadcastIndex> ia = MakeBroadcast(*out, c.a), ib = MakeBroadcast(*out, c.b);
      ASSERT_TRUE(ia.ok() && ib.ok());
      Result<BinaryOp> bop = MakeBinary(op);
      ASSERT_TRUE(bop.ok());
      std::vector<float> got(static_cast<size_t>(NumElements(*out)));
      for (int64_t i = 0; i < static_cast<int64_t>(got.size()); ++i) {
        got[static_cast<size_t>(i)] =
            ApplyBinary(*bop, a.data<float>()[BroadcastOffset(*ia, i)],
                        b.data<float>()[BroadcastOffset(*ib, i)]);
      }
      SCOPED_TRACE(std::string(op) + " " + ShapeToString(c.a) + " " + ShapeToString(c.b));
      ExpectClose(got, want);
    }
  }
}

TEST(CudaKernelMath, BroadcastRefusesIncompatibleAndTooDeep) {
  EXPECT_FALSE(MakeBroadcast({2, 3}, {4}).ok());
  EXPECT_EQ(MakeBroadcast(Shape(9, 1), {1}).status().code(), StatusCode::kUnimplemented);
  Result<BroadcastIndex> b = MakeBroadcast({2, 3, 4}, {3, 1});
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->strides[0], 0);
  EXPECT_EQ(b->strides[1], 1);
  EXPECT_EQ(b->strides[2], 0);
  EXPECT_EQ(BroadcastOffset(*b, 23), 2);  // [1, 2, 3] reads row 2
}

TEST(CudaKernelMath, UnaryMatchesCpu) {
  const Tensor x = Random({3, 7, 5}, 3);
  struct Case { const char* op; Attributes attrs; int64_t opset; };
  const Case cases[] = {{"Relu", {}, 13},
                        {"LeakyRelu", Attrs({{"alpha", 0.3f}}), 13},
                        {"Clip", Attrs({{"min", -0.5f}, {"max", 0.75f}}), 6},
                        {"Sigmoid", {}, 13},
                        {"Tanh", {}, 13},
                        {"HardSigmoid", Attrs({{"alpha", 0.3f}, {"beta", 0.4f}}), 13},
                        {"HardSwish", {}, 14},
                        {"Exp", {}, 13},
                        {"Neg", {}, 13},
                        {"Abs", {}, 13}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.op);
    const std::vector<float> want = Cpu(c.op, {&x}, c.attrs, c.opset);
    const Tensor* values[] = {&x};
    Result<UnaryParams> p = MakeUnary(c.op, c.attrs, c.opset, values);
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    std::vector<float> got;
    for (float v : Values<float>(x)) got.push_back(ApplyUnary(p->op, v, p->alpha, p->beta));
    ExpectClose(got, want, 2e-5f);
  }
}

TEST(CudaKernelMath, ClipFromConstantInputs) {
  const Tensor x = Random({11}, 4);
  const Tensor lo = F32({}, {-0.25f}), hi = F32({}, {1.5f});
  const std::vector<float> want = Cpu("Clip", {&x, &lo, &hi}, {}, 13);
  const Tensor* values[] = {&x, &lo, &hi};
  Result<UnaryParams> p = MakeUnary("Clip", {}, 13, values);
  ASSERT_TRUE(p.ok());
  std::vector<float> got;
  for (float v : Values<float>(x)) got.push_back(ApplyUnary(p->op, v, p->alpha, p->beta));
  ExpectClose(got, want);
}

TEST(CudaKernelMath, BatchNormMatchesCpu) {
  const Tensor x = Random({2, 3, 5, 7}, 5);
  const Tensor scale = Random({3}, 6), bias = Random({3}, 7), mean = Random({3}, 8);
  const Tensor var = F32({3}, {0.5f, 1.25f, 3.0f});
  const float eps = 1e-3f;
  const std::vector<float> want = Cpu("BatchNormalization", {&x, &scale, &bias, &mean, &var},
                                      Attrs({{"epsilon", eps}}));
  std::vector<float> got;
  for (int64_t i = 0; i < x.num_elements(); ++i) {
    const int64_t c = ChannelOf(i, 3, 35);
    got.push_back(BatchNormAt(x.data<float>()[i], scale.data<float>()[c], bias.data<float>()[c],
                              mean.data<float>()[c], var.data<float>()[c], eps));
  }
  ExpectClose(got, want);
}

// Runs the pooling math over every output as the kernel's threads would.
std::vector<float> GpuPool(const std::string& op, const Tensor& x, const Attributes& attrs) {
  Result<Pool2d> g = MakePool2d(op, attrs, x.shape());
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  if (!g.ok()) return {};
  const int64_t planes = x.shape()[0] * x.shape()[1];
  std::vector<float> y;
  for (int64_t p = 0; p < planes; ++p) {
    const float* plane = x.data<float>() + p * g->in_h * g->in_w;
    for (int64_t oh = 0; oh < g->out_h; ++oh) {
      for (int64_t ow = 0; ow < g->out_w; ++ow) {
        y.push_back(op == "MaxPool" ? MaxPool2dAt(plane, *g, oh, ow)
                                    : AveragePool2dAt(plane, *g, oh, ow));
      }
    }
  }
  return y;
}

TEST(CudaKernelMath, PoolingWindowsMatchCpuOnOddShapes) {
  const Tensor x = Random({2, 3, 11, 9}, 9);
  const std::vector<int64_t> k33 = {3, 3}, k23 = {2, 3}, s2 = {2, 2}, s21 = {2, 1},
                             p1 = {1, 1, 1, 1}, p_odd = {0, 1, 2, 1}, d2 = {2, 2};
  const Attributes cases[] = {
      Attrs({{"kernel_shape", k33}}),
      Attrs({{"kernel_shape", k33}, {"strides", s2}, {"pads", p1}}),
      Attrs({{"kernel_shape", k23}, {"strides", s21}, {"pads", p_odd}}),
      Attrs({{"kernel_shape", k33}, {"strides", s2}, {"ceil_mode", int64_t{1}}}),
      Attrs({{"kernel_shape", k33}, {"strides", s2}, {"auto_pad", std::string("SAME_UPPER")}}),
      Attrs({{"kernel_shape", k23}, {"strides", s2}, {"auto_pad", std::string("SAME_LOWER")}}),
      Attrs({{"kernel_shape", k33}, {"pads", p_odd}, {"count_include_pad", int64_t{1}}}),
      Attrs({{"kernel_shape", k33}, {"strides", s2}, {"pads", p1}, {"ceil_mode", int64_t{1}},
             {"count_include_pad", int64_t{1}}}),
  };
  for (const char* op : {"MaxPool", "AveragePool"}) {
    for (size_t i = 0; i < std::size(cases); ++i) {
      Attributes attrs = cases[i];
      if (std::string(op) == "MaxPool" && attrs.Has("count_include_pad")) continue;
      SCOPED_TRACE(std::string(op) + " case " + std::to_string(i));
      ExpectClose(GpuPool(op, x, attrs), Cpu(op, {&x}, attrs, 19));
    }
  }
  // Dilation (MaxPool only in ONNX before opset 19's AveragePool dilations).
  const Attributes dil = Attrs({{"kernel_shape", k23}, {"dilations", d2}, {"pads", p1}});
  ExpectClose(GpuPool("MaxPool", x, dil), Cpu("MaxPool", {&x}, dil, 13));
}

TEST(CudaKernelMath, GlobalAveragePoolMatchesCpu) {
  const Tensor x = Random({3, 5, 7, 3}, 10);
  std::vector<float> got;
  for (int64_t p = 0; p < 15; ++p) got.push_back(MeanOf(x.data<float>() + p * 21, 21));
  ExpectClose(got, Cpu("GlobalAveragePool", {&x}));
}

TEST(CudaKernelMath, SoftmaxRowsMatchCpuForEveryAxisAndOpset) {
  const Tensor x = Random({3, 4, 5, 3}, 11);
  for (int64_t opset : {11, 13}) {
    for (int64_t axis : {-1, 0, 1, 2, 3}) {
      SCOPED_TRACE("opset " + std::to_string(opset) + " axis " + std::to_string(axis));
      const Attributes attrs = Attrs({{"axis", axis}});
      Result<SoftmaxRows> s = MakeSoftmaxRows(x.shape(), attrs, opset);
      ASSERT_TRUE(s.ok()) << s.status().ToString();
      std::vector<float> got(static_cast<size_t>(x.num_elements()));
      for (int64_t row = 0; row < SoftmaxRowCount(*s); ++row) {
        const int64_t base = SoftmaxRowBase(*s, row);
        SoftmaxRow(x.data<float>() + base, got.data() + base, s->axis_dim, s->inner);
      }
      ExpectClose(got, Cpu("Softmax", {&x}, attrs, opset));
    }
  }
}

TEST(CudaKernelMath, ConcatOffsetsMatchCpu) {
  for (int64_t axis : {0, 1, 2, -1}) {
    const Tensor a = Random({2, 3, 5}, 12);
    Shape sb = {2, 3, 5}, sc = {2, 3, 5};
    const size_t ax = static_cast<size_t>(axis < 0 ? axis + 3 : axis);
    sb[ax] = 1;
    sc[ax] = 4;
    const Tensor b = Random(sb, 13), c = Random(sc, 14);
    const Attributes attrs = Attrs({{"axis", axis}});
    const std::vector<float> want = Cpu("Concat", {&a, &b, &c}, attrs);
    const Shape shapes[] = {a.shape(), b.shape(), c.shape()};
    Result<ConcatLayout> l = MakeConcat(shapes, attrs);
    ASSERT_TRUE(l.ok());
    std::vector<float> got(want.size(), -99.0f);
    const Tensor* ins[] = {&a, &b, &c};
    for (size_t k = 0; k < 3; ++k) {
      for (int64_t i = 0; i < ins[k]->num_elements(); ++i) {
        got[static_cast<size_t>(ConcatDest(i, l->blocks[k], l->out_block, l->offsets[k]))] =
            ins[k]->data<float>()[i];
      }
    }
    SCOPED_TRACE("axis " + std::to_string(axis));
    ExpectClose(got, want);
  }
}

// A naive column-major SGEMM with cuBLAS's argument convention.
void ColumnMajorSgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a,
                      int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc) {
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t i = 0; i < m; ++i) {
      float sum = 0;
      for (int64_t p = 0; p < k; ++p) {
        const float av = ta ? a[p + i * lda] : a[i + p * lda];
        const float bv = tb ? b[j + p * ldb] : b[p + j * ldb];
        sum += av * bv;
      }
      c[i + j * ldc] = sum;
    }
  }
}

TEST(CudaKernelMath, RowMajorGemmThroughColumnMajorArgumentsMatchesCpuGemm) {
  const int64_t m = 5, n = 7, k = 3;
  for (int ta = 0; ta < 2; ++ta) {
    for (int tb = 0; tb < 2; ++tb) {
      const Tensor a = Random(ta ? Shape{k, m} : Shape{m, k}, 15);
      const Tensor b = Random(tb ? Shape{n, k} : Shape{k, n}, 16);
      const std::vector<float> want =
          Cpu("Gemm", {&a, &b}, Attrs({{"transA", int64_t{ta}}, {"transB", int64_t{tb}}}));
      const ColumnMajorGemm g = RowMajorGemmAsColumnMajor(ta, tb, m, n, k);
      std::vector<float> got(static_cast<size_t>(m * n));
      ColumnMajorSgemm(g.trans_first, g.trans_second, g.m, g.n, g.k, b.data<float>(), g.ld_first,
                       a.data<float>(), g.ld_second, got.data(), g.ld_c);
      SCOPED_TRACE("transA " + std::to_string(ta) + " transB " + std::to_string(tb));
      ExpectClose(got, want, 1e-5f);
    }
  }
}

TEST(CudaSupport, RefusesWhatTheKernelsDoNotCoverNamingTheOp) {
  const TensorType f{DType::kFloat32, {1, 3, 8, 8}};
  const TensorType i64{DType::kInt64, {1, 3, 8, 8}};
  const TensorType outs[] = {f};
  const TensorType two_outs[] = {f, i64};
  const TensorType in1[] = {f};
  const Tensor* none[] = {nullptr, nullptr, nullptr};
  Status st = CheckCudaSupport("LSTM", {}, 13, in1, none, outs);
  EXPECT_EQ(st.code(), StatusCode::kUnimplemented);
  EXPECT_NE(st.message().find("LSTM"), std::string::npos) << st.message();
  const std::vector<int64_t> k = {2, 2};
  st = CheckCudaSupport("MaxPool", Attrs({{"kernel_shape", k}}), 13, in1, none, two_outs);
  EXPECT_EQ(st.code(), StatusCode::kUnimplemented);
  EXPECT_NE(st.message().find("Indices"), std::string::npos) << st.message();
  const TensorType ints[] = {i64, i64};
  const TensorType int_out[] = {i64};
  st = CheckCudaSupport("Add", {}, 13, ints, none, int_out);
  EXPECT_EQ(st.code(), StatusCode::kUnimplemented);
  EXPECT_NE(st.message().find("float32"), std::string::npos) << st.message();
  const TensorType clip_in[] = {f, TensorType{DType::kFloat32, {}}};
  EXPECT_EQ(CheckCudaSupport("Clip", {}, 13, clip_in, none, outs).code(),
            StatusCode::kUnimplemented);
  // Supported ones pass.
  EXPECT_TRUE(CheckCudaSupport("MaxPool", Attrs({{"kernel_shape", k}}), 13, in1, none, outs).ok());
  EXPECT_TRUE(CheckCudaSupport("Relu", {}, 13, in1, none, outs).ok());
  const TensorType add_in[] = {f, TensorType{DType::kFloat32, {3, 1, 1}}};
  EXPECT_TRUE(CheckCudaSupport("Add", {}, 13, add_in, none, outs).ok());
  EXPECT_EQ(CudaOpTypes().size(), 31u);
}

}  // namespace
}  // namespace orrery::ops::cuda

namespace orrery::ops::cuda {
namespace {

TEST(CudaSupport, ConvParamsResolvePadsAndRefuseAsymmetricOnes) {
  const std::vector<int64_t> s2 = {2, 2}, p1 = {1, 1, 1, 1};
  Attributes a;
  a.Set("strides", s2);
  a.Set("pads", p1);
  a.Set("group", int64_t{2});
  Result<Conv2dParams> p = MakeConv2d(a, {1, 4, 9, 7}, {6, 2, 3, 3});
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->out_h, 5);
  EXPECT_EQ(p->out_w, 4);
  EXPECT_EQ(p->pad_h, 1);
  EXPECT_EQ(p->group, 2);
  Attributes same;
  same.Set("auto_pad", std::string("SAME_UPPER"));
  same.Set("strides", s2);
  // in 8, kernel 3, stride 2: total pad 1 -> asymmetric -> refused.
  Result<Conv2dParams> q = MakeConv2d(same, {1, 2, 8, 8}, {3, 2, 3, 3});
  EXPECT_EQ(q.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(q.status().message().find("asymmetric"), std::string::npos);
  EXPECT_FALSE(MakeConv2d({}, {1, 3, 8, 8}, {3, 2, 3, 3}).ok());  // channels mismatch
}

}  // namespace
}  // namespace orrery::ops::cuda
