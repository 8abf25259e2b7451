// Small gRPC helpers for the integration tests: one call with a bearer
// secret, chunked uploads, raw inference requests.
#pragma once

#include <string>

#include <grpcpp/grpcpp.h>

#include "api/proto/grpc_predict_v2.grpc.pb.h"
#include "api/proto/orrery.grpc.pb.h"
#include "runtime/tensor.h"

namespace orrery::testing {

struct Stubs {
  explicit Stubs(const std::shared_ptr<grpc::Channel>& channel)
      : admin(v1::AdminService::NewStub(channel)),
        models(v1::ModelService::NewStub(channel)),
        infer(inference::GRPCInferenceService::NewStub(channel)) {}
  std::unique_ptr<v1::AdminService::Stub> admin;
  std::unique_ptr<v1::ModelService::Stub> models;
  std::unique_ptr<inference::GRPCInferenceService::Stub> infer;
};

// One unary call with `authorization: Bearer <secret>` ("" sends none).
template <typename Stub, typename Req, typename Resp>
grpc::Status Call(Stub* stub, grpc::Status (Stub::*method)(grpc::ClientContext*, const Req&, Resp*),
                  const std::string& secret, const Req& req, Resp* resp) {
  grpc::ClientContext ctx;
  if (!secret.empty()) ctx.AddMetadata("authorization", "Bearer " + secret);
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  return (stub->*method)(&ctx, req, resp);
}

inline grpc::Status UploadModel(v1::ModelService::Stub* stub, const std::string& key, const std::string& name,
                                const std::string& bytes, v1::UploadModelResponse* resp,
                                const std::string& upload_id = "", size_t chunk = 1000) {
  grpc::ClientContext ctx;
  if (!key.empty()) ctx.AddMetadata("authorization", "Bearer " + key);
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  auto writer = stub->UploadModel(&ctx, resp);
  v1::UploadModelRequest msg;
  msg.mutable_header()->set_name(name);
  msg.mutable_header()->set_upload_id(upload_id);
  size_t off = 0;
  do {
    msg.set_chunk(bytes.substr(off, chunk));
    off += chunk;
    if (!writer->Write(msg)) break;
    msg.clear_header();
  } while (off < bytes.size());
  writer->WritesDone();
  return writer->Finish();
}

inline inference::ModelInferRequest InferRequest(const std::string& model, const std::string& version,
                                                 const NamedTensor& input) {
  inference::ModelInferRequest req;
  req.set_model_name(model);
  req.set_model_version(version);
  auto* in = req.add_inputs();
  in->set_name(input.name);
  in->set_datatype(std::string(DTypeToOipName(input.tensor.dtype())));
  for (int64_t d : input.tensor.shape()) in->add_shape(d);
  req.add_raw_input_contents(std::string(input.tensor.bytes()));
  return req;
}

inline grpc::Status CreateTenant(v1::AdminService::Stub* stub, const std::string& admin, const std::string& name,
                                 v1::CreateTenantResponse* resp, const v1::Quotas* quotas = nullptr) {
  v1::CreateTenantRequest req;
  req.set_name(name);
  if (quotas) *req.mutable_quotas() = *quotas;
  return Call(stub, &v1::AdminService::Stub::CreateTenant, admin, req, resp);
}

}  // namespace orrery::testing
