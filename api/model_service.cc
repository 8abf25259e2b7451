#include "api/model_service.h"

#include <algorithm>
#include <chrono>
#include <string>

#include <spdlog/spdlog.h>

#include "api/auth.h"
#include "api/grpc_status.h"
#include "api/model_costs.h"
#include "api/model_info.h"
#include "runtime/cuda/weight_layout.h"
#include "runtime/model.h"
#include "tenancy/api_key.h"
#include "tenancy/quotas.h"

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

// The byte limits an upload runs into while streaming, smallest first wins.
struct UploadBudget {
  uint64_t server_max_model_bytes;
  uint64_t quota_max_model_bytes;
  uint64_t quota_max_total_bytes;
  uint64_t stored_bytes;  // the tenant's usage before this upload

  // OK while `size` bytes fit; RESOURCE_EXHAUSTED naming the limit otherwise.
  Status Check(uint64_t size) const {
    if (size > server_max_model_bytes) return TooLarge(server_max_model_bytes);
    if (size > quota_max_model_bytes) {
      return Status::ResourceExhausted("quota max_model_bytes (" + std::to_string(quota_max_model_bytes) +
                                       ") exceeded: the model has more than " +
                                       std::to_string(quota_max_model_bytes) + " bytes");
    }
    if (stored_bytes + size > quota_max_total_bytes) {
      return Status::ResourceExhausted("quota max_total_bytes (" + std::to_string(quota_max_total_bytes) +
                                       ") exceeded: the tenant stores " + std::to_string(stored_bytes) +
                                       " bytes and this upload has more than " +
                                       std::to_string(quota_max_total_bytes - std::min(stored_bytes,
                                                                                      quota_max_total_bytes)));
    }
    return Status::Ok();
  }
};

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
  const std::string upload_id = msg.header().upload_id();
  if (Status s = ValidateName("model name", name); !s.ok()) return ToGrpcStatus(s);
  if (!upload_id.empty()) {
    if (Status s = ValidateName("upload id", upload_id); !s.ok()) return ToGrpcStatus(s);
    // A retry of a finished upload: answer at once, without reading the bytes again.
    Result<ModelRecord> earlier = ctx_->catalog->GetUpload(tenant->id(), upload_id);
    if (earlier.ok()) {
      if (earlier->name() != name) {
        return ToGrpcStatus(Status::AlreadyExists("upload id '" + upload_id + "' was already used for model '" +
                                                  earlier->name() + "'"));
      }
      RecordToModelInfo(*earlier, response->mutable_model());
      response->set_replayed(true);
      return grpc::Status::OK;
    }
    if (earlier.status().code() != StatusCode::kNotFound) return ToGrpcStatus(earlier.status());
  }

  const storage::TenantQuotas quotas = EffectiveQuotas(*tenant);
  Result<Catalog::Usage> usage = ctx_->catalog->TenantUsage(tenant->id());
  if (!usage.ok()) return ToGrpcStatus(usage.status());
  const bool new_name = ctx_->catalog->GetModel(tenant->id(), name).status().code() == StatusCode::kNotFound;
  if (new_name && usage->models >= quotas.max_models()) {
    return ToGrpcStatus(Status::ResourceExhausted("quota max_models (" + std::to_string(quotas.max_models()) +
                                                  ") exceeded: the tenant already stores " +
                                                  std::to_string(usage->models) + " models"));
  }
  const UploadBudget budget{ctx_->max_model_bytes, quotas.max_model_bytes(), quotas.max_total_bytes(),
                            usage->total_bytes};
  if (Status s = budget.Check(msg.header().total_size_bytes()); !s.ok()) return ToGrpcStatus(s);

  std::string bytes;
  do {
    // Checked before appending, so an over-limit stream is never buffered.
    if (Status s = budget.Check(bytes.size() + msg.chunk().size()); !s.ok()) return ToGrpcStatus(s);
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
  record.set_upload_id(upload_id);
  for (const TensorSpec& in : sig.inputs) SpecToRecord(in, record.add_inputs());
  for (const TensorSpec& out : sig.outputs) SpecToRecord(out, record.add_outputs());
  // What a GPU's device cache charges for it (api/device_tier.h).
  record.set_device_weight_bytes(static_cast<uint64_t>(runtime::WeightLayoutBytes(*(*compiled)->shape_generic_plan())));
  // The catalog re-checks the stored-size quotas under its write lock, so two
  // concurrent uploads cannot both squeeze under them.
  Catalog::ModelLimits limits;
  limits.max_models = quotas.max_models();
  limits.max_total_bytes = quotas.max_total_bytes();
  // The packed weights go to disk (synced, renamed) before the record that
  // names them is committed: a crash in between leaves an orphan segment
  // that start-up recovery removes, never a record without its segment.
  ModelLoader& loader = ctx_->cache->loader();
  if (loader.segments() != nullptr) {
    Status s = loader.WriteSegment(**compiled, SegmentStore::NewName(), &record);
    if (!s.ok()) {
      if (s.code() == StatusCode::kResourceExhausted || s.code() == StatusCode::kUnavailable) {
        return ToGrpcStatus(s.WithPrefix("model '" + name + "': writing its segment"));
      }
      // Weights that cannot be exported for the signature's shapes: the
      // model is stored without a segment and packs on every load.
      spdlog::warn("tenant {}: model '{}' stored without a segment: {}", tenant->id(), name, s.message());
      record.clear_segment_file();
    }
  }
  // A model that could never be loaded into the host cache is refused now,
  // not at its first request.
  if (ctx_->host != nullptr) {
    if (Status s = ctx_->host->CheckFits(record); !s.ok()) {
      loader.RemoveSegments(record.segment_file().empty() ? std::vector<ModelRecord>{}
                                                          : std::vector<ModelRecord>{record});
      return ToGrpcStatus(s.WithPrefix("model '" + name + "'"));
    }
  }
  const std::vector<ModelRecord> written_segment =
      record.segment_file().empty() ? std::vector<ModelRecord>{} : std::vector<ModelRecord>{record};
  Result<Catalog::PutResult> put = ctx_->catalog->PutModel(&record, bytes, limits);
  if (!put.ok() || put->replayed) {
    // Nothing (or an earlier upload's record) names the segment just written.
    loader.RemoveSegments(written_segment);
  }
  if (!put.ok()) return ToGrpcStatus(put.status());
  if (!put->replayed) {
    ModelCache::ModelPtr model(std::move(compiled).value());
    // Kept in memory as a load makes it, from the segment just written:
    // weights packed only, borrowed from the read buffer, the bytes the host
    // tier charges. The compiled model also holds the values it packed.
    if (!record.segment_file().empty()) {
      Result<std::unique_ptr<CompiledModel>> loaded = loader.Load(record);
      if (loaded.ok()) {
        model = std::move(loaded).value();
      } else {
        spdlog::warn("tenant {}: model '{}' v{}: its new segment does not load, keeping the compiled model: {}",
                     tenant->id(), name, record.version(), loaded.status().message());
      }
    }
    ctx_->cache->Put(record, model);
    if (ctx_->host != nullptr) {
      // Accounted in the host cache as resident: its "load" finds the model
      // just put (no I/O) and may evict others to make room. A prefetch, not
      // a request: no miss counted, nobody billed for it.
      Status s = ctx_->host->Register(record);
      if (s.ok()) s = ctx_->host->Prefetch(record);
      RegisterWithDevice(ctx_->device, record);
      if (!s.ok()) {
        ctx_->cache->EraseVersion(record.tenant_id(), name, record.version());
        spdlog::warn("tenant {}: model '{}' v{} not kept in memory: {}", tenant->id(), name, record.version(),
                     s.message());
      }
    }
    CalibrateAfterUpload(ctx_, record, std::move(model));
    spdlog::info("tenant {}: stored model '{}' v{} ({} bytes, sha256 {})", tenant->id(), name, record.version(),
                 bytes.size(), record.sha256());
  }
  RecordToModelInfo(record, response->mutable_model());
  response->set_replayed(put->replayed);
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
  Result<ModelRecord> model = ctx_->catalog->GetModel(tenant->id(), request->name(), request->version());
  if (!model.ok()) return ToGrpcStatus(model.status());
  RecordToModelInfo(*model, response->mutable_model());
  return grpc::Status::OK;
}

