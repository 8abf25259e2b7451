// The scheduler against the real orreryd: calibration at upload (stored,
// billed, loaded again after a restart) and batching of concurrent
// same-model requests (outputs equal to unbatched runs, billed by share).
#include <cmath>
#include <cstdio>
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "base/cpu_set.h"
#include "tests/integration/orreryd_process.h"
#include "tests/integration/rpc_client.h"

namespace orrery {
namespace {

using testing::Call;
using testing::OrrerydProcess;
using testing::Stubs;
using InferStub = inference::GRPCInferenceService::Stub;

struct Tenant {
  std::string id, key;
};

Tenant MakeTenantWithMlp(Stubs* stubs, const std::string& admin, const std::string& name) {
  v1::CreateTenantResponse t;
  grpc::Status s = testing::CreateTenant(stubs->admin.get(), admin, name, &t);
  EXPECT_TRUE(s.ok()) << s.error_message();
  v1::UploadModelResponse up;
  s = testing::UploadModel(stubs->models.get(), t.api_key(), "mlp",
                           testing::ReadFileOrEmpty(testing::ModelPath("mlp", "model.onnx")), &up);
  EXPECT_TRUE(s.ok()) << s.error_message();
  return {t.tenant().id(), t.api_key()};
}

v1::SchedulerStatsResponse Stats(Stubs* stubs, const std::string& admin) {
  v1::SchedulerStatsResponse stats;
  grpc::Status s =
      Call(stubs->admin.get(), &v1::AdminService::Stub::SchedulerStats, admin, v1::SchedulerStatsRequest(), &stats);
  EXPECT_TRUE(s.ok()) << s.error_message();
  return stats;
}

const v1::ModelCostInfo* FindModel(const v1::SchedulerStatsResponse& stats, const std::string& id) {
  for (const v1::ModelCostInfo& m : stats.models()) {
    if (m.model_id() == id) return &m;
  }
  return nullptr;
}

// Polls until the model's calibration is in the scheduler (it runs after the
// upload returns); the stats at that point.
v1::SchedulerStatsResponse WaitForCalibration(Stubs* stubs, const std::string& admin, const std::string& id) {
  v1::SchedulerStatsResponse stats;
  for (int i = 0; i < 500; ++i) {
    stats = Stats(stubs, admin);
    const v1::ModelCostInfo* m = FindModel(stats, id);
    if (m != nullptr && m->calibrated_ns_size() == 4) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return stats;
}

// x: float32 [rows, 16], distinct per request.
NamedTensor Input(int seed, int rows = 1) {
  Tensor x(DType::kFloat32, {rows, 16});
  for (int i = 0; i < rows * 16; ++i) x.data<float>()[i] = std::sin(0.37f * static_cast<float>(seed * 16 + i));
  return {"x", x};
}

std::vector<float> Probs(const inference::ModelInferResponse& resp) {
  EXPECT_EQ(resp.raw_output_contents_size(), 1);
  if (resp.raw_output_contents_size() != 1) return {};
  const std::string& raw = resp.raw_output_contents(0);
  std::vector<float> out(raw.size() / sizeof(float));
  std::memcpy(out.data(), raw.data(), out.size() * sizeof(float));
  return out;
}

TEST(SchedulingTest, UploadIsCalibratedStoredBilledAndLoadedAfterRestart) {
  OrrerydProcess server({"--storage-sample-seconds", "0", "--lanes", "1"});
  ASSERT_TRUE(server.Start()) << "orreryd did not start";
  Stubs stubs(server.channel());
  const std::string admin = server.admin_token();
  const Tenant t = MakeTenantWithMlp(&stubs, admin, "calib");
  const std::string id = t.id + "/mlp@1";

  v1::SchedulerStatsResponse stats = WaitForCalibration(&stubs, admin, id);
  const v1::ModelCostInfo* m = FindModel(stats, id);
  ASSERT_NE(m, nullptr) << "no cost entry for " << id;
  ASSERT_EQ(m->calibrated_ns_size(), 4) << "mlp's batch dim is dynamic: batch 1, 2, 4 and 8";
  for (int b : {1, 2, 4, 8}) {
    ASSERT_TRUE(m->calibrated_ns().count(b)) << "batch " << b;
    EXPECT_GT(m->calibrated_ns().at(b), 0);
  }
  EXPECT_GT(m->steps(), 0u);  // known from the calibration's per-step times
  std::printf("mlp calibration: %llu steps; lane us per run (per row) at batch", static_cast<unsigned long long>(m->steps()));
  for (int b : {1, 2, 4, 8}) {
    std::printf(" %d: %.1f (%.1f);", b, static_cast<double>(m->calibrated_ns().at(b)) / 1e3,
                static_cast<double>(m->calibrated_ns().at(b)) / 1e3 / b);
  }
  std::printf("\n");
  EXPECT_EQ(m->samples(), 0u);  // calibration is not a prediction sample
  ASSERT_EQ(stats.tenants_size(), 1);
  EXPECT_EQ(stats.tenants(0).calibration_runs(), 8u);
  EXPECT_EQ(stats.tenants(0).completed(), 0u);

  // Billed: one calibration line with the runs' lane time.
  auto billing = v1::BillingService::NewStub(server.channel());
  v1::BillingReportResponse report;
  v1::BillingReportRequest req;
  for (int i = 0; i < 100; ++i) {  // the entry is written just after the profile is loaded
    ASSERT_TRUE(Call(billing.get(), &v1::BillingService::Stub::Report, t.key, req, &report).ok());
    if (report.lines_size() > 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_EQ(report.lines_size(), 1);
  EXPECT_EQ(report.lines(0).kind(), "calibration");
  EXPECT_EQ(report.lines(0).model(), "mlp");
  EXPECT_EQ(report.lines(0).batch_size(), 8u);  // runs
  EXPECT_GT(report.lines(0).lane_ns(), 0);
  EXPECT_EQ(report.counter_entries(), 1u);

  // The profile is durable and loaded at start-up, before any inference.
  const int64_t b8 = m->calibrated_ns().at(8);
  ASSERT_EQ(server.Stop(), 0);
  ASSERT_TRUE(server.Start()) << "orreryd did not restart";
  Stubs again(server.channel());
  stats = Stats(&again, admin);
  m = FindModel(stats, id);
  ASSERT_NE(m, nullptr) << "profile not loaded at start-up";
  ASSERT_EQ(m->calibrated_ns_size(), 4);
  EXPECT_EQ(m->calibrated_ns().at(8), b8);
  EXPECT_EQ(stats.tenants_size(), 0);  // nothing ran again
}

TEST(SchedulingTest, ConcurrentRequestsAreBatchedAndMatchUnbatchedOutputs) {
  OrrerydProcess server({"--storage-sample-seconds", "0", "--lanes", "1", "--max-batch", "8"});
  ASSERT_TRUE(server.Start()) << "orreryd did not start";
  Stubs stubs(server.channel());
  const std::string admin = server.admin_token();
  const Tenant t = MakeTenantWithMlp(&stubs, admin, "batch");
  const std::string id = t.id + "/mlp@1";
  const v1::SchedulerStatsResponse calibration = WaitForCalibration(&stubs, admin, id);
  const v1::ModelCostInfo* calibrated = FindModel(calibration, id);
  ASSERT_NE(calibrated, nullptr);
  ASSERT_EQ(calibrated->calibrated_ns_size(), 4);

  // Reference outputs: one request at a time, never batched.
  constexpr int kRequests = 48;
  std::vector<std::vector<float>> expected(kRequests);
  for (int i = 0; i < kRequests; ++i) {
    inference::ModelInferResponse resp;
    ASSERT_TRUE(Call(stubs.infer.get(), &InferStub::ModelInfer, t.key, testing::InferRequest("mlp", "", Input(i)), &resp)
                    .ok());
    expected[i] = Probs(resp);
    ASSERT_EQ(expected[i].size(), 8u);
  }
  ASSERT_EQ(Stats(&stubs, admin).batches(), 0u);

  // The same inputs from 16 threads at once, a few rounds: requests queue
  // behind the one lane and go as batches (as long as calibration measured
  // a batch as cheaper per request, which a 16x32x8 MLP always is).
  // Rounds until a batch formed: whether requests overlap on the lane is up
  // to the OS (the handler's ledger fsync dominates a ~2 us run); in
  // practice the first round always batched some.
  int rounds = 0;
  for (; rounds < 10 && Stats(&stubs, admin).batches() == 0; ++rounds) {
    std::vector<std::vector<float>> got(kRequests);
    std::vector<grpc::Status> status(kRequests);
    std::vector<std::thread> threads;
    for (int th = 0; th < 16; ++th) {
      threads.emplace_back([&, th] {
        for (int i = th; i < kRequests; i += 16) {
          inference::ModelInferResponse resp;
          status[i] =
              Call(stubs.infer.get(), &InferStub::ModelInfer, t.key, testing::InferRequest("mlp", "", Input(i)), &resp);
          if (status[i].ok()) got[i] = Probs(resp);
        }
      });
    }
    for (std::thread& th : threads) th.join();
    for (int i = 0; i < kRequests; ++i) {
      ASSERT_TRUE(status[i].ok()) << status[i].error_message();
      ASSERT_EQ(got[i].size(), expected[i].size());
      for (size_t k = 0; k < got[i].size(); ++k) EXPECT_NEAR(got[i][k], expected[i][k], 1e-5) << i << "," << k;
    }
  }
  v1::SchedulerStatsResponse stats = Stats(&stubs, admin);
  EXPECT_GT(stats.batches(), 0u) << "no batch formed from 16 concurrent clients on one lane";
  std::printf("%d rounds of %d concurrent requests from 16 clients on 1 lane: %llu ran in %llu batches\n", rounds, kRequests,
              static_cast<unsigned long long>(stats.tenants_size() ? stats.tenants(0).batched() : 0),
              static_cast<unsigned long long>(stats.batches()));
  ASSERT_EQ(stats.tenants_size(), 1);
  EXPECT_GT(stats.tenants(0).batched(), 0u);
  EXPECT_EQ(stats.tenants(0).completed(), static_cast<uint64_t>((1 + rounds) * kRequests));

  // Billing: batched lines carry their batch size and share, and shares of
  // one batch add up (each line pays its share of the batch's lane time).
  auto billing = v1::BillingService::NewStub(server.channel());
  v1::BillingReportResponse report;
  ASSERT_TRUE(Call(billing.get(), &v1::BillingService::Stub::Report, t.key, v1::BillingReportRequest(), &report).ok());
  int batched_lines = 0;
  for (const v1::BillingLine& l : report.lines()) {
    if (l.kind() != "inference") continue;
    if (l.batch_size() > 1) {
      ++batched_lines;
      EXPECT_NEAR(l.batch_share(), 1.0 / l.batch_size(), 1e-9);  // one row each
    } else {
      EXPECT_EQ(l.batch_share(), 1.0);
    }
  }
  EXPECT_EQ(static_cast<uint64_t>(batched_lines), stats.tenants(0).batched());
}

TEST(SchedulingTest, MaxBatchOneNeverBatches) {
  OrrerydProcess server({"--storage-sample-seconds", "0", "--lanes", "1", "--max-batch", "1"});
  ASSERT_TRUE(server.Start()) << "orreryd did not start";
  Stubs stubs(server.channel());
  const std::string admin = server.admin_token();
  const Tenant t = MakeTenantWithMlp(&stubs, admin, "nobatch");
  const std::string id = t.id + "/mlp@1";
  // Calibrated at batch 1 only: the limit is 1.
  v1::SchedulerStatsResponse stats;
  for (int i = 0; i < 500; ++i) {
    stats = Stats(&stubs, admin);
    const v1::ModelCostInfo* m = FindModel(stats, id);
    if (m != nullptr && m->calibrated_ns_size() > 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const v1::ModelCostInfo* m = FindModel(stats, id);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->calibrated_ns_size(), 1);
  std::vector<std::thread> threads;
  for (int th = 0; th < 8; ++th) {
    threads.emplace_back([&, th] {
      for (int i = 0; i < 4; ++i) {
        inference::ModelInferResponse resp;
        EXPECT_TRUE(
            Call(stubs.infer.get(), &InferStub::ModelInfer, t.key, testing::InferRequest("mlp", "", Input(th)), &resp)
                .ok());
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(Stats(&stubs, admin).batches(), 0u);
}

}  // namespace
}  // namespace orrery

namespace orrery {
namespace {

// Cpus_allowed_list of every thread of `pid`, by thread name.
std::vector<std::pair<std::string, std::string>> ThreadCpus(pid_t pid) {
  std::vector<std::pair<std::string, std::string>> threads;
  for (const auto& task : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task")) {
    std::string name = testing::ReadFileOrEmpty(task.path() / "comm");
    while (!name.empty() && name.back() == '\n') name.pop_back();
    std::istringstream status(testing::ReadFileOrEmpty(task.path() / "status"));
    std::string line;
    std::string cpus;
    while (std::getline(status, line)) {
      if (line.rfind("Cpus_allowed_list:", 0) == 0) cpus = line.substr(line.find_first_not_of(" \t", 18));
    }
    threads.emplace_back(name, cpus);
  }
  return threads;
}

TEST(SchedulingTest, LanesRunOnLaneCpusAndEveryOtherThreadOnServingCpus) {
  const std::vector<int> allowed = AllowedCpus();
  ASSERT_FALSE(allowed.empty());
  const std::string lane_cpu = std::to_string(allowed.back());
  const std::string serving_cpu = std::to_string(allowed.front());
  OrrerydProcess server({"--storage-sample-seconds", "0", "--lane-cpus", lane_cpu, "--serving-cpus", serving_cpu});
  ASSERT_TRUE(server.Start()) << "orreryd did not start";
  Stubs stubs(server.channel());
  const std::string admin = server.admin_token();
  const Tenant t = MakeTenantWithMlp(&stubs, admin, "pinned");
  WaitForCalibration(&stubs, admin, t.id + "/mlp@1");  // the lane has run
  inference::ModelInferResponse resp;
  ASSERT_TRUE(
      Call(stubs.infer.get(), &InferStub::ModelInfer, t.key, testing::InferRequest("mlp", "", Input(1)), &resp).ok());
  EXPECT_FALSE(Probs(resp).empty());

  int lanes = 0;
  int others = 0;
  for (const auto& [name, cpus] : ThreadCpus(server.pid())) {
    if (name.rfind("orrery-lane-", 0) == 0) {
      ++lanes;
      EXPECT_EQ(cpus, lane_cpu) << name;
    } else {
      ++others;
      EXPECT_EQ(cpus, serving_cpu) << name;
    }
  }
  EXPECT_EQ(lanes, 1) << "one lane per --lane-cpus CPU";
  EXPECT_GT(others, 3) << "main, gRPC, loaders, RocksDB";
}

TEST(SchedulingTest, ALaneGroupRunsOnItsCpusOneThreadEach) {
  const std::vector<int> allowed = AllowedCpus();
  if (allowed.size() < 2) GTEST_SKIP() << "needs 2 CPUs, this process may use " << allowed.size();
  const std::string cpus = std::to_string(allowed[0]) + "," + std::to_string(allowed[1]);
  OrrerydProcess server({"--storage-sample-seconds", "0", "--lane-threads", "2", "--lane-cpus", cpus});
  ASSERT_TRUE(server.Start()) << "orreryd did not start";
  Stubs stubs(server.channel());
  const std::string admin = server.admin_token();
  const Tenant t = MakeTenantWithMlp(&stubs, admin, "group");
  WaitForCalibration(&stubs, admin, t.id + "/mlp@1");
  inference::ModelInferResponse resp;
  ASSERT_TRUE(
      Call(stubs.infer.get(), &InferStub::ModelInfer, t.key, testing::InferRequest("mlp", "", Input(2)), &resp).ok());
  EXPECT_FALSE(Probs(resp).empty());
  EXPECT_EQ(Stats(&stubs, admin).lanes(), 1) << "2 CPUs / 2 threads per lane";
  // The lane's thread and its group's worker (named after it), one per CPU.
  std::vector<std::string> lane_cpus;
  for (const auto& [name, cpu_list] : ThreadCpus(server.pid())) {
    if (name == "orrery-lane-0") lane_cpus.push_back(cpu_list);
  }
  std::sort(lane_cpus.begin(), lane_cpus.end());
  EXPECT_EQ(lane_cpus, (std::vector<std::string>{std::to_string(allowed[0]), std::to_string(allowed[1])}));
}

TEST(SchedulingTest, UnavailableOrMalformedCpusAreRefusedAtStart) {
  for (std::vector<std::string> args : {std::vector<std::string>{"--lane-cpus", "4095"},
                                        std::vector<std::string>{"--serving-cpus", "1-0"},
                                        std::vector<std::string>{"--lane-cpus", "x"}}) {
    OrrerydProcess server(args);
    EXPECT_FALSE(server.Start()) << args[0] << " " << args[1];
  }
}

}  // namespace
}  // namespace orrery
