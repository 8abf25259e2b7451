// A fresh directory under the system temp dir, removed with its contents when
// the object goes out of scope. Shared by the unit and integration tests.
#pragma once

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <system_error>

#include <gtest/gtest.h>

namespace orrery::testing {

// mkdtemp of <tmp>/<prefix>XXXXXX; empty on failure.
inline std::string MakeTempDir(const std::string& prefix) {
  std::string tmpl = (std::filesystem::temp_directory_path() / (prefix + "XXXXXX")).string();
  char* dir = ::mkdtemp(tmpl.data());
  return dir ? std::string(dir) : std::string();
}

class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "orrery_test_") : path_(MakeTempDir(prefix)) {
    EXPECT_FALSE(path_.empty()) << "mkdtemp: " << std::strerror(errno);
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  // Where the catalog tests open their RocksDB.
  std::string db() const { return path_ + "/catalog"; }

 private:
  std::string path_;
};

}  // namespace orrery::testing
