// The orrery CLI's commands, each a function from parsed arguments to an exit
// code. Output goes to stdout (human text, or JSON with --json); progress and
// errors go to stderr.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"

namespace orrery::cli {

struct GlobalOptions {
  std::string server;       // HOST:PORT
  std::string api_key;      // tenant key
  std::string admin_token;  // operator token
  bool json = false;
};

// Tenant settings given on the command line; unset (nullopt / 0) leaves a
// setting at its default (create) or as it is (update).
struct TenantFlags {
  std::optional<std::string> display_name;
  uint32_t weight = 0;
  uint64_t max_models = 0;
  uint64_t max_total_bytes = 0;
  uint64_t max_model_bytes = 0;
  uint32_t max_inflight_requests = 0;
  uint32_t requests_per_second = 0;
  uint32_t burst_requests = 0;
};

// `tenant` is a tenant name or id.
int AdminTenantCreate(const GlobalOptions& g, const std::string& name, const TenantFlags& flags);
int AdminTenantList(const GlobalOptions& g);
int AdminTenantShow(const GlobalOptions& g, const std::string& tenant);
int AdminTenantUpdate(const GlobalOptions& g, const std::string& tenant, const TenantFlags& flags);
int AdminTenantSetDisabled(const GlobalOptions& g, const std::string& tenant, bool disabled);
int AdminTenantDelete(const GlobalOptions& g, const std::string& tenant);
int AdminKeyCreate(const GlobalOptions& g, const std::string& tenant);
int AdminKeyList(const GlobalOptions& g, const std::string& tenant);
int AdminKeyRevoke(const GlobalOptions& g, const std::string& tenant, const std::string& key_id);
// upload_id "" = none (a retry then stores a second version).
int ModelUpload(const GlobalOptions& g, const std::string& name, const std::string& file,
                const std::string& upload_id);
int ModelList(const GlobalOptions& g);
// version 0 = latest (show) / every version (delete).
int ModelShow(const GlobalOptions& g, const std::string& name, uint64_t version);
int ModelDelete(const GlobalOptions& g, const std::string& name, uint64_t version);
// inputs are "NAME=FILE.pb"; outputs go to output_dir as <name>.pb when set,
// else they are printed. request_id "" = the server makes one up; either
// way it is printed (stderr, or "id" in --json) and is the billing line's id.
int Infer(const GlobalOptions& g, const std::string& model, const std::string& version,
          const std::vector<std::string>& inputs, const std::string& output_dir, const std::string& request_id = "");
int Status(const GlobalOptions& g);

// billing_commands.cc
struct BillingFlags {
  std::string from;  // YYYY-MM-DD, YYYY-MM-DDTHH:MM:SSZ (UTC) or Unix ms; "" = open
  std::string to;    // exclusive
  std::string model;
  std::string format = "table";  // table, csv, json (--json forces json)
};
Result<int64_t> ParseTimeMs(const std::string& s);
int BillingReport(const GlobalOptions& g, const BillingFlags& flags);
// tenant "" = every tenant.
int AdminBillingReport(const GlobalOptions& g, const BillingFlags& flags, const std::string& tenant);
int AdminSchedulerStats(const GlobalOptions& g);
// Exit code 2 when in-flight inferences remain after the timeout.
int AdminServerDrain(const GlobalOptions& g, int64_t timeout_ms);
int AdminServerResume(const GlobalOptions& g);
int AdminServerInfo(const GlobalOptions& g);

// cache_commands.cc: `orrery admin cache list|evict|pin|unpin|prefetch`.
// tier "" = every tier (list) / the host tier (actions); tenant "" = every
// tenant (list); version 0 = the latest.
int AdminCacheList(const GlobalOptions& g, const std::string& tier, const std::string& tenant);
// action: "evict", "pin", "unpin" or "prefetch".
int AdminCacheAction(const GlobalOptions& g, const std::string& action, const std::string& tier,
                     const std::string& tenant, const std::string& model, uint64_t version);

}  // namespace orrery::cli
