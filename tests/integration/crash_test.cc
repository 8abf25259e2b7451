// Crash safety: orreryd is killed with SIGKILL at random moments while
// several tenants upload, delete versions and run inferences, then restarted,
// kCycles times. After every kill the catalog is opened directly (start-up
// repair off) and checked: no orphaned blobs, records without blob or dangling
// ids; every acknowledged upload that was not deleted is present with the
// SHA-256 of the bytes sent. After every restart, over gRPC: every visible
// version is one of the uploads sent for that name (its bytes, its upload id);
// an unacknowledged upload retried with its upload id is either replayed (it
// had committed) or stored once. Every acknowledged inference was correct.
// Segments: after every kill each model record's segment file exists and
// validates (it was synced before the record was committed); after every
// restart (start-up recovery) no temp file and no segment that no record
// names is left.
#include <atomic>
#include <filesystem>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/tensor_proto.h"
#include "storage/catalog.h"
#include "storage/segment_reader.h"
#include "storage/segment_store.h"
#include "tenancy/api_key.h"
#include "tests/integration/orreryd_process.h"
#include "tests/integration/rpc_client.h"

namespace orrery {
namespace {

using orrery::testing::ModelPath;

using orrery::testing::Call;
using orrery::testing::InferRequest;
using orrery::testing::OrrerydProcess;
using orrery::testing::ReadFileOrEmpty;
using orrery::testing::Stubs;
using orrery::testing::UploadModel;
using ModelStub = v1::ModelService::Stub;
using InferStub = inference::GRPCInferenceService::Stub;

constexpr int kCycles = 50;
constexpr int kTenants = 3;

NamedTensor Load(const std::string& file) {
  Result<NamedTensor> t = ParseTensorProto(ReadFileOrEmpty(ModelPath("mlp", "test_data_set_0/" + file)));
  EXPECT_TRUE(t.ok());
  return t.ok() ? std::move(t).value() : NamedTensor{};
}

// Concatenation by appends (GCC 12 warns falsely on chains of operator+).
std::string Cat(std::initializer_list<std::string_view> parts) {
  std::string out;
  for (std::string_view p : parts) out.append(p);
  return out;
}

// The mlp model with a different doc_string appended (ModelProto field 6; the
// last occurrence wins), so every upload has its own bytes and SHA-256.
std::string Variant(const std::string& base, const std::string& tag) {
  std::string out = base;
  out.push_back(static_cast<char>((6 << 3) | 2));
  out.push_back(static_cast<char>(tag.size()));  // tags are short (< 128)
  out += tag;
  return out;
}

struct Upload {
  int tenant = 0;
  std::string name;
  std::string upload_id;
  std::string sha;
  uint64_t version = 0;  // 0 until acknowledged
  bool deleted = false;        // delete acknowledged
  bool maybe_deleted = false;  // delete sent, not acknowledged
};

class World {
 public:
  // Registers an upload about to be sent; returns its index.
  size_t Begin(int tenant, const std::string& name, const std::string& upload_id, const std::string& sha) {
    std::lock_guard<std::mutex> lock(mu_);
    uploads_.push_back(Upload{tenant, name, upload_id, sha});
    return uploads_.size() - 1;
  }
  void Ack(size_t i, uint64_t version) {
    std::lock_guard<std::mutex> lock(mu_);
    uploads_[i].version = version;
  }
  // A random acknowledged, undeleted upload of the tenant, or -1.
  long PickLive(int tenant, std::mt19937& rng) {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<size_t> live;
    for (size_t i = 0; i < uploads_.size(); ++i) {
      const Upload& u = uploads_[i];
      if (u.tenant == tenant && u.version && !u.deleted && !u.maybe_deleted) live.push_back(i);
    }
    if (live.empty()) return -1;
    return static_cast<long>(live[rng() % live.size()]);
  }
  void MarkDeleting(size_t i) {
    std::lock_guard<std::mutex> lock(mu_);
    uploads_[i].maybe_deleted = true;
  }
  void MarkDeleted(size_t i) {
    std::lock_guard<std::mutex> lock(mu_);
    uploads_[i].deleted = true;
  }
  std::vector<Upload> Snapshot() {
    std::lock_guard<std::mutex> lock(mu_);
    return uploads_;
  }
  void Set(size_t i, const Upload& u) {
    std::lock_guard<std::mutex> lock(mu_);
    uploads_[i] = u;
  }

