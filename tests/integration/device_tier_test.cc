// The simulated device tier in orreryd (--sim-device): with one CPU lane and
// bursts of concurrent requests, the scheduler places some requests on the
// device once their model's weights have moved there (the transfer is a link
// action it planned), every output is right wherever it ran, CacheList shows
// the device tier (simulated) with the model resident and a model larger
// than the device memory as "too_large", the ledger bills device time and
// the transferred bytes, and the Prometheus counters match the ledger. The
// large model still runs, on the CPU.
#include <cmath>
#include <cstdio>
#include <map>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "tests/common/http_client.h"
#include "tests/integration/orreryd_process.h"
#include "tests/integration/rpc_client.h"
#include "tests/unit/runtime/model_builder.h"

namespace orrery {
namespace {

using orrery::testing::Call;
using orrery::testing::InferRequest;
using orrery::testing::ModelBuilder;
using orrery::testing::OrrerydProcess;
using orrery::testing::Stubs;
using orrery::testing::UploadModel;
using InferStub = inference::GRPCInferenceService::Stub;

// Small deterministic weights (no RNG: the expected outputs are computed
// here the same way).
float Weight(int64_t i, int64_t salt) { return static_cast<float>((i * 37 + salt * 11) % 23 - 11) / 256.0f; }

struct Layer {
  int64_t in = 0, out = 0;
  std::vector<float> w;  // [in, out]
  std::vector<float> b;  // [out]
};

Layer MakeLayer(int64_t in, int64_t out, int64_t salt) {
  Layer l{in, out, std::vector<float>(static_cast<size_t>(in * out)), std::vector<float>(static_cast<size_t>(out))};
  for (int64_t i = 0; i < in * out; ++i) l.w[static_cast<size_t>(i)] = Weight(i, salt);
  for (int64_t i = 0; i < out; ++i) l.b[static_cast<size_t>(i)] = Weight(i, salt + 1);
  return l;
}

// x [N, layers[0].in] -> Gemm (+ Relu between layers) -> [N, last.out].
std::string BuildMlp(const std::vector<Layer>& layers) {
  ModelBuilder mb;
  mb.Input("x", onnx::TensorProto::FLOAT, {-1, layers.front().in});
  std::string prev = "x";
  for (size_t k = 0; k < layers.size(); ++k) {
    const std::string w = std::string("w").append(std::to_string(k));
    const std::string b = std::string("b").append(std::to_string(k));
    const std::string h = std::string("h").append(std::to_string(k));
    mb.FloatInit(w, {layers[k].in, layers[k].out}, layers[k].w);
    mb.FloatInit(b, {layers[k].out}, layers[k].b);
    mb.Node("Gemm", {prev, w, b}, {h});
    prev = h;
    if (k + 1 < layers.size()) {
      prev = std::string(h).append("r");
      mb.Node("Relu", {h}, {prev});
    }
  }
  mb.Node("Identity", {prev}, {"y"});
  mb.Output("y", onnx::TensorProto::FLOAT, {-1, layers.back().out});
  return mb.Bytes();
}

std::vector<float> Reference(const std::vector<Layer>& layers, const std::vector<float>& x, int64_t rows) {
  std::vector<float> cur = x;
  for (size_t k = 0; k < layers.size(); ++k) {
    const Layer& l = layers[k];
    std::vector<float> next(static_cast<size_t>(rows * l.out));
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t o = 0; o < l.out; ++o) next[static_cast<size_t>(r * l.out + o)] = l.b[static_cast<size_t>(o)];
      for (int64_t i = 0; i < l.in; ++i) {
        const float v = cur[static_cast<size_t>(r * l.in + i)];
        const float* wrow = &l.w[static_cast<size_t>(i * l.out)];
        float* out = &next[static_cast<size_t>(r * l.out)];
        for (int64_t o = 0; o < l.out; ++o) out[o] += v * wrow[o];
      }
      if (k + 1 < layers.size()) {
        for (int64_t o = 0; o < l.out; ++o) {
          float& y = next[static_cast<size_t>(r * l.out + o)];
          y = std::max(y, 0.0f);
        }
      }
    }
    cur = std::move(next);
  }
  return cur;
}

