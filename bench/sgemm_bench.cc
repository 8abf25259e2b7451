// GFLOP/s of the packed SGEMM (ops/cpu/gemm) on one thread, best of N runs:
//   sgemm_bench [M N K]...   (default: 512 512 512 and 256 3136 576)
// Operands are raw row-major matrices, packed on the fly like a MatMul of
// two activations; "packed A" prepacks the left operand like Conv weights;
// "packed B" prepacks the right operand like the weights of a transposed
// Conv (few output positions) and rotates over copies of it that together
// exceed L2, as a model's weights arrive from L3 / memory.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>
#include <vector>

#include "ops/cpu/gemm/sgemm.h"

namespace {

using orrery::ops::cpu::GemmShape;

double Best(int runs, auto&& fn) {
  double best = 1e30;
  for (int i = 0; i < runs; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    const std::chrono::duration<double> dt = std::chrono::steady_clock::now() - t0;
    best = std::min(best, dt.count());
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  namespace cpu = orrery::ops::cpu;
  std::vector<GemmShape> shapes;
  for (int i = 1; i + 2 < argc; i += 3) {
    shapes.push_back({std::atoll(argv[i]), std::atoll(argv[i + 1]), std::atoll(argv[i + 2])});
  }
  if (shapes.empty()) shapes = {{512, 512, 512}, {256, 3136, 576}};
  std::printf("isa %s\n", std::string(cpu::GemmIsaName(cpu::ActiveGemmIsa())).c_str());
  for (const GemmShape& s : shapes) {
    std::vector<float> a(static_cast<size_t>(s.m * s.k), 0.5f);
    std::vector<float> b(static_cast<size_t>(s.k * s.n), 0.25f);
    std::vector<float> c(static_cast<size_t>(s.m * s.n));
    const cpu::PackedMatrix pa = cpu::PackedMatrix::PackLeft(a.data(), s.k, false, s.m, s.k);
    std::vector<std::byte> scratch(
        static_cast<size_t>(cpu::SgemmScratchBytes(s, false, false)) + 64);
    auto* base = reinterpret_cast<std::byte*>(
        (reinterpret_cast<uintptr_t>(scratch.data()) + 63) & ~uintptr_t{63});
    const std::span<std::byte> sp(base, scratch.size() - 64);
    const double flops = 2.0 * static_cast<double>(s.m) * static_cast<double>(s.n) *
                         static_cast<double>(s.k);
    const double raw = Best(10, [&] {
      cpu::Sgemm(s, {.data = a.data(), .ld = s.k}, {.data = b.data(), .ld = s.n}, c.data(), s.n,
                 {}, sp, nullptr);
    });
    const double packed = Best(10, [&] {
      cpu::Sgemm(s, {.packed = &pa}, {.data = b.data(), .ld = s.n}, c.data(), s.n, {}, sp,
                 nullptr);
    });
    constexpr int kCopies = 6;
    std::vector<cpu::PackedMatrix> pbs;
    for (int i = 0; i < kCopies; ++i) {
      pbs.push_back(cpu::PackedMatrix::PackRight(b.data(), s.n, false, s.k, s.n));
    }
    int next = 0;
    const double packed_b = Best(3 * kCopies, [&] {
      cpu::Sgemm(s, {.data = a.data(), .ld = s.k}, {.packed = &pbs[next]}, c.data(), s.n, {}, sp,
                 nullptr);
      next = (next + 1) % kCopies;
    });
    std::printf("%lldx%lldx%lld: raw %.1f GFLOP/s, packed A %.1f GFLOP/s, packed B %.1f GFLOP/s\n",
                static_cast<long long>(s.m), static_cast<long long>(s.n),
                static_cast<long long>(s.k), flops / raw / 1e9, flops / packed / 1e9,
                flops / packed_b / 1e9);
  }
  return 0;
}