 private:
  std::mutex mu_;
  std::vector<Upload> uploads_;
};

class CrashTest : public ::testing::Test {
 protected:
  void SetUp() {
    base_ = ReadFileOrEmpty(ModelPath("mlp", "model.onnx"));
    ASSERT_FALSE(base_.empty());
    input_ = Load("input_0.pb");
    want_ = Load("output_0.pb");
  }

  // What a tenant does until `stop`: uploads (always with an upload id),
  // deletes of single versions, inferences.
  // `channel` is taken by the main thread: a worker reading server_'s own
  // channel could race with Kill() resetting it.
  void Work(int tenant, uint32_t seed, const std::atomic<bool>& stop, std::shared_ptr<grpc::Channel> channel) {
    std::mt19937 rng(seed);
    Stubs stubs(channel);
    const std::string& key = keys_[tenant];
    while (!stop.load()) {
      const int what = static_cast<int>(rng() % 10);
      if (what < 4) {
        const std::string name = Cat({"m", std::to_string(rng() % 3)});
        const std::string id = Cat({"u", std::to_string(tenant), "-", std::to_string(next_id_++)});
        const std::string bytes = Variant(base_, id);
        const size_t i = world_.Begin(tenant, name, id, Sha256Hex(bytes));
        v1::UploadModelResponse up;
        if (UploadModel(stubs.models.get(), key, name, bytes, &up, id, 4096).ok()) {
          EXPECT_EQ(up.model().sha256(), Sha256Hex(bytes));
          world_.Ack(i, up.model().version());
          ++acked_uploads_;
        }
      } else if (what < 5) {
        const long i = world_.PickLive(tenant, rng);
        if (i < 0) continue;
        const Upload u = world_.Snapshot()[static_cast<size_t>(i)];
        world_.MarkDeleting(static_cast<size_t>(i));
        v1::DeleteModelRequest del;
        del.set_name(u.name);
        del.set_version(u.version);
        v1::DeleteModelResponse resp;
        grpc::Status s = Call(stubs.models.get(), &ModelStub::DeleteModel, key, del, &resp);
        if (s.ok()) {
          world_.MarkDeleted(static_cast<size_t>(i));
          ++acked_deletes_;
        }
      } else {
        const long i = world_.PickLive(tenant, rng);
        if (i < 0) continue;
        const Upload u = world_.Snapshot()[static_cast<size_t>(i)];
        inference::ModelInferResponse resp;
        grpc::Status s = Call(stubs.infer.get(), &InferStub::ModelInfer, key,
                              InferRequest(u.name, std::to_string(u.version), input_), &resp);
        if (s.ok()) {
          ++acked_inferences_;
          const std::string& raw = resp.raw_output_contents_size() ? resp.raw_output_contents(0) : "";
          bool same = raw.size() == want_.tensor.byte_size();
          for (int64_t k = 0; same && k < want_.tensor.num_elements(); ++k) {
            same = std::abs(reinterpret_cast<const float*>(raw.data())[k] - want_.tensor.data<float>()[k]) < 1e-4f;
          }
          if (!same) ++wrong_inferences_;
        }
      }
    }
  }

