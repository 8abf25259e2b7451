// AdminService RPCs about the cache tiers: residency of every registered
// model version on each tier (CacheList) and the operator's evict / pin /
// unpin / prefetch of one version on one tier: "host" (HostTier) or, on a
// server with a device tier, "device" (DeviceCache, whose loads are
// transfers performed by the DeviceLanes).
#include <chrono>
#include <map>

#include <spdlog/spdlog.h>

#include "api/admin_service.h"
#include "api/auth.h"
#include "api/grpc_status.h"

namespace orrery {
namespace {

constexpr const char* kHostTier = "host";
constexpr const char* kDeviceTier = "device";
constexpr int64_t kOperatorWaitNs = 30 * kNsPerSec;

// "host" is the host tier ("" = every tier for a list, the host tier for an
// action); "device" the device tier, NOT_FOUND on a server without one.
Status CheckTier(const std::string& tier, const DeviceTier* device) {
  if (tier.empty() || tier == kHostTier) return Status::Ok();
  if (tier == kDeviceTier) {
    if (device != nullptr) return Status::Ok();
    return Status::NotFound("cache tier 'device' not found: this server has no device tier (host only; "
                            "start orreryd with --sim-device or --device)");
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

void ToEntry(const char* tier, const TierEntryInfo& info, const std::string& tenant_name, const WallClock& wall,
             v1::CacheEntry* out) {
  out->set_tier(tier);
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

void ToTierInfo(const char* tier, const TierStats& s, v1::CacheTierInfo* out) {
  out->set_tier(tier);
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
  if (Status s = CheckTier(request->tier(), ctx_->device); !s.ok()) return ToGrpcStatus(s);
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

  const WallClock wall = Now(*ctx_->host);
  const std::vector<TierEntryInfo> host_entries = ctx_->host->List();
  auto tenant_name = [&](const std::string& id) {
    auto name = names.find(id);
    return name == names.end() ? std::string() : name->second;
  };
  if (request->tier() != kDeviceTier) {
    ToTierInfo(kHostTier, ctx_->host->stats(), response->add_tiers());
    for (const TierEntryInfo& info : host_entries) {
      if (!only.empty() && info.key.tenant != only) continue;
      ToEntry(kHostTier, info, tenant_name(info.key.tenant), wall, response->add_entries());
    }
  }
  if (ctx_->device != nullptr && request->tier() != kHostTier) {
    const DeviceCache& cache = *ctx_->device->cache;
    v1::CacheTierInfo* tier = response->add_tiers();
    ToTierInfo(kDeviceTier, cache.Stats(), tier);
    tier->set_device(ctx_->device->device->Describe());
    tier->set_simulated(ctx_->device->device->simulated());
    // Every version the host tier knows: its device entry, or "too_large"
    // when the device cache refused it (larger than the device memory).
    for (const TierEntryInfo& host_info : host_entries) {
      if (!only.empty() && host_info.key.tenant != only) continue;
      v1::CacheEntry* out = response->add_entries();
      if (std::optional<TierEntryInfo> info = cache.Info(host_info.key)) {
        ToEntry(kDeviceTier, *info, tenant_name(info->key.tenant), wall, out);
      } else {
        TierEntryInfo absent;
        absent.key = host_info.key;
        absent.bytes = host_info.bytes;
        ToEntry(kDeviceTier, absent, tenant_name(absent.key.tenant), wall, out);
        out->set_state("too_large");
      }
    }
  }
  return grpc::Status::OK;
}

Result<ModelRecord> AdminServiceImpl::CacheTarget(const grpc::ServerContext& context,
                                                  const v1::CacheModelRequest& request,
                                                  std::string* tenant_name) const {
  ORRERY_RETURN_IF_ERROR(AuthorizeAdmin(context, ctx_->admin_token, *ctx_->tenants));
  ORRERY_RETURN_IF_ERROR(CheckTier(request.tier(), ctx_->device));
  if (request.tenant().empty()) return Status::InvalidArgument("a tenant (name or id) is required");
  if (request.model().empty()) return Status::InvalidArgument("a model name is required");
  ORRERY_ASSIGN_OR_RETURN(TenantRecord tenant, ctx_->tenants->Find(request.tenant()));
  *tenant_name = tenant.name();
  Result<ModelRecord> record = ctx_->catalog->GetModel(tenant.id(), request.model(), request.version());
  if (!record.ok()) return record.status().WithPrefix("tenant '" + tenant.name() + "'");
  if (ctx_->host == nullptr) return NoHostTier();
  if (request.tier() == kDeviceTier && !ctx_->device->cache->Info(HostTier::KeyOf(*record)).has_value()) {
    return Status::FailedPrecondition("model '" + record->name() + "' v" + std::to_string(record->version()) + " (" +
                                      std::to_string(HostTier::BytesOf(*record)) +
                                      " bytes) is larger than the device memory (" +
                                      std::to_string(ctx_->device->device->memory_bytes()) +
                                      " bytes): it never goes to the device");
  }
  return record;
}

grpc::Status AdminServiceImpl::CacheReply(const ModelRecord& record, const std::string& tenant_name, bool device,
                                          v1::CacheModelResponse* response) const {
  const ModelKey key = HostTier::KeyOf(record);
  if (device) {
    std::optional<TierEntryInfo> info = ctx_->device->cache->Info(key);
    if (!info.has_value()) return ToGrpcStatus(Status::NotFound(key.ToString() + " is not on the device tier"));
    ToEntry(kDeviceTier, *info, tenant_name, Now(*ctx_->host), response->mutable_entry());
    return grpc::Status::OK;
  }
  Result<TierEntryInfo> info = ctx_->host->Info(key);
  if (!info.ok()) return ToGrpcStatus(info.status());
  ToEntry(kHostTier, *info, tenant_name, Now(*ctx_->host), response->mutable_entry());
  return grpc::Status::OK;
}

grpc::Status AdminServiceImpl::CacheAction(const grpc::ServerContext& context, const v1::CacheModelRequest& request,
                                           const char* done, const HostAction& host, const DeviceAction& device_action,
                                           v1::CacheModelResponse* response) {
  std::string tenant_name;
  Result<ModelRecord> record = CacheTarget(context, request, &tenant_name);
  if (!record.ok()) return ToGrpcStatus(record.status());
  const ModelKey key = HostTier::KeyOf(*record);
  const bool device = request.tier() == kDeviceTier;
  if (Status s = device ? device_action(key) : host(*record, key); !s.ok()) return ToGrpcStatus(s);
  spdlog::info("{} cache: operator {} {}", device ? kDeviceTier : kHostTier, done, key.ToString());
  return CacheReply(*record, tenant_name, device, response);
}

grpc::Status AdminServiceImpl::CacheEvict(grpc::ServerContext* context, const v1::CacheModelRequest* request,
                                          v1::CacheModelResponse* response) {
  return CacheAction(
      *context, *request, "evicted", [this](const ModelRecord&, const ModelKey& key) { return ctx_->host->Evict(key); },
      [this](const ModelKey& key) { return ctx_->device->cache->Evict(key); }, response);
}

grpc::Status AdminServiceImpl::CachePin(grpc::ServerContext* context, const v1::CacheModelRequest* request,
                                        v1::CacheModelResponse* response) {
  return CacheAction(
      *context, *request, "pinned",
      [this](const ModelRecord& record, const ModelKey&) { return ctx_->host->OperatorPin(record); },
      [this](const ModelKey& key) { return ctx_->device->lanes->OperatorPin(key, kOperatorWaitNs); }, response);
}

grpc::Status AdminServiceImpl::CacheUnpin(grpc::ServerContext* context, const v1::CacheModelRequest* request,
                                          v1::CacheModelResponse* response) {
  return CacheAction(
      *context, *request, "unpinned",
      [this](const ModelRecord&, const ModelKey& key) { return ctx_->host->OperatorUnpin(key); },
      [this](const ModelKey& key) { return ctx_->device->cache->OperatorUnpin(key); }, response);
}

grpc::Status AdminServiceImpl::CachePrefetch(grpc::ServerContext* context, const v1::CacheModelRequest* request,
                                             v1::CacheModelResponse* response) {
  return CacheAction(
      *context, *request, "prefetched",
      [this](const ModelRecord& record, const ModelKey&) { return ctx_->host->Prefetch(record); },
      [this](const ModelKey& key) { return ctx_->device->lanes->Load(key, kOperatorWaitNs); }, response);
}

}  // namespace orrery
