// Catalog: model records and blobs. See catalog.h and catalog.cc.
#include <algorithm>
#include <mutex>
#include <optional>

#include "storage/catalog_impl.h"

namespace orrery {

// ---- models

namespace {

uint64_t DecodeU64Be(std::string_view s) {
  uint64_t v = 0;
  for (char c : s) v = (v << 8) | static_cast<unsigned char>(c);
  return v;
}

Status QuotaExceeded(const char* quota, uint64_t limit, const std::string& detail) {
  return Status::ResourceExhausted("quota " + std::string(quota) + " (" + std::to_string(limit) + ") exceeded: " +
                                   detail);
}

}  // namespace

Result<Catalog::PutResult> Catalog::PutModel(ModelRecord* record, std::string_view onnx_bytes,
                                             const ModelLimits& limits) {
  if (record == nullptr) return Status::InvalidArgument("PutModel: null record");
  ORRERY_RETURN_IF_ERROR(CheckIdPart("tenant id", record->tenant_id()));
  ORRERY_RETURN_IF_ERROR(CheckIdPart("model name", record->name()));
  if (!record->upload_id().empty()) ORRERY_RETURN_IF_ERROR(CheckIdPart("upload id", record->upload_id()));
  const std::string& tenant_id = record->tenant_id();

  std::lock_guard<std::mutex> lock(impl_->write_mu);
  ORRERY_ASSIGN_OR_RETURN(std::optional<TenantRecord> tenant, impl_->FindTenant(tenant_id));
  if (!tenant) return Status::NotFound("tenant '" + tenant_id + "' not found");

  PutResult result;
  const std::string upload_key = record->upload_id().empty() ? "" : UploadKey(tenant_id, record->upload_id());
  if (!upload_key.empty()) {
    ORRERY_ASSIGN_OR_RETURN(std::optional<ModelRecord> earlier, impl_->FindUpload(tenant_id, record->upload_id()));
    if (earlier) {
      if (earlier->name() != record->name()) {
        return Status::AlreadyExists("upload id '" + record->upload_id() + "' was already used for model '" +
                                     earlier->name() + "'");
      }
      *record = std::move(*earlier);
      result.replayed = true;
      return result;
    }
  }

  ORRERY_ASSIGN_OR_RETURN(std::optional<ModelRecord> latest, impl_->LatestModel(tenant_id, record->name()));
  if (limits.max_models != 0 || limits.max_total_bytes != 0) {
    ORRERY_ASSIGN_OR_RETURN(Usage usage, impl_->TenantUsage(tenant_id));
    if (limits.max_models != 0 && !latest && usage.models + 1 > limits.max_models) {
      return QuotaExceeded("max_models", limits.max_models,
                           "the tenant already stores " + std::to_string(usage.models) + " models");
    }
    if (limits.max_total_bytes != 0 && usage.total_bytes + onnx_bytes.size() > limits.max_total_bytes) {
      return QuotaExceeded("max_total_bytes", limits.max_total_bytes,
                           "the tenant stores " + std::to_string(usage.total_bytes) + " bytes and this model has " +
                               std::to_string(onnx_bytes.size()));
    }
  }

  const std::string counter_key = NextVersionKey(tenant_id, record->name());
  ORRERY_ASSIGN_OR_RETURN(std::optional<std::string> counter, impl_->Get(kMeta, counter_key, "get version counter"));
  uint64_t version = latest ? latest->version() + 1 : 1;
  if (counter && counter->size() == 8) version = std::max(version, DecodeU64Be(*counter));

  ModelRecord rec = *record;
  rec.set_version(version);
  rec.set_size_bytes(onnx_bytes.size());
  if (rec.created_unix_ms() == 0) rec.set_created_unix_ms(NowUnixMs());
  const std::string key = ModelKey(tenant_id, rec.name(), rec.version());
  std::string next;
  AppendU64Be(&next, version + 1);

  rocksdb::WriteBatch batch;
  batch.Put(impl_->cf[kModels], key, rec.SerializeAsString());
  batch.Put(impl_->cf[kBlobs], key, rocksdb::Slice(onnx_bytes.data(), onnx_bytes.size()));
  batch.Put(impl_->cf[kMeta], counter_key, next);
  if (!upload_key.empty()) batch.Put(impl_->cf[kUploads], upload_key, key);
  ORRERY_RETURN_IF_ERROR(impl_->Write(&batch, "put model"));
  *record = std::move(rec);
  return result;
}

Result<ModelRecord> Catalog::GetUpload(std::string_view tenant_id, std::string_view upload_id) const {
  ORRERY_RETURN_IF_ERROR(CheckIdPart("tenant id", tenant_id));
  ORRERY_RETURN_IF_ERROR(CheckIdPart("upload id", upload_id));
  ORRERY_ASSIGN_OR_RETURN(std::optional<ModelRecord> rec, impl_->FindUpload(tenant_id, upload_id));
  if (!rec) return Status::NotFound("upload '" + std::string(upload_id) + "' not found");
  return std::move(*rec);
}

Result<Catalog::Usage> Catalog::TenantUsage(std::string_view tenant_id) const {
  ORRERY_RETURN_IF_ERROR(CheckIdPart("tenant id", tenant_id));
  return impl_->TenantUsage(tenant_id);
}

Result<ModelRecord> Catalog::GetModel(std::string_view tenant_id, std::string_view name, uint64_t version) const {
  ORRERY_RETURN_IF_ERROR(CheckIdPart("tenant id", tenant_id));
  ORRERY_RETURN_IF_ERROR(CheckIdPart("model name", name));
  if (version == 0) {
    ORRERY_ASSIGN_OR_RETURN(std::optional<ModelRecord> latest, impl_->LatestModel(tenant_id, name));
    if (!latest) return Status::NotFound("model '" + std::string(name) + "' not found");
    return std::move(*latest);
  }
  const std::string key = ModelKey(tenant_id, name, version);
  ORRERY_ASSIGN_OR_RETURN(std::optional<std::string> raw, impl_->Get(kModels, key, "get model"));
  if (!raw) {
    return Status::NotFound("model '" + std::string(name) + "' version " + std::to_string(version) + " not found");
  }
  return ParseRecord<ModelRecord>(*raw, "model", key);
}

Result<std::vector<ModelRecord>> Catalog::ListModels(std::string_view tenant_id) const {
  ORRERY_RETURN_IF_ERROR(CheckIdPart("tenant id", tenant_id));
  std::vector<ModelRecord> out;
  ORRERY_RETURN_IF_ERROR(impl_->Scan(kModels, ModelTenantPrefix(tenant_id),
                                     [&](std::string_view key, std::string_view value, bool*) -> Status {
                                       ORRERY_ASSIGN_OR_RETURN(ModelRecord rec,
                                                               ParseRecord<ModelRecord>(value, "model", key));
                                       out.push_back(std::move(rec));
                                       return Status::Ok();
                                     }));
  return out;
}

Result<std::string> Catalog::GetModelBlob(std::string_view tenant_id, std::string_view name,
                                          uint64_t version) const {
  ORRERY_RETURN_IF_ERROR(CheckIdPart("tenant id", tenant_id));
  ORRERY_RETURN_IF_ERROR(CheckIdPart("model name", name));
  if (version == 0) {
    ORRERY_ASSIGN_OR_RETURN(ModelRecord latest, GetModel(tenant_id, name, 0));
    version = latest.version();
  }
  const std::string key = ModelKey(tenant_id, name, version);
  ORRERY_ASSIGN_OR_RETURN(std::optional<std::string> raw, impl_->Get(kBlobs, key, "get model blob"));
  if (!raw) {
    return Status::NotFound("model '" + std::string(name) + "' version " + std::to_string(version) + " not found");
  }
  return std::move(*raw);
}

Result<std::vector<uint64_t>> Catalog::DeleteModelVersions(std::string_view tenant_id, std::string_view name,
                                                           uint64_t version) {
  ORRERY_RETURN_IF_ERROR(CheckIdPart("tenant id", tenant_id));
  ORRERY_RETURN_IF_ERROR(CheckIdPart("model name", name));
  std::lock_guard<std::mutex> lock(impl_->write_mu);
  std::vector<std::pair<std::string, ModelRecord>> found;
  auto collect = [&](std::string_view key, std::string_view value, bool*) -> Status {
    ORRERY_ASSIGN_OR_RETURN(ModelRecord rec, ParseRecord<ModelRecord>(value, "model", key));
    found.emplace_back(std::string(key), std::move(rec));
    return Status::Ok();
  };
  if (version != 0) {
    std::string key = ModelKey(tenant_id, name, version);
    ORRERY_ASSIGN_OR_RETURN(std::optional<std::string> raw, impl_->Get(kModels, key, "get model"));
    if (raw) {
      bool more = true;
      ORRERY_RETURN_IF_ERROR(collect(key, *raw, &more));
    }
  } else {
    ORRERY_RETURN_IF_ERROR(impl_->Scan(kModels, ModelNamePrefix(tenant_id, name), collect));
  }
  if (found.empty()) {
    std::string what = "model '" + std::string(name) + "'";
    if (version != 0) what += " version " + std::to_string(version);
    return Status::NotFound(what + " not found");
  }
  rocksdb::WriteBatch batch;
  std::vector<uint64_t> versions;
  for (const auto& [key, rec] : found) {
    batch.Delete(impl_->cf[kModels], key);
    batch.Delete(impl_->cf[kBlobs], key);
    batch.Delete(impl_->cf[kCostProfiles], key);
    if (!rec.upload_id().empty()) batch.Delete(impl_->cf[kUploads], UploadKey(tenant_id, rec.upload_id()));
    versions.push_back(rec.version());
  }
  ORRERY_RETURN_IF_ERROR(impl_->Write(&batch, "delete model"));
  return versions;
}

}  // namespace orrery