  // With the server down: the catalog as the kill left it.
  void CheckCatalogDirectly() {
    Catalog::Options opts;
    opts.repair_on_open = false;
    auto catalog = Catalog::Open(server_.data_dir() + "/catalog", opts);
    ASSERT_TRUE(catalog.ok()) << catalog.status().ToString();
    auto report = (*catalog)->Fsck(/*repair=*/false);
    ASSERT_TRUE(report.ok());
    EXPECT_EQ(report->orphan_blobs, 0u);
    EXPECT_EQ(report->records_without_blob, 0u);
    EXPECT_EQ(report->dangling_uploads, 0u);
    EXPECT_EQ(report->dangling_key_index, 0u);
    // Every record names a segment that is there and intact.
    live_segments_.clear();
    auto reader = SegmentReader::Create();
    ASSERT_TRUE(reader.ok());
    for (const std::string& tenant_id : tenant_ids_) {
      auto models = (*catalog)->ListModels(tenant_id);
      ASSERT_TRUE(models.ok());
      for (const ModelRecord& m : *models) {
        EXPECT_FALSE(m.segment_file().empty()) << m.name() << " v" << m.version() << " has no segment";
        // What a GPU's device cache charges it (api/device_tier.h), recorded at upload.
        EXPECT_GT(m.device_weight_bytes(), 0u) << m.name() << " v" << m.version() << " has no device weight layout";
        if (m.segment_file().empty()) continue;
        live_segments_.insert(m.segment_file());
        AlignedBuffer buffer;
        Result<SegmentHeader> header = (*reader)->Read(SegmentDir() + "/" + m.segment_file(), &buffer);
        ASSERT_TRUE(header.ok()) << m.name() << " v" << m.version() << ": " << header.status().ToString();
        EXPECT_EQ(header->file_size(), m.segment_bytes());
        EXPECT_EQ(SegmentStore::HeaderCrc(*header), m.segment_header_crc32c());
        ++verified_segments_;
      }
    }
    for (const Upload& u : world_.Snapshot()) {
      if (!u.version || u.deleted || u.maybe_deleted) continue;
      auto blob = (*catalog)->GetModelBlob(tenant_ids_[u.tenant], u.name, u.version);
      ASSERT_TRUE(blob.ok()) << "acknowledged upload " << u.upload_id << " lost: " << blob.status().ToString();
      EXPECT_EQ(Sha256Hex(*blob), u.sha) << "upload " << u.upload_id << " is not byte-identical";
      ++verified_blobs_;
    }
  }

  // With the server up after start-up recovery and before any new upload:
  // only segments of the records seen after the kill (recovery and catalog
  // repair only remove), and no unfinished writes.
  void CheckNoOrphanSegments() {
    for (const auto& e : std::filesystem::directory_iterator(SegmentDir())) {
      const std::string name = e.path().filename().string();
      EXPECT_TRUE(live_segments_.count(name) > 0) << "orphaned segment file " << name << " after recovery";
    }
  }

  std::string SegmentDir() const { return server_.data_dir() + "/segments"; }

  // With the server up: what every tenant sees, then pending uploads retried.
  void CheckAndResolveOverGrpc() {
    Stubs stubs(server_.channel());
    std::vector<Upload> uploads = world_.Snapshot();
    for (int t = 0; t < kTenants; ++t) {
      v1::ListModelsResponse list;
      ASSERT_TRUE(Call(stubs.models.get(), &ModelStub::ListModels, keys_[t], v1::ListModelsRequest(), &list).ok());
      std::set<std::pair<std::string, uint64_t>> visible;
      for (const v1::ModelInfo& m : list.models()) {
        visible.insert({m.name(), m.version()});
        // Visible => it is one of ours, complete, under its own upload id.
        bool known = false;
        for (const Upload& u : uploads) {
          if (u.tenant == t && u.upload_id == m.upload_id()) {
            known = u.name == m.name() && u.sha == m.sha256() && (u.version == 0 || u.version == m.version());
          }
        }
        EXPECT_TRUE(known) << "tenant " << t << " sees " << m.name() << " v" << m.version() << " (upload "
                           << m.upload_id() << ") that matches no upload sent";
      }
      for (const Upload& u : uploads) {
        if (u.tenant != t || !u.version) continue;
        const bool present = visible.count({u.name, u.version}) > 0;
        if (u.deleted) {
          EXPECT_FALSE(present) << "deleted " << u.upload_id << " is back";
        } else if (!u.maybe_deleted) {
          EXPECT_TRUE(present) << "acknowledged " << u.upload_id << " missing";
        }
      }
    }
    // Retry every unacknowledged upload once with its id.
    for (size_t i = 0; i < uploads.size(); ++i) {
      Upload u = uploads[i];
      if (u.version) continue;
      const std::string bytes = Variant(base_, u.upload_id);
      v1::UploadModelResponse up;
      grpc::Status s = UploadModel(stubs.models.get(), keys_[u.tenant], u.name, bytes, &up, u.upload_id, 4096);
      ASSERT_TRUE(s.ok()) << s.error_message();
      EXPECT_EQ(up.model().sha256(), u.sha);
      if (up.replayed()) ++replayed_;
      u.version = up.model().version();
      world_.Set(i, u);
    }
  }

