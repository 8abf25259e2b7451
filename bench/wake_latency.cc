// wake_latency: what it costs one thread to wake another, same CPU vs
// across CPUs, sleeping (futex, condition variable) vs spinning. The floor
// under orreryd's hand-offs between its gRPC threads (serving CPUs) and a
// lane on another CPU.
//   wake_latency [--a CPU] [--b CPU] [--gap-us N] [--rounds N]
// Thread A (pinned to --a) sleeps --gap-us (so that an idle CPU halts, as
// it does between requests), then wakes B (pinned to --b) and waits for
// B's answer; prints p50/p90/p99 of the round trip and of B's one-way
// wake-up for each mode: futex (both sleep on std::atomic::wait), condvar
// (std::condition_variable), spin-b (B spins, A sleeps), spin (both spin).
// The modes that sleep are also run with both threads on --a.
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/clock.h"

namespace {

enum class Mode { kFutex, kCondvar, kSpinB, kSpin };

int64_t Now() { return orrery::SteadyClock::Get()->NowNs(); }

void Pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  (void)pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

inline void Relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

struct Channel {
  std::atomic<uint32_t> value{0};
  std::mutex mu;
  std::condition_variable cv;

  void Post(uint32_t v, Mode mode, bool spinning_reader) {
    if (mode == Mode::kCondvar) {
      {
        std::lock_guard<std::mutex> lock(mu);
        value.store(v, std::memory_order_release);
      }
      cv.notify_one();
      return;
    }
    value.store(v, std::memory_order_release);
    if (!spinning_reader) value.notify_one();
  }
  void Await(uint32_t v, Mode mode, bool spin) {
    if (mode == Mode::kCondvar) {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return value.load(std::memory_order_acquire) >= v; });
      return;
    }
    uint32_t seen;
    while ((seen = value.load(std::memory_order_acquire)) < v) {
      if (spin) {
        Relax();
      } else {
        value.wait(seen, std::memory_order_acquire);
      }
    }
  }
};

double Quantile(std::vector<int64_t> v, double q) {
  std::sort(v.begin(), v.end());
  return static_cast<double>(v[static_cast<size_t>(q * static_cast<double>(v.size() - 1))]) / 1000.0;
}

void Run(Mode mode, const char* name, int cpu_a, int cpu_b, int gap_us, int rounds) {
  const bool spin_a = mode == Mode::kSpin;
  const bool spin_b = mode == Mode::kSpin || mode == Mode::kSpinB;
  Channel ping;
  Channel pong;
  std::atomic<int64_t> sent_at{0};
  std::vector<int64_t> round_trip;
  std::vector<int64_t> one_way(static_cast<size_t>(rounds));
  std::thread b([&] {
    Pin(cpu_b);
    for (uint32_t i = 1; i <= static_cast<uint32_t>(rounds); ++i) {
      ping.Await(i, mode, spin_b);
      one_way[i - 1] = Now() - sent_at.load(std::memory_order_acquire);
      pong.Post(i, mode, spin_a);
    }
  });
  Pin(cpu_a);
  for (uint32_t i = 1; i <= static_cast<uint32_t>(rounds); ++i) {
    if (gap_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(gap_us));
    const int64_t t0 = Now();
    sent_at.store(t0, std::memory_order_release);
    ping.Post(i, mode, spin_b);
    pong.Await(i, mode, spin_a);
    round_trip.push_back(Now() - t0);
  }
  b.join();
  std::printf("%-8s CPU %d -> %d, gap %4d us: round trip p50 %7.1f p90 %7.1f p99 %7.1f us | one-way wake-up p50 %7.1f "
              "p90 %7.1f p99 %7.1f us\n",
              name, cpu_a, cpu_b, gap_us, Quantile(round_trip, 0.5), Quantile(round_trip, 0.9),
              Quantile(round_trip, 0.99), Quantile(one_way, 0.5), Quantile(one_way, 0.9), Quantile(one_way, 0.99));
}

}  // namespace

int main(int argc, char** argv) {
  int cpu_a = 0;
  int cpu_b = 1;
  int gap_us = 250;
  int rounds = 2000;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const int v = std::atoi(argv[i + 1]);
    if (flag == "--a") {
      cpu_a = v;
    } else if (flag == "--b") {
      cpu_b = v;
    } else if (flag == "--gap-us") {
      gap_us = v;
    } else if (flag == "--rounds") {
      rounds = std::max(v, 1);
    } else {
      std::fprintf(stderr, "usage: wake_latency [--a CPU] [--b CPU] [--gap-us N] [--rounds N]\n");
      return 2;
    }
  }
  Run(Mode::kFutex, "futex", cpu_a, cpu_b, gap_us, rounds);
  Run(Mode::kFutex, "futex", cpu_a, cpu_a, gap_us, rounds);
  Run(Mode::kCondvar, "condvar", cpu_a, cpu_b, gap_us, rounds);
  Run(Mode::kCondvar, "condvar", cpu_a, cpu_a, gap_us, rounds);
  Run(Mode::kSpinB, "spin-b", cpu_a, cpu_b, gap_us, rounds);
  Run(Mode::kSpin, "spin", cpu_a, cpu_b, gap_us, rounds);
  return 0;
}
