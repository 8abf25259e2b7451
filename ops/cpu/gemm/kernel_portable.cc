// Portable micro-kernel: plain C++ over the same packed panels, for CPUs
// without AVX2/FMA (and to test the layout independently of intrinsics).
#include <cstdint>

#include "ops/cpu/gemm/kernels.h"

#define ORRERY_GEMM_NS portable
#define ORRERY_GEMM_WIDTH 4
#include "ops/cpu/gemm/epilogue_impl.h"

namespace orrery::ops::cpu::portable {
namespace {

using gemm_internal::TileArgs;

void TileAny(const TileArgs& t) {
  float acc[kPanelRows][kPanelCols] = {};
  const int64_t w = t.w;
  for (int64_t k = 0; k < t.kc; ++k) {
    const float* a = t.a + k * kPanelRows;
    const float* b = t.b + k * t.ldb;
    for (int r = 0; r < t.rows; ++r) {
      const float av = a[r];
      for (int64_t j = 0; j < w; ++j) acc[r][j] += av * b[j];
    }
  }
  for (int r = 0; r < t.rows; ++r) {
    float* c = t.c + r * t.ldc;
    for (int j = 0; j < t.cols; ++j) {
      const float y = t.alpha * acc[r][j];
      c[j] = t.load_c ? c[j] + y : y;
    }
  }
}

}  // namespace
}  // namespace orrery::ops::cpu::portable

namespace orrery::ops::cpu::gemm_internal {

const GemmKernels& PortableKernels() {
  static const GemmKernels k{portable::TileAny, portable::ApplyEpilogueImpl,
                             portable::DepthwisePlanesImpl, portable::Im2ColPanelImpl,
                             /*conv_tile=*/nullptr, /*conv_panel=*/nullptr,
                             /*conv_rows=*/nullptr,
                             portable::PackRightRowsImpl,
                             /*tile_post=*/false, /*conv_tail=*/nullptr};
  return k;
}

}  // namespace orrery::ops::cpu::gemm_internal
