// Segment files against the real orreryd: an upload writes its version's
// segment under <data_dir>/segments; a restart loads the model from it
// (io_uring read + import, no packing); a corrupt segment is never served:
// the model is rebuilt from the ONNX, answers correctly, and the segment is
// rewritten; start-up recovery removes orphans; deletes remove segments.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/tensor_proto.h"
#include "storage/segment_reader.h"
#include "tests/common/http_client.h"
#include "tests/integration/orreryd_process.h"
#include "tests/integration/rpc_client.h"

namespace orrery {
namespace {

namespace fs = std::filesystem;
using orrery::testing::Call;
using orrery::testing::InferRequest;
using orrery::testing::ModelPath;
using orrery::testing::OrrerydProcess;
using orrery::testing::ReadFileOrEmpty;
using orrery::testing::Stubs;
using orrery::testing::UploadModel;
using InferStub = inference::GRPCInferenceService::Stub;
using ModelStub = v1::ModelService::Stub;

NamedTensor LoadTensor(const std::string& file) {
  Result<NamedTensor> t = ParseTensorProto(ReadFileOrEmpty(ModelPath("mlp", "test_data_set_0/" + file)));
  EXPECT_TRUE(t.ok());
  return t.ok() ? std::move(t).value() : NamedTensor{};
}

std::vector<std::string> Files(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

class SegmentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(server_.Start());
    Stubs stubs(server_.channel());
    v1::CreateTenantResponse resp;
    ASSERT_TRUE(testing::CreateTenant(stubs.admin.get(), server_.admin_token(), "seg", &resp).ok());
    key_ = resp.api_key();
    input_ = LoadTensor("input_0.pb");
    want_ = LoadTensor("output_0.pb");
  }

  std::string SegDir() const { return server_.data_dir() + "/segments"; }

  void Upload(const std::string& name) {
    Stubs stubs(server_.channel());
    v1::UploadModelResponse up;
    grpc::Status s = UploadModel(stubs.models.get(), key_, name, ReadFileOrEmpty(ModelPath("mlp", "model.onnx")), &up);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }

  // One inference of the mlp test input; true when the output matches.
  bool InferCorrect(const std::string& name) {
    Stubs stubs(server_.channel());
    inference::ModelInferResponse resp;
    grpc::Status s = Call(stubs.infer.get(), &InferStub::ModelInfer, key_, InferRequest(name, "", input_), &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    if (!s.ok() || resp.raw_output_contents_size() == 0) return false;
    const std::string& raw = resp.raw_output_contents(0);
    if (raw.size() != want_.tensor.byte_size()) return false;
    for (int64_t k = 0; k < want_.tensor.num_elements(); ++k) {
      if (std::abs(reinterpret_cast<const float*>(raw.data())[k] - want_.tensor.data<float>()[k]) > 1e-4f) {
        return false;
      }
    }
    return true;
  }

  OrrerydProcess server_{{"--lanes", "1"}};
  std::string key_;
  NamedTensor input_, want_;
};

TEST_F(SegmentTest, CorruptSegmentIsRebuiltFromTheOnnxAndRewritten) {
  Upload("m");
  std::vector<std::string> files = Files(SegDir());
  ASSERT_EQ(files.size(), 1u) << "one segment per uploaded version";
  const std::string path = SegDir() + "/" + files[0];
  const std::string original = ReadFileOrEmpty(path);
  ASSERT_GT(original.size(), 4096u);
  EXPECT_EQ(original.size() % 4096, 0u);
  EXPECT_TRUE(InferCorrect("m"));

  // A clean restart loads from the segment.
  ASSERT_EQ(server_.Stop(), 0);
  ASSERT_TRUE(server_.Start());
  EXPECT_TRUE(InferCorrect("m"));
  EXPECT_EQ(testing::MetricSample(server_.metrics_address(), "orrery_segment_loads_total"), 1);
  EXPECT_EQ(testing::MetricSample(server_.metrics_address(), "orrery_segment_rebuilds_total"), 0);
  EXPECT_EQ(testing::MetricSample(server_.metrics_address(), "orrery_model_compiles_total"), 0);

  // One flipped byte in the packed weights.
  ASSERT_EQ(server_.Stop(), 0);
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(4096 + 200);
    const char c = static_cast<char>(original[4096 + 200] ^ 0x01);
    f.write(&c, 1);
  }
  ASSERT_NE(ReadFileOrEmpty(path), original);
  ASSERT_TRUE(server_.Start());
  EXPECT_TRUE(InferCorrect("m")) << "a corrupt segment must not be served";
  EXPECT_EQ(testing::MetricSample(server_.metrics_address(), "orrery_segment_rebuilds_total"), 1);
  EXPECT_EQ(testing::MetricSample(server_.metrics_address(), "orrery_segment_loads_total"), 0);
  // Rewritten in place (packing is deterministic: the same bytes) and valid.
  EXPECT_EQ(ReadFileOrEmpty(path), original);
  {
    auto reader = SegmentReader::Create();
    ASSERT_TRUE(reader.ok());
    AlignedBuffer buffer;
    EXPECT_TRUE((*reader)->Read(path, &buffer).ok());
  }