grpc::Status ModelServiceImpl::DeleteModel(grpc::ServerContext* context, const v1::DeleteModelRequest* request,
                                           v1::DeleteModelResponse* response) {
  Result<TenantRecord> tenant = AuthenticateTenant(*context, *ctx_->tenants);
  if (!tenant.ok()) return ToGrpcStatus(tenant.status());
  // The records first, for their segment files, which go after the catalog
  // change (a crash in between leaves orphans that recovery removes).
  Result<std::vector<ModelRecord>> before = ctx_->catalog->ListModels(tenant->id());
  if (!before.ok()) return ToGrpcStatus(before.status());
  Result<std::vector<uint64_t>> deleted =
      ctx_->catalog->DeleteModelVersions(tenant->id(), request->name(), request->version());
  if (!deleted.ok()) return ToGrpcStatus(deleted.status());
  std::vector<ModelRecord> gone;
  for (const ModelRecord& m : *before) {
    if (m.name() == request->name() &&
        std::find(deleted->begin(), deleted->end(), m.version()) != deleted->end()) {
      gone.push_back(m);
    }
  }
  ctx_->cache->loader().RemoveSegments(gone);
  if (ctx_->host != nullptr) {
    for (const ModelRecord& m : gone) ctx_->host->Unregister(m);
  }
  for (const ModelRecord& m : gone) UnregisterFromDevice(ctx_->device, m);
  // The stored bytes are gone now; requests already running hold a
  // shared_ptr to the compiled model (the reference count of the serving
  // path), so their plans finish and the model is freed after the last one.
  // Versions that were not deleted are simply recompiled on their next use.
  ctx_->cache->Erase(tenant->id(), request->name());
  for (uint64_t v : *deleted) response->add_deleted_versions(v);
  spdlog::info("tenant {}: deleted model '{}' ({} versions)", tenant->id(), request->name(), deleted->size());
  return grpc::Status::OK;
}

}  // namespace orrery
