#include "runtime/model_image.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "model_builder.h"
#include "runtime/model.h"
#include "runtime/packed_weights.h"

namespace orrery {
namespace {

using testing::kFloat;
using testing::kInt64;
using testing::ModelBuilder;
using testing::TinyMlp;

std::vector<float> Ramp(size_t n, int seed) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>((i * 7 + seed * 3) % 11) * 0.125f - 0.6f;
  return v;
}

// Conv -> BatchNormalization -> Add(residual X) -> Relu: BN folded into new
// constant weights, residual and activation fused (with the unfused
// fallback steps kept).
ModelBuilder ConvBnResidual() {
  ModelBuilder b(13);
  b.Input("X", kFloat, {1, 4, 6, 6});
  b.FloatInit("W", {4, 4, 3, 3}, Ramp(144, 1));
  b.FloatInit("scale", {4}, {1.0f, 0.5f, 2.0f, 1.5f});
  b.FloatInit("bias", {4}, {0.1f, -0.2f, 0.3f, 0.0f});
  b.FloatInit("mean", {4}, {0.0f, 0.1f, -0.1f, 0.2f});
  b.FloatInit("var", {4}, {1.0f, 0.5f, 2.0f, 1.0f});
  ModelBuilder::AttrInts(b.Node("Conv", {"X", "W"}, {"c"}, "conv"), "pads", {1, 1, 1, 1});
  b.Node("BatchNormalization", {"c", "scale", "bias", "mean", "var"}, {"bn"}, "bn");
  b.Node("Add", {"bn", "X"}, {"sum"}, "add");
  b.Node("Relu", {"sum"}, {"r"}, "relu");
  // A reshape to a constant shape and a global pool: a constant int64
  // operand and a kByKernel view in the plan.
  b.Node("GlobalAveragePool", {"r"}, {"p"}, "pool");
  b.Int64Init("shape", {2}, {1, 4});
  b.Node("Reshape", {"p", "shape"}, {"Y"}, "flatten");
  b.Output("Y", kFloat, {1, 4});
  return b;
}

// Dynamic batch; a folded constant subgraph (Mul of two initializers) and a
// MatMul whose bias Add is fused.
ModelBuilder FoldedMatMul() {
  ModelBuilder b(13);
  b.Input("X", kFloat, {-1, 8});
  b.FloatInit("A", {8, 5}, Ramp(40, 2));
  b.FloatInit("two", {1}, {2.0f});
  b.FloatInit("c", {5}, Ramp(5, 3));
  b.Node("Mul", {"A", "two"}, {"W"}, "fold_me");
  b.Node("MatMul", {"X", "W"}, {"mm"}, "mm");
  b.Node("Add", {"mm", "c"}, {"lin"}, "bias");
  ModelBuilder::AttrFloat(b.Node("LeakyRelu", {"lin"}, {"Y"}, "act"), "alpha", 0.2f);
  b.Output("Y", kFloat, {-1, 5});
  return b;
}

struct Case {
  std::string name;
  ModelBuilder builder;
  std::vector<NamedTensor> inputs;
};

NamedTensor Input(const std::string& name, Shape shape, int seed) {
  Tensor t(DType::kFloat32, shape);
  const std::vector<float> v = Ramp(static_cast<size_t>(t.num_elements()), seed);
  std::memcpy(t.data<float>(), v.data(), v.size() * sizeof(float));
  return NamedTensor{name, std::move(t)};
}

std::vector<Case> Cases() {
  std::vector<Case> cases;
  cases.push_back({"mlp", TinyMlp(), {Input("X", {3, 2}, 1)}});
  cases.push_back({"conv_bn_residual", ConvBnResidual(), {Input("X", {1, 4, 6, 6}, 2)}});
  cases.push_back({"folded_matmul", FoldedMatMul(), {Input("X", {2, 8}, 3)}});
  return cases;
}

// Outputs as raw bytes, so equality is bit-identity.
std::vector<std::string> RunBytes(const CompiledModel& model, const std::vector<NamedTensor>& in) {
  Result<std::vector<NamedTensor>> out = model.Run(in);
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  std::vector<std::string> bytes;
  if (!out.ok()) return bytes;
  for (const NamedTensor& t : *out) bytes.emplace_back(t.tensor.bytes());
  return bytes;
}

uint32_t GetU32(const std::vector<std::byte>& b, size_t at) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(b[at + i]) << (8 * i);
  return v;
}