NamedTensor Input(int64_t rows, int64_t cols) {
  NamedTensor t{"x", Tensor(DType::kFloat32, {rows, cols})};
  for (int64_t i = 0; i < rows * cols; ++i) t.tensor.data<float>()[i] = Weight(i, 5) * 4;
  return t;
}

bool Close(const std::string& raw, const std::vector<float>& want) {
  if (raw.size() != want.size() * sizeof(float)) return false;
  const float* got = reinterpret_cast<const float*>(raw.data());
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::abs(got[i] - want[i]) > 1e-3f * (1.0f + std::abs(want[i]))) return false;
  }
  return true;
}

std::string Placement(const inference::ModelInferResponse& resp) {
  auto it = resp.parameters().find("orrery_placement");
  return it == resp.parameters().end() ? "" : it->second.string_param();
}

TEST(DeviceTierTest, RequestsMoveToTheSimulatedDeviceAndAreBilledForIt) {
  OrrerydProcess server({"--lanes", "1", "--max-batch", "1", "--summary-seconds", "0", "--sim-device",
                         "memory=64M,link-gbps=8,latency-us=50"});
  ASSERT_TRUE(server.Start());
  Stubs stubs(server.channel());
  v1::CreateTenantResponse tenant;
  ASSERT_TRUE(testing::CreateTenant(stubs.admin.get(), server.admin_token(), "dev", &tenant).ok());

  // "wide": ~6 MB of weights, a few ms per 16-row request on a lane; the
  // 8 Gb/s link moves it in ~6 ms. "big": 68 MB, more than the 64 MiB device.
  const std::vector<Layer> wide = {MakeLayer(512, 1024, 1), MakeLayer(1024, 1024, 2), MakeLayer(1024, 16, 3)};
  const std::vector<Layer> big = {MakeLayer(4096, 4160, 4)};
  for (const auto& [name, layers] : {std::pair{"wide", &wide}, std::pair{"big", &big}}) {
    v1::UploadModelResponse up;
    grpc::Status s = UploadModel(stubs.models.get(), tenant.api_key(), name, BuildMlp(*layers), &up, "", 1 << 20);
    ASSERT_TRUE(s.ok()) << name << ": " << s.error_message();
  }
  const int64_t rows = 16;
  const NamedTensor x = Input(rows, 512);
  const std::vector<float> want(Reference(wide, std::vector<float>(x.tensor.data<float>(),
                                                                   x.tensor.data<float>() + rows * 512),
                                          rows));
  auto infer = [&](const std::string& model, const NamedTensor& in, inference::ModelInferResponse* resp) {
    return Call(stubs.infer.get(), &InferStub::ModelInfer, tenant.api_key(), InferRequest(model, "", in), resp);
  };

  // Sequential requests seed the cost model; an idle lane wins ties.
  int correct = 0, total = 0, on_device = 0;
  for (int i = 0; i < 4; ++i) {
    inference::ModelInferResponse resp;
    ASSERT_TRUE(infer("wide", x, &resp).ok());
    ++total;
    correct += Close(resp.raw_output_contents(0), want) ? 1 : 0;
    on_device += Placement(resp) == "device" ? 1 : 0;
  }
  // Bursts on one lane: a request queued behind others is predicted to
  // finish first on the device once the weights move there.
  for (int burst = 0; burst < 20 && on_device < 4; ++burst) {
    std::vector<inference::ModelInferResponse> resps(8);
    std::vector<grpc::Status> status(8);
    std::vector<std::thread> clients;
    for (size_t c = 0; c < resps.size(); ++c) clients.emplace_back([&, c] { status[c] = infer("wide", x, &resps[c]); });
    for (std::thread& t : clients) t.join();
    for (size_t c = 0; c < resps.size(); ++c) {
      ASSERT_TRUE(status[c].ok()) << status[c].error_message();
      ++total;
      correct += Close(resps[c].raw_output_contents(0), want) ? 1 : 0;
      const std::string where = Placement(resps[c]);
      EXPECT_TRUE(where == "device" || where == "cpu") << where;
      on_device += where == "device" ? 1 : 0;
    }
  }
  std::printf("%d of %d requests ran on the simulated device\n", on_device, total);
  EXPECT_EQ(correct, total);
  EXPECT_GE(on_device, 1) << "no request was placed on the device in " << total << " requests";

  // The large model runs on the CPU, always.
  const NamedTensor bx = Input(1, 4096);
  const std::vector<float> bwant =
      Reference(big, std::vector<float>(bx.tensor.data<float>(), bx.tensor.data<float>() + 4096), 1);
  for (int i = 0; i < 2; ++i) {
    inference::ModelInferResponse resp;
    grpc::Status s = infer("big", bx, &resp);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_TRUE(Close(resp.raw_output_contents(0), bwant));
    EXPECT_EQ(Placement(resp), "cpu");
  }

  // CacheList: the device tier is there, simulated, "wide" resident on it,
  // "big" too large for it.
  v1::CacheListRequest list_req;
  list_req.set_tier("device");
  v1::CacheListResponse list;
  ASSERT_TRUE(Call(stubs.admin.get(), &v1::AdminService::Stub::CacheList, server.admin_token(), list_req, &list).ok());
  ASSERT_EQ(list.tiers_size(), 1);
  EXPECT_EQ(list.tiers(0).tier(), "device");
  EXPECT_TRUE(list.tiers(0).simulated());
  EXPECT_NE(list.tiers(0).device().find("simulated"), std::string::npos) << list.tiers(0).device();
  EXPECT_EQ(list.tiers(0).capacity_bytes(), uint64_t{64} << 20);
  std::map<std::string, v1::CacheEntry> device_entries;
  for (const v1::CacheEntry& e : list.entries()) device_entries[e.model()] = e;
  ASSERT_EQ(device_entries.count("wide"), 1u);
  ASSERT_EQ(device_entries.count("big"), 1u);
  EXPECT_EQ(device_entries["wide"].state(), "resident");
  EXPECT_EQ(device_entries["wide"].pins(), 0u);
  EXPECT_GT(device_entries["wide"].last_use_unix_ms(), 0);
  EXPECT_EQ(device_entries["big"].state(), "too_large");
  EXPECT_GT(device_entries["big"].size_bytes(), uint64_t{64} << 20);

  // The ledger: device lines carry device time, no lane time, and the
  // transfer is billed once, to the request whose placement started it.
  v1::BillingReportRequest bill_req;
  bill_req.set_tenant("dev");
  v1::BillingReportResponse bill;
  ASSERT_TRUE(
      Call(stubs.admin.get(), &v1::AdminService::Stub::BillingReport, server.admin_token(), bill_req, &bill).ok());
  int device_lines = 0;
  uint64_t transferred = 0;
  int64_t device_ns = 0;
  for (const v1::BillingLine& l : bill.lines()) {
    if (l.kind() != "inference") continue;
    if (l.model() == "big") {
      EXPECT_EQ(l.placement(), "cpu");
    }
    transferred += l.bytes_transferred();
    if (l.placement() == "device") {
      ++device_lines;
      device_ns += l.device_ns();
      EXPECT_GT(l.device_ns(), 0);
      EXPECT_EQ(l.lane_ns(), 0);
      const v1::PriceTable& p = bill.prices();
      const int64_t expect = std::llround(static_cast<double>(l.device_ns()) * p.device_second_micros() / 1e9) +
                             std::llround(static_cast<double>(l.bytes_transferred()) * p.gb_loaded_micros() / 1e9) +
                             std::llround(static_cast<double>(l.bytes_loaded()) * p.gb_loaded_micros() / 1e9);
      EXPECT_NEAR(l.cost_micros(), expect, 2) << l.request_id();
    }
  }
  EXPECT_EQ(device_lines, on_device);
  EXPECT_EQ(transferred, device_entries["wide"].size_bytes()) << "one transfer, billed once";

  // Metrics agree with the responses and the ledger.
  const std::string m = server.metrics_address();
  EXPECT_EQ(testing::MetricSample(m, "orrery_device_placements_total{target=\"device\"}"), on_device);
  EXPECT_EQ(testing::MetricSample(m, "orrery_device_link_bytes_total"), static_cast<double>(transferred));
  EXPECT_EQ(testing::MetricSample(m, "orrery_device_cache_loaded_bytes_total"), static_cast<double>(transferred));
  EXPECT_EQ(testing::MetricSample(m, "orrery_device_cache_events_total{event=\"load\"}"), 1);
  EXPECT_EQ(testing::MetricSample(m, "orrery_device_cache_events_total{event=\"eviction\"}"), 0);
  // Every device placement acquired the entry once (a pre-warm is no request).
  EXPECT_EQ(testing::MetricSample(m, "orrery_device_cache_events_total{event=\"hit\"}") +
                testing::MetricSample(m, "orrery_device_cache_events_total{event=\"join\"}") +
                testing::MetricSample(m, "orrery_device_cache_events_total{event=\"miss\"}"),
            on_device);
  EXPECT_GT(testing::MetricSample(m, "orrery_device_link_seconds_total"), 0);
  EXPECT_NEAR(testing::MetricSample(m, "orrery_device_busy_seconds_total"), static_cast<double>(device_ns) / 1e9, 1e-6);
  EXPECT_GE(testing::MetricSample(m, "orrery_device_utilisation{device=\"simulated\",resource=\"compute\"}"), 0);
  EXPECT_GT(testing::MetricSample(m, "orrery_lane_utilisation"), 0);

  // Scheduler stats name the device as simulated and count its runs.
  v1::SchedulerStatsResponse stats;
  ASSERT_TRUE(Call(stubs.admin.get(), &v1::AdminService::Stub::SchedulerStats, server.admin_token(),
                   v1::SchedulerStatsRequest(), &stats)
                  .ok());
  ASSERT_TRUE(stats.has_device());
  EXPECT_TRUE(stats.device().simulated());
  EXPECT_EQ(stats.device().placed_device(), static_cast<uint64_t>(on_device));
  EXPECT_EQ(stats.device().transfers(), 1u);
  ASSERT_EQ(stats.tenants_size(), 1);
  EXPECT_EQ(stats.tenants(0).device_runs(), static_cast<uint64_t>(on_device));
}

