// The orrery CLI's commands, each a function from parsed arguments to an exit
// code. Output goes to stdout (human text, or JSON with --json); progress and
// errors go to stderr.
#pragma once

#include <string>
#include <vector>

namespace orrery::cli {

struct GlobalOptions {
  std::string server;       // HOST:PORT
  std::string api_key;      // tenant key
  std::string admin_token;  // operator token
  bool json = false;
};

int AdminTenantCreate(const GlobalOptions& g, const std::string& name);
int AdminTenantList(const GlobalOptions& g);
int ModelUpload(const GlobalOptions& g, const std::string& name, const std::string& file);
int ModelList(const GlobalOptions& g);
int ModelShow(const GlobalOptions& g, const std::string& name);
int ModelDelete(const GlobalOptions& g, const std::string& name);
// inputs are "NAME=FILE.pb"; outputs go to output_dir as <name>.pb when set,
// else they are printed.
int Infer(const GlobalOptions& g, const std::string& model, const std::string& version,
          const std::vector<std::string>& inputs, const std::string& output_dir);
int Status(const GlobalOptions& g);

}  // namespace orrery::cli
