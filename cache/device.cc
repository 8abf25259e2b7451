#include "cache/device.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <initializer_list>
#include <map>
#include <utility>

namespace orrery {
namespace {

constexpr std::string_view kFlag = "--sim-device";

// Appends, rather than "lit" + std::string(...): g++ 12 -O3 misreports
// -Wrestrict on the latter.
std::string Cat(std::initializer_list<std::string_view> parts) {
  std::string out;
  for (std::string_view p : parts) out.append(p);
  return out;
}

Result<double> ParsePositive(std::string_view field, std::string_view text, bool allow_zero) {
  double v = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || ec != std::errc() || ptr != end || !std::isfinite(v) || v < 0 ||
      (!allow_zero && v == 0)) {
    return Status::InvalidArgument(std::string(kFlag) + ": field '" + std::string(field) +
                                   "' must be a number " + (allow_zero ? ">= 0" : "> 0") + ", got '" +
                                   std::string(text) + "'");
  }
  return v;
}

}  // namespace

Result<int64_t> ParseByteSize(std::string_view text) {
  uint64_t n = 0;
  const char* begin = text.data();
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(begin, end, n);
  if (ptr == begin || ec != std::errc()) {
    return Status::InvalidArgument(Cat({"'", text,
                                        "' is not a byte size (an integer with an optional "
                                        "K/KiB/M/MiB/G/GiB/T/TiB or KB/MB/GB/TB suffix)"}));
  }
  static const std::map<std::string_view, uint64_t> kSuffix = {
      {"", 1},
      {"K", 1ULL << 10}, {"KiB", 1ULL << 10}, {"M", 1ULL << 20}, {"MiB", 1ULL << 20},
      {"G", 1ULL << 30}, {"GiB", 1ULL << 30}, {"T", 1ULL << 40}, {"TiB", 1ULL << 40},
      {"KB", 1000ULL}, {"MB", 1000'000ULL}, {"GB", 1000'000'000ULL}, {"TB", 1000'000'000'000ULL}};
  auto s = kSuffix.find(std::string_view(ptr, static_cast<size_t>(end - ptr)));
  if (s == kSuffix.end()) {
    return Status::InvalidArgument(
        Cat({"'", text, "' has an unknown size suffix '", std::string_view(ptr, static_cast<size_t>(end - ptr)), "'"}));
  }
  if (n > static_cast<uint64_t>(INT64_MAX) / s->second) {
    return Status::InvalidArgument(Cat({"byte size '", text, "' is too large"}));
  }
  return static_cast<int64_t>(n * s->second);
}

Result<SimulatedDeviceConfig> ParseSimulatedDeviceSpec(std::string_view spec) {
  static constexpr std::string_view kFields = "memory, link-gbps, latency-us, page, speedup";
  if (spec.empty()) {
    return Status::InvalidArgument(std::string(kFlag) + " is empty; expected memory=BYTES,link-gbps=G,latency-us=L");
  }
  std::map<std::string, std::string, std::less<>> kv;
  size_t pos = 0;
  while (pos <= spec.size()) {
    size_t comma = spec.find(',', pos);
    if (comma == std::string_view::npos) comma = spec.size();
    const std::string_view item = spec.substr(pos, comma - pos);
    const size_t eq = item.find('=');
    if (item.empty() || eq == std::string_view::npos || eq == 0) {
      return Status::InvalidArgument(std::string(kFlag) + ": '" + std::string(item) +
                                     "' is not a field=value pair (fields: " + std::string(kFields) + ")");
    }
    const std::string key(item.substr(0, eq));
    if (key != "memory" && key != "link-gbps" && key != "latency-us" && key != "page" && key != "speedup") {
      return Status::InvalidArgument(std::string(kFlag) + ": unknown field '" + key +
                                     "' (fields: " + std::string(kFields) + ")");
    }
    if (!kv.emplace(key, std::string(item.substr(eq + 1))).second) {
      return Status::InvalidArgument(std::string(kFlag) + ": field '" + key + "' is given twice");
    }
    pos = comma + 1;
  }
  for (std::string_view required : {"memory", "link-gbps", "latency-us"}) {
    if (kv.find(required) == kv.end()) {
      return Status::InvalidArgument(std::string(kFlag) + ": missing field '" + std::string(required) +
                                     "'; expected memory=BYTES,link-gbps=G,latency-us=L");
    }
  }
  SimulatedDeviceConfig c;
  Result<int64_t> memory = ParseByteSize(kv["memory"]);
  if (!memory.ok()) {
    return Status::InvalidArgument(std::string(kFlag) + ": field 'memory': " + memory.status().message());
  }
  c.memory_bytes = *memory;
  ORRERY_ASSIGN_OR_RETURN(c.link_gbps, ParsePositive("link-gbps", kv["link-gbps"], false));
  ORRERY_ASSIGN_OR_RETURN(c.latency_us, ParsePositive("latency-us", kv["latency-us"], true));
  if (auto it = kv.find("page"); it != kv.end()) {
    Result<int64_t> page = ParseByteSize(it->second);
    if (!page.ok()) {
      return Status::InvalidArgument(std::string(kFlag) + ": field 'page': " + page.status().message());
    }
    c.page_bytes = *page;
  }
  if (auto it = kv.find("speedup"); it != kv.end()) {
    ORRERY_ASSIGN_OR_RETURN(c.speedup, ParsePositive("speedup", it->second, false));
  }
  if (c.page_bytes <= 0) {
    return Status::InvalidArgument(std::string(kFlag) + ": field 'page' must be > 0 bytes");
  }
  if (c.memory_bytes < c.page_bytes) {
    return Status::InvalidArgument(std::string(kFlag) + ": field 'memory' (" + std::to_string(c.memory_bytes) +
                                   " bytes) is smaller than one page (" + std::to_string(c.page_bytes) +
                                   " bytes)");
  }
  return c;
}

