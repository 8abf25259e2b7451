#include "runtime/packed_weights.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <tuple>
#include <vector>

#include "model_builder.h"
#include "ops/cpu/gemm/sgemm.h"
#include "runtime/model.h"
#include "runtime/model_image.h"

namespace orrery {
namespace {

using testing::kFloat;
using testing::ModelBuilder;
using testing::TinyMlp;

// X[1, 2, 5, 5] -> Conv(W[m, 2, 3, 3], pads 1) -> Y[1, m, 5, 5].
ModelBuilder ConvModel(int64_t m) {
  ModelBuilder b(13);
  b.Input("X", kFloat, {1, 2, 5, 5});
  std::vector<float> w(static_cast<size_t>(m * 2 * 9));
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i % 7) * 0.25f - 0.5f;
  b.FloatInit("W", {m, 2, 3, 3}, w);
  ModelBuilder::AttrInts(b.Node("Conv", {"X", "W"}, {"Y"}, "conv"), "pads", {1, 1, 1, 1});
  b.Output("Y", kFloat, {1, m, 5, 5});
  return b;
}

// X[N, 4] -> MatMul(B[4, 3]) -> Y[N, 3].
ModelBuilder MatMulModel() {
  ModelBuilder b(13);
  b.Input("X", kFloat, {-1, 4});
  b.FloatInit("B", {4, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  b.Node("MatMul", {"X", "B"}, {"Y"}, "mm");
  b.Output("Y", kFloat, {-1, 3});
  return b;
}

NamedTensor Input(const std::string& name, Shape shape) {
  Tensor t(DType::kFloat32, shape);
  float* d = t.data<float>();
  for (int64_t i = 0; i < t.num_elements(); ++i) d[i] = static_cast<float>(i % 5) - 1.5f;
  return NamedTensor{name, std::move(t)};
}

std::vector<float> RunOnce(const CompiledModel& model, const NamedTensor& in) {
  Result<std::vector<NamedTensor>> out = model.Run({in});
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  if (!out.ok()) return {};
  const Tensor& y = (*out)[0].tensor;
  return std::vector<float>(y.data<float>(), y.data<float>() + y.num_elements());
}

struct Case {
  ModelBuilder builder;
  NamedTensor input;
  size_t entries;  // packed operands the model has
};

TEST(PackedWeightsTest, ExportImportRoundTripReusesPackedWeights) {
  std::vector<Case> cases;
  cases.push_back({TinyMlp(), Input("X", {3, 2}), 2});
  cases.push_back({ConvModel(4), Input("X", {1, 2, 5, 5}), 1});
  cases.push_back({MatMulModel(), Input("X", {2, 4}), 1});
  for (const Case& c : cases) {
    const std::string bytes = c.builder.Bytes();
    auto plain = CompiledModel::Compile(bytes);
    ASSERT_TRUE(plain.ok()) << plain.status().ToString();
    Result<std::vector<std::byte>> blob = ExportPackedWeights(**plain);
    ASSERT_TRUE(blob.ok()) << blob.status().ToString();
    size_t imported = 0;
    Status import_status;
    auto loaded = CompiledModel::Compile(
        bytes, {.packed_weights = *blob, .imported = &imported, .import_status = &import_status});
    ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
    EXPECT_TRUE(import_status.ok()) << import_status.ToString();
    EXPECT_EQ(imported, c.entries);
    EXPECT_EQ(RunOnce(**loaded, c.input), RunOnce(**plain, c.input));
    // Exporting the imported model gives the same bytes (nothing repacked differently).
    Result<std::vector<std::byte>> again = ExportPackedWeights(**loaded);
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(*again, *blob);
  }
}

TEST(PackedWeightsTest, MalformedBlobIsIgnoredAndTheModelPacks) {
  const std::string bytes = TinyMlp().Bytes();
  auto plain = CompiledModel::Compile(bytes);
  ASSERT_TRUE(plain.ok());
  Result<std::vector<std::byte>> blob = ExportPackedWeights(**plain);
  ASSERT_TRUE(blob.ok());
  const NamedTensor in = Input("X", {3, 2});
  for (size_t cut : {size_t{3}, size_t{16}, blob->size() / 2, blob->size() - 1}) {
    std::vector<std::byte> bad(blob->begin(), blob->begin() + static_cast<long>(cut));
    size_t imported = 99;
    Status import_status;
    auto loaded = CompiledModel::Compile(
        bytes, {.packed_weights = bad, .imported = &imported, .import_status = &import_status});
    ASSERT_TRUE(loaded.ok());
    EXPECT_EQ(import_status.code(), StatusCode::kInvalidArgument) << "cut at " << cut;
    EXPECT_EQ(imported, 99u) << "nothing is taken from a malformed blob";
    EXPECT_EQ(RunOnce(**loaded, in), RunOnce(**plain, in));
  }
}

TEST(PackedWeightsTest, WeightsOfOtherDimensionsAreRepackedNotUsed) {
  // Conv with 4 output channels exported, imported into one with 6: the
  // entry matches by step and op type but not by shape.
  auto four = CompiledModel::Compile(ConvModel(4).Bytes());
  ASSERT_TRUE(four.ok());
  Result<std::vector<std::byte>> blob = ExportPackedWeights(**four);
  ASSERT_TRUE(blob.ok());
  const std::string six_bytes = ConvModel(6).Bytes();
  auto six_plain = CompiledModel::Compile(six_bytes);
  ASSERT_TRUE(six_plain.ok());
  size_t imported = 0;
  auto six = CompiledModel::Compile(six_bytes, {.packed_weights = *blob, .imported = &imported});
  ASSERT_TRUE(six.ok());
  EXPECT_EQ(imported, 1u);
  const NamedTensor in = Input("X", {1, 2, 5, 5});
  EXPECT_EQ(RunOnce(**six, in), RunOnce(**six_plain, in));

  // Weights of another op type at that step are not even deserialised.
  auto mm = CompiledModel::Compile(MatMulModel().Bytes());
  ASSERT_TRUE(mm.ok());
  Result<std::vector<std::byte>> mm_blob = ExportPackedWeights(**mm);
  ASSERT_TRUE(mm_blob.ok());
  imported = 0;
  auto six2 = CompiledModel::Compile(six_bytes, {.packed_weights = *mm_blob, .imported = &imported});
  ASSERT_TRUE(six2.ok());
  EXPECT_EQ(imported, 0u);
  EXPECT_EQ(RunOnce(**six2, in), RunOnce(**six_plain, in));
}

// X[1, 3, 8, 64] -> Conv(3 -> 16, 3x3, stride 2, pads 1): an image stem
// (gemm/conv_stem.h) -> Conv(16 -> 32, same): 16-wide output rows, the
// channels kernel (gemm/conv_channels.h) -> Y[1, 32, 2, 16].
ModelBuilder StemAndChannelsModel() {
  ModelBuilder b(13);
  b.Input("X", kFloat, {1, 3, 8, 64});
  for (auto [name, m, c] : {std::tuple{"W1", 16, 3}, std::tuple{"W2", 32, 16}}) {
    std::vector<float> w(static_cast<size_t>(m * c * 9));
    for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i % 11) * 0.125f - 0.6f;
    b.FloatInit(name, {m, c, 3, 3}, w);
  }
  for (auto [in, w, out] : {std::tuple{"X", "W1", "H"}, std::tuple{"H", "W2", "Y"}}) {
    onnx::NodeProto* n = b.Node("Conv", {in, w}, {out}, out);
    ModelBuilder::AttrInts(n, "strides", {2, 2});
    ModelBuilder::AttrInts(n, "pads", {1, 1, 1, 1});
  }
  b.Output("Y", kFloat, {1, 32, 2, 16});
  return b;
}

// Layers the direct AVX-512 kernels run keep only those kernels' weights:
// nothing packed for the GEMM is exported for them. With the ISA capped
// below AVX-512 after compiling, the same plan falls back to the GEMM over
// the weights as stored and still computes the same outputs.
TEST(PackedWeightsTest, StemAndChannelsLayersKeepNoPackedGemmWeights) {
  using ops::cpu::GemmIsa;
  if (ops::cpu::ActiveGemmIsa() != GemmIsa::kAvx512) GTEST_SKIP() << "needs AVX-512 (the stem and channels kernels)";
  // The channels kernel runs where InPlaceConvKernels() (not on Intel
  // unless asked for).
  struct InPlaceOn {
    InPlaceOn() { ops::cpu::SetInPlaceConvKernelsForTesting(true); }
    ~InPlaceOn() { ops::cpu::SetInPlaceConvKernelsForTesting(std::nullopt); }
  } in_place_on;
  const std::string bytes = StemAndChannelsModel().Bytes();
  auto model = CompiledModel::Compile(bytes);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  Result<std::vector<std::byte>> blob = ExportPackedWeights(**model);
  ASSERT_TRUE(blob.ok()) << blob.status().ToString();
  size_t imported = 99;
  auto loaded = CompiledModel::Compile(bytes, {.packed_weights = *blob, .imported = &imported});
  ASSERT_TRUE(loaded.ok());
  EXPECT_EQ(imported, 0u) << "no packed GEMM W for the stem or the channels layer";
  const NamedTensor in = Input("X", {1, 3, 8, 64});
  const std::vector<float> avx512 = RunOnce(**model, in);
  ops::cpu::SetGemmIsaCapForTesting(GemmIsa::kAvx2);
  const std::vector<float> fallback = RunOnce(**model, in);
  ops::cpu::SetGemmIsaCapForTesting(GemmIsa::kAvx512);
  ASSERT_EQ(fallback.size(), avx512.size());
  ASSERT_EQ(avx512.size(), size_t{32 * 2 * 16});
  for (size_t i = 0; i < avx512.size(); ++i) {
    EXPECT_NEAR(fallback[i], avx512[i], 1e-4f * (1.0f + std::abs(avx512[i]))) << "at " << i;
  }
}

// X[1, 32, 28, 28] -> Conv(W[40, 32, 3, 3], pads 1): Winograd's F(4x4, 3x3)
// layer on AVX2 or AVX-512 (ops/cpu/gemm/conv_winograd.h).
ModelBuilder WinogradModel() {
  ModelBuilder b(13);
  b.Input("X", kFloat, {1, 32, 28, 28});
  std::vector<float> w(40 * 32 * 9);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i % 11) * 0.05f - 0.25f;
  b.FloatInit("W", {40, 32, 3, 3}, w);
  ModelBuilder::AttrInts(b.Node("Conv", {"X", "W"}, {"Y"}, "conv"), "pads", {1, 1, 1, 1});
  b.Output("Y", kFloat, {1, 40, 28, 28});
  return b;
}

// The transformed weights are the layer's packed form: exported, imported
// and standing in for W in a packed-only image, so a cold load neither
// transforms nor needs the values.
TEST(PackedWeightsTest, WinogradWeightsAreExportedAndStandInForW) {
  using ops::cpu::GemmIsa;
  if (ops::cpu::ActiveGemmIsa() == GemmIsa::kPortable) GTEST_SKIP() << "needs AVX2 or AVX-512 (Conv's Winograd path)";
  const std::string bytes = WinogradModel().Bytes();
  auto model = CompiledModel::Compile(bytes);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  Result<std::vector<std::byte>> blob = ExportPackedWeights(**model);
  ASSERT_TRUE(blob.ok()) << blob.status().ToString();
  // 36 terms x 1 chunk of 40 x 32 floats, 4x W's 40 x 32 x 9.
  EXPECT_GT(blob->size(), 36u * 40 * 32 * sizeof(float));
  size_t imported = 0;
  auto loaded = CompiledModel::Compile(bytes, {.packed_weights = *blob, .imported = &imported});
  ASSERT_TRUE(loaded.ok());
  EXPECT_EQ(imported, 1u);
  const NamedTensor in = Input("X", {1, 32, 28, 28});
  const std::vector<float> want = RunOnce(**model, in);
  EXPECT_EQ(RunOnce(**loaded, in), want);
  Result<std::vector<std::byte>> full = ExportModelImage(**model);
  Result<std::vector<std::byte>> small = ExportModelImage(**model, {.packed_only = true});
  ASSERT_TRUE(full.ok() && small.ok());
  EXPECT_LT(small->size() + 40 * 32 * 9 * sizeof(float) / 2, full->size()) << "W left out";
  auto cold = CompiledModel::Load({.image = *small, .packed_weights = *blob});
  ASSERT_TRUE(cold.ok()) << cold.status().ToString();
  EXPECT_EQ(RunOnce(**cold, in), want);
  // Without Winograd the layer needs the GEMM's packing, which only the
  // values give: the load says so (the server then compiles the ONNX).
  ops::cpu::SetWinogradConvsForTesting(false);
  auto other = CompiledModel::Load({.image = *small, .packed_weights = *blob});
  ops::cpu::SetWinogradConvsForTesting(std::nullopt);
  EXPECT_FALSE(other.ok());
}

TEST(PackedWeightsTest, ModelWithoutPackedOperandsExportsAnEmptyList) {
  ModelBuilder b(13);
  b.Input("X", kFloat, {-1, 4});
  b.Node("Relu", {"X"}, {"Y"}, "relu");
  b.Output("Y", kFloat, {-1, 4});
  auto model = CompiledModel::Compile(b.Bytes());
  ASSERT_TRUE(model.ok());
  Result<std::vector<std::byte>> blob = ExportPackedWeights(**model);
  ASSERT_TRUE(blob.ok());
  EXPECT_EQ(blob->size(), 16u);  // the header with a zero count
  size_t imported = 7;
  auto again = CompiledModel::Compile(b.Bytes(), {.packed_weights = *blob, .imported = &imported});
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(imported, 0u);
}

}  // namespace
}  // namespace orrery