struct Exported {
  std::unique_ptr<CompiledModel> compiled;
  std::vector<std::byte> image;
  std::vector<std::byte> packed;
};

Exported Export(const std::string& onnx) {
  Exported e;
  auto compiled = CompiledModel::Compile(onnx);
  EXPECT_TRUE(compiled.ok()) << compiled.status().ToString();
  if (!compiled.ok()) return e;
  e.compiled = std::move(compiled).value();
  auto packed = ExportPackedWeights(*e.compiled);
  EXPECT_TRUE(packed.ok()) << packed.status().ToString();
  if (packed.ok()) e.packed = std::move(packed).value();
  auto image = ExportModelImage(*e.compiled);
  EXPECT_TRUE(image.ok()) << image.status().ToString();
  if (image.ok()) e.image = std::move(image).value();
  return e;
}

TEST(ModelImageTest, LoadedModelRunsBitIdenticallyToTheCompiledOne) {
  for (Case& c : Cases()) {
    SCOPED_TRACE(c.name);
    Exported e = Export(c.builder.Bytes());
    ASSERT_NE(e.compiled, nullptr);
    size_t imported = 0;
    auto loaded = CompiledModel::Load({.image = e.image, .packed_weights = e.packed, .imported = &imported});
    ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
    EXPECT_GT(imported, 0u);
    const ModelSignature& a = e.compiled->signature();
    const ModelSignature& b = (*loaded)->signature();
    ASSERT_EQ(a.inputs.size(), b.inputs.size());
    ASSERT_EQ(a.outputs.size(), b.outputs.size());
    EXPECT_EQ(a.opset, b.opset);
    EXPECT_EQ(a.node_count, b.node_count);
    for (size_t i = 0; i < a.outputs.size(); ++i) {
      EXPECT_EQ(a.outputs[i].name, b.outputs[i].name);
      EXPECT_EQ(a.outputs[i].dtype, b.outputs[i].dtype);
      EXPECT_EQ(a.outputs[i].shape, b.outputs[i].shape);
    }
    const std::vector<std::string> want = RunBytes(*e.compiled, c.inputs);
    ASSERT_FALSE(want.empty());
    EXPECT_EQ(RunBytes(**loaded, c.inputs), want);
    // Re-exporting the loaded model gives the same image and packed bytes.
    auto image2 = ExportModelImage(**loaded);
    ASSERT_TRUE(image2.ok());
    EXPECT_EQ(*image2, e.image);
    auto packed2 = ExportPackedWeights(**loaded);
    ASSERT_TRUE(packed2.ok());
    EXPECT_EQ(*packed2, e.packed);
  }
}

// Image and packed weights in one 4096-aligned buffer, as a segment read
// leaves them: the model borrows the bytes and keeps the buffer alive.
TEST(ModelImageTest, BorrowedBuffersOutliveTheCallerAndRunBitIdentically) {
  for (Case& c : Cases()) {
    SCOPED_TRACE(c.name);
    Exported e = Export(c.builder.Bytes());
    ASSERT_NE(e.compiled, nullptr);
    const size_t packed_at = (e.image.size() + 4095) / 4096 * 4096;
    const size_t total = packed_at + e.packed.size();
    std::shared_ptr<std::byte> buffer(static_cast<std::byte*>(std::aligned_alloc(4096, (total + 4095) / 4096 * 4096)),
                                      [](std::byte* p) { std::free(p); });
    ASSERT_NE(buffer, nullptr);
    std::memcpy(buffer.get(), e.image.data(), e.image.size());
    std::memcpy(buffer.get() + packed_at, e.packed.data(), e.packed.size());
    const std::span<const std::byte> image(buffer.get(), e.image.size());
    const std::span<const std::byte> packed(buffer.get() + packed_at, e.packed.size());
    size_t imported = 0;
    auto loaded = CompiledModel::Load({.image = image, .packed_weights = packed, .owner = buffer, .imported = &imported});
    ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
    EXPECT_GT(imported, 0u);
    // Constants and packed matrices hold the buffer.
    EXPECT_GT(buffer.use_count(), 1);
    std::weak_ptr<std::byte> weak = buffer;
    buffer.reset();
    EXPECT_FALSE(weak.expired());
    EXPECT_EQ(RunBytes(**loaded, c.inputs), RunBytes(*e.compiled, c.inputs));
    loaded->reset();
    EXPECT_TRUE(weak.expired());
  }
}