  // Truncated, then missing: both rebuilt as well.
  ASSERT_EQ(server_.Stop(), 0);
  fs::resize_file(path, 4096);
  ASSERT_TRUE(server_.Start());
  EXPECT_TRUE(InferCorrect("m"));
  EXPECT_EQ(testing::MetricSample(server_.metrics_address(), "orrery_segment_rebuilds_total"), 1);
  EXPECT_EQ(ReadFileOrEmpty(path), original);
  ASSERT_EQ(server_.Stop(), 0);
  fs::remove(path);
  ASSERT_TRUE(server_.Start());
  EXPECT_TRUE(InferCorrect("m"));
  EXPECT_EQ(testing::MetricSample(server_.metrics_address(), "orrery_segment_rebuilds_total"), 1);
  EXPECT_EQ(ReadFileOrEmpty(path), original);

  // And the next restart imports again.
  ASSERT_EQ(server_.Stop(), 0);
  ASSERT_TRUE(server_.Start());
  EXPECT_TRUE(InferCorrect("m"));
  EXPECT_EQ(testing::MetricSample(server_.metrics_address(), "orrery_segment_loads_total"), 1);
  EXPECT_EQ(testing::MetricSample(server_.metrics_address(), "orrery_segment_rebuilds_total"), 0);
}

TEST_F(SegmentTest, RecoveryRemovesOrphansAndDeletesRemoveSegments) {
  Upload("a");
  Upload("a");
  Upload("b");
  std::vector<std::string> live = Files(SegDir());
  ASSERT_EQ(live.size(), 3u);

  // What a crash between a segment write and its catalog commit leaves.
  ASSERT_EQ(server_.Stop(), 0);
  std::ofstream(SegDir() + "/0123456789abcdef0123456789abcdef.seg") << std::string(8192, 'x');
  std::ofstream(SegDir() + "/.0123456789abcdef0123456789abcdef.seg.tmp-feedfacefeedface-1") << "partial";
  ASSERT_EQ(Files(SegDir()).size(), 5u);
  ASSERT_TRUE(server_.Start());
  EXPECT_EQ(Files(SegDir()), live);

  // Deleting one version removes its segment only; deleting the tenant the rest.
  Stubs stubs(server_.channel());
  v1::DeleteModelRequest del;
  del.set_name("a");
  del.set_version(1);
  v1::DeleteModelResponse resp;
  ASSERT_TRUE(Call(stubs.models.get(), &ModelStub::DeleteModel, key_, del, &resp).ok());
  EXPECT_EQ(Files(SegDir()).size(), 2u);
  EXPECT_TRUE(InferCorrect("a"));
  EXPECT_TRUE(InferCorrect("b"));
  v1::DeleteTenantRequest dt;
  dt.set_tenant("seg");
  v1::DeleteTenantResponse dresp;
  ASSERT_TRUE(Call(stubs.admin.get(), &v1::AdminService::Stub::DeleteTenant, server_.admin_token(), dt, &dresp).ok());
  EXPECT_TRUE(Files(SegDir()).empty());
}

}  // namespace
}  // namespace orrery
