// An accelerator as the caches and placement see it: bounded memory in
// fixed-size pages, a host -> device link whose copies are scheduled actions
// (latency + bytes / bandwidth on a timeline, so concurrent copies queue), and
// a compute queue with a predicted execution time.
//
// SimulatedDevice is the only implementation so far: a bounded memory and a
// link of configurable bandwidth and latency, with execution running on the
// CPU (the caller runs the plan on CPU threads; ExecNs predicts it as the CPU
// time / speedup, 1 by default). It exists so the device path (transfers,
// device cache, eviction, link scheduling, placement) is testable without a
// GPU, and it says "simulated" in name(), Describe() and Stats() so nobody
// mistakes its numbers for a GPU's. Selected with
//   --sim-device memory=BYTES,link-gbps=G,latency-us=L[,page=BYTES][,speedup=S]
// BYTES: an integer with an optional suffix K/KiB, M/MiB, G/GiB, T/TiB
// (powers of 1024) or KB/MB/GB/TB (powers of 1000). G: gigabits per second
// (PCIe 3.0 x16 is ~126). L: microseconds per copy. page: default 2 MiB.
//
// Thread-safe: the configuration is immutable and the timelines lock.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "base/status.h"
#include "cache/timeline.h"

namespace orrery {

struct DeviceStats {
  std::string name;         // "simulated" for SimulatedDevice
  std::string description;  // name and configuration
  bool simulated = false;
  int64_t memory_bytes = 0;  // usable: whole pages
  int64_t page_bytes = 0;
  int64_t link_busy_ns = 0;     // in the window asked for
  int64_t compute_busy_ns = 0;  // in the window asked for
  double link_utilisation = 0;
  double compute_utilisation = 0;
};

class Device {
 public:
  virtual ~Device() = default;
  virtual std::string_view name() const = 0;
  virtual std::string Describe() const = 0;
  virtual bool simulated() const = 0;
  // Usable memory, a whole number of pages.
  virtual int64_t memory_bytes() const = 0;
  virtual int64_t page_bytes() const = 0;
  virtual int64_t link_latency_ns() const = 0;
  virtual double link_bytes_per_sec() const = 0;
  // Predicted duration of one host -> device copy (latency + bytes / bandwidth).
  virtual int64_t CopyNs(int64_t bytes) const = 0;
  // Predicted device execution time of work predicted at `cpu_exec_ns` on one CPU lane.
  virtual int64_t ExecNs(int64_t cpu_exec_ns) const = 0;
  // The link (one slot: copies queue) and the compute queue (one slot).
  virtual std::shared_ptr<ResourceTimeline> link() const = 0;
  virtual std::shared_ptr<ResourceTimeline> compute() const = 0;
  // Busy time and utilisation of link and compute in [from_ns, to_ns).
  DeviceStats Stats(int64_t from_ns, int64_t to_ns) const;
};

struct SimulatedDeviceConfig {
  int64_t memory_bytes = 0;
  double link_gbps = 0;  // gigabits per second
  double latency_us = 0;
  int64_t page_bytes = int64_t{2} << 20;
  double speedup = 1.0;  // device execution time = CPU time / speedup
};

// Parses the --sim-device value. INVALID_ARGUMENT naming the field for an
// unknown, duplicate, missing or malformed field, or a memory smaller than
// one page.
Result<SimulatedDeviceConfig> ParseSimulatedDeviceSpec(std::string_view spec);

// Parses BYTES as above ("8GiB", "512M", "1000000"). INVALID_ARGUMENT.
Result<int64_t> ParseByteSize(std::string_view text);

class SimulatedDevice final : public Device {
 public:
  static Result<std::unique_ptr<SimulatedDevice>> Create(const SimulatedDeviceConfig& config);
  static Result<std::unique_ptr<SimulatedDevice>> Create(std::string_view spec);

  std::string_view name() const override { return "simulated"; }
  std::string Describe() const override;
  bool simulated() const override { return true; }
  int64_t memory_bytes() const override { return memory_bytes_; }
  int64_t page_bytes() const override { return config_.page_bytes; }
  int64_t link_latency_ns() const override;
  double link_bytes_per_sec() const override { return config_.link_gbps * 1e9 / 8; }
  int64_t CopyNs(int64_t bytes) const override;
  int64_t ExecNs(int64_t cpu_exec_ns) const override;
  std::shared_ptr<ResourceTimeline> link() const override { return link_; }
  std::shared_ptr<ResourceTimeline> compute() const override { return compute_; }

  const SimulatedDeviceConfig& config() const { return config_; }

 private:
  explicit SimulatedDevice(const SimulatedDeviceConfig& config);

  SimulatedDeviceConfig config_;
  int64_t memory_bytes_;
  std::shared_ptr<ResourceTimeline> link_;
  std::shared_ptr<ResourceTimeline> compute_;
};

}  // namespace orrery
