// Runs the real orreryd binary for integration tests: a temp data dir, a free
// loopback port (--listen 127.0.0.1:0 --port-file), stop by SIGTERM or SIGKILL.
#pragma once

#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "tests/common/temp_dir.h"

extern char** environ;

namespace orrery::testing {

inline std::string ReadFileOrEmpty(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

#ifdef TEST_MODELS_DIR
// A file of a generated test model: TEST_MODELS_DIR/<model>/<file>.
inline std::string ModelPath(const std::string& model, const std::string& file) {
  return std::string(TEST_MODELS_DIR) + "/" + model + "/" + file;
}
#endif

class OrrerydProcess {
 public:
  explicit OrrerydProcess(std::vector<std::string> extra_args = {})
      : data_dir_(MakeTempDir("orreryd-test-")), extra_args_(std::move(extra_args)) {}
  ~OrrerydProcess() {
    Kill();
    std::error_code ec;
    std::filesystem::remove_all(data_dir_, ec);
  }

  // Starts orreryd and waits until it serves; false on failure or timeout.
  bool Start() {
    std::string port_file = data_dir_ + "/port";
    std::filesystem::remove(port_file);
    const std::string metrics_file = data_dir_ + "/metrics-port";
    std::filesystem::remove(metrics_file);
    std::vector<std::string> args = {ORRERYD_PATH,   "--data-dir",          data_dir_,    "--listen",
                                     "127.0.0.1:0",  "--port-file",         port_file,    "--log-level",
                                     "warn",         "--metrics-listen",    "127.0.0.1:0", "--metrics-port-file",
                                     metrics_file};
    args.insert(args.end(), extra_args_.begin(), extra_args_.end());
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    if (posix_spawn(&pid_, ORRERYD_PATH, nullptr, nullptr, argv.data(), environ) != 0) return false;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (std::chrono::steady_clock::now() < deadline) {
      std::string addr = ReadFileOrEmpty(port_file);
      if (!addr.empty() && addr.back() == '\n') {
        address_ = addr.substr(0, addr.size() - 1);
        metrics_address_ = ReadFileOrEmpty(metrics_file);
        if (!metrics_address_.empty()) metrics_address_.pop_back();
        channel_ = grpc::CreateChannel(address_, grpc::InsecureChannelCredentials());
        return channel_->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(30));
      }
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }

  // SIGTERM and wait; returns the exit status (0 = clean).
  int Stop() { return Signal(SIGTERM); }
  // kill -9 and wait.
  void Kill() { Signal(SIGKILL); }

  const std::string& address() const { return address_; }
  const std::string& metrics_address() const { return metrics_address_; }  // HOST:PORT
  const std::string& data_dir() const { return data_dir_; }
  pid_t pid() const { return pid_; }  // -1 when not running
  std::shared_ptr<grpc::Channel> channel() const { return channel_; }
  std::string admin_token() const {
    std::string t = ReadFileOrEmpty(data_dir_ + "/admin.token");
    while (!t.empty() && (t.back() == '\n' || t.back() == ' ')) t.pop_back();
    return t;
  }

 private:
  int Signal(int sig) {
    if (pid_ <= 0) return -1;
    channel_.reset();
    kill(pid_, sig);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

  std::string data_dir_;
  std::vector<std::string> extra_args_;
  pid_t pid_ = -1;
  std::string address_;
  std::string metrics_address_;
  std::shared_ptr<grpc::Channel> channel_;
};

}  // namespace orrery::testing