// X[1, 2, 5, 5] -> Conv(W[m, 2, 3, 3], pads 1) -> Y[1, m, 5, 5].
ModelBuilder ConvOnly(int64_t m) {
  ModelBuilder b(13);
  b.Input("X", kFloat, {1, 2, 5, 5});
  b.FloatInit("W", {m, 2, 3, 3}, Ramp(static_cast<size_t>(m * 18), 4));
  ModelBuilder::AttrInts(b.Node("Conv", {"X", "W"}, {"Y"}, "conv"), "pads", {1, 1, 1, 1});
  b.Output("Y", kFloat, {1, m, 5, 5});
  return b;
}

// ModelImageOptions::packed_only: the weights read only as packed operands
// are left out of the image, which then loads only with the packed weights
// that stand in for them, and runs bit-identically, at other batch sizes
// too. The Conv whose fused residual keeps the unfused originals (which
// pack from the values) keeps its weights.
TEST(ModelImageTest, PackedOnlyImagesLeaveOutPackedWeightsAndLoadOnlyWithThem) {
  std::vector<Case> cases = Cases();
  cases.push_back({"conv", ConvOnly(6), {Input("X", {1, 2, 5, 5}, 4)}});
  for (Case& c : cases) {
    SCOPED_TRACE(c.name);
    Exported e = Export(c.builder.Bytes());
    ASSERT_NE(e.compiled, nullptr);
    Result<std::vector<std::byte>> small = ExportModelImage(*e.compiled, {.packed_only = true});
    ASSERT_TRUE(small.ok()) << small.status().ToString();
    if (c.name == "conv_bn_residual") {
      EXPECT_EQ(small->size(), e.image.size()) << "its W is read by the unfused originals";
      continue;
    }
    // (TinyMlp's 24-byte matrices went into the 64-byte alignment padding.)
    if (c.name != "mlp") {
      EXPECT_LT(small->size(), e.image.size());
    }
    auto loaded = CompiledModel::Load({.image = *small, .packed_weights = e.packed});
    ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
    EXPECT_EQ(RunBytes(**loaded, c.inputs), RunBytes(*e.compiled, c.inputs));
    if (c.name == "folded_matmul") {
      const std::vector<NamedTensor> five = {Input("X", {5, 8}, 6)};
      EXPECT_EQ(RunBytes(**loaded, five), RunBytes(*e.compiled, five));
    }
    // Exported again, it is the same image (the left-out values stay out).
    Result<std::vector<std::byte>> again = ExportModelImage(**loaded);
    ASSERT_TRUE(again.ok()) << again.status().ToString();
    EXPECT_EQ(*again, *small);
    // Version 2 (flags words); an image with every value is still version 1,
    // which earlier builds read (LoadedModelRunsBitIdenticallyToTheCompiledOne
    // loads those).
    EXPECT_EQ(GetU32(*small, 4), kModelImageVersion);
    EXPECT_EQ(GetU32(e.image, 4), kModelImageMinVersion);
    // The header tells it before decoding (a GPU server's loader asks).
    EXPECT_TRUE(runtime::ImageHasPackedOnlyConstants(*small));
    EXPECT_FALSE(runtime::ImageHasPackedOnlyConstants(e.image));
    EXPECT_FALSE(runtime::ImageHasPackedOnlyConstants(std::span(*small).first(7)));
    // Without packed weights, or with another model's, nothing stands in
    // for the left-out values: DATA_LOSS (the loader recompiles the ONNX),
    // never a run without weights.
    auto bare = CompiledModel::Load({.image = *small});
    EXPECT_EQ(bare.status().code(), StatusCode::kDataLoss) << bare.status().ToString();
    Exported other = Export((c.name == "conv" ? ConvOnly(4) : TinyMlp()).Bytes());
    if (c.name == "mlp") other = Export(FoldedMatMul().Bytes());
    auto mixed = CompiledModel::Load({.image = *small, .packed_weights = other.packed});
    EXPECT_EQ(mixed.status().code(), StatusCode::kDataLoss) << mixed.status().ToString();
  }
}

