// Catalog: tenants and API keys. See catalog.h and catalog.cc.
#include <mutex>
#include <optional>

#include "storage/catalog_impl.h"

namespace orrery {

// ---- tenants and keys

Status Catalog::CreateTenant(const TenantRecord& tenant, std::string_view key_digest, const ApiKeyRecord& key) {
  ORRERY_RETURN_IF_ERROR(CheckIdPart("tenant id", tenant.id()));
  ORRERY_RETURN_IF_ERROR(CheckIdPart("tenant name", tenant.name()));
  ORRERY_RETURN_IF_ERROR(CheckIdPart("key id", key.key_id()));
  if (tenant.deleted_unix_ms() != 0) return Status::InvalidArgument("cannot create a deleted tenant");
  if (key_digest.size() != kDigestSize) {
    return Status::InvalidArgument("API key digest must be " + std::to_string(kDigestSize) + " bytes");
  }
  if (key.tenant_id() != tenant.id()) {
    return Status::InvalidArgument("API key record belongs to tenant '" + key.tenant_id() + "', not '" +
                                   tenant.id() + "'");
  }
  const std::string name_key = TenantNameKey(tenant.name());
  const std::string id_key = TenantIdKey(tenant.id());

  std::lock_guard<std::mutex> lock(impl_->write_mu);
  ORRERY_ASSIGN_OR_RETURN(std::optional<std::string> by_name, impl_->Get(kTenants, name_key, "get tenant"));
  if (by_name) return Status::AlreadyExists("tenant '" + tenant.name() + "' already exists");
  ORRERY_ASSIGN_OR_RETURN(std::optional<std::string> by_id, impl_->Get(kTenants, id_key, "get tenant"));
  if (by_id) return Status::AlreadyExists("tenant id '" + tenant.id() + "' already exists");
  ORRERY_ASSIGN_OR_RETURN(std::optional<std::string> existing_key, impl_->Get(kKeys, key_digest, "get key"));
  if (existing_key) return Status::AlreadyExists("API key already exists");

  rocksdb::WriteBatch batch;
  batch.Put(impl_->cf[kTenants], id_key, tenant.SerializeAsString());
  batch.Put(impl_->cf[kTenants], name_key, tenant.id());
  batch.Put(impl_->cf[kKeys], rocksdb::Slice(key_digest.data(), key_digest.size()), key.SerializeAsString());
  batch.Put(impl_->cf[kTenants], KeyIndexKey(tenant.id(), key.key_id()),
            rocksdb::Slice(key_digest.data(), key_digest.size()));
  return impl_->Write(&batch, "create tenant");
}

Result<TenantRecord> Catalog::GetTenant(std::string_view tenant_id) const {
  ORRERY_ASSIGN_OR_RETURN(std::optional<TenantRecord> rec, impl_->FindTenant(tenant_id));
  if (!rec) return Status::NotFound("tenant '" + std::string(tenant_id) + "' not found");
  return std::move(*rec);
}

Result<TenantRecord> Catalog::GetTenantByName(std::string_view name) const {
  const std::string name_key = TenantNameKey(name);
  ORRERY_ASSIGN_OR_RETURN(std::optional<std::string> id, impl_->Get(kTenants, name_key, "get tenant"));
  if (!id) return Status::NotFound("tenant '" + std::string(name) + "' not found");
  ORRERY_ASSIGN_OR_RETURN(std::optional<TenantRecord> rec, impl_->FindTenant(*id));
  if (!rec) return Status::DataLoss("tenant name index points at missing tenant '" + *id + "'");
  return std::move(*rec);
}

Result<std::vector<TenantRecord>> Catalog::ListTenants() const {
  std::vector<TenantRecord> out;
  ORRERY_RETURN_IF_ERROR(impl_->Scan(
      kTenants, std::string(kTenantNamePrefix), [&](std::string_view key, std::string_view id, bool*) -> Status {
        ORRERY_ASSIGN_OR_RETURN(std::optional<TenantRecord> rec, impl_->FindTenant(id));
        if (!rec) {
          return Status::DataLoss("tenant name index '" + std::string(key) + "' points at missing tenant '" +
                                  std::string(id) + "'");
        }
        out.push_back(std::move(*rec));
        return Status::Ok();
      }));
  return out;
}

Status Catalog::SetTenantDisabled(std::string_view tenant_id, bool disabled) {
  std::lock_guard<std::mutex> lock(impl_->write_mu);
  ORRERY_ASSIGN_OR_RETURN(std::optional<TenantRecord> rec, impl_->FindTenant(tenant_id));
  if (!rec) return Status::NotFound("tenant '" + std::string(tenant_id) + "' not found");
  rec->set_disabled(disabled);
  rocksdb::WriteBatch batch;
  batch.Put(impl_->cf[kTenants], TenantIdKey(tenant_id), rec->SerializeAsString());
  return impl_->Write(&batch, "update tenant");
}

Result<ApiKeyRecord> Catalog::GetKey(std::string_view key_digest) const {
  ORRERY_ASSIGN_OR_RETURN(std::optional<std::string> raw, impl_->Get(kKeys, key_digest, "get key"));
  if (!raw) return Status::NotFound("API key not found");
  return ParseRecord<ApiKeyRecord>(*raw, "API key", "<digest>");
}

Status Catalog::UpdateTenant(const TenantRecord& tenant) {
  std::lock_guard<std::mutex> lock(impl_->write_mu);
  ORRERY_ASSIGN_OR_RETURN(std::optional<TenantRecord> rec, impl_->FindTenant(tenant.id()));
  if (!rec) return Status::NotFound("tenant '" + tenant.id() + "' not found");
  TenantRecord updated = tenant;
  updated.set_name(rec->name());
  updated.set_created_unix_ms(rec->created_unix_ms());
  updated.set_deleted_unix_ms(0);
  rocksdb::WriteBatch batch;
  batch.Put(impl_->cf[kTenants], TenantIdKey(tenant.id()), updated.SerializeAsString());
  return impl_->Write(&batch, "update tenant");
}

Status Catalog::DeleteTenant(std::string_view tenant_id) {
  ORRERY_RETURN_IF_ERROR(CheckIdPart("tenant id", tenant_id));
  std::lock_guard<std::mutex> lock(impl_->write_mu);
  ORRERY_ASSIGN_OR_RETURN(std::optional<TenantRecord> rec, impl_->FindTenant(tenant_id));
  if (!rec) return Status::NotFound("tenant '" + std::string(tenant_id) + "' not found");

  rocksdb::WriteBatch batch;
  auto delete_all = [&](Cf which, const std::string& prefix) -> Status {
    return impl_->Scan(which, prefix, [&](std::string_view key, std::string_view, bool*) -> Status {
      batch.Delete(impl_->cf[which], rocksdb::Slice(key.data(), key.size()));
      return Status::Ok();
    });
  };
  const std::string models = ModelTenantPrefix(tenant_id);
  ORRERY_RETURN_IF_ERROR(delete_all(kModels, models));
  ORRERY_RETURN_IF_ERROR(delete_all(kBlobs, models));
  ORRERY_RETURN_IF_ERROR(delete_all(kUploads, models));
  ORRERY_RETURN_IF_ERROR(delete_all(kCostProfiles, models));
  ORRERY_RETURN_IF_ERROR(delete_all(kMeta, NextVersionPrefix(tenant_id)));
  // Keys: the index names every digest of the tenant.
  ORRERY_RETURN_IF_ERROR(
      impl_->Scan(kTenants, KeyIndexPrefix(tenant_id), [&](std::string_view key, std::string_view digest, bool*) {
        batch.Delete(impl_->cf[kTenants], rocksdb::Slice(key.data(), key.size()));
        batch.Delete(impl_->cf[kKeys], rocksdb::Slice(digest.data(), digest.size()));
        return Status::Ok();
      }));
  batch.Delete(impl_->cf[kTenants], TenantNameKey(rec->name()));
  rec->set_deleted_unix_ms(NowUnixMs());
  rec->set_disabled(true);
  batch.Put(impl_->cf[kTenants], TenantIdKey(tenant_id), rec->SerializeAsString());
  // The ledger CF is left alone on purpose: billing outlives the tenant.
  return impl_->Write(&batch, "delete tenant");
}

Result<TenantRecord> Catalog::GetTenantTombstone(std::string_view tenant_id) const {
  ORRERY_ASSIGN_OR_RETURN(std::optional<TenantRecord> rec, impl_->FindTenant(tenant_id, /*with_tombstones=*/true));
  if (!rec || rec->deleted_unix_ms() == 0) {
    return Status::NotFound("no deleted tenant '" + std::string(tenant_id) + "'");
  }
  return std::move(*rec);
}

Status Catalog::AddKey(std::string_view key_digest, const ApiKeyRecord& key) {
  ORRERY_RETURN_IF_ERROR(CheckIdPart("tenant id", key.tenant_id()));
  ORRERY_RETURN_IF_ERROR(CheckIdPart("key id", key.key_id()));
  if (key_digest.size() != kDigestSize) {
    return Status::InvalidArgument("API key digest must be " + std::to_string(kDigestSize) + " bytes");
  }
  std::lock_guard<std::mutex> lock(impl_->write_mu);
  ORRERY_ASSIGN_OR_RETURN(std::optional<TenantRecord> tenant, impl_->FindTenant(key.tenant_id()));
  if (!tenant) return Status::NotFound("tenant '" + key.tenant_id() + "' not found");
  ORRERY_ASSIGN_OR_RETURN(std::optional<std::string> existing, impl_->Get(kKeys, key_digest, "get key"));
  if (existing) return Status::AlreadyExists("API key already exists");
  const std::string index_key = KeyIndexKey(key.tenant_id(), key.key_id());
  ORRERY_ASSIGN_OR_RETURN(std::optional<std::string> same_id, impl_->Get(kTenants, index_key, "get key index"));
  if (same_id) return Status::AlreadyExists("key id '" + key.key_id() + "' already exists");
  rocksdb::WriteBatch batch;
  batch.Put(impl_->cf[kKeys], rocksdb::Slice(key_digest.data(), key_digest.size()), key.SerializeAsString());
  batch.Put(impl_->cf[kTenants], index_key, rocksdb::Slice(key_digest.data(), key_digest.size()));
  return impl_->Write(&batch, "add key");
}

Result<std::vector<ApiKeyRecord>> Catalog::ListKeys(std::string_view tenant_id) const {
  ORRERY_RETURN_IF_ERROR(CheckIdPart("tenant id", tenant_id));
  std::vector<ApiKeyRecord> out;
  ORRERY_RETURN_IF_ERROR(
      impl_->Scan(kTenants, KeyIndexPrefix(tenant_id), [&](std::string_view, std::string_view digest, bool*) {
        ORRERY_ASSIGN_OR_RETURN(std::optional<std::string> raw, impl_->Get(kKeys, digest, "get key"));
        if (!raw) return Status::Ok();  // revoked concurrently
        ORRERY_ASSIGN_OR_RETURN(ApiKeyRecord rec, ParseRecord<ApiKeyRecord>(*raw, "API key", "<digest>"));
        out.push_back(std::move(rec));
        return Status::Ok();
      }));
  return out;
}

Status Catalog::RevokeKey(std::string_view tenant_id, std::string_view key_id) {
  ORRERY_RETURN_IF_ERROR(CheckIdPart("tenant id", tenant_id));
  ORRERY_RETURN_IF_ERROR(CheckIdPart("key id", key_id));
  std::lock_guard<std::mutex> lock(impl_->write_mu);
  const std::string index_key = KeyIndexKey(tenant_id, key_id);
  ORRERY_ASSIGN_OR_RETURN(std::optional<std::string> digest, impl_->Get(kTenants, index_key, "get key index"));
  if (!digest) return Status::NotFound("key '" + std::string(key_id) + "' not found");
  rocksdb::WriteBatch batch;
  batch.Delete(impl_->cf[kTenants], index_key);
  batch.Delete(impl_->cf[kKeys], *digest);
  return impl_->Write(&batch, "revoke key");
}

}  // namespace orrery
