// Vectorised float32 loops for the elementwise, softmax, normalisation and
// pooling kernels, in three builds of one source (vec_impl.h): AVX-512,
// AVX2/FMA and portable (the compiler's baseline). Kernels() picks the best
// one the CPU supports, once, capped by the environment variable
// ORRERY_VEC_ISA=portable|avx2|avx512 (tests use it to cover every path).
//
// The math functions (exp, log, tanh, erf, sigmoid and what is built on
// them) are polynomial approximations accurate to a few ulp (~1e-6
// relative, see tests/unit/ops/vec_test.cc); they keep inf and NaN
// semantics. Every call is a plain loop: no allocation, no threads.
#pragma once

#include <cstdint>

namespace orrery::ops::cpu::vec {

enum class Isa : int { kPortable = 0, kAvx2 = 1, kAvx512 = 2 };
const char* IsaName(Isa isa);

enum class Unary : int {
  kExp,
  kLog,
  kTanh,
  kErf,
  kSigmoid,
  kGelu,          // 0.5 x (1 + erf(x / sqrt 2))
  kGeluTanh,      // 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))
  kSoftplus,      // log(1 + exp(x))
  kElu,           // x < 0 ? a (exp(x) - 1) : x
  kSelu,          // b * (x > 0 ? x : a (exp(x) - 1))
  kHardSigmoid,   // clamp(a x + b, 0, 1)
  kHardSwish,     // x * clamp(x / 6 + 1 / 2, 0, 1)
  kRelu,          // NaN stays NaN
  kLeakyRelu,     // x < 0 ? a x : x
  kClip,          // min(max(x, a), b), NaN stays NaN
  kSqrt,
  kAbs,
  kNeg,
  kReciprocal,
  kSilu,          // x * sigmoid(x)
};

enum class Binary : int { kAdd, kSub, kMul, kDiv, kMax, kMin };

enum class Reduce : int { kSum, kMax, kMin, kSumSquare };

// One 2-D pooling problem (NCHW planes), window tables from the kernel's
// Prepare: taps_h[2 o], taps_h[2 o + 1] = [begin, end) of the kernel rows
// inside the input for output row o (end >= begin); padded_h[o] the rows
// inside the padded input (count_include_pad). Per output column, as
// floats padded to Pool2dColumns(ow) entries with 1: col_valid (kernel
// columns inside the input) and col_padded (inside the padded input).
struct Pool2d {
  int64_t ih = 0, iw = 0, oh = 0, ow = 0;
  int64_t kh = 0, kw = 0, sh = 1, sw = 1, dh = 1, dw = 1, ph = 0, pw = 0;
  bool max = true;
  bool count_include_pad = false;
  const int64_t* taps_h = nullptr;
  const int64_t* padded_h = nullptr;
  const float* col_valid = nullptr;
  const float* col_padded = nullptr;
  // Optional tables of the flat path (Pool2dFlatTables), else built per
  // call in scratch.
  const int32_t* flat_masks = nullptr;
  const float* flat_count = nullptr;
  // Optional Pool2dFlatLaneMasks table (AVX-512 flat MaxPool), else built
  // per call in scratch.
  const uint64_t* flat_lane_masks = nullptr;
};

// Entries of the column tables: ow rounded up to the widest vector.
int64_t Pool2dColumns(int64_t ow);
// Floats per row of pool2d's padded row (the vertical fold of a window's
// input rows), and of its scratch per call (one such row).
int64_t Pool2dRowWidth(const Pool2d& p);
// Output rows pool2d folds together (its scratch holds as many padded rows).
inline constexpr int64_t kPool2dRowGroup = 8;
int64_t Pool2dScratchFloats(const Pool2d& p);
// Whether pool2d takes the flattened path (3x3, stride 1, pads 1, the
// output plane the input's size, planes at most 32 wide), and the outputs
// it handles per chunk there.
bool Pool2dFlat(const Pool2d& p);
inline constexpr int64_t kPool2dFlatChunk = 512;
// The flat path's tables, periodic in the plane, for positions
// [0, Pool2dFlatPeriod(p)): `masks` holds 4 such runs (neighbour above,
// below, left, right exists: -1, else 0) and `count` the average's divisor.
int64_t Pool2dFlatPeriod(const Pool2d& p);
void Pool2dFlatTables(const Pool2d& p, int32_t* masks, float* count);
// The same neighbours as 16-lane bit masks for a vector whose first lane
// is at position m of the plane, m in [0, ih * iw): bits 0-15 above,
// 16-31 below, 32-47 left, 48-63 right (lanes past the plane: the next
// plane's positions).
void Pool2dFlatLaneMasks(const Pool2d& p, uint64_t* masks);

struct Kernels {
  Isa isa;
  // y[i] = op(x[i]); a and b are the op's parameters (see Unary). x may be y.
  void (*unary)(Unary op, float a, float b, const float* x, float* y, int64_t n);
  // y[i] = op(a[i * sa], b[i * sb]) with sa, sb in {0, 1}. y may alias a or b.
  void (*binary)(Binary op, const float* a, int64_t sa, const float* b, int64_t sb, float* y,
                 int64_t n);
  // Reduces each of `rows` contiguous rows of n values to y[r].
  void (*reduce_rows)(Reduce op, const float* x, int64_t rows, int64_t n, float* y);
  // Accumulates rows: y[j] = op(y[j], x[r * n + j]) over r < rows (reduce
  // over an outer axis; y holds the start value).
  void (*reduce_cols)(Reduce op, const float* x, int64_t rows, int64_t n, float* y);
  // Softmax (or LogSoftmax) of each row: max, then exp(x - max) and its sum
  // in one pass, then one scaling pass.
  void (*softmax_rows)(const float* x, float* y, int64_t rows, int64_t n, bool log);
  // LayerNorm of each row: y = (x - mean) / sqrt(var + eps) * scale + bias
  // (bias may be null); mean_out / inv_std_out (may be null) get one value per row.
  void (*layer_norm_rows)(const float* x, float* y, int64_t rows, int64_t n, const float* scale,
                          const float* bias, float epsilon, float* mean_out, float* inv_std_out);
  // y = x * a + b over n values (BatchNorm, InstanceNorm).
  void (*scale_shift)(const float* x, float* y, int64_t n, float a, float b);
  // Mean and variance (population) of n values, two passes.
  void (*moments)(const float* x, int64_t n, float* mean, float* var);
  // Pools `planes` consecutive planes; `scratch` holds Pool2dScratchFloats.
  // Separable: each output row folds its window's input rows, then kw
  // columns; 3x3 / 2x2 windows of stride 1 and 2 have their own loops, and
  // small 3x3 stride-1 planes go flat (Pool2dFlat); AVX-512 max pools of
  // 3x3 / 2x2 stride 2 fold rows in registers instead (no scratch). It
  // reads only [x, x + planes * ih * iw) and writes only [y, y + planes *
  // oh * ow). Max ignores NaN (never replaces the running value); a window
  // with no input gives lowest().
  void (*pool2d)(const Pool2d& p, const float* x, float* y, int64_t planes, float* scratch);
};

// The best kernels for this CPU (capped by ORRERY_VEC_ISA). Thread-safe.
const Kernels& Best();
// The kernels for `isa`, or nullptr when this CPU does not support it.
const Kernels* ForIsa(Isa isa);

}  // namespace orrery::ops::cpu::vec