// Inputs with a dynamic dim past the first: another shape could plan
// another packed layout, so every value stays in the image.
TEST(ModelImageTest, PackedOnlyKeepsTheValuesOfModelsWithDynamicInnerDims) {
  ModelBuilder b(13);
  b.Input("X", kFloat, {1, -1, 8});
  b.FloatInit("B", {8, 5}, Ramp(40, 5));
  b.Node("MatMul", {"X", "B"}, {"Y"}, "mm");
  b.Output("Y", kFloat, {1, -1, 5});
  Exported e = Export(b.Bytes());
  ASSERT_NE(e.compiled, nullptr);
  Result<std::vector<std::byte>> image = ExportModelImage(*e.compiled, {.packed_only = true});
  ASSERT_TRUE(image.ok());
  EXPECT_EQ(*image, e.image);
}

TEST(ModelImageTest, LoadsWithoutPackedWeightsByPacking) {
  Case c = std::move(Cases()[1]);
  Exported e = Export(c.builder.Bytes());
  ASSERT_NE(e.compiled, nullptr);
  auto loaded = CompiledModel::Load({.image = e.image});
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(RunBytes(**loaded, c.inputs), RunBytes(*e.compiled, c.inputs));
}

TEST(ModelImageTest, DynamicBatchPlansForOtherShapes) {
  Case c = std::move(Cases()[2]);
  Exported e = Export(c.builder.Bytes());
  ASSERT_NE(e.compiled, nullptr);
  auto loaded = CompiledModel::Load({.image = e.image, .packed_weights = e.packed});
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  for (int64_t n : {1, 5, 17}) {
    const std::vector<NamedTensor> in{Input("X", {n, 8}, static_cast<int>(n))};
    EXPECT_EQ(RunBytes(**loaded, in), RunBytes(*e.compiled, in)) << "batch " << n;
  }
}

void PutU32(std::vector<std::byte>* b, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) (*b)[at + i] = static_cast<std::byte>((v >> (8 * i)) & 0xff);
}

TEST(ModelImageTest, OtherVersionsAreFailedPrecondition) {
  Exported e = Export(TinyMlp().Bytes());
  std::vector<std::byte> old = e.image;
  PutU32(&old, 4, kModelImageVersion + 1);
  auto r = CompiledModel::Load({.image = old});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("version"), std::string::npos) << r.status().message();

  std::vector<std::byte> state = e.image;
  PutU32(&state, 8, 999);
  r = CompiledModel::Load({.image = state});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);

  // Packed weights of another version beside a good image: refused too, so
  // the caller rebuilds the whole segment.
  std::vector<std::byte> packed = e.packed;
  PutU32(&packed, 4, kPackedWeightsVersion + 1);
  r = CompiledModel::Load({.image = e.image, .packed_weights = packed});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
}

TEST(ModelImageTest, MalformedImagesAreDataLoss) {
  Exported e = Export(ConvBnResidual().Bytes());
  ASSERT_FALSE(e.image.empty());
  // Empty, bad magic, every truncation, trailing bytes.
  auto r = CompiledModel::Load({.image = {}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kDataLoss);
  std::vector<std::byte> bad = e.image;
  bad[0] = std::byte{'X'};
  r = CompiledModel::Load({.image = bad});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(r.status().message().find("ORCG"), std::string::npos);
  for (size_t n = 0; n < e.image.size(); ++n) {
    auto t = CompiledModel::Load({.image = std::span(e.image).first(n)});
    ASSERT_FALSE(t.ok()) << "truncated to " << n;
    EXPECT_EQ(t.status().code(), StatusCode::kDataLoss) << t.status().ToString();
  }
  std::vector<std::byte> longer = e.image;
  longer.push_back(std::byte{0});
  r = CompiledModel::Load({.image = longer});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("trailing"), std::string::npos);
  // Truncated packed weights with a good image.
  r = CompiledModel::Load({.image = e.image, .packed_weights = std::span(e.packed).first(e.packed.size() - 1)});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kDataLoss);
}

