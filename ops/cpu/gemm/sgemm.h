// Single-precision GEMM with packed operands, register-blocked micro-kernels
// and a fused epilogue:
//   C[M x N] = act(alpha * op(A) * op(B) [+ C] + row_bias + col_bias + Z)
// The micro-kernel is picked at run time: AVX-512 (8 x 48 tiles), AVX2/FMA
// (4 x 24) or portable C++; ORRERY_GEMM_ISA=portable|avx2|avx512 caps the
// choice (read once), SetGemmIsaCapForTesting too.
//
// Operands are panels that span all of K (see PackedMatrix): the left one in
// panels of kPanelRows rows, the right one in panels of up to kPanelCols
// columns. Constant weights are packed once (PackedMatrix); the other operand
// is packed block by block (kc x nc) into caller-provided scratch, so a call
// allocates nothing. Work is split into M x N tasks on the caller's threads;
// every output element is computed by one task in the same order, so results
// do not depend on the thread count.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "base/function_ref.h"
#include "base/status.h"
#include "ops/parallel.h"

namespace orrery::ops::cpu {

enum class GemmIsa : int { kPortable = 0, kAvx2 = 1, kAvx512 = 2 };
std::string_view GemmIsaName(GemmIsa isa);
// The micro-kernel used now: the best the CPU supports, capped by
// ORRERY_GEMM_ISA and SetGemmIsaCapForTesting.
GemmIsa ActiveGemmIsa();
// Caps the ISA for the whole process (tests). Not for concurrent use with
// running GEMMs.
void SetGemmIsaCapForTesting(GemmIsa cap);

// Whether Conv may use the AVX-512 kernels that read the input in place
// instead of Sgemm over packed panels: the im2col-free tiles
// (gemm/conv_direct.h) and the channels kernel for strided layers
// (gemm/conv_channels.h). Which is faster depends on the core, not the
// ISA: they were tuned on AMD Zen 5 and win there, but on an Intel Xeon
// with AVX-512 they lose (ResNet-18, one thread, p50 28.1 -> 25.0-25.5 ms
// without them; why was not traced: that VM exposes no hardware counters).
// So: on unless the CPU is Intel's; ORRERY_CONV_KERNELS=inplace|gemm overrides
// (read once), SetInPlaceConvKernelsForTesting too (nullopt: back to
// that). Read at Conv's Prepare.
bool InPlaceConvKernels();
void SetInPlaceConvKernelsForTesting(std::optional<bool> on);

// Whether Conv runs 3x3 stride-1 layers with enough channels by Winograd's
// F(2x2, 3x3) (gemm/conv_winograd.h) when AVX-512 or AVX2 is active (its
// transforms AVX-512 or portable, its GEMMs the ISA's): 2.25x fewer
// FLOPs than the direct sum, outputs within a few roundings of it. On
// unless ORRERY_CONV_WINOGRAD=off (read once); SetWinogradConvsForTesting
// too (nullopt: back to that). Read at Conv's Prepare.
bool WinogradConvs();
void SetWinogradConvsForTesting(std::optional<bool> on);

// Activations a GEMM epilogue applies (the `_fused_activation` names).
enum class Activation : int {
  kNone = 0,
  kRelu,
  kClip,         // min(max(x, alpha), beta)
  kLeakyRelu,    // x >= 0 ? x : alpha * x
  kHardSigmoid,  // max(0, min(1, alpha * x + beta))
  kHardSwish,    // x * max(0, min(1, x / 6 + 1 / 2))
  kSigmoid,
  kTanh,
  kGelu,  // erf form: x / 2 * (1 + erf(x / sqrt 2))
};
// INVALID_ARGUMENT for an unknown name.
Result<Activation> ParseActivation(std::string_view name);

struct Epilogue {
  float alpha = 1.0f;       // scales op(A) * op(B)
  bool accumulate = false;  // add the product to C's content instead of overwriting it
  const float* row_bias = nullptr;  // [M], added to every row i
  const float* col_bias = nullptr;  // [N], added to every column j
  const float* residual = nullptr;  // Z[M x N] with leading dimension ld_residual
  int64_t ld_residual = 0;
  Activation act = Activation::kNone;
  float act_alpha = 0.0f;  // Clip min, LeakyRelu / HardSigmoid alpha
  float act_beta = 0.0f;   // Clip max, HardSigmoid beta

  bool has_post() const {
    return row_bias != nullptr || col_bias != nullptr || residual != nullptr ||
           act != Activation::kNone;
  }
};

// Panel sizes of the packed layout; fixed for every ISA so that a packed
// operand (and its serialised bytes) works whichever kernel runs.
inline constexpr int64_t kPanelRows = 8;   // left operand
inline constexpr int64_t kPanelCols = 48;  // right operand (tail panels: 16 or 32)

// A matrix packed once into the GEMM's panel layout (constant weights).
// Layout, version 1, floats:
//   left  (op(A), rows x depth): panel p holds rows [8p, 8p + 8); element
//     (i, k) at p * depth * 8 + k * 8 + i % 8; rows past the end are zero.
//   right (op(B), depth x cols): panel q holds columns [48q, 48q + w) where
//     w = 48 except for the last panel, whose width is the remaining column
//     count rounded up to 16; element (k, j) at q * depth * 48 + k * w +
//     j - 48q; columns past the end are zero.
// The buffer is 64-byte aligned (4096 when at least 1 MiB). Immutable.
class PackedMatrix {
 public:
  enum class Side : uint8_t { kLeft = 0, kRight = 1 };
  static constexpr uint32_t kVersion = 1;