  OrrerydProcess server_{{"--lanes", "2"}};
  std::string base_;
  NamedTensor input_, want_;
  std::vector<std::string> keys_, tenant_ids_;
  World world_;
  std::atomic<int> next_id_{0};
  std::atomic<int> acked_uploads_{0}, acked_deletes_{0}, acked_inferences_{0}, wrong_inferences_{0};
  int verified_blobs_ = 0, replayed_ = 0, verified_segments_ = 0;
  std::set<std::string> live_segments_;
};

TEST_F(CrashTest, AcknowledgedWorkSurvivesRepeatedSigkill) {
  ASSERT_TRUE(server_.Start());
  {
    Stubs stubs(server_.channel());
    for (int t = 0; t < kTenants; ++t) {
      v1::CreateTenantResponse resp;
      ASSERT_TRUE(orrery::testing::CreateTenant(stubs.admin.get(), server_.admin_token(),
                                                Cat({"crash-", std::to_string(t)}), &resp)
                      .ok());
      keys_.push_back(resp.api_key());
      tenant_ids_.push_back(resp.tenant().id());
    }
  }
  std::mt19937 rng(12345);
  for (int cycle = 0; cycle < kCycles; ++cycle) {
    std::atomic<bool> stop{false};
    std::vector<std::thread> workers;
    for (int t = 0; t < kTenants; ++t) {
      workers.emplace_back([this, t, cycle, &stop, channel = server_.channel()] {
        Work(t, static_cast<uint32_t>(cycle * 31 + t), stop, channel);
      });
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20 + rng() % 120));
    server_.Kill();  // SIGKILL, mid-flight
    stop.store(true);
    for (auto& w : workers) w.join();

    CheckCatalogDirectly();
    ASSERT_TRUE(server_.Start()) << "restart " << cycle << " failed";
    CheckNoOrphanSegments();
    CheckAndResolveOverGrpc();
    if (::testing::Test::HasFatalFailure()) return;
  }
  EXPECT_EQ(wrong_inferences_.load(), 0);
  // The run did real work (otherwise the checks above prove nothing).
  EXPECT_GT(acked_uploads_.load(), kCycles);
  EXPECT_GT(acked_inferences_.load(), kCycles);
  EXPECT_GT(acked_deletes_.load(), 0);
  EXPECT_GT(verified_blobs_, kCycles);
  EXPECT_GT(verified_segments_, kCycles);
  std::printf("crash test: %d kills, %d acknowledged uploads, %d deletes, %d inferences, %d blob checks, "
              "%d segment checks, %d unacknowledged uploads found committed on retry\n",
              kCycles, acked_uploads_.load(), acked_deletes_.load(), acked_inferences_.load(), verified_blobs_,
              verified_segments_, replayed_);
}

}  // namespace
}  // namespace orrery