TEST(ModelImageTest, UnknownOpTypeIsNamed) {
  Exported e = Export(TinyMlp().Bytes());
  // Rename "Softmax" to "Softmay" inside the image.
  const std::string needle = "Softmax";
  std::string s(reinterpret_cast<const char*>(e.image.data()), e.image.size());
  size_t at = 0;
  bool renamed = false;
  while ((at = s.find(needle, at)) != std::string::npos) {
    // The op type field is the length-prefixed "Softmax" exactly.
    if (at >= 8 && static_cast<unsigned char>(s[at - 8]) == needle.size()) {
      e.image[at + needle.size() - 1] = std::byte{'y'};
      renamed = true;
    }
    at += needle.size();
  }
  ASSERT_TRUE(renamed);
  auto r = CompiledModel::Load({.image = e.image});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(r.status().message().find("Softmay"), std::string::npos) << r.status().message();
}

// Hostile bytes in the style of the fuzz target: random byte flips and
// random garbage never crash (ASan/UBSan catch out-of-bounds reads), and
// whatever loads still runs or reports an error.
TEST(ModelImageTest, HostileBytesNeverCrash) {
  constexpr size_t kHeader = 16;  // magic and versions: flips there are covered above
  constexpr int kMutations = 300;
  std::mt19937_64 rng(7);
  for (Case& c : Cases()) {
    Exported e = Export(c.builder.Bytes());
    ASSERT_FALSE(e.image.empty());
    size_t loaded = 0;
    for (int iter = 0; iter < kMutations; ++iter) {
      std::vector<std::byte> b = e.image;
      const int flips = 1 + static_cast<int>(rng() % 4);
      for (int f = 0; f < flips; ++f) {
        const size_t at = kHeader + rng() % (b.size() - kHeader);
        b[at] = static_cast<std::byte>(rng() & 0xff);
      }
      const auto t0 = std::chrono::steady_clock::now();
      auto r = CompiledModel::Load({.image = b, .packed_weights = e.packed});
      const auto t1 = std::chrono::steady_clock::now();
      if (r.ok()) {
        ++loaded;
        (void)(*r)->Run(c.inputs);  // may fail, must not crash
      }
      const auto t2 = std::chrono::steady_clock::now();
      // Hostile dims are rejected before anything is allocated (this caught
      // 14 GB allocations once): no case may take long.
      EXPECT_LT(t2 - t0, std::chrono::seconds(20));
      if (t2 - t0 > std::chrono::milliseconds(200)) {
        std::cout << "SLOW " << c.name << " iter " << iter << " load " << (t1 - t0).count() / 1000000
                  << " ms run " << (t2 - t1).count() / 1000000 << " ms: " << (r.ok() ? "ok" : r.status().ToString()) << "\n";
      }
    }
    for (int iter = 0; iter < 100; ++iter) {
      std::vector<std::byte> b(16 + rng() % 512);
      for (std::byte& x : b) x = static_cast<std::byte>(rng() & 0xff);
      std::memcpy(b.data(), e.image.data(), 16);  // a valid header, garbage after
      auto r = CompiledModel::Load({.image = b});
      EXPECT_FALSE(r.ok());
    }
    std::cout << c.name << ": " << loaded << " of " << kMutations << " mutated images loaded\n";
  }
}

// The real models, when the benchmark cache has them (bench/export_models.py).
TEST(ModelImageTest, RealModelsWhenPresent) {
  const char* home = std::getenv("HOME");
  if (home == nullptr) GTEST_SKIP() << "no HOME";
  int ran = 0;
  for (const char* name : {"mobilenet_v2", "squeezenet1_1"}) {
    const std::string path = std::string(home) + "/.cache/orrery-bench/models/" + name + "/model.onnx";
    std::ifstream f(path, std::ios::binary);
    if (!f) continue;
    std::stringstream ss;
    ss << f.rdbuf();
    Exported e = Export(ss.str());
    ASSERT_NE(e.compiled, nullptr);
    auto loaded = CompiledModel::Load({.image = e.image, .packed_weights = e.packed});
    ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
    const TensorSpec& spec = e.compiled->signature().inputs[0];
    Shape shape = spec.shape;
    for (int64_t& d : shape) d = d < 0 ? 1 : d;
    const std::vector<NamedTensor> in{Input(spec.name, shape, 5)};
    EXPECT_EQ(RunBytes(**loaded, in), RunBytes(*e.compiled, in)) << name;
    ++ran;
  }
  if (ran == 0) GTEST_SKIP() << "no models under ~/.cache/orrery-bench/models (bench/export_models.py)";
}

}  // namespace
}  // namespace orrery
