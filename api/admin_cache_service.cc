// AdminService RPCs about the cache tiers: residency of every registered
// model version (CacheList) and the operator's evict / pin / unpin /
// prefetch of one version. Only the host tier exists in the server today;
// the tier field is there for the device tier.
#include <chrono>
#include <map>

#include <spdlog/spdlog.h>

#include "api/admin_service.h"
#include "api/auth.h"
#include "api/grpc_status.h"

namespace orrery {
namespace {

constexpr const char* kHostTier = "host";

// "host" is the host tier ("" = every tier for a list, the host tier for an
// action); "device" is a tier this server does not have (no device tier is
// wired in yet).
Status CheckTier(const std::string& tier) {
  if (tier.empty() || tier == kHostTier) return Status::Ok();
  if (tier == "device") {
    return Status::NotFound("cache tier 'device' not found: this server has no device tier (host only)");
  }
  return Status::InvalidArgument("unknown cache tier '" + tier + "' (tiers: host, device)");
}

std::string StateName(Residency r) {
  switch (r) {
    case Residency::kAbsent: return "absent";
    case Residency::kMoving: return "loading";
    case Residency::kResident: return "resident";
  }
  return "unknown";
}

// Converts the tier's clock to wall time once per call.
struct WallClock {
  int64_t now_ns;
  int64_t now_unix_ms;
  int64_t UnixMs(int64_t clock_ns) const { return now_unix_ms - (now_ns - clock_ns) / 1'000'000; }
};

WallClock Now(const HostTier& host) {
  return WallClock{host.clock().NowNs(), std::chrono::duration_cast<std::chrono::milliseconds>(
                                             std::chrono::system_clock::now().time_since_epoch())
                                             .count()};
}

void ToEntry(const TierEntryInfo& info, const std::string& tenant_name, const WallClock& wall, v1::CacheEntry* out) {
  out->set_tier(kHostTier);
  out->set_tenant_id(info.key.tenant);
  out->set_tenant(tenant_name);
  out->set_model(info.key.model);
  out->set_version(info.key.version);
  out->set_size_bytes(static_cast<uint64_t>(info.bytes));
  out->set_state(StateName(info.state));
  out->set_pins(static_cast<uint32_t>(info.pins));
  out->set_operator_pins(static_cast<uint32_t>(info.operator_pins));
  out->set_last_use_unix_ms(info.used ? wall.UnixMs(info.last_use_ns) : 0);
  out->set_rate_per_sec(info.rate_per_sec);
}

void ToTierInfo(const TierStats& s, v1::CacheTierInfo* out) {
  out->set_tier(kHostTier);
  out->set_capacity_bytes(static_cast<uint64_t>(s.capacity_bytes));
  out->set_used_bytes(static_cast<uint64_t>(s.used_bytes));
  out->set_resident_bytes(static_cast<uint64_t>(s.resident_bytes));
  out->set_pinned_bytes(static_cast<uint64_t>(s.pinned_bytes));
  out->set_models(s.entries);
  out->set_resident_models(s.resident);
  out->set_hits(s.hits);
  out->set_joins(s.joins);
  out->set_misses(s.misses);
  out->set_loads(s.moves_started);
  out->set_loads_failed(s.moves_failed);
  out->set_evictions(s.evictions);
  out->set_bytes_loaded(static_cast<uint64_t>(s.bytes_moved));
  out->set_load_seconds(static_cast<double>(s.move_ns) / 1e9);
  out->set_bytes_per_sec(s.bytes_per_sec);
  out->set_prewarms(s.prewarms);
  out->set_expirations(s.expirations);
  out->set_idle_byte_seconds(s.idle_byte_ns / 1e9);
}

Status NoHostTier() { return Status::FailedPrecondition("this server runs without a host cache tier"); }

}  // namespace

grpc::Status AdminServiceImpl::CacheList(grpc::ServerContext* context, const v1::CacheListRequest* request,
                                         v1::CacheListResponse* response) {
  Status auth = AuthorizeAdmin(*context, ctx_->admin_token, *ctx_->tenants);
  if (!auth.ok()) return ToGrpcStatus(auth);
  if (Status s = CheckTier(request->tier()); !s.ok()) return ToGrpcStatus(s);
  std::string only;
  if (!request->tenant().empty()) {
    Result<TenantRecord> tenant = ctx_->tenants->Find(request->tenant());
    if (!tenant.ok()) return ToGrpcStatus(tenant.status());
    only = tenant->id();
  }
  if (ctx_->host == nullptr) return grpc::Status::OK;
  Result<std::vector<TenantRecord>> tenants = ctx_->tenants->List();
  if (!tenants.ok()) return ToGrpcStatus(tenants.status());
  std::map<std::string, std::string> names;
  for (const TenantRecord& t : *tenants) names[t.id()] = t.name();

  ToTierInfo(ctx_->host->stats(), response->add_tiers());
  const WallClock wall = Now(*ctx_->host);
  for (const TierEntryInfo& info : ctx_->host->List()) {
    if (!only.empty() && info.key.tenant != only) continue;
    auto name = names.find(info.key.tenant);
    ToEntry(info, name == names.end() ? "" : name->second, wall, response->add_entries());
  }
  return grpc::Status::OK;
}

Result<ModelRecord> AdminServiceImpl::CacheTarget(const grpc::ServerContext& context,
                                                  const v1::CacheModelRequest& request,
                                                  std::string* tenant_name) const {
  ORRERY_RETURN_IF_ERROR(AuthorizeAdmin(context, ctx_->admin_token, *ctx_->tenants));
  ORRERY_RETURN_IF_ERROR(CheckTier(request.tier()));
  if (request.tenant().empty()) return Status::InvalidArgument("a tenant (name or id) is required");
  if (request.model().empty()) return Status::InvalidArgument("a model name is required");
  ORRERY_ASSIGN_OR_RETURN(TenantRecord tenant, ctx_->tenants->Find(request.tenant()));
  *tenant_name = tenant.name();
  Result<ModelRecord> record = ctx_->catalog->GetModel(tenant.id(), request.model(), request.version());
  if (!record.ok()) return record.status().WithPrefix("tenant '" + tenant.name() + "'");
  if (ctx_->host == nullptr) return NoHostTier();
  return record;
}

grpc::Status AdminServiceImpl::CacheReply(const ModelRecord& record, const std::string& tenant_name,
                                          v1::CacheModelResponse* response) const {
  Result<TierEntryInfo> info = ctx_->host->Info(HostTier::KeyOf(record));
  if (!info.ok()) return ToGrpcStatus(info.status());
  ToEntry(*info, tenant_name, Now(*ctx_->host), response->mutable_entry());
  return grpc::Status::OK;
}

grpc::Status AdminServiceImpl::CacheEvict(grpc::ServerContext* context, const v1::CacheModelRequest* request,
                                          v1::CacheModelResponse* response) {
  std::string tenant_name;
  Result<ModelRecord> record = CacheTarget(*context, *request, &tenant_name);
  if (!record.ok()) return ToGrpcStatus(record.status());
  const ModelKey key = HostTier::KeyOf(*record);
  if (Status s = ctx_->host->Evict(key); !s.ok()) return ToGrpcStatus(s);
  spdlog::info("host cache: operator evicted {}", key.ToString());
  return CacheReply(*record, tenant_name, response);
}

grpc::Status AdminServiceImpl::CachePin(grpc::ServerContext* context, const v1::CacheModelRequest* request,
                                        v1::CacheModelResponse* response) {
  std::string tenant_name;
  Result<ModelRecord> record = CacheTarget(*context, *request, &tenant_name);
  if (!record.ok()) return ToGrpcStatus(record.status());
  if (Status s = ctx_->host->OperatorPin(*record); !s.ok()) return ToGrpcStatus(s);
  spdlog::info("host cache: operator pinned {}", HostTier::KeyOf(*record).ToString());
  return CacheReply(*record, tenant_name, response);
}

grpc::Status AdminServiceImpl::CacheUnpin(grpc::ServerContext* context, const v1::CacheModelRequest* request,
                                          v1::CacheModelResponse* response) {
  std::string tenant_name;
  Result<ModelRecord> record = CacheTarget(*context, *request, &tenant_name);
  if (!record.ok()) return ToGrpcStatus(record.status());
  const ModelKey key = HostTier::KeyOf(*record);
  if (Status s = ctx_->host->OperatorUnpin(key); !s.ok()) return ToGrpcStatus(s);
  spdlog::info("host cache: operator unpinned {}", key.ToString());
  return CacheReply(*record, tenant_name, response);
}

grpc::Status AdminServiceImpl::CachePrefetch(grpc::ServerContext* context, const v1::CacheModelRequest* request,
                                             v1::CacheModelResponse* response) {
  std::string tenant_name;
  Result<ModelRecord> record = CacheTarget(*context, *request, &tenant_name);
  if (!record.ok()) return ToGrpcStatus(record.status());
  if (Status s = ctx_->host->Prefetch(*record); !s.ok()) return ToGrpcStatus(s);
  return CacheReply(*record, tenant_name, response);
}

}  // namespace orrery
