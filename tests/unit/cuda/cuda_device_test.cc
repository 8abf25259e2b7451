// The CUDA device, context and plan runner. What needs a GPU skips with a
// message when none is found (or the build has no CUDA backend); what does
// not (the UNAVAILABLE path, plan checks) always runs; --device parsing and
// the module loader are tested in tests/unit/cache/cuda_backend_test.cc.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "cache/cuda_device.h"
#include "ops/registry.h"
#include "runtime/cuda/cuda_context.h"
#include "runtime/cuda/cuda_executor.h"
#include "runtime/cuda/cuda_plan.h"
#include "runtime/cuda/page_mapping.h"
#include "runtime/cuda/weight_layout.h"
#include "runtime/graph.h"
#include "runtime/model.h"
#include "runtime/plan.h"
#include "tests/unit/runtime/model_builder.h"

namespace orrery {
namespace {

using testing::kFloat;
using testing::ModelBuilder;

#define ORRERY_REQUIRE_GPU()                                                                  \
  do {                                                                                        \
    if (runtime::CudaDeviceCount() == 0) {                                                    \
      GTEST_SKIP() << (runtime::CudaBackendBuilt()                                            \
                           ? "no CUDA device found (cudaGetDeviceCount reports none): GPU "   \
                             "test not run"                                                   \
                           : "built without the CUDA backend (no nvcc, or a sanitizer build): GPU test not " \
                             "run");                                                          \
    }                                                                                         \
  } while (0)

std::vector<float> Randoms(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

Result<runtime::Plan> Compile(ModelBuilder& b, bool fuse = true) {
  ORRERY_ASSIGN_OR_RETURN(runtime::Graph g, runtime::ImportModel(b.model(), ops::OpRegistry::Global()));
  return runtime::CompilePlan(g, ops::OpRegistry::Global(), ops::Backend::kCpu, {.fuse = fuse});
}

// A small CNN touching every kernel family: Conv (+ fused bias/Relu),
// BatchNorm, MaxPool, AveragePool, Concat, GlobalAveragePool, Flatten,
// Gemm, Sigmoid, Mul (broadcast), Softmax.
ModelBuilder SmallCnn() {
  ModelBuilder b(13);
  b.Input("X", kFloat, {2, 3, 11, 9});
  b.FloatInit("W", {4, 3, 3, 3}, Randoms(4 * 3 * 9, 1));
  b.FloatInit("B", {4}, Randoms(4, 2));
  b.FloatInit("scale", {4}, Randoms(4, 3));
  b.FloatInit("bias", {4}, Randoms(4, 4));
  b.FloatInit("mean", {4}, Randoms(4, 5));
  b.FloatInit("var", {4}, {0.5f, 1.0f, 1.5f, 2.0f});
  b.FloatInit("FC", {8, 5}, Randoms(40, 6));
  b.FloatInit("FCb", {5}, Randoms(5, 7));
  b.FloatInit("gain", {1, 5}, Randoms(5, 8));
  auto* conv = b.Node("Conv", {"X", "W", "B"}, {"c"}, "conv");
  ModelBuilder::AttrInts(conv, "pads", {1, 1, 1, 1});
  b.Node("Relu", {"c"}, {"r"}, "relu");
  b.Node("BatchNormalization", {"r", "scale", "bias", "mean", "var"}, {"bn"}, "bn");
  auto* mp = b.Node("MaxPool", {"bn"}, {"mp"}, "maxpool");
  ModelBuilder::AttrInts(mp, "kernel_shape", {3, 2});
  ModelBuilder::AttrInts(mp, "strides", {2, 2});
  ModelBuilder::AttrInt(mp, "ceil_mode", 1);
  auto* ap = b.Node("AveragePool", {"bn"}, {"ap"}, "avgpool");
  ModelBuilder::AttrInts(ap, "kernel_shape", {3, 2});
  ModelBuilder::AttrInts(ap, "strides", {2, 2});
  ModelBuilder::AttrInt(ap, "ceil_mode", 1);
  auto* cat = b.Node("Concat", {"mp", "ap"}, {"cat"}, "concat");
  ModelBuilder::AttrInt(cat, "axis", 1);
  b.Node("GlobalAveragePool", {"cat"}, {"gap"}, "gap");
  b.Node("Flatten", {"gap"}, {"flat"}, "flatten");
  b.Node("Gemm", {"flat", "FC", "FCb"}, {"fc"}, "fc");
  b.Node("Sigmoid", {"fc"}, {"sig"}, "sigmoid");
  b.Node("Mul", {"sig", "gain"}, {"scaled"}, "mul");
  b.Node("Softmax", {"scaled"}, {"Y"}, "softmax");
  b.Output("Y", kFloat, {2, 5});
  return b;
}

TEST(CudaDevice, OpenWithoutGpuIsUnavailableNamingTheReason) {
  if (runtime::CudaDeviceCount() > 0) GTEST_SKIP() << "a GPU is present: the no-GPU path is not reachable";
  Result<std::unique_ptr<Device>> d = OpenCudaDevice(0);
  EXPECT_EQ(d.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(d.status().message().find("no CUDA device"), std::string::npos) << d.status().message();
}

TEST(CudaDevice, OrdinalOutOfRangeIsUnavailable) {
  Result<std::unique_ptr<Device>> d = OpenCudaDevice(1000);
  EXPECT_EQ(d.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(d.status().message().find("no CUDA device"), std::string::npos);
}

TEST(CudaPlanCheck, AcceptsTheSmallCnnFusedOrNot) {
  for (bool fuse : {false, true}) {
    ModelBuilder b = SmallCnn();
    Result<runtime::Plan> plan = Compile(b, fuse);
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    Status st = runtime::CheckCudaPlan(*plan, {{DType::kFloat32, {2, 3, 11, 9}}});
    EXPECT_TRUE(st.ok()) << "fuse " << fuse << ": " << st.ToString();
  }
}

TEST(CudaPlanCheck, RefusesAnUnsupportedOpNamingTheStepAndOp) {
  ModelBuilder b(13);
  b.Input("X", kFloat, {2, 3});
  b.Node("Relu", {"X"}, {"r"}, "relu");
  b.Node("Erf", {"r"}, {"Y"}, "the_erf");
  b.Output("Y", kFloat, {2, 3});
  Result<runtime::Plan> plan = Compile(b);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  Status st = runtime::CheckCudaPlan(*plan, {{DType::kFloat32, {2, 3}}});
  EXPECT_EQ(st.code(), StatusCode::kUnimplemented);
  EXPECT_NE(st.message().find("the_erf"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("Erf"), std::string::npos) << st.message();
  // Compile refuses the same way before it needs a device.
  Result<std::unique_ptr<runtime::CudaPlan>> cp = runtime::CudaPlan::Compile(
      std::make_shared<runtime::Plan>(std::move(*plan)), {{DType::kFloat32, {2, 3}}}, nullptr);
  EXPECT_EQ(cp.status().code(), StatusCode::kUnimplemented);
}

TEST(CudaPlanCheck, RefusesAsymmetricConvPadsAndPoolIndices) {
  ModelBuilder b(13);
  b.Input("X", kFloat, {1, 2, 8, 8});
  b.FloatInit("W", {2, 2, 2, 2}, Randoms(16, 9));
  auto* conv = b.Node("Conv", {"X", "W"}, {"Y"}, "asym");
  ModelBuilder::AttrInts(conv, "pads", {0, 0, 1, 1});
  b.Output("Y", kFloat, {1, 2, 8, 8});
  Result<runtime::Plan> plan = Compile(b);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  Status st = runtime::CheckCudaPlan(*plan, {{DType::kFloat32, {1, 2, 8, 8}}});
  EXPECT_EQ(st.code(), StatusCode::kUnimplemented);
  EXPECT_NE(st.message().find("asymmetric"), std::string::npos) << st.message();
}

// Two physical pages mapped out of order into one range (CUDA virtual memory
// management): a copy across their boundary through the staging buffers
// comes back intact.
TEST(CudaContextGpu, CopiesRoundTripThroughStagingIntoMappedPages) {
  ORRERY_REQUIRE_GPU();
  runtime::CudaContextOptions o;
  o.memory_bytes = int64_t{64} << 20;
  o.staging_bytes = int64_t{1} << 20;
  Result<std::unique_ptr<runtime::CudaContext>> ctx = runtime::CudaContext::Open(o);
  ASSERT_TRUE(ctx.ok()) << ctx.status().ToString();
  EXPECT_FALSE((*ctx)->info().name.empty());
  EXPECT_EQ((*ctx)->num_pages(), 32);
  EXPECT_GT((*ctx)->link_bytes_per_sec(), 0);
  ASSERT_NE((*ctx)->page_mapper(), nullptr);
  Result<std::unique_ptr<runtime::MappedPages>> range =
      runtime::MappedPages::Map((*ctx)->page_mapper(), std::vector<uint32_t>{3, 1});
  ASSERT_TRUE(range.ok()) << range.status().ToString();
  void* dst = reinterpret_cast<void*>(static_cast<uintptr_t>((*range)->address()));
  // 3.5 MiB: more than three staging buffers' worth, so both alternate, and
  // across the two 2 MiB pages.
  const size_t n = (size_t{7} << 20) / 2 / sizeof(float);
  const std::vector<float> src = Randoms(n, 10);
  std::vector<float> back(n, 0.0f);
  ASSERT_TRUE((*ctx)->CopyToDevice(src.data(), dst, static_cast<int64_t>(n * 4)).ok());
  ASSERT_TRUE((*ctx)->CopyToHost(dst, back.data(), static_cast<int64_t>(n * 4)).ok());
  EXPECT_EQ(std::memcmp(src.data(), back.data(), n * 4), 0);
  // The same physical page 1 mapped alone elsewhere holds the second half.
  range->reset();
  Result<std::unique_ptr<runtime::MappedPages>> one =
      runtime::MappedPages::Map((*ctx)->page_mapper(), std::vector<uint32_t>{1});
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  const size_t page_floats = static_cast<size_t>((*ctx)->page_bytes()) / sizeof(float);
  std::vector<float> second(n - page_floats, 0.0f);
  ASSERT_TRUE((*ctx)->CopyToHost(reinterpret_cast<void*>(static_cast<uintptr_t>((*one)->address())), second.data(),
                                 static_cast<int64_t>(second.size() * 4))
                  .ok());
  EXPECT_EQ(std::memcmp(src.data() + page_floats, second.data(), second.size() * 4), 0);
}

TEST(CudaDeviceGpu, DescribesARealDevice) {
  ORRERY_REQUIRE_GPU();
  Result<std::unique_ptr<Device>> d = OpenCudaDevice(0);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_FALSE((*d)->simulated());
  EXPECT_GT((*d)->memory_bytes(), 0);
  EXPECT_EQ((*d)->memory_bytes() % (*d)->page_bytes(), 0);
  EXPECT_GT((*d)->CopyNs(int64_t{1} << 30), (*d)->CopyNs(1));
  EXPECT_NE((*d)->Describe().find("CUDA device 0"), std::string::npos);
}

TEST(CudaPlanGpu, SmallCnnMatchesTheCpuExecutor) {
  ORRERY_REQUIRE_GPU();
  for (bool fuse : {false, true}) {
    ModelBuilder b = SmallCnn();
    Result<runtime::Plan> plan = Compile(b, fuse);
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    auto shared = std::make_shared<runtime::Plan>(std::move(*plan));
    Tensor x(DType::kFloat32, {2, 3, 11, 9});
    const std::vector<float> xv = Randoms(static_cast<size_t>(x.num_elements()), 11);
    std::memcpy(x.raw_data(), xv.data(), x.byte_size());
    Result<std::vector<Tensor>> want = runtime::ExecutePlan(*shared, {x});
    ASSERT_TRUE(want.ok()) << want.status().ToString();
    runtime::CudaContextOptions o;
    o.memory_bytes = int64_t{16} << 20;
    Result<std::unique_ptr<runtime::CudaContext>> ctx = runtime::CudaContext::Open(o);
    ASSERT_TRUE(ctx.ok()) << ctx.status().ToString();
    Result<std::unique_ptr<runtime::CudaPlan>> gpu =
        runtime::CudaPlan::Compile(shared, {{DType::kFloat32, {2, 3, 11, 9}}}, ctx->get());
    ASSERT_TRUE(gpu.ok()) << gpu.status().ToString();
    Result<std::vector<Tensor>> got = (*gpu)->Run({x});
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ASSERT_EQ(got->size(), 1u);
    ASSERT_EQ((*got)[0].shape(), (*want)[0].shape());
    for (int64_t i = 0; i < (*got)[0].num_elements(); ++i) {
      EXPECT_NEAR((*got)[0].data<float>()[i], (*want)[0].data<float>()[i], 1e-4f) << i;
    }
  }
}

// The executor the scheduler's device workers use: what the GPU supports is
// decided without a device (plan check, remembered per model and input
// types); without a device every run is UNAVAILABLE, never a wrong answer.
TEST(CudaExecutor, SupportsFollowsThePlanCheckAndRunNeedsADevice) {
  ModelBuilder cnn = SmallCnn();
  Result<std::unique_ptr<CompiledModel>> good = CompiledModel::Compile(cnn.model().SerializeAsString());
  ASSERT_TRUE(good.ok()) << good.status().ToString();
  ModelBuilder erf(13);
  erf.Input("X", kFloat, {2, 3});
  erf.Node("Erf", {"X"}, {"Y"}, "the_erf");
  erf.Output("Y", kFloat, {2, 3});
  Result<std::unique_ptr<CompiledModel>> bad = CompiledModel::Compile(erf.model().SerializeAsString());
  ASSERT_TRUE(bad.ok()) << bad.status().ToString();

  runtime::CudaExecutor exec(nullptr);
  const std::vector<NamedTensor> x{{"X", Tensor(DType::kFloat32, {2, 3, 11, 9})}};
  EXPECT_TRUE(exec.Supports(**good, x).ok());
  EXPECT_TRUE(exec.Supports(**good, x).ok());  // remembered
  Status st = exec.Supports(**bad, {{"X", Tensor(DType::kFloat32, {2, 3})}});
  EXPECT_EQ(st.code(), StatusCode::kUnimplemented);
  EXPECT_NE(st.message().find("the_erf"), std::string::npos) << st.message();
  EXPECT_EQ(exec.Supports(**good, {}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(exec.Supports(**good, {{"X", Tensor(DType::kInt64, {2, 3, 11, 9})}}).code(),
            StatusCode::kInvalidArgument);
  Result<std::vector<NamedTensor>> out = exec.Run(**good, x);
  EXPECT_EQ(out.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(exec.compiled_plans(), 0u);
  // The device tier's transfer and eviction: nothing to upload to, nothing held.
  EXPECT_EQ(exec.Upload("t/cnn@1", **good).code(), StatusCode::kUnavailable);
  exec.Release("t/cnn@1");
  const runtime::CudaExecutor::WeightStats ws = exec.weight_stats();
  EXPECT_EQ(ws.uploads + ws.fallback_uploads + ws.releases + ws.resident, 0u);
}

TEST(CudaExecutorGpu, RunsMatchTheCpuAndPlansAreReused) {
  ORRERY_REQUIRE_GPU();
  ModelBuilder cnn = SmallCnn();
  Result<std::unique_ptr<CompiledModel>> model = CompiledModel::Compile(cnn.model().SerializeAsString());
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  Tensor x(DType::kFloat32, {2, 3, 11, 9});
  const std::vector<float> xv = Randoms(static_cast<size_t>(x.num_elements()), 12);
  std::memcpy(x.raw_data(), xv.data(), x.byte_size());
  Result<std::vector<NamedTensor>> want = (*model)->Run({{"X", x}});
  ASSERT_TRUE(want.ok()) << want.status().ToString();
  runtime::CudaContextOptions o;
  o.memory_bytes = int64_t{16} << 20;
  Result<std::unique_ptr<runtime::CudaContext>> ctx = runtime::CudaContext::Open(o);
  ASSERT_TRUE(ctx.ok()) << ctx.status().ToString();
  runtime::CudaExecutor exec(ctx->get());
  for (int run = 0; run < 2; ++run) {
    Result<std::vector<NamedTensor>> got = exec.Run(**model, {{"X", x}});
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ASSERT_EQ(got->size(), want->size());
    EXPECT_EQ((*got)[0].name, (*want)[0].name);
    ASSERT_EQ((*got)[0].tensor.shape(), (*want)[0].tensor.shape());
    for (int64_t i = 0; i < (*got)[0].tensor.num_elements(); ++i) {
      EXPECT_NEAR((*got)[0].tensor.data<float>()[i], (*want)[0].tensor.data<float>()[i], 1e-4f) << i;
    }
  }
  EXPECT_EQ(exec.compiled_plans(), 1u);
  EXPECT_EQ(exec.weight_stats().fallback_uploads, 1u);  // nothing was uploaded ahead
}

// The device tier's path: the transfer uploads the weights (Upload), the
// plan compiled at the first run borrows them (no fallback upload),
// eviction (Release) drops the weights and the plans over them.
TEST(CudaExecutorGpu, UploadedWeightsAreSharedByPlansAndReleased) {
  ORRERY_REQUIRE_GPU();
  ModelBuilder cnn = SmallCnn();
  Result<std::unique_ptr<CompiledModel>> model = CompiledModel::Compile(cnn.model().SerializeAsString());
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  runtime::CudaContextOptions o;
  o.memory_bytes = int64_t{16} << 20;
  Result<std::unique_ptr<runtime::CudaContext>> ctx = runtime::CudaContext::Open(o);
  ASSERT_TRUE(ctx.ok()) << ctx.status().ToString();
  runtime::CudaExecutor exec(ctx->get());
  Result<runtime::WeightLayout> layout =
      runtime::LayOutWeights(runtime::PlanWeightSizes(*(*model)->shape_generic_plan()), (*ctx)->page_bytes());
  ASSERT_TRUE(layout.ok());
  ASSERT_EQ(layout->pages, 1);
  // The page count must be the layout's.
  EXPECT_EQ(exec.Upload("t/cnn@1", **model, std::vector<uint32_t>{4, 5}).code(), StatusCode::kFailedPrecondition);
  const std::vector<uint32_t> pages{static_cast<uint32_t>((*ctx)->num_pages() - 1)};
  ASSERT_TRUE(exec.Upload("t/cnn@1", **model, pages).ok());
  ASSERT_TRUE(exec.Upload("t/cnn@1", **model, pages).ok());  // already there
  runtime::CudaExecutor::WeightStats ws = exec.weight_stats();
  EXPECT_EQ(ws.uploads, 1u);
  EXPECT_EQ(ws.resident, 1u);
  EXPECT_EQ(ws.resident_bytes, (*ctx)->page_bytes());
  for (int run = 0; run < 2; ++run) {
    Tensor x(DType::kFloat32, {2, 3, 11, 9});
    const std::vector<float> xv = Randoms(static_cast<size_t>(x.num_elements()), 7 + static_cast<uint32_t>(run));
    std::memcpy(x.raw_data(), xv.data(), x.byte_size());
    Result<std::vector<NamedTensor>> want = (*model)->Run({{"X", x}});
    ASSERT_TRUE(want.ok()) << want.status().ToString();
    Result<std::vector<NamedTensor>> got = exec.Run("t/cnn@1", **model, {{"X", x}});
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    for (int64_t i = 0; i < (*got)[0].tensor.num_elements(); ++i) {
      EXPECT_NEAR((*got)[0].tensor.data<float>()[i], (*want)[0].tensor.data<float>()[i], 1e-4f) << i;
    }
  }
  EXPECT_EQ(exec.compiled_plans(), 1u);
  EXPECT_EQ(exec.weight_stats().fallback_uploads, 0u);
  exec.Release("t/cnn@1");
  ws = exec.weight_stats();
  EXPECT_EQ(ws.releases, 1u);
  EXPECT_EQ(ws.resident, 0u);
  EXPECT_EQ(exec.compiled_plans(), 0u);
}

// Weights over three scattered pages (a 4 MiB matrix and a bias need
// three 2 MiB pages): the GPU's result is the CPU's, on pages handed out in
// any order, and again after the pages were released and reused by another
// upload.
TEST(CudaExecutorGpu, WeightsOnScatteredPagesGiveTheCpuResult) {
  ORRERY_REQUIRE_GPU();
  ModelBuilder b(13);
  b.Input("X", kFloat, {4, 1024});
  b.FloatInit("W", {1024, 1024}, Randoms(1024 * 1024, 21));
  b.FloatInit("c", {1024}, Randoms(1024, 22));
  b.Node("Gemm", {"X", "W", "c"}, {"Y"}, "fc");
  b.Output("Y", kFloat, {4, 1024});
  Result<std::unique_ptr<CompiledModel>> model = CompiledModel::Compile(b.model().SerializeAsString());
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  runtime::CudaContextOptions o;
  o.memory_bytes = int64_t{32} << 20;
  Result<std::unique_ptr<runtime::CudaContext>> ctx = runtime::CudaContext::Open(o);
  ASSERT_TRUE(ctx.ok()) << ctx.status().ToString();
  Result<runtime::WeightLayout> layout =
      runtime::LayOutWeights(runtime::PlanWeightSizes(*(*model)->shape_generic_plan()), (*ctx)->page_bytes());
  ASSERT_TRUE(layout.ok());
  ASSERT_EQ(layout->pages, 3);
  Tensor x(DType::kFloat32, {4, 1024});
  const std::vector<float> xv = Randoms(static_cast<size_t>(x.num_elements()), 23);
  std::memcpy(x.raw_data(), xv.data(), x.byte_size());
  Result<std::vector<NamedTensor>> want = (*model)->Run({{"X", x}});
  ASSERT_TRUE(want.ok()) << want.status().ToString();
  runtime::CudaExecutor exec(ctx->get());
  for (const std::vector<uint32_t>& pages : {std::vector<uint32_t>{7, 2, 4}, std::vector<uint32_t>{4, 9, 7}}) {
    ASSERT_TRUE(exec.Upload("t/fc@1", **model, pages).ok());
    Result<std::vector<NamedTensor>> got = exec.Run("t/fc@1", **model, {{"X", x}});
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    for (int64_t i = 0; i < (*got)[0].tensor.num_elements(); ++i) {
      ASSERT_NEAR((*got)[0].tensor.data<float>()[i], (*want)[0].tensor.data<float>()[i], 1e-2f) << i;
    }
    exec.Release("t/fc@1");
  }
  EXPECT_EQ(exec.weight_stats().fallback_uploads, 0u);
  EXPECT_EQ(exec.weight_stats().uploads, 2u);
}

}  // namespace
}  // namespace orrery
