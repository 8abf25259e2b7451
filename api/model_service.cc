#include "api/model_service.h"

#include <chrono>
#include <string>

#include <spdlog/spdlog.h>

#include "api/auth.h"
#include "api/grpc_status.h"
#include "api/model_info.h"
#include "runtime/model.h"
#include "tenancy/api_key.h"

namespace orrery {
namespace {

int64_t NowUnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

Status TooLarge(uint64_t limit) {
  return Status::ResourceExhausted("model exceeds the per-model size limit of " + std::to_string(limit) +
                                   " bytes");
}

}  // namespace

grpc::Status ModelServiceImpl::UploadModel(grpc::ServerContext* context,
                                           grpc::ServerReader<v1::UploadModelRequest>* reader,
                                           v1::UploadModelResponse* response) {
  Result<TenantRecord> tenant = AuthenticateTenant(*context, *ctx_->tenants);
  if (!tenant.ok()) return ToGrpcStatus(tenant.status());

  v1::UploadModelRequest msg;
  if (!reader->Read(&msg)) return ToGrpcStatus(Status::InvalidArgument("empty upload stream"));
  if (!msg.has_header()) {
    return ToGrpcStatus(Status::InvalidArgument("the first upload message must carry a header with the model name"));
  }
  const std::string name = msg.header().name();
  if (Status s = ValidateName("model name", name); !s.ok()) return ToGrpcStatus(s);
  const uint64_t limit = ctx_->max_model_bytes;
  if (msg.header().total_size_bytes() > limit) return ToGrpcStatus(TooLarge(limit));

  std::string bytes;
  do {
    if (bytes.size() + msg.chunk().size() > limit) return ToGrpcStatus(TooLarge(limit));
    bytes += msg.chunk();
  } while (reader->Read(&msg));
  if (bytes.empty()) return ToGrpcStatus(Status::InvalidArgument("model '" + name + "': no ONNX bytes uploaded"));

  Result<std::unique_ptr<CompiledModel>> compiled = CompiledModel::Compile(bytes);
  if (!compiled.ok()) {
    spdlog::info("tenant {}: rejected upload of '{}': {}", tenant->id(), name, compiled.status().message());
    return ToGrpcStatus(compiled.status().WithPrefix("model '" + name + "'"));
  }
  const ModelSignature& sig = (*compiled)->signature();

  ModelRecord record;
  record.set_tenant_id(tenant->id());
  record.set_name(name);
  record.set_size_bytes(bytes.size());
  record.set_sha256(Sha256Hex(bytes));
  record.set_created_unix_ms(NowUnixMs());
  record.set_opset(sig.opset);
  record.set_node_count(static_cast<uint32_t>(sig.node_count));
  for (const TensorSpec& in : sig.inputs) SpecToRecord(in, record.add_inputs());
  for (const TensorSpec& out : sig.outputs) SpecToRecord(out, record.add_outputs());
  if (Status s = ctx_->catalog->PutModel(&record, bytes); !s.ok()) return ToGrpcStatus(s);
  ctx_->cache->Put(record, ModelCache::ModelPtr(std::move(compiled).value()));

  spdlog::info("tenant {}: stored model '{}' v{} ({} bytes, sha256 {})", tenant->id(), name, record.version(),
               bytes.size(), record.sha256());
  RecordToModelInfo(record, response->mutable_model());
  return grpc::Status::OK;
}

grpc::Status ModelServiceImpl::ListModels(grpc::ServerContext* context, const v1::ListModelsRequest*,
                                          v1::ListModelsResponse* response) {
  Result<TenantRecord> tenant = AuthenticateTenant(*context, *ctx_->tenants);
  if (!tenant.ok()) return ToGrpcStatus(tenant.status());
  Result<std::vector<ModelRecord>> models = ctx_->catalog->ListModels(tenant->id());
  if (!models.ok()) return ToGrpcStatus(models.status());
  for (const ModelRecord& m : *models) RecordToModelInfo(m, response->add_models());
  return grpc::Status::OK;
}

grpc::Status ModelServiceImpl::DescribeModel(grpc::ServerContext* context, const v1::DescribeModelRequest* request,
                                             v1::DescribeModelResponse* response) {
  Result<TenantRecord> tenant = AuthenticateTenant(*context, *ctx_->tenants);
  if (!tenant.ok()) return ToGrpcStatus(tenant.status());
  Result<ModelRecord> model = ctx_->catalog->GetModel(tenant->id(), request->name());
  if (!model.ok()) return ToGrpcStatus(model.status());
  RecordToModelInfo(*model, response->mutable_model());
  return grpc::Status::OK;
}

grpc::Status ModelServiceImpl::DeleteModel(grpc::ServerContext* context, const v1::DeleteModelRequest* request,
                                           v1::DeleteModelResponse*) {
  Result<TenantRecord> tenant = AuthenticateTenant(*context, *ctx_->tenants);
  if (!tenant.ok()) return ToGrpcStatus(tenant.status());
  if (Status s = ctx_->catalog->DeleteModel(tenant->id(), request->name()); !s.ok()) return ToGrpcStatus(s);
  // In-flight requests hold shared_ptrs to the compiled model and finish normally.
  ctx_->cache->Erase(tenant->id(), request->name());
  spdlog::info("tenant {}: deleted model '{}'", tenant->id(), request->name());
  return grpc::Status::OK;
}

}  // namespace orrery
