#include "bench/loadgen/driver.h"

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

namespace orrery::loadgen {
namespace {

// Answers every ModelInfer after `delay`, counting the answers.
class SlowService final : public inference::GRPCInferenceService::Service {
 public:
  explicit SlowService(std::chrono::milliseconds delay) : delay_(delay) {}
  grpc::Status ModelInfer(grpc::ServerContext*, const inference::ModelInferRequest*,
                          inference::ModelInferResponse*) override {
    std::this_thread::sleep_for(delay_);
    answered_.fetch_add(1);
    return grpc::Status::OK;
  }
  int answered() const { return answered_.load(); }

 private:
  std::chrono::milliseconds delay_;
  std::atomic<int> answered_{0};
};

// Scenario 1 takes each tenant's service over the measured window from
// snapshots at its two ends: the window-end hook must run while the
// closed-loop streams still have their calls outstanding (they are all
// backlogged), not after the drain, which serves every stream's last calls
// alike whatever the weights.
TEST(RunWorkloadTest, WindowEndHookRunsBeforeTheOutstandingCallsDrain) {
  SlowService service(std::chrono::milliseconds(300));
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_TRUE(server != nullptr);
  ASSERT_GT(port, 0);

  Target t;
  t.channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials());
  t.closed = 3;
  std::vector<Target> targets{t};
  RunOptions options;
  options.warmup_ns = 50'000'000;
  options.duration_ns = 400'000'000;  // ends ~170 ms after the first answers, ~130 ms before the next
  int at_warmup_end = -1, at_window_end = -1;
  options.on_warmup_end = [&] { at_warmup_end = service.answered(); };
  options.on_window_end = [&] { at_window_end = service.answered(); };
  const std::vector<Record> records = RunWorkload(targets, {}, options);
  server->Shutdown();

  const int total = service.answered();
  EXPECT_EQ(at_warmup_end, 0);  // the first answers come 300 ms in
  ASSERT_GE(at_window_end, 3);  // the calls sent at the start were answered
  // 3 calls were outstanding when the window ended, answered after it.
  EXPECT_EQ(total - at_window_end, 3);
  EXPECT_EQ(static_cast<int>(records.size()), total - 3);  // the 3 sent in the warm-up are not recorded
}

}  // namespace
}  // namespace orrery::loadgen