DeviceStats Device::Stats(int64_t from_ns, int64_t to_ns) const {
  DeviceStats s;
  s.name = std::string(name());
  s.description = Describe();
  s.simulated = simulated();
  s.memory_bytes = memory_bytes();
  s.page_bytes = page_bytes();
  s.link_busy_ns = link()->BusyNs(from_ns, to_ns);
  s.compute_busy_ns = compute()->BusyNs(from_ns, to_ns);
  if (to_ns > from_ns) {
    const double span = static_cast<double>(to_ns - from_ns);
    s.link_utilisation = static_cast<double>(s.link_busy_ns) / span;
    s.compute_utilisation = static_cast<double>(s.compute_busy_ns) / span;
  }
  return s;
}

SimulatedDevice::SimulatedDevice(const SimulatedDeviceConfig& config)
    : config_(config),
      memory_bytes_(config.memory_bytes / config.page_bytes * config.page_bytes),
      link_(std::make_shared<ResourceTimeline>(1)),
      compute_(std::make_shared<ResourceTimeline>(1)) {}

Result<std::unique_ptr<SimulatedDevice>> SimulatedDevice::Create(const SimulatedDeviceConfig& c) {
  if (c.page_bytes <= 0 || c.memory_bytes < c.page_bytes) {
    return Status::InvalidArgument("simulated device: memory (" + std::to_string(c.memory_bytes) +
                                   " bytes) must hold at least one page (" + std::to_string(c.page_bytes) +
                                   " bytes)");
  }
  if (!(c.link_gbps > 0) || !std::isfinite(c.link_gbps)) {
    return Status::InvalidArgument("simulated device: link-gbps must be > 0");
  }
  if (!(c.latency_us >= 0) || !std::isfinite(c.latency_us)) {
    return Status::InvalidArgument("simulated device: latency-us must be >= 0");
  }
  if (!(c.speedup > 0) || !std::isfinite(c.speedup)) {
    return Status::InvalidArgument("simulated device: speedup must be > 0");
  }
  return std::unique_ptr<SimulatedDevice>(new SimulatedDevice(c));
}

Result<std::unique_ptr<SimulatedDevice>> SimulatedDevice::Create(std::string_view spec) {
  ORRERY_ASSIGN_OR_RETURN(SimulatedDeviceConfig c, ParseSimulatedDeviceSpec(spec));
  return Create(c);
}

std::string SimulatedDevice::Describe() const {
  char buf[256];
  std::snprintf(buf, sizeof(buf),
                "simulated device (execution on the CPU): memory=%lld bytes in %lld pages of %lld, "
                "link-gbps=%g, latency-us=%g, speedup=%g",
                static_cast<long long>(memory_bytes_), static_cast<long long>(memory_bytes_ / config_.page_bytes),
                static_cast<long long>(config_.page_bytes), config_.link_gbps, config_.latency_us,
                config_.speedup);
  return buf;
}

int64_t SimulatedDevice::link_latency_ns() const {
  return static_cast<int64_t>(std::llround(std::min(config_.latency_us * 1000, 1e15)));
}

int64_t SimulatedDevice::CopyNs(int64_t bytes) const {
  // Clamped (1e18 ns, 31 years) so that absurd configurations cannot overflow.
  const double ns = std::ceil(static_cast<double>(std::max<int64_t>(bytes, 0)) / link_bytes_per_sec() * 1e9);
  return link_latency_ns() + static_cast<int64_t>(std::min(ns, 1e18));
}

int64_t SimulatedDevice::ExecNs(int64_t cpu_exec_ns) const {
  return static_cast<int64_t>(std::min(std::ceil(static_cast<double>(cpu_exec_ns) / config_.speedup), 1e18));
}

}  // namespace orrery
