// Overload of the RPC layer: with --max-rpc-threads N, requests past the
// threads gRPC may use are refused at once with RESOURCE_EXHAUSTED instead of
// the server growing a thread per waiting request; once the blocked handlers
// finish, the server serves normally again. Upload streams left open (their
// handlers wait in Read) hold threads deterministically.
#include <atomic>
#include <chrono>
#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "tests/integration/orreryd_process.h"
#include "tests/integration/rpc_client.h"

namespace orrery {
namespace {

using orrery::testing::Call;
using orrery::testing::OrrerydProcess;
using orrery::testing::Stubs;

struct OpenUpload {
  grpc::ClientContext ctx;
  v1::UploadModelResponse resp;
  std::unique_ptr<grpc::ClientWriter<v1::UploadModelRequest>> writer;
};

// Tenant "acme" (an empty key when it could not be created).
v1::CreateTenantResponse CreateTenant(const OrrerydProcess& server, const Stubs& stubs) {
  v1::CreateTenantRequest create;
  create.set_name("acme");
  v1::CreateTenantResponse tenant;
  if (!Call(stubs.admin.get(), &v1::AdminService::Stub::CreateTenant, server.admin_token(), create, &tenant).ok()) {
    tenant.clear_api_key();
  }
  return tenant;
}

TEST(OverloadTest, RpcsPastTheThreadCapAreRefusedAtOnceAndServiceResumes) {
  constexpr int kThreads = 8;
  OrrerydProcess server({"--max-rpc-threads", std::to_string(kThreads), "--lanes", "1"});
  ASSERT_TRUE(server.Start()) << "orreryd did not start";
  Stubs stubs(server.channel());
  const v1::CreateTenantResponse tenant = CreateTenant(server, stubs);
  ASSERT_FALSE(tenant.api_key().empty()) << "tenant not created";

  const std::string bearer = std::string("Bearer ").append(tenant.api_key());
  // More open streams than threads: each handler that got a thread waits
  // for the next chunk; the ones past the cap are refused.
  std::vector<std::unique_ptr<OpenUpload>> uploads;
  for (int i = 0; i < 2 * kThreads; ++i) {
    auto u = std::make_unique<OpenUpload>();
    u->ctx.AddMetadata("authorization", bearer);
    u->ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    u->writer = stubs.models->UploadModel(&u->ctx, &u->resp);
    v1::UploadModelRequest header;
    header.mutable_header()->set_name(std::string("m").append(std::to_string(i)));
    u->writer->Write(header);
    uploads.push_back(std::move(u));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // let the server pick them up

  // A unary call now is answered quickly (refused or served), never queued
  // behind the blocked handlers until its deadline.
  const auto t0 = std::chrono::steady_clock::now();
  v1::ListModelsResponse list;
  grpc::ClientContext ctx;
  ctx.AddMetadata("authorization", bearer);
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  grpc::Status during = stubs.models->ListModels(&ctx, v1::ListModelsRequest(), &list);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_NE(during.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << "queued behind blocked handlers";
  EXPECT_LT(seconds, 5.0);

  int refused = during.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED ? 1 : 0;
  for (auto& u : uploads) {
    u->writer->WritesDone();
    grpc::Status s = u->writer->Finish();
    if (s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) ++refused;
  }
  EXPECT_GT(refused, 0) << "nothing was refused with " << 2 * kThreads << " streams held open and a cap of "
                        << kThreads << " threads";

  // The held threads are free again: the server serves.
  grpc::Status after = Call(stubs.models.get(), &v1::ModelService::Stub::ListModels, tenant.api_key(),
                            v1::ListModelsRequest(), &list);
  EXPECT_TRUE(after.ok()) << after.error_message();
}

// The ids of the process's threads now.
std::set<std::string> ThreadIds(pid_t pid) {
  std::set<std::string> ids;
  for (const auto& e : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task")) {
    ids.insert(e.path().filename().string());
  }
  return ids;
}

// A handler thread that finishes an RPC goes back to polling: RPCs with a
// few in flight at a time reuse the threads that served the first ones
// instead of creating and ending threads (gRPC's default kept at most two
// idle, so every burst past two created new ones: ~400 a second under load).
TEST(OverloadTest, HandlerThreadsAreReusedNotCreatedPerRpc) {
  OrrerydProcess server({"--lanes", "1"});
  ASSERT_TRUE(server.Start()) << "orreryd did not start";
  Stubs stubs(server.channel());
  const v1::CreateTenantResponse tenant = CreateTenant(server, stubs);
  ASSERT_FALSE(tenant.api_key().empty()) << "tenant not created";
  constexpr int kClients = 6;
  auto burst = [&](int calls_each) {
    std::vector<std::thread> clients;
    std::atomic<int> failed{0};
    for (int c = 0; c < kClients; ++c) {
      clients.emplace_back([&] {
        for (int i = 0; i < calls_each; ++i) {
          v1::ListModelsResponse list;
          if (!Call(stubs.models.get(), &v1::ModelService::Stub::ListModels, tenant.api_key(), v1::ListModelsRequest(),
                    &list)
                   .ok()) {
            failed.fetch_add(1);
          }
        }
      });
    }
    for (std::thread& t : clients) t.join();
    return failed.load();
  };
  ASSERT_EQ(burst(50), 0);  // the server grows to the threads this needs
  const std::set<std::string> before = ThreadIds(server.pid());
  // Every thread seen while the next 1,200 run, sampled each millisecond.
  std::set<std::string> seen = before;
  std::atomic<bool> done{false};
  std::thread watcher([&] {
    while (!done.load()) {
      const std::set<std::string> now = ThreadIds(server.pid());
      seen.insert(now.begin(), now.end());
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  const int failed = burst(200);
  done.store(true);
  watcher.join();
  ASSERT_EQ(failed, 0);
  const size_t created = seen.size() - before.size();
  EXPECT_LE(created, size_t{kClients}) << "1,200 RPCs, " << kClients << " in flight at most, started " << created
                                       << " threads beside the " << before.size() << " there after the first 300";
}

}  // namespace
}  // namespace orrery
