// orrery: command-line client for an Orrery server.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include "api/cli/commands.h"
#include "api/version.h"

namespace {

std::string EnvOr(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return (v && *v) ? std::string(v) : fallback;
}

// When no admin token is given, a local operator's token file is used.
std::string DefaultAdminToken() {
  std::string token = EnvOr("ORRERY_ADMIN_TOKEN", "");
  if (!token.empty()) return token;
  std::filesystem::path file = std::filesystem::path(EnvOr("ORRERY_DATA_DIR", "orrery-data")) / "admin.token";
  std::ifstream in(file);
  std::getline(in, token);
  return token;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace orrery::cli;
  GlobalOptions g;
  g.server = EnvOr("ORRERY_SERVER", "127.0.0.1:8500");
  g.api_key = EnvOr("ORRERY_API_KEY", "");
  g.admin_token = DefaultAdminToken();

  CLI::App app{"orrery: client for the Orrery inference service"};
  app.set_version_flag("--version", std::string("orrery ") + orrery::kOrreryVersion);
  app.require_subcommand(1);
  app.add_option("--server", g.server, "Server HOST:PORT (env ORRERY_SERVER)")->capture_default_str();
  app.add_option("--api-key", g.api_key, "Tenant API key (env ORRERY_API_KEY)");
  app.add_option("--admin-token", g.admin_token,
                 "Admin token (env ORRERY_ADMIN_TOKEN, else $ORRERY_DATA_DIR/admin.token)");
  app.add_flag("--json", g.json, "Print JSON instead of text");

  int rc = 0;
  auto* admin = app.add_subcommand("admin", "Operator commands (admin token)")->require_subcommand(1);
  auto* tenant = admin->add_subcommand("tenant", "Manage tenants")->require_subcommand(1);
  std::string tenant_name, key_id;
  TenantFlags flags;
  std::string display_name;
  // Settings shared by create and update; unset ones keep their value.
  auto add_settings = [&](CLI::App* cmd) {
    cmd->add_option("--display-name", display_name, "Human-readable name");
    cmd->add_option("--weight", flags.weight, "Scheduling weight (1-1000)");
    cmd->add_option("--max-models", flags.max_models, "Quota: distinct model names");
    cmd->add_option("--max-total-bytes", flags.max_total_bytes, "Quota: stored ONNX bytes over all versions");
    cmd->add_option("--max-model-bytes", flags.max_model_bytes, "Quota: bytes of one model");
    cmd->add_option("--max-inflight", flags.max_inflight_requests, "Quota: inferences queued or running");
    cmd->add_option("--rate", flags.requests_per_second, "Quota: inference requests per second");
    cmd->add_option("--burst", flags.burst_requests, "Quota: request burst (token bucket size)");
  };
  auto settings = [&]() -> const TenantFlags& {
    if (!display_name.empty() || tenant->get_subcommand("update")->count("--display-name") > 0) {
      flags.display_name = display_name;
    }
    return flags;
  };
  auto* tcreate = tenant->add_subcommand("create", "Create a tenant; prints its API key (shown once)");
  tcreate->add_option("NAME", tenant_name, "Tenant name")->required();
  add_settings(tcreate);
  tcreate->callback([&] { rc = AdminTenantCreate(g, tenant_name, settings()); });
  tenant->add_subcommand("list", "List tenants")->callback([&] { rc = AdminTenantList(g); });
  auto* tshow = tenant->add_subcommand("show", "Show a tenant: settings, effective quotas, usage");
  tshow->add_option("TENANT", tenant_name, "Tenant name or id")->required();
  tshow->callback([&] { rc = AdminTenantShow(g, tenant_name); });
  auto* tupdate = tenant->add_subcommand("update", "Change a tenant's display name, weight or quotas");
  tupdate->add_option("TENANT", tenant_name, "Tenant name or id")->required();
  add_settings(tupdate);
  tupdate->callback([&] { rc = AdminTenantUpdate(g, tenant_name, settings()); });
  auto* tdisable = tenant->add_subcommand("disable", "Disable a tenant (its keys stop working)");
  tdisable->add_option("TENANT", tenant_name, "Tenant name or id")->required();
  tdisable->callback([&] { rc = AdminTenantSetDisabled(g, tenant_name, true); });
  auto* tenable = tenant->add_subcommand("enable", "Enable a disabled tenant");
  tenable->add_option("TENANT", tenant_name, "Tenant name or id")->required();
  tenable->callback([&] { rc = AdminTenantSetDisabled(g, tenant_name, false); });
  auto* tdelete = tenant->add_subcommand("delete", "Delete a tenant with its models and keys (ledger kept)");
  tdelete->add_option("TENANT", tenant_name, "Tenant name or id")->required();
  tdelete->callback([&] { rc = AdminTenantDelete(g, tenant_name); });

  auto* key = admin->add_subcommand("key", "Manage a tenant's API keys")->require_subcommand(1);
  auto* kcreate = key->add_subcommand("create", "Create another key; prints it (shown once)");
  kcreate->add_option("TENANT", tenant_name, "Tenant name or id")->required();
  kcreate->callback([&] { rc = AdminKeyCreate(g, tenant_name); });
  auto* klist = key->add_subcommand("list", "List keys by id and prefix");
  klist->add_option("TENANT", tenant_name, "Tenant name or id")->required();
  klist->callback([&] { rc = AdminKeyList(g, tenant_name); });
  auto* krevoke = key->add_subcommand("revoke", "Revoke a key");
  krevoke->add_option("TENANT", tenant_name, "Tenant name or id")->required();
  krevoke->add_option("KEY_ID", key_id, "Key id (k_...)")->required();
  krevoke->callback([&] { rc = AdminKeyRevoke(g, tenant_name, key_id); });

  BillingFlags billing_flags;
  std::string billing_tenant;
  auto add_report_flags = [&](CLI::App* cmd) {
    cmd->add_option("--from", billing_flags.from, "From (inclusive): YYYY-MM-DD, YYYY-MM-DDTHH:MM:SSZ or Unix ms");
    cmd->add_option("--to", billing_flags.to, "To (exclusive), same forms");
    cmd->add_option("--model", billing_flags.model, "Only this model's requests");
    cmd->add_option("--format", billing_flags.format, "table, csv or json")->capture_default_str();
  };
  auto* abilling = admin->add_subcommand("billing", "Billing reports of any tenant")->require_subcommand(1);
  auto* areport = abilling->add_subcommand("report", "Per-request lines, per-model and per-day aggregates");
  areport->add_option("--tenant", billing_tenant, "Tenant name or id (default: every tenant)");
  add_report_flags(areport);
  areport->callback([&] { rc = AdminBillingReport(g, billing_flags, billing_tenant); });
  auto* asched = admin->add_subcommand("scheduler", "Scheduler state")->require_subcommand(1);
  asched->add_subcommand("stats", "Per-tenant queues and counts, per-model cost prediction error")
      ->callback([&] { rc = AdminSchedulerStats(g); });
  auto* aserver = admin->add_subcommand("server", "Drain, resume, build information")->require_subcommand(1);
  int64_t drain_timeout_ms = 30000;
  auto* adrain = aserver->add_subcommand("drain", "Stop admitting inferences and wait for in-flight ones");
  adrain->add_option("--timeout-ms", drain_timeout_ms, "Wait at most this long")->capture_default_str();
  adrain->callback([&] { rc = AdminServerDrain(g, drain_timeout_ms); });
  aserver->add_subcommand("resume", "Admit inferences again")->callback([&] { rc = AdminServerResume(g); });
  aserver->add_subcommand("info", "Version, build and state")->callback([&] { rc = AdminServerInfo(g); });
  auto* acache = admin->add_subcommand("cache", "Model residency in the cache tiers")->require_subcommand(1);
  std::string cache_tier, cache_tenant, cache_model;
  uint64_t cache_version = 0;
  auto* clist = acache->add_subcommand("list", "Every model version on each tier: state, size, pins, last use");
  clist->add_option("--tier", cache_tier, "Only this tier (host, device)");
  clist->add_option("--tenant", cache_tenant, "Only this tenant's models (name or id)");
  clist->callback([&] { rc = AdminCacheList(g, cache_tier, cache_tenant); });
  for (const auto& [action, help] : std::vector<std::pair<std::string, std::string>>{
           {"evict", "Drop a resident model version (refused while pinned or loading)"},
           {"pin", "Load a model version if needed and keep it resident until unpinned"},
           {"unpin", "Undo one operator pin"},
           {"prefetch", "Load a model version now, without pinning it"}}) {
    auto* cmd = acache->add_subcommand(action, help);
    cmd->add_option("TENANT", cache_tenant, "Tenant name or id")->required();
    cmd->add_option("MODEL", cache_model, "Model name")->required();
    cmd->add_option("--version", cache_version, "Version (default: latest)");
    cmd->add_option("--tier", cache_tier, "Tier (default: host)");
    cmd->callback([&, action] {
      rc = AdminCacheAction(g, action, cache_tier, cache_tenant, cache_model, cache_version);
    });
  }

  auto* billing = app.add_subcommand("billing", "Your bill (API key)")->require_subcommand(1);
  auto* report = billing->add_subcommand("report", "Per-request lines, per-model and per-day aggregates");
  add_report_flags(report);
  report->callback([&] { rc = BillingReport(g, billing_flags); });

  auto* model = app.add_subcommand("model", "Manage your models (API key)")->require_subcommand(1);
  std::string model_name, model_file, upload_id;
  uint64_t model_version = 0;
  auto* upload = model->add_subcommand("upload", "Upload an ONNX model (a new version if NAME exists)");
  upload->add_option("NAME", model_name, "Model name")->required();
  upload->add_option("FILE", model_file, "ONNX file")->required()->check(CLI::ExistingFile);
  upload->add_option("--upload-id", upload_id, "Idempotency id: a retry with the same id stores nothing new");
  upload->callback([&] { rc = ModelUpload(g, model_name, model_file, upload_id); });
  model->add_subcommand("list", "List your models")->callback([&] { rc = ModelList(g); });
  auto* show = model->add_subcommand("show", "Show a model's signature and metadata");
  show->add_option("NAME", model_name, "Model name")->required();
  show->add_option("--version", model_version, "Version (default: latest)");
  show->callback([&] { rc = ModelShow(g, model_name, model_version); });
  auto* del = model->add_subcommand("delete", "Delete a model (every version, or --version N)");
  del->add_option("NAME", model_name, "Model name")->required();
  del->add_option("--version", model_version, "Delete only this version");
  del->callback([&] { rc = ModelDelete(g, model_name, model_version); });

  std::string infer_model, infer_version, output_dir;
  std::vector<std::string> inputs;
  auto* infer = app.add_subcommand("infer", "Run one inference");
  infer->add_option("MODEL", infer_model, "Model name")->required();
  infer->add_option("--input,-i", inputs, "NAME=FILE.pb (ONNX TensorProto), repeatable")->required();
  infer->add_option("--version", infer_version, "Model version (default: latest)");
  infer->add_option("--output-dir,-o", output_dir, "Write outputs as <name>.pb here instead of printing");
  std::string infer_request_id;
  infer->add_option("--request-id", infer_request_id,
                    "Request id (default: the server's); a retry with the same id is billed once");
  infer->callback([&] { rc = Infer(g, infer_model, infer_version, inputs, output_dir, infer_request_id); });

  app.add_subcommand("status", "Server liveness, readiness and version")->callback([&] { rc = Status(g); });

  // Global options may follow the subcommands too.
  for (CLI::App* sub : {admin, tenant, key, model, infer, abilling, asched, aserver, acache, billing}) {
    sub->fallthrough();
  }
  for (CLI::App* sub : acache->get_subcommands({})) sub->fallthrough();
  for (CLI::App* sub : {areport, report}) sub->fallthrough();
  for (CLI::App* sub : asched->get_subcommands({})) sub->fallthrough();
  for (CLI::App* sub : aserver->get_subcommands({})) sub->fallthrough();
  for (CLI::App* sub : tenant->get_subcommands({})) sub->fallthrough();
  for (CLI::App* sub : key->get_subcommands({})) sub->fallthrough();
  for (CLI::App* sub : model->get_subcommands({})) sub->fallthrough();
  for (CLI::App* sub : app.get_subcommands({})) sub->fallthrough();

  CLI11_PARSE(app, argc, argv);
  return rc;
}
