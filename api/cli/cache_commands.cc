// `orrery admin cache list|evict|pin|unpin|prefetch` (admin token): model
// residency in the cache tiers and the operator's actions on one version.
#include <cinttypes>
#include <cstdio>
#include <ctime>
#include <iostream>

#include "api/cli/commands.h"
#include "api/cli/common.h"
#include "api/proto/orrery.grpc.pb.h"

namespace orrery::cli {
namespace {

std::string UtcMs(int64_t unix_ms) {
  if (unix_ms == 0) return "-";
  const std::time_t t = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

void PrintEntryHeader() {
  std::printf("%-6s %-20s %-24s %7s %-9s %12s %5s %s\n", "TIER", "TENANT", "MODEL", "VERSION", "STATE", "BYTES",
              "PINS", "LAST USE (UTC)");
}

void PrintEntry(const v1::CacheEntry& e) {
  const std::string tenant = e.tenant().empty() ? e.tenant_id() : e.tenant();
  // "2" or "2(1op)": request pins + operator pins, of which operator pins.
  char pins[32];
  if (e.operator_pins() > 0) {
    std::snprintf(pins, sizeof(pins), "%u(%uop)", e.pins(), e.operator_pins());
  } else {
    std::snprintf(pins, sizeof(pins), "%u", e.pins());
  }
  std::printf("%-6s %-20s %-24s %7" PRIu64 " %-9s %12" PRIu64 " %5s %s\n", e.tier().c_str(), tenant.c_str(),
              e.model().c_str(), e.version(), e.state().c_str(), e.size_bytes(), pins,
              UtcMs(e.last_use_unix_ms()).c_str());
}

void PrintTier(const v1::CacheTierInfo& t) {
  std::printf("%s tier: %" PRIu64 " of %" PRIu64 " bytes used (%" PRIu64 " resident, %" PRIu64
              " pinned), %" PRIu64 " of %" PRIu64 " versions resident\n",
              t.tier().c_str(), t.used_bytes(), t.capacity_bytes(), t.resident_bytes(), t.pinned_bytes(),
              t.resident_models(), t.models());
  std::printf("  requests: %" PRIu64 " hits, %" PRIu64 " joined loads, %" PRIu64 " misses; %" PRIu64
              " loads (%" PRIu64 " failed), %" PRIu64 " evictions, %" PRIu64
              " bytes loaded in %.3f s; %s %.1f MB/s\n",
              t.hits(), t.joins(), t.misses(), t.loads(), t.loads_failed(), t.evictions(), t.bytes_loaded(),
              t.load_seconds(), t.tier() == "device" ? "link" : "loader", t.bytes_per_sec() / 1e6);
  if (!t.device().empty()) std::printf("  device: %s\n", t.device().c_str());
  std::printf("  keep-alive: %" PRIu64 " pre-warms, %" PRIu64 " expirations; idle resident %.1f MB.s\n",
              t.prewarms(), t.expirations(), t.idle_byte_seconds() / 1e6);
}

}  // namespace

int AdminCacheList(const GlobalOptions& g, const std::string& tier, const std::string& tenant) {
  if (!NeedAdmin(g)) return 1;
  grpc::ClientContext ctx;
  Authorize(&ctx, g.admin_token);
  auto stub = v1::AdminService::NewStub(Connect(g));
  v1::CacheListRequest req;
  req.set_tier(tier);
  req.set_tenant(tenant);
  v1::CacheListResponse resp;
  grpc::Status s = stub->CacheList(&ctx, req, &resp);
  if (!s.ok()) return Fail(s, g);
  if (g.json) {
    std::cout << ToJson(resp) << "\n";
    return 0;
  }
  for (const v1::CacheTierInfo& t : resp.tiers()) PrintTier(t);
  std::printf("\n");
  PrintEntryHeader();
  for (const v1::CacheEntry& e : resp.entries()) PrintEntry(e);
  return 0;
}

int AdminCacheAction(const GlobalOptions& g, const std::string& action, const std::string& tier,
                     const std::string& tenant, const std::string& model, uint64_t version) {
  if (!NeedAdmin(g)) return 1;
  grpc::ClientContext ctx;
  Authorize(&ctx, g.admin_token);
  auto stub = v1::AdminService::NewStub(Connect(g));
  v1::CacheModelRequest req;
  req.set_tier(tier);
  req.set_tenant(tenant);
  req.set_model(model);
  req.set_version(version);
  v1::CacheModelResponse resp;
  grpc::Status s;
  if (action == "evict") {
    s = stub->CacheEvict(&ctx, req, &resp);
  } else if (action == "pin") {
    s = stub->CachePin(&ctx, req, &resp);
  } else if (action == "unpin") {
    s = stub->CacheUnpin(&ctx, req, &resp);
  } else if (action == "prefetch") {
    s = stub->CachePrefetch(&ctx, req, &resp);
  } else {
    return Fail("unknown cache action '" + action + "'");
  }
  if (!s.ok()) return Fail(s, g);
  if (g.json) {
    std::cout << ToJson(resp) << "\n";
    return 0;
  }
  PrintEntryHeader();
  PrintEntry(resp.entry());
  return 0;
}

}  // namespace orrery::cli
