#include "ops/cpu/vec/vec.h"

#include <cstdlib>
#include <cstring>
#include <initializer_list>

namespace orrery::ops::cpu::vec {
namespace avx512 {
extern const Kernels kKernels;
}  // namespace avx512
namespace avx2 {
extern const Kernels kKernels;
}  // namespace avx2
namespace portable {
extern const Kernels kKernels;
}  // namespace portable

namespace {

bool Supported(Isa isa) {
  switch (isa) {
    case Isa::kPortable: return true;
    case Isa::kAvx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case Isa::kAvx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
             __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
             Supported(Isa::kAvx2);
  }
  return false;
}

// ORRERY_VEC_ISA caps the choice; unset or unknown: no cap.
Isa Cap() {
  const char* env = std::getenv("ORRERY_VEC_ISA");
  if (env == nullptr) return Isa::kAvx512;
  if (std::strcmp(env, "portable") == 0) return Isa::kPortable;
  if (std::strcmp(env, "avx2") == 0) return Isa::kAvx2;
  return Isa::kAvx512;
}

const Kernels& Choose() {
  __builtin_cpu_init();
  const Isa cap = Cap();
  for (Isa isa : {Isa::kAvx512, Isa::kAvx2}) {
    if (static_cast<int>(isa) <= static_cast<int>(cap) && Supported(isa)) return *ForIsa(isa);
  }
  return portable::kKernels;
}

}  // namespace

const char* IsaName(Isa isa) {
  switch (isa) {
    case Isa::kPortable: return "portable";
    case Isa::kAvx2: return "avx2";
    case Isa::kAvx512: return "avx512";
  }
  return "?";
}

const Kernels* ForIsa(Isa isa) {
  __builtin_cpu_init();
  if (!Supported(isa)) return nullptr;
  switch (isa) {
    case Isa::kPortable: return &portable::kKernels;
    case Isa::kAvx2: return &avx2::kKernels;
    case Isa::kAvx512: return &avx512::kKernels;
  }
  return nullptr;
}

int64_t Pool2dColumns(int64_t ow) { return (ow + 15) / 16 * 16; }

// The padded row: every column a vector of the widest ISA may read for
// Pool2dColumns(ow) outputs (the stride-2 taps read one vector further),
// and the input row rounded up to whole vectors.
int64_t Pool2dRowWidth(const Pool2d& p) {
  const int64_t reach = Pool2dColumns(p.ow) * p.sw + (p.kw - 1) * p.dw + 16;
  const int64_t row = p.pw + Pool2dColumns(p.iw);
  return reach > row ? reach : row;
}

bool Pool2dFlat(const Pool2d& p) {
  return p.kh == 3 && p.kw == 3 && p.sh == 1 && p.sw == 1 && p.dh == 1 && p.dw == 1 &&
         p.ph == 1 && p.pw == 1 && p.oh == p.ih && p.ow == p.iw && p.iw <= 32 &&
         p.ih * p.iw <= 4096;
}

int64_t Pool2dFlatPeriod(const Pool2d& p) { return p.ih * p.iw + 16; }

void Pool2dFlatTables(const Pool2d& p, int32_t* masks, float* count) {
  const int64_t ext = Pool2dFlatPeriod(p);
  int32_t* up = masks;
  int32_t* down = up + ext;
  int32_t* left = down + ext;
  int32_t* right = left + ext;
  int64_t r = 0, c = 0;
  for (int64_t k = 0; k < ext; ++k) {
    up[k] = r > 0 ? -1 : 0;
    down[k] = r + 1 < p.ih ? -1 : 0;
    left[k] = c > 0 ? -1 : 0;
    right[k] = c + 1 < p.iw ? -1 : 0;
    count[k] = p.count_include_pad
                   ? static_cast<float>(p.padded_h[r]) * p.col_padded[c]
                   : static_cast<float>(p.taps_h[2 * r + 1] - p.taps_h[2 * r]) * p.col_valid[c];
    if (++c == p.iw) {
      c = 0;
      if (++r == p.ih) r = 0;
    }
  }
}

void Pool2dFlatLaneMasks(const Pool2d& p, uint64_t* masks) {
  const int64_t hw = p.ih * p.iw;
  for (int64_t m = 0; m < hw; ++m) {
    uint64_t w = 0;
    for (int64_t l = 0; l < 16; ++l) {
      const int64_t q = (m + l) % hw, r = q / p.iw, c = q % p.iw;
      const uint64_t bit = uint64_t{1} << l;
      if (r > 0) w |= bit;
      if (r + 1 < p.ih) w |= bit << 16;
      if (c > 0) w |= bit << 32;
      if (c + 1 < p.iw) w |= bit << 48;
    }
    masks[m] = w;
  }
}

// Flat: four mask tables and the divisors (one plane plus a vector each),
// then the chunk's vertical fold with a vector and a lane either side.
int64_t Pool2dScratchFloats(const Pool2d& p) {
  const int64_t row = Pool2dRowWidth(p) * kPool2dRowGroup;
  if (!Pool2dFlat(p)) return row;
  const int64_t flat = 5 * Pool2dFlatPeriod(p) + kPool2dFlatChunk + 3 * 16 + 2;
  return flat > row ? flat : row;
}

const Kernels& Best() {
  static const Kernels& k = Choose();
  return k;
}

}  // namespace orrery::ops::cpu::vec
