// cost_profiles CF: ModelKey(tenant, name, version) -> CostProfileRecord.
#include "storage/catalog_impl.h"

namespace orrery {

Status Catalog::PutCostProfile(const CostProfileRecord& profile) {
  ORRERY_RETURN_IF_ERROR(CheckIdPart("tenant id", profile.tenant_id()));
  ORRERY_RETURN_IF_ERROR(CheckIdPart("model name", profile.name()));
  const std::string key = ModelKey(profile.tenant_id(), profile.name(), profile.version());
  // Under the model write lock: DeleteModelVersions deletes the profile in
  // the same batch as the record, so checking the record here means no
  // profile is left behind for a deleted version.
  std::lock_guard<std::mutex> lock(impl_->write_mu);
  ORRERY_ASSIGN_OR_RETURN(std::optional<std::string> model, impl_->Get(kModels, key, "get model"));
  if (!model) {
    return Status::NotFound("model '" + profile.name() + "' version " + std::to_string(profile.version()) +
                            " not found");
  }
  rocksdb::WriteBatch batch;
  batch.Put(impl_->cf[kCostProfiles], key, profile.SerializeAsString());
  return impl_->Write(&batch, "put cost profile");
}

Result<CostProfileRecord> Catalog::GetCostProfile(std::string_view tenant_id, std::string_view name,
                                                  uint64_t version) const {
  ORRERY_RETURN_IF_ERROR(CheckIdPart("tenant id", tenant_id));
  ORRERY_RETURN_IF_ERROR(CheckIdPart("model name", name));
  const std::string key = ModelKey(tenant_id, name, version);
  ORRERY_ASSIGN_OR_RETURN(std::optional<std::string> raw, impl_->Get(kCostProfiles, key, "get cost profile"));
  if (!raw) {
    return Status::NotFound("model '" + std::string(name) + "' version " + std::to_string(version) +
                            " has no cost profile");
  }
  return ParseRecord<CostProfileRecord>(*raw, "cost profile", key);
}

Result<std::vector<CostProfileRecord>> Catalog::ListCostProfiles() const {
  std::vector<CostProfileRecord> out;
  ORRERY_RETURN_IF_ERROR(
      impl_->Scan(kCostProfiles, "", [&](std::string_view key, std::string_view value, bool*) -> Status {
        ORRERY_ASSIGN_OR_RETURN(CostProfileRecord rec, ParseRecord<CostProfileRecord>(value, "cost profile", key));
        out.push_back(std::move(rec));
        return Status::Ok();
      }));
  return out;
}

}  // namespace orrery