  // op(X)[r][c] = trans ? x[c * ld + r] : x[r * ld + c]. Left: op(X) is the
  // M x K left operand; right: op(X) is the K x N right operand. Costs one
  // pass over the matrix and an allocation of its (padded) size.
  static PackedMatrix PackLeft(const float* x, int64_t ld, bool trans, int64_t m, int64_t k);
  static PackedMatrix PackRight(const float* x, int64_t ld, bool trans, int64_t k, int64_t n);

  Side side() const { return side_; }
  int64_t rows() const { return rows_; }  // M (left) or K (right)
  int64_t cols() const { return cols_; }  // K (left) or N (right)
  int64_t depth() const { return side_ == Side::kLeft ? cols_ : rows_; }
  const float* data() const { return data_.get(); }
  int64_t num_floats() const { return num_floats_; }

  // Little-endian bytes: a 64-byte header (magic "ORPK", version, side,
  // rows, cols, panel sizes) followed by the floats.
  std::vector<std::byte> Serialize() const;
  // INVALID_ARGUMENT for bytes that are not a packed matrix of this version.
  static Result<PackedMatrix> Deserialize(std::span<const std::byte> bytes);
  // The same, but when `owner` is non-null and the floats in `bytes` are
  // 4-byte aligned, the matrix borrows them instead of copying: it shares
  // ownership of `owner`, which must keep `bytes` alive and unchanged (e.g. a
  // segment read buffer). Cost: no copy, no allocation beyond a control block.
  static Result<PackedMatrix> Deserialize(std::span<const std::byte> bytes,
                                          std::shared_ptr<const void> owner);

 private:
  struct Free {
    void operator()(float* p) const;
  };
  static PackedMatrix Allocate(Side side, int64_t rows, int64_t cols);

  Side side_ = Side::kLeft;
  int64_t rows_ = 0, cols_ = 0, num_floats_ = 0;
  // Owned (Allocate) or borrowed (Deserialize with an owner); immutable
  // once built either way.
  std::shared_ptr<float> data_;
};


// Fills one right panel on demand (e.g. im2col for a tile of output
// positions): dst[k * w + j] = op(B)[k0 + k][j0 + j] for k < kc, j < cols
// (cols <= w; the GEMM zeroes columns [cols, w)). Called concurrently from
// several threads with distinct dst.
using PanelSource = FunctionRef<void(int64_t k0, int64_t kc, int64_t j0, int64_t cols, int64_t w,
                                     float* dst)>;

// A left operand: packed, a raw row-major matrix packed on the fly, or
// panels made on demand (called as panels(k0, kc, i0, rows, kPanelRows, dst):
// dst[k * kPanelRows + i] = op(A)[i0 + i][k0 + k]).
struct LeftOperand {
  const float* data = nullptr;
  int64_t ld = 0;
  bool trans = false;
  const PackedMatrix* packed = nullptr;  // wins when set
  const PanelSource* panels = nullptr;   // wins over data when set
  // Rows per left panel when packed on the fly (data or panels; 1..8,
  // kPanelRows for packed): 7 runs a 49-row operand (a 7x7 plane's
  // positions) as 7 tiles of 7 rows, where 8-row panels computed 56.
  int panel_rows = kPanelRows;
};

// A right operand: packed, a raw row-major matrix, or panels made on demand.
struct RightOperand {
  const float* data = nullptr;
  int64_t ld = 0;
  bool trans = false;
  const PackedMatrix* packed = nullptr;  // wins when set
  const PanelSource* panels = nullptr;   // wins over data when set
};

struct GemmShape {
  int64_t m = 0, n = 0, k = 0;
};

// Scratch one thread needs for a GEMM of this shape, or of any shape with
// the same K and no more rows or columns (bytes, <= ~1.3 MiB).
int64_t SgemmScratchBytes(GemmShape s, bool a_packed, bool b_packed);
// Sgemm calls so far whose scratch slices were smaller than
// SgemmScratchBytes (each ran on heap scratch instead): a sizing bug when
// not 0.
int64_t SgemmScratchShortfalls();

// C = epilogue(op(A) * op(B)). `scratch` holds NumThreads(threads) slices
// of equal size, each at least SgemmScratchBytes and 64-byte aligned (the
// layout of KernelContext::scratch). Packed operands must match the shape.
// Allocates nothing; blocks until every task has run on `threads`.
void Sgemm(GemmShape s, const LeftOperand& a, const RightOperand& b, float* c, int64_t ldc,
           const Epilogue& ep, std::span<std::byte> scratch, ThreadGroup* threads);

// C += alpha * op(A) * op(B) on raw matrices, single-threaded, with heap
// scratch: for cold paths (ConvTranspose, the reference executor).
void SgemmAccumulate(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                     const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
                     int64_t ldc);

// Applies the post-GEMM part of `ep` (biases, residual, activation; not
// alpha) to C's rows [i0, i0 + rows) and columns [j0, j0 + cols) in place,
// with the active ISA. For kernels that compute outside the GEMM (depthwise
// convolution).
void ApplyEpilogue(const Epilogue& ep, float* c, int64_t ldc, int64_t i0, int64_t j0,
                   int64_t rows, int64_t cols);

}  // namespace orrery::ops::cpu
