// How far apart the host put two of our vCPUs: one cache line bounced
// between a thread on CPU A and one on CPU B, the median round trip in ns.
// On the 2-vCPU Zen 5 VM the host switches between ~100-120 ns ("near":
// the vCPUs share an L3) and ~390-440 ns ("far": probably different core
// complexes), and a two-thread plan runs 10-15% slower when far, since half
// of each step's input is in the other complex's cache (docs/benchmarks.md,
// h-t2). The latency table prints it next to each T=2 row.
//   cpu_pingpong [--a CPU] [--b CPU] [--rounds N]
// Prints one JSON line: {"a":0,"b":1,"rounds":N,"p50_ns":...,"p10_ns":...,"p90_ns":...}.
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace {

bool Pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0;
}

// Its own cache line, so only the bounce is measured.
struct alignas(64) Line {
  std::atomic<long> value{0};
};

}  // namespace

int main(int argc, char** argv) {
  int a = 0, b = 1;
  long rounds = 20000;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--a") == 0) a = std::atoi(argv[i + 1]);
    else if (std::strcmp(argv[i], "--b") == 0) b = std::atoi(argv[i + 1]);
    else if (std::strcmp(argv[i], "--rounds") == 0) rounds = std::atol(argv[i + 1]);
    else {
      std::fprintf(stderr, "usage: cpu_pingpong [--a CPU] [--b CPU] [--rounds N]\n");
      return 2;
    }
  }
  if (rounds < 1) rounds = 1;
  Line line;
  bool pinned_b = true;
  std::thread partner([&] {
    pinned_b = Pin(b);
    for (long i = 0; i < rounds; ++i) {
      while (line.value.load(std::memory_order_acquire) != 2 * i + 1) {
      }
      line.value.store(2 * i + 2, std::memory_order_release);
    }
  });
  const bool pinned_a = Pin(a);
  std::vector<double> ns;
  ns.reserve(static_cast<size_t>(rounds));
  for (long i = 0; i < rounds; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    line.value.store(2 * i + 1, std::memory_order_release);
    while (line.value.load(std::memory_order_acquire) != 2 * i + 2) {
    }
    ns.push_back(std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count());
  }
  partner.join();
  if (!pinned_a || !pinned_b) {
    std::fprintf(stderr, "cpu_pingpong: could not pin to CPUs %d and %d\n", a, b);
    return 1;
  }
  std::sort(ns.begin(), ns.end());
  auto at = [&](double q) { return ns[std::min(ns.size() - 1, static_cast<size_t>(q * static_cast<double>(ns.size())))]; };
  std::printf("{\"a\":%d,\"b\":%d,\"rounds\":%ld,\"p50_ns\":%.0f,\"p10_ns\":%.0f,\"p90_ns\":%.0f}\n", a, b, rounds,
              at(0.5), at(0.1), at(0.9));
  return 0;
}
