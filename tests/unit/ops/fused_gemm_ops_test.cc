// Conv, Gemm and MatMul with the runtime's `_fused_*` attributes
// (ops/cpu/gemm/fusion.h) against the same computation done by the unfused
// ops: the op, then Add for the residual, then the activation's own op.
#include <gtest/gtest.h>

#include <algorithm>

#include <cstdint>
#include <string>
#include <vector>

#include "ops/cpu/gemm/sgemm.h"
#include "ops/registry.h"
#include "op_test_util.h"
#include "parallel_test_util.h"

namespace orrery::ops {
namespace {

using testing::ExpectNear;
using testing::F32;
using testing::RandomTensor;
using testing::RunOp;
using testing::Values;

struct ActCase {
  std::string name;
  bool has_alpha = false, has_beta = false;
  float alpha = 0, beta = 0;
};

const std::vector<ActCase>& Activations() {
  static const std::vector<ActCase> acts = {
      {"", false, false},
      {"Relu"},
      {"Clip", true, true, -0.3f, 0.4f},
      {"LeakyRelu", true, false, 0.2f},
      {"HardSigmoid", true, true, 0.3f, 0.45f},
      {"HardSwish"},
      {"Sigmoid"},
      {"Tanh"},
      {"Gelu"}};
  return acts;
}

// The activation applied by its own op (opset 20 for Gelu).
Tensor ApplyUnfused(const ActCase& a, const Tensor& x) {
  if (a.name.empty()) return x;
  Attributes attrs;
  std::vector<const Tensor*> ins = {&x};
  Tensor lo = F32({}, {a.alpha}), hi = F32({}, {a.beta});
  if (a.name == "Clip") {
    ins.push_back(&lo);
    ins.push_back(&hi);
  } else {
    if (a.has_alpha) attrs.Set("alpha", a.alpha);
    if (a.has_beta) attrs.Set("beta", a.beta);
  }
  auto out = RunOp(a.name, ins, attrs, 20);
  EXPECT_TRUE(out.ok()) << a.name << ": " << out.status().ToString();
  return out.ok() ? std::move((*out)[0]) : Tensor();
}

void SetFusion(Attributes* attrs, const ActCase& a, bool residual) {
  if (!a.name.empty()) attrs->Set("_fused_activation", a.name);
  if (a.has_alpha) attrs->Set("_fused_alpha", a.alpha);
  if (a.has_beta) attrs->Set("_fused_beta", a.beta);
  if (residual) attrs->Set("_fused_residual", int64_t{1});
}

Tensor AddTensors(const Tensor& a, const Tensor& b) {
  auto out = RunOp("Add", {&a, &b});
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  return out.ok() ? std::move((*out)[0]) : Tensor();
}

struct ConvCase {
  Shape x, w;
  std::vector<int64_t> strides, pads;
  int64_t group = 1;
};

TEST(FusedConvTest, EveryActivationWithAndWithoutResidual) {
  const std::vector<ConvCase> cases = {
      {{1, 5, 9, 9}, {12, 5, 3, 3}, {1, 1}, {1, 1, 1, 1}},   // im2col
      {{2, 5, 16, 17}, {12, 5, 3, 3}, {1, 1}, {1, 1, 1, 1}}, // im2col-free tile
      {{2, 8, 6, 7}, {16, 8, 1, 1}, {1, 1}, {0, 0, 0, 0}},   // pointwise
      {{1, 6, 11, 11}, {6, 1, 3, 3}, {2, 2}, {1, 1, 1, 1}, 6},  // depthwise
      {{1, 4, 7, 7}, {4, 1, 5, 5}, {1, 1}, {2, 2, 2, 2}, 4},    // depthwise 5x5
      {{2, 3, 5, 37}, {3, 1, 3, 3}, {1, 2}, {1, 0, 1, 2}, 3},   // depthwise, 2 images
      {{2, 5, 14, 14}, {5, 1, 3, 3}, {1, 1}, {1, 1, 1, 1}, 5},  // flat depthwise, 2 images
      {{2, 5, 7, 7}, {5, 1, 3, 3}, {1, 1}, {1, 1, 1, 1}, 5},    // flat depthwise (AVX2: 7x7)
      {{2, 4, 28, 28}, {4, 1, 3, 3}, {2, 2}, {1, 1, 1, 1}, 4},  // depthwise stride 2, split rows
      {{1, 4, 8, 8}, {6, 2, 3, 3}, {2, 1}, {0, 1, 1, 0}, 2},    // grouped
      {{1, 8, 6, 6}, {64, 8, 3, 3}, {1, 1}, {1, 1, 1, 1}},      // transposed GEMM
      {{1, 16, 4, 4}, {80, 16, 1, 1}, {1, 1}, {0, 0, 0, 0}},    // transposed pointwise
      {{1, 24, 17, 17}, {13, 24, 1, 1}, {1, 1}, {0, 0, 0, 0}},  // pointwise tile
      {{2, 40, 16, 20}, {72, 40, 1, 1}, {1, 1}, {0, 0, 0, 0}},  // pointwise tile, shallow and wide
      {{1, 3, 20, 33}, {3, 1, 3, 3}, {1, 1}, {1, 0, 1, 0}, 3},  // depthwise, row groups
      {{2, 3, 12, 40}, {20, 3, 3, 3}, {2, 2}, {1, 1, 1, 1}},    // stem (AVX-512 direct)
      // channels across the lanes (AVX-512; 70 = 64 + 6)
      {{2, 6, 9, 52}, {70, 6, 3, 3}, {2, 2}, {1, 1, 1, 1}},
      // 1x1 stride 2 on even planes: the even-even parity plane (masked
      // panels, transposed left panels, groups).
      {{2, 12, 10, 14}, {24, 12, 1, 1}, {2, 2}, {0, 0, 0, 0}},
      {{1, 16, 14, 14}, {72, 16, 1, 1}, {2, 2}, {0, 0, 0, 0}},
      {{1, 8, 8, 8}, {8, 4, 1, 1}, {2, 2}, {0, 0, 0, 0}, 2},
      // Winograd's F(2x2, 3x3) (AVX2 / AVX-512), two images, odd sizes.
      {{2, 32, 29, 27}, {40, 32, 3, 3}, {1, 1}, {1, 1, 1, 1}},
  };
  uint32_t seed = 1;
  for (const ConvCase& cc : cases) {
    const Tensor x = RandomTensor(cc.x, seed++);
    const Tensor w = RandomTensor(cc.w, seed++);
    const Tensor b = RandomTensor({cc.w[0]}, seed++);
    Attributes base;
    base.Set("strides", cc.strides);
    base.Set("pads", cc.pads);
    base.Set("group", cc.group);
    auto plain = RunOp("Conv", {&x, &w, &b}, base);
    ASSERT_TRUE(plain.ok()) << plain.status().ToString();
    const Tensor z = RandomTensor((*plain)[0].shape(), seed++);
    for (const ActCase& a : Activations()) {
      for (bool residual : {false, true}) {
        SCOPED_TRACE("act '" + a.name + "' residual " + std::to_string(residual) + " W " +
                     ShapeToString(cc.w));
        Attributes attrs = base;
        SetFusion(&attrs, a, residual);
        std::vector<const Tensor*> ins = {&x, &w, &b};
        if (residual) ins.push_back(&z);
        auto fused = RunOp("Conv", ins, attrs);
        ASSERT_TRUE(fused.ok()) << fused.status().ToString();
        const Tensor pre = residual ? AddTensors((*plain)[0], z) : (*plain)[0];
        ExpectNear(Values<float>((*fused)[0]), Values<float>(ApplyUnfused(a, pre)), 2e-5f);
      }
    }
  }
}

TEST(FusedConvTest, ResidualWithoutBias) {
  const Tensor x = RandomTensor({1, 3, 5, 5}, 11);
  const Tensor w = RandomTensor({4, 3, 3, 3}, 12);
  Attributes attrs;
  attrs.Set("pads", std::vector<int64_t>{1, 1, 1, 1});
  auto plain = RunOp("Conv", {&x, &w}, attrs);
  ASSERT_TRUE(plain.ok());
  const Tensor z = RandomTensor((*plain)[0].shape(), 13);
  attrs.Set("_fused_residual", int64_t{1});
  auto fused = RunOp("Conv", {&x, &w, &z}, attrs);  // Z is the last input
  ASSERT_TRUE(fused.ok()) << fused.status().ToString();
  ExpectNear(Values<float>((*fused)[0]), Values<float>(AddTensors((*plain)[0], z)));
}

TEST(FusedConvTest, RejectsBadFusedInputs) {
  const Tensor x = RandomTensor({1, 3, 5, 5}, 1);
  const Tensor w = RandomTensor({4, 3, 1, 1}, 2);
  const Tensor b = RandomTensor({4}, 3);
  const Tensor z_bad = RandomTensor({1, 4, 5, 4}, 4);
  Attributes plain;
  // A fourth input without _fused_residual.
  EXPECT_EQ(RunOp("Conv", {&x, &w, &b, &b}, plain).status().code(),
            StatusCode::kInvalidArgument);
  Attributes res;
  res.Set("_fused_residual", int64_t{1});
  auto st = RunOp("Conv", {&x, &w, &b, &z_bad}, res).status();
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("residual"), std::string::npos) << st.ToString();
  Attributes act;
  act.Set("_fused_activation", std::string("Swish"));
  st = RunOp("Conv", {&x, &w, &b}, act).status();
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("Swish"), std::string::npos) << st.ToString();
  Attributes bias;
  bias.Set("_fused_bias", int64_t{1});
  EXPECT_EQ(RunOp("Conv", {&x, &w, &b}, bias).status().code(), StatusCode::kInvalidArgument);
  Attributes flag;
  flag.Set("_fused_residual", int64_t{2});
  EXPECT_EQ(RunOp("Conv", {&x, &w, &b}, flag).status().code(), StatusCode::kInvalidArgument);
}

