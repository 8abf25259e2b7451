#include "base/cpu_set.h"

#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>

namespace orrery {
namespace {

constexpr int kMaxCpu = 4095;

Result<int> ParseCpu(std::string_view part, std::string_view whole) {
  int value = -1;
  auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), value);
  if (part.empty() || ec != std::errc() || end != part.data() + part.size() || value < 0 || value > kMaxCpu) {
    return Status::InvalidArgument(std::string("CPU list '").append(whole).append("': '").append(part).append(
        "' is not a CPU number (0-4095)"));
  }
  return value;
}

}  // namespace

Result<std::vector<int>> ParseCpuList(std::string_view text) {
  if (text.empty()) return Status::InvalidArgument("CPU list is empty");
  std::vector<int> cpus;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    if (comma == std::string_view::npos) comma = text.size();
    const std::string_view item = text.substr(pos, comma - pos);
    const size_t dash = item.find('-');
    if (dash == std::string_view::npos) {
      ORRERY_ASSIGN_OR_RETURN(int cpu, ParseCpu(item, text));
      cpus.push_back(cpu);
    } else {
      ORRERY_ASSIGN_OR_RETURN(int first, ParseCpu(item.substr(0, dash), text));
      ORRERY_ASSIGN_OR_RETURN(int last, ParseCpu(item.substr(dash + 1), text));
      if (last < first) {
        return Status::InvalidArgument(std::string("CPU list '").append(text).append("': range '").append(item).append(
            "' ends before it starts"));
      }
      for (int cpu = first; cpu <= last; ++cpu) cpus.push_back(cpu);
    }
    pos = comma + 1;
  }
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  return cpus;
}

std::vector<int> AllowedCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
  }
  return cpus;
}

Status CheckCpusAllowed(const std::vector<int>& cpus, std::string_view what) {
  const std::vector<int> allowed = AllowedCpus();
  for (int cpu : cpus) {
    if (!std::binary_search(allowed.begin(), allowed.end(), cpu)) {
      return Status::InvalidArgument(std::string(what).append(": CPU ").append(std::to_string(cpu)).append(
          " is not available to this process (allowed: ").append(FormatCpuList(allowed)).append(")"));
    }
  }
  return Status::Ok();
}

namespace {

// 0 or the errno of sched_setaffinity.
int PinThread(pid_t tid, const std::vector<int>& cpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int cpu : cpus) {
    if (cpu >= 0 && cpu < CPU_SETSIZE) CPU_SET(cpu, &set);
  }
  return sched_setaffinity(tid, sizeof(set), &set) == 0 ? 0 : errno;
}

Status PinError(const std::vector<int>& cpus, int err) {
  return Status::InvalidArgument(std::string("cannot pin to CPUs ").append(FormatCpuList(cpus)).append(": ").append(
      std::strerror(err)));
}

}  // namespace

Status PinThisThread(const std::vector<int>& cpus) {
  const int err = PinThread(0, cpus);
  return err == 0 ? Status::Ok() : PinError(cpus, err);
}

Status PinThisProcess(const std::vector<int>& cpus) {
  ORRERY_RETURN_IF_ERROR(PinThisThread(cpus));
  std::error_code ec;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task", ec)) {
    const std::string name = task.path().filename().string();
    pid_t tid = 0;
    auto [end, parse_ec] = std::from_chars(name.data(), name.data() + name.size(), tid);
    if (parse_ec != std::errc() || end != name.data() + name.size()) continue;
    // A thread that exited since the listing is not an error.
    const int err = PinThread(tid, cpus);
    if (err != 0 && err != ESRCH) return PinError(cpus, err);
  }
  if (ec) return Status::Internal("cannot list /proc/self/task: " + ec.message());
  return Status::Ok();
}

std::string FormatCpuList(const std::vector<int>& cpus) {
  std::string out;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(cpus[i]);
    if (j > i) out.append("-").append(std::to_string(cpus[j]));
    i = j + 1;
  }
  return out;
}

bool CpuListsDisjoint(const std::vector<int>& a, const std::vector<int>& b) {
  if (a.empty() || b.empty()) return false;
  for (int cpu : a) {
    if (std::find(b.begin(), b.end(), cpu) != b.end()) return false;
  }
  return true;
}

}  // namespace orrery
