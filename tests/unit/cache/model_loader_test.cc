#include "cache/model_loader.h"

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "runtime/model_image.h"
#include "runtime/packed_weights.h"
#include "tests/unit/runtime/model_builder.h"

namespace orrery {
namespace {

class ModelLoaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("model-loader-test-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    Result<std::unique_ptr<Catalog>> c = Catalog::Open((dir_ / "catalog").string(), {.sync_writes = false});
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    catalog_ = std::move(c).value();
    auto s = SegmentStore::Open(dir_.string());
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    segments_ = std::move(s).value();
    TenantRecord tenant;
    tenant.set_id("t_1");
    tenant.set_name("loader-test");
    ApiKeyRecord key;
    key.set_key_id("k_1");
    key.set_tenant_id("t_1");
    ASSERT_TRUE(catalog_->CreateTenant(tenant, std::string(32, 'k'), key).ok());
  }
  void TearDown() override {
    catalog_.reset();
    std::filesystem::remove_all(dir_);
  }

  // Uploads the MLP as the server does: compile, segment, then the record.
  ModelRecord Upload(ModelLoader& loader) {
    const std::string bytes = testing::TinyMlp().Bytes();
    auto model = CompiledModel::Compile(bytes);
    EXPECT_TRUE(model.ok());
    ModelRecord r;
    r.set_tenant_id("t_1");
    r.set_name("mlp");
    r.set_sha256("0123abcd");
    EXPECT_TRUE(loader.WriteSegment(**model, SegmentStore::NewName(), &r).ok());
    EXPECT_TRUE(catalog_->PutModel(&r, bytes).ok());
    want_ = Run(**model);
    return r;
  }

  static std::string Run(const CompiledModel& m) {
    Tensor x(DType::kFloat32, {3, 2});
    for (int i = 0; i < 6; ++i) x.data<float>()[i] = static_cast<float>(i) * 0.5f - 1.0f;
    auto out = m.Run({{"X", std::move(x)}});
    EXPECT_TRUE(out.ok()) << out.status().ToString();
    return out.ok() ? std::string((*out)[0].tensor.bytes()) : std::string();
  }

  std::string SegmentPath(const ModelRecord& r) const { return segments_->dir() + "/" + r.segment_file(); }

  std::filesystem::path dir_;
  std::unique_ptr<Catalog> catalog_;
  std::unique_ptr<SegmentStore> segments_;
  std::string want_;
};

// A segment written with weights packed only (a CPU server's) loaded by a
// loader that keeps the values (a GPU server's): the model is compiled from
// the ONNX, with the values and the segment's packed weights (nothing
// packed again), and the segment is left as the record has it.
TEST_F(ModelLoaderTest, PackedOnlySegmentsCompileWhereTheValuesAreNeeded) {
  ModelLoader cpu(catalog_.get(), segments_.get(), /*packed_only_images=*/true);
  ModelRecord r = Upload(cpu);
  auto packed = cpu.Load(r);
  ASSERT_TRUE(packed.ok()) << packed.status().ToString();
  EXPECT_TRUE(runtime::HasPackedOnlyConstants(*(*packed)->shape_generic_plan()));
  ModelLoader gpu(catalog_.get(), segments_.get(), /*packed_only_images=*/false);
  auto full = gpu.Load(r);
  ASSERT_TRUE(full.ok()) << full.status().ToString();
  EXPECT_FALSE(runtime::HasPackedOnlyConstants(*(*full)->shape_generic_plan()));
  EXPECT_EQ(Run(**full), want_);
  EXPECT_EQ(gpu.stats().segment_loads, 1u);
  EXPECT_EQ(gpu.stats().compiles, 0u);
  EXPECT_EQ(gpu.stats().segment_rebuilds, 0u);
  EXPECT_EQ(gpu.stats().image_loads, 0u);
  // Untouched: the CPU loader still loads it from its image.
  auto again = cpu.Load(r);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(Run(**again), want_);
  EXPECT_EQ(cpu.stats().image_loads, 2u);
}

TEST_F(ModelLoaderTest, LoadsFromTheModelImageWithoutCompiling) {
  ModelLoader loader(catalog_.get(), segments_.get());
  ModelRecord r = Upload(loader);
  auto m = loader.Load(r);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(Run(**m), want_);
  const ModelLoaderStats s = loader.stats();
  EXPECT_EQ(s.image_loads, 1u);
  EXPECT_EQ(s.segment_loads, 1u);
  EXPECT_EQ(s.compiles, 0u);
  EXPECT_EQ(s.segment_rebuilds, 0u);
}

TEST_F(ModelLoaderTest, CorruptSegmentFallsBackToTheOnnxAndIsRewrittenIdentically) {
  ModelLoader loader(catalog_.get(), segments_.get());
  ModelRecord r = Upload(loader);
  std::string original;
  {
    std::ifstream in(SegmentPath(r), std::ios::binary);
    original.assign(std::istreambuf_iterator<char>(in), {});
  }
  // Flip a byte inside the model image section (the first after the header).
  {
    std::fstream f(SegmentPath(r), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(4096 + 20);
    f.put('\x7f');
  }
  auto m = loader.Load(r);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(Run(**m), want_);
  EXPECT_EQ(loader.stats().segment_rebuilds, 1u);
  EXPECT_EQ(loader.stats().compiles, 1u);
  std::string rewritten;
  {
    std::ifstream in(SegmentPath(r), std::ios::binary);
    rewritten.assign(std::istreambuf_iterator<char>(in), {});
  }
  EXPECT_EQ(rewritten, original);
  // The next load uses the image again.
  auto again = loader.Load(r);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(loader.stats().image_loads, 1u);
  EXPECT_EQ(Run(**again), want_);
}

TEST_F(ModelLoaderTest, TruncatedSegmentFallsBack) {
  ModelLoader loader(catalog_.get(), segments_.get());
  ModelRecord r = Upload(loader);
  std::filesystem::resize_file(SegmentPath(r), 4096);
  auto m = loader.Load(r);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(Run(**m), want_);
  EXPECT_EQ(loader.stats().segment_rebuilds, 1u);
  EXPECT_EQ(loader.stats().image_loads, 0u);
}

TEST_F(ModelLoaderTest, OldLayoutSegmentsStillCompileWithTheirPackedWeights) {
  ModelLoader loader(catalog_.get(), segments_.get());
  const std::string bytes = testing::TinyMlp().Bytes();
  auto model = CompiledModel::Compile(bytes);
  ASSERT_TRUE(model.ok());
  auto packed = ExportPackedWeights(**model);
  ASSERT_TRUE(packed.ok());
  ModelRecord r;
  r.set_tenant_id("t_1");
  r.set_name("mlp");
  r.set_sha256("0123abcd");
  auto info = segments_->Write(SegmentStore::NewName(), kPackedWeightsSegmentLayoutVersion, SegmentContentId(r), *packed);
  ASSERT_TRUE(info.ok());
  r.set_segment_file(info->name);
  r.set_segment_header_crc32c(info->header_crc32c);
  ASSERT_TRUE(catalog_->PutModel(&r, bytes).ok());
  auto m = loader.Load(r);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(Run(**m), Run(**model));
  EXPECT_EQ(loader.stats().segment_loads, 1u);
  EXPECT_EQ(loader.stats().image_loads, 0u);
  EXPECT_EQ(loader.stats().segment_rebuilds, 0u);
}

}  // namespace
}  // namespace orrery