TEST(FusedGemmTest, EveryActivationWithBiasFormsAndResidual) {
  const Tensor a = RandomTensor({9, 20}, 21);
  const Tensor bt = RandomTensor({50, 20}, 22);  // transB
  const std::vector<Tensor> biases = {RandomTensor({50}, 23), RandomTensor({9, 1}, 24),
                                      RandomTensor({9, 50}, 25), RandomTensor({1}, 26)};
  const Tensor z = RandomTensor({9, 50}, 27);
  for (const Tensor& c : biases) {
    for (float beta : {1.0f, 0.5f}) {
      Attributes base;
      base.Set("transB", int64_t{1});
      base.Set("alpha", 1.5f);
      base.Set("beta", beta);
      auto plain = RunOp("Gemm", {&a, &bt, &c}, base);
      ASSERT_TRUE(plain.ok()) << plain.status().ToString();
      for (const ActCase& act : Activations()) {
        for (bool residual : {false, true}) {
          SCOPED_TRACE("act '" + act.name + "' C " + ShapeToString(c.shape()));
          Attributes attrs = base;
          SetFusion(&attrs, act, residual);
          std::vector<const Tensor*> ins = {&a, &bt, &c};
          if (residual) ins.push_back(&z);
          auto fused = RunOp("Gemm", ins, attrs);
          ASSERT_TRUE(fused.ok()) << fused.status().ToString();
          const Tensor pre = residual ? AddTensors((*plain)[0], z) : (*plain)[0];
          ExpectNear(Values<float>((*fused)[0]), Values<float>(ApplyUnfused(act, pre)), 2e-5f);
        }
      }
    }
  }
}

