// The host cache in orreryd (--host-cache-bytes): with room for two of three
// models, all three are served correctly in rotation, the cache reports
// evictions and loads, and a model larger than the cache is refused at upload
// with RESOURCE_EXHAUSTED naming both sizes.
#include <cmath>
#include <string>

#include <gtest/gtest.h>

#include "runtime/tensor_proto.h"
#include "tests/common/http_client.h"
#include "tests/integration/orreryd_process.h"
#include "tests/integration/rpc_client.h"

namespace orrery {
namespace {

using orrery::testing::Call;
using orrery::testing::InferRequest;
using orrery::testing::ModelPath;
using orrery::testing::OrrerydProcess;
using orrery::testing::ReadFileOrEmpty;
using orrery::testing::Stubs;
using orrery::testing::UploadModel;
using InferStub = inference::GRPCInferenceService::Stub;

NamedTensor LoadTensor(const std::string& file) {
  Result<NamedTensor> t = ParseTensorProto(ReadFileOrEmpty(ModelPath("mlp", "test_data_set_0/" + file)));
  EXPECT_TRUE(t.ok());
  return t.ok() ? std::move(t).value() : NamedTensor{};
}

// The mlp's segment is 24 KiB (header page + model image + packed weights); 60000 bytes
// hold two of them, not three.
TEST(HostCacheTest, ThreeModelsRotateThroughACacheThatHoldsTwo) {
  OrrerydProcess server({"--lanes", "1", "--host-cache-bytes", "60000"});
  ASSERT_TRUE(server.Start());
  Stubs stubs(server.channel());
  v1::CreateTenantResponse tenant;
  ASSERT_TRUE(testing::CreateTenant(stubs.admin.get(), server.admin_token(), "host", &tenant).ok());
  const std::string onnx = ReadFileOrEmpty(ModelPath("mlp", "model.onnx"));
  for (const char* name : {"a", "b", "c"}) {
    v1::UploadModelResponse up;
    grpc::Status s = UploadModel(stubs.models.get(), tenant.api_key(), name, onnx, &up);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  const NamedTensor input = LoadTensor("input_0.pb");
  const NamedTensor want = LoadTensor("output_0.pb");
  int correct = 0;
  for (int round = 0; round < 4; ++round) {
    for (const char* name : {"a", "b", "c"}) {
      inference::ModelInferResponse resp;
      grpc::Status s =
          Call(stubs.infer.get(), &InferStub::ModelInfer, tenant.api_key(), InferRequest(name, "", input), &resp);
      ASSERT_TRUE(s.ok()) << name << ": " << s.error_message();
      ASSERT_EQ(resp.raw_output_contents_size(), 1);
      const std::string& raw = resp.raw_output_contents(0);
      ASSERT_EQ(raw.size(), want.tensor.byte_size());
      bool same = true;
      for (int64_t k = 0; k < want.tensor.num_elements(); ++k) {
        same = same && std::abs(reinterpret_cast<const float*>(raw.data())[k] - want.tensor.data<float>()[k]) < 1e-4f;
      }
      correct += same ? 1 : 0;
    }
  }
  EXPECT_EQ(correct, 12);
  const std::string m = server.metrics_address();
  // Round robin over three models in room for two: every request after the
  // first uploads misses, so evictions and loads keep happening.
  EXPECT_GE(testing::MetricSample(m, "orrery_host_cache_events_total{event=\"eviction\"}"), 9);
  EXPECT_GE(testing::MetricSample(m, "orrery_host_cache_events_total{event=\"load\"}"), 9);
  EXPECT_EQ(testing::MetricSample(m, "orrery_host_cache_events_total{event=\"load_failed\"}"), 0);
  EXPECT_LE(testing::MetricSample(m, "orrery_host_cache_used_bytes"), 60000);
  EXPECT_EQ(testing::MetricSample(m, "orrery_host_cache_capacity_bytes"), 60000);
  // Loads came from the segments, not from repacking.
  EXPECT_GE(testing::MetricSample(m, "orrery_segment_loads_total"), 9);
  EXPECT_EQ(testing::MetricSample(m, "orrery_segment_rebuilds_total"), 0);
}

TEST(HostCacheTest, ModelLargerThanTheCacheIsRefusedAtUpload) {
  OrrerydProcess server({"--lanes", "1", "--host-cache-bytes", "10000"});
  ASSERT_TRUE(server.Start());
  Stubs stubs(server.channel());
  v1::CreateTenantResponse tenant;
  ASSERT_TRUE(testing::CreateTenant(stubs.admin.get(), server.admin_token(), "small", &tenant).ok());
  v1::UploadModelResponse up;
  grpc::Status s =
      UploadModel(stubs.models.get(), tenant.api_key(), "big", ReadFileOrEmpty(ModelPath("mlp", "model.onnx")), &up);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(s.error_message().find("20480"), std::string::npos) << s.error_message();
  EXPECT_NE(s.error_message().find("10000"), std::string::npos) << s.error_message();
  // Nothing stored: no model, no segment left behind.
  v1::ListModelsResponse list;
  ASSERT_TRUE(Call(stubs.models.get(), &v1::ModelService::Stub::ListModels, tenant.api_key(), v1::ListModelsRequest(),
                   &list)
                  .ok());
  EXPECT_EQ(list.models_size(), 0);
  EXPECT_TRUE(std::filesystem::is_empty(server.data_dir() + "/segments"));
}

}  // namespace
}  // namespace orrery