TEST(DeviceTierTest, OperatorActionsTakeTheDeviceTier) {
  OrrerydProcess server({"--lanes", "1", "--sim-device", "memory=64M,link-gbps=8,latency-us=50"});
  ASSERT_TRUE(server.Start());
  Stubs stubs(server.channel());
  v1::CreateTenantResponse tenant;
  ASSERT_TRUE(testing::CreateTenant(stubs.admin.get(), server.admin_token(), "ops", &tenant).ok());
  v1::UploadModelResponse up;
  ASSERT_TRUE(UploadModel(stubs.models.get(), tenant.api_key(), "m", BuildMlp({MakeLayer(64, 64, 1)}), &up).ok());
  v1::CacheModelRequest req;
  req.set_tier("device");
  req.set_tenant("ops");
  req.set_model("m");
  v1::CacheModelResponse resp;
  auto admin = [&](auto method) {
    resp.Clear();
    return Call(stubs.admin.get(), method, server.admin_token(), req, &resp);
  };
  ASSERT_TRUE(admin(&v1::AdminService::Stub::CachePrefetch).ok());
  EXPECT_EQ(resp.entry().tier(), "device");
  EXPECT_EQ(resp.entry().state(), "resident");
  ASSERT_TRUE(admin(&v1::AdminService::Stub::CachePin).ok());
  EXPECT_EQ(resp.entry().operator_pins(), 1u);
  EXPECT_EQ(admin(&v1::AdminService::Stub::CacheEvict).error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  ASSERT_TRUE(admin(&v1::AdminService::Stub::CacheUnpin).ok());
  ASSERT_TRUE(admin(&v1::AdminService::Stub::CacheEvict).ok());
  EXPECT_EQ(resp.entry().state(), "absent");
  // The host tier is untouched by device actions (and stays the default).
  req.set_tier("");
  ASSERT_TRUE(admin(&v1::AdminService::Stub::CacheUnpin).error_code() == grpc::StatusCode::FAILED_PRECONDITION);
  req.set_tier("gpu");
  EXPECT_EQ(admin(&v1::AdminService::Stub::CachePin).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

TEST(DeviceTierTest, NoDeviceTierWithoutTheFlag) {
  OrrerydProcess server({"--lanes", "1"});
  ASSERT_TRUE(server.Start());
  Stubs stubs(server.channel());
  v1::CacheListRequest req;
  req.set_tier("device");
  v1::CacheListResponse list;
  grpc::Status s = Call(stubs.admin.get(), &v1::AdminService::Stub::CacheList, server.admin_token(), req, &list);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_NE(s.error_message().find("--sim-device"), std::string::npos) << s.error_message();
}

}  // namespace
}  // namespace orrery
