// A fixed register-only loop whose cycle count never changes: eight
// independent FMA chains (AVX-512 or AVX2, chosen by the caller) or an integer
// ALU chain. Its wall time moves only with the core's speed, so the tools time
// it next to their own runs to tell the host's jitter from Orrery's
// (bench/cpu_jitter, orrery-run --host-probe-us). Header-only so a tool links
// nothing for it; each call costs about n iterations of one dependency step.
#ifndef ORRERY_BASE_FMA_PROBE_H_
#define ORRERY_BASE_FMA_PROBE_H_

#include <cstdint>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace orrery::probe {

#if defined(__x86_64__)
// Callers check __builtin_cpu_supports("avx512f") first.
__attribute__((target("avx512f"))) inline float Fma512(int64_t n) {
  __m512 acc[8];
  for (int i = 0; i < 8; ++i) acc[i] = _mm512_set1_ps(1.0f + static_cast<float>(i) * 1e-7f);
  const __m512 b = _mm512_set1_ps(0.9999999f);
  const __m512 c = _mm512_set1_ps(1e-7f);
  for (int64_t k = 0; k < n; ++k) {
    for (auto& a : acc) a = _mm512_fmadd_ps(a, b, c);
  }
  float s = 0;
  float lanes[16];
  for (const auto& a : acc) {
    _mm512_storeu_ps(lanes, a);
    s += lanes[0];
  }
  return s;
}

// Callers check __builtin_cpu_supports("avx2") and ("fma") first.
__attribute__((target("avx2,fma"))) inline float Fma256(int64_t n) {
  __m256 acc[8];
  for (int i = 0; i < 8; ++i) acc[i] = _mm256_set1_ps(1.0f + static_cast<float>(i) * 1e-7f);
  const __m256 b = _mm256_set1_ps(0.9999999f);
  const __m256 c = _mm256_set1_ps(1e-7f);
  for (int64_t k = 0; k < n; ++k) {
    for (auto& a : acc) a = _mm256_fmadd_ps(a, b, c);
  }
  float s = 0;
  for (const auto& a : acc) s += _mm_cvtss_f32(_mm256_castps256_ps128(a));
  return s;
}
#endif

// Integer ALU only: rules out anything SIMD-specific (frequency licences).
inline float ScalarAlu(int64_t n) {
  uint64_t x = 1, y = 2, z = 3;
  for (int64_t k = 0; k < n; ++k) {
    x = x * 3 + 1;
    y ^= x >> 3;
    z += y * 5;
    asm volatile("" : "+r"(x), "+r"(y), "+r"(z));
  }
  return static_cast<float>((x + y + z) & 0xff);
}

}  // namespace orrery::probe

#endif  // ORRERY_BASE_FMA_PROBE_H_
