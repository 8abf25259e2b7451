// Overload of the RPC layer: with --max-rpc-threads N, requests past the
// threads gRPC may use are refused at once with RESOURCE_EXHAUSTED instead of
// the server growing a thread per waiting request; once the blocked handlers
// finish, the server serves normally again. Upload streams left open (their
// handlers wait in Read) hold threads deterministically.
#include <chrono>
#include <memory>
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

TEST(OverloadTest, RpcsPastTheThreadCapAreRefusedAtOnceAndServiceResumes) {
  constexpr int kThreads = 8;
  OrrerydProcess server({"--max-rpc-threads", std::to_string(kThreads), "--lanes", "1"});
  ASSERT_TRUE(server.Start()) << "orreryd did not start";
  Stubs stubs(server.channel());
  v1::CreateTenantRequest create;
  create.set_name("acme");
  v1::CreateTenantResponse tenant;
  ASSERT_TRUE(Call(stubs.admin.get(), &v1::AdminService::Stub::CreateTenant, server.admin_token(), create, &tenant).ok());

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

}  // namespace
}  // namespace orrery