TEST(FusedMatMulTest, BiasResidualAndActivation) {
  const Tensor a = RandomTensor({2, 3, 7, 33}, 31);
  const Tensor b2 = RandomTensor({33, 20}, 32);       // folded batches
  const Tensor b4 = RandomTensor({2, 1, 33, 20}, 33);  // broadcast batches
  const Tensor bias = RandomTensor({20}, 34);
  const Tensor z = RandomTensor({2, 3, 7, 20}, 35);
  for (const Tensor* b : {&b2, &b4}) {
    auto plain = RunOp("MatMul", {&a, b});
    ASSERT_TRUE(plain.ok()) << plain.status().ToString();
    const Tensor with_bias = AddTensors((*plain)[0], bias);
    for (const ActCase& act : Activations()) {
      SCOPED_TRACE("act '" + act.name + "' B " + ShapeToString(b->shape()));
      Attributes attrs;
      SetFusion(&attrs, act, true);
      attrs.Set("_fused_bias", int64_t{1});
      auto fused = RunOp("MatMul", {&a, b, &bias, &z}, attrs);
      ASSERT_TRUE(fused.ok()) << fused.status().ToString();
      ExpectNear(Values<float>((*fused)[0]),
                 Values<float>(ApplyUnfused(act, AddTensors(with_bias, z))), 2e-5f);
      Attributes only_act;
      SetFusion(&only_act, act, false);
      auto fused2 = RunOp("MatMul", {&a, b}, only_act);
      ASSERT_TRUE(fused2.ok()) << fused2.status().ToString();
      ExpectNear(Values<float>((*fused2)[0]), Values<float>(ApplyUnfused(act, (*plain)[0])),
                 2e-5f);
    }
  }
  // Wrong bias shape, and a residual without the attribute.
  const Tensor bad_bias = RandomTensor({21}, 36);
  Attributes fb;
  fb.Set("_fused_bias", int64_t{1});
  EXPECT_EQ(RunOp("MatMul", {&a, &b2, &bad_bias}, fb).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(RunOp("MatMul", {&a, &b2, &z}).status().code(), StatusCode::kInvalidArgument);
}

// Threads lent through KernelContext give the same result (batches split
// across threads, or one GEMM's tiles).
TEST(MatMulTest, ThreadsMatchSingleThread) {
  const Tensor a = RandomTensor({4, 33, 70}, 61);
  const Tensor b = RandomTensor({4, 70, 150}, 62);
  const Tensor w = RandomTensor({70, 150}, 63);
  for (const Tensor* rhs : {&b, &w}) {
    auto want = RunOp("MatMul", {&a, rhs});
    ASSERT_TRUE(want.ok());
    const KernelDef* def = OpRegistry::Global().Find("MatMul", Backend::kCpu);
    ASSERT_NE(def, nullptr);
    testing::SpawnThreads threads(2);
    Attributes attrs;
    const std::vector<const Tensor*> ins = {&a, rhs};
    const KernelContext ctx{.inputs = ins, .attrs = attrs, .opset = 13, .threads = &threads};
    const TensorType out_type{DType::kFloat32, (*want)[0].shape()};
    std::vector<Tensor> outs(1);
    outs[0] = *Tensor::Allocate(DType::kFloat32, out_type.shape);
    ASSERT_TRUE(
        PrepareAndCompute(def->prepare, def->compute, ctx, {&out_type, 1}, outs).ok());
    EXPECT_EQ(Values<float>(outs[0]), Values<float>((*want)[0]));
  }
}

// 1x1 stride-2 convolutions over the even-even parity plane (split by
// channel chunks on every thread, then the GEMM on the rest of the
// scratch): two threads give the one-thread bits, also with a residual.
TEST(FusedConvTest, StrideTwoParityPlaneThreadsMatchSingleThread) {
  const KernelDef* def = OpRegistry::Global().Find("Conv", Backend::kCpu);
  ASSERT_NE(def, nullptr);
  for (const Shape& xs : {Shape{2, 40, 28, 28}, Shape{1, 64, 14, 14}}) {
    const Tensor x = RandomTensor(xs, 71);
    const Tensor w = RandomTensor({96, xs[1], 1, 1}, 72);
    const Tensor b = RandomTensor({96}, 73);
    Attributes attrs;
    attrs.Set("strides", std::vector<int64_t>{2, 2});
    auto plain = RunOp("Conv", {&x, &w, &b}, attrs);
    ASSERT_TRUE(plain.ok()) << plain.status().ToString();
    const Tensor z = RandomTensor((*plain)[0].shape(), 74);
    attrs.Set("_fused_residual", int64_t{1});
    attrs.Set("_fused_activation", std::string("Relu"));
    const std::vector<const Tensor*> ins = {&x, &w, &b, &z};
    auto want = RunOp("Conv", ins, attrs);
    ASSERT_TRUE(want.ok()) << want.status().ToString();
    const Tensor pre = AddTensors((*plain)[0], z);
    std::vector<float> relu = Values<float>(pre);
    for (float& v : relu) v = std::max(v, 0.0f);
    ExpectNear(Values<float>((*want)[0]), relu, 2e-5f);
    testing::SpawnThreads threads(2);
    const KernelContext ctx{.inputs = ins, .attrs = attrs, .opset = 11, .threads = &threads};
    const TensorType out_type{DType::kFloat32, (*want)[0].shape()};
    std::vector<Tensor> outs(1);
    outs[0] = *Tensor::Allocate(DType::kFloat32, out_type.shape);
    ASSERT_TRUE(PrepareAndCompute(def->prepare, def->compute, ctx, {&out_type, 1}, outs).ok());
    EXPECT_EQ(Values<float>(outs[0]), Values<float>((*want)[0])) << ShapeToString(xs);
  }
}

TEST(MatMulTest, SmallBatchOneRowsMatchReference) {
  // M = 1..8 rows (batch-1 MLP / decoder shapes) against Gemm's reference.
  for (int64_t m = 1; m <= 8; ++m) {
    const Tensor a = RandomTensor({m, 100}, 40 + static_cast<uint32_t>(m));
    const Tensor b = RandomTensor({100, 70}, 50);
    auto out = RunOp("MatMul", {&a, &b});
    ASSERT_TRUE(out.ok());
    const std::vector<float> av = Values<float>(a), bv = Values<float>(b);
    std::vector<float> want(static_cast<size_t>(m * 70));
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < 70; ++j) {
        double acc = 0;
        for (int64_t k = 0; k < 100; ++k) acc += double(av[i * 100 + k]) * bv[k * 70 + j];
        want[static_cast<size_t>(i * 70 + j)] = static_cast<float>(acc);
      }
    }
    ExpectNear(Values<float>((*out)[0]), want, 1e-4f);
  }
}

}  // namespace
}  // namespace orrery::ops
