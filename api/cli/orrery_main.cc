// orrery: command-line client for an Orrery server.
#include <cstdlib>
#include <filesystem>
#include <fstream>

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
  std::string tenant_name;
  auto* tcreate = tenant->add_subcommand("create", "Create a tenant; prints its API key (shown once)");
  tcreate->add_option("NAME", tenant_name, "Tenant name")->required();
  tcreate->callback([&] { rc = AdminTenantCreate(g, tenant_name); });
  tenant->add_subcommand("list", "List tenants")->callback([&] { rc = AdminTenantList(g); });

  auto* model = app.add_subcommand("model", "Manage your models (API key)")->require_subcommand(1);
  std::string model_name, model_file;
  auto* upload = model->add_subcommand("upload", "Upload an ONNX model (a new version if NAME exists)");
  upload->add_option("NAME", model_name, "Model name")->required();
  upload->add_option("FILE", model_file, "ONNX file")->required()->check(CLI::ExistingFile);
  upload->callback([&] { rc = ModelUpload(g, model_name, model_file); });
  model->add_subcommand("list", "List your models")->callback([&] { rc = ModelList(g); });
  auto* show = model->add_subcommand("show", "Show a model's signature and metadata");
  show->add_option("NAME", model_name, "Model name")->required();
  show->callback([&] { rc = ModelShow(g, model_name); });
  auto* del = model->add_subcommand("delete", "Delete a model (all versions)");
  del->add_option("NAME", model_name, "Model name")->required();
  del->callback([&] { rc = ModelDelete(g, model_name); });

  std::string infer_model, infer_version, output_dir;
  std::vector<std::string> inputs;
  auto* infer = app.add_subcommand("infer", "Run one inference");
  infer->add_option("MODEL", infer_model, "Model name")->required();
  infer->add_option("--input,-i", inputs, "NAME=FILE.pb (ONNX TensorProto), repeatable")->required();
  infer->add_option("--version", infer_version, "Model version (default: latest)");
  infer->add_option("--output-dir,-o", output_dir, "Write outputs as <name>.pb here instead of printing");
  infer->callback([&] { rc = Infer(g, infer_model, infer_version, inputs, output_dir); });

  app.add_subcommand("status", "Server liveness, readiness and version")->callback([&] { rc = Status(g); });

  // Global options may follow the subcommands too.
  for (CLI::App* sub : {admin, tenant, tcreate, model, upload, show, del, infer}) sub->fallthrough();
  for (CLI::App* sub : tenant->get_subcommands({})) sub->fallthrough();
  for (CLI::App* sub : model->get_subcommands({})) sub->fallthrough();
  for (CLI::App* sub : app.get_subcommands({})) sub->fallthrough();

  CLI11_PARSE(app, argc, argv);
  return rc;
}
