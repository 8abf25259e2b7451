// Packing into the panel layout (see PackedMatrix in sgemm.h) and the
// PackedMatrix container with its serialised form.
#include <algorithm>
#include <bit>
#include <cstdlib>
#include <cstring>
#include <string>

#include "ops/cpu/gemm/kernels.h"
#include "ops/cpu/gemm/sgemm.h"

namespace orrery::ops::cpu {
namespace gemm_internal {

void PackLeftPanel(const float* a, int64_t lda, bool trans, int64_t i0, int64_t rows, int64_t k0,
                   int64_t kc, float* dst) {
  if (rows < kPanelRows) std::memset(dst, 0, static_cast<size_t>(kc * kPanelRows) * sizeof(float));
  if (trans) {
    // op(A)[i][k] = a[k * lda + i]: each k reads `rows` contiguous floats
    // (a fixed-size copy for full panels: inlined, where a memcpy call per
    // 32 bytes cost ~20% of a transposed 1x1 convolution on a 7x7 plane).
    if (rows == kPanelRows) {
      for (int64_t k = 0; k < kc; ++k) {
        std::memcpy(dst + k * kPanelRows, a + (k0 + k) * lda + i0, kPanelRows * sizeof(float));
      }
      return;
    }
    if (rows == kPanelRows - 1) {  // 7-row panels (LeftOperand::panel_rows)
      for (int64_t k = 0; k < kc; ++k) {
        std::memcpy(dst + k * kPanelRows, a + (k0 + k) * lda + i0,
                    (kPanelRows - 1) * sizeof(float));
      }
      return;
    }
    for (int64_t k = 0; k < kc; ++k) {
      std::memcpy(dst + k * kPanelRows, a + (k0 + k) * lda + i0,
                  static_cast<size_t>(rows) * sizeof(float));
    }
    return;
  }
  for (int64_t i = 0; i < rows; ++i) {
    const float* src = a + (i0 + i) * lda + k0;
    for (int64_t k = 0; k < kc; ++k) dst[k * kPanelRows + i] = src[k];
  }
}

void PackRightPanel(const float* b, int64_t ldb, bool trans, int64_t k0, int64_t kc, int64_t j0,
                    int64_t cols, int64_t w, float* dst) {
  if (!trans) {
    for (int64_t k = 0; k < kc; ++k) {
      float* d = dst + k * w;
      std::memcpy(d, b + (k0 + k) * ldb + j0, static_cast<size_t>(cols) * sizeof(float));
      for (int64_t j = cols; j < w; ++j) d[j] = 0.0f;
    }
    return;
  }
  // op(B)[k][j] = b[j * ldb + k].
  if (cols < w) std::memset(dst, 0, static_cast<size_t>(kc * w) * sizeof(float));
  for (int64_t j = 0; j < cols; ++j) {
    const float* src = b + (j0 + j) * ldb + k0;
    for (int64_t k = 0; k < kc; ++k) dst[k * w + j] = src[k];
  }
}

}  // namespace gemm_internal

namespace {

constexpr char kMagic[4] = {'O', 'R', 'P', 'K'};
constexpr size_t kHeaderBytes = 64;
constexpr size_t kPageBytes = 4096;

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Floats the layout needs (panels are padded to their full size).
int64_t LayoutFloats(PackedMatrix::Side side, int64_t rows, int64_t cols) {
  if (side == PackedMatrix::Side::kLeft) return CeilDiv(rows, kPanelRows) * kPanelRows * cols;
  return CeilDiv(cols, kPanelCols) * kPanelCols * rows;
}

void PutU64(std::byte* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<std::byte>((v >> (8 * i)) & 0xff);
}
uint64_t GetU64(const std::byte* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

}  // namespace

void PackedMatrix::Free::operator()(float* p) const { std::free(p); }

PackedMatrix PackedMatrix::Allocate(Side side, int64_t rows, int64_t cols) {
  PackedMatrix pm;
  pm.side_ = side;
  pm.rows_ = rows;
  pm.cols_ = cols;
  pm.num_floats_ = LayoutFloats(side, rows, cols);
  const size_t bytes = static_cast<size_t>(pm.num_floats_) * sizeof(float);
  const size_t align = bytes >= (size_t{1} << 20) ? kPageBytes : 64;
  const size_t rounded = (bytes + align - 1) / align * align;
  if (rounded > 0) {
    pm.data_ = std::shared_ptr<float>(static_cast<float*>(std::aligned_alloc(align, rounded)), Free{});
    if (pm.data_ == nullptr) std::abort();  // like operator new: out of memory is fatal
    std::memset(pm.data_.get(), 0, rounded);
  }
  return pm;
}

PackedMatrix PackedMatrix::PackLeft(const float* x, int64_t ld, bool trans, int64_t m, int64_t k) {
  PackedMatrix pm = Allocate(Side::kLeft, m, k);
  for (int64_t i0 = 0; i0 < m; i0 += kPanelRows) {
    gemm_internal::PackLeftPanel(x, ld, trans, i0, std::min(kPanelRows, m - i0), 0, k,
                                 pm.data_.get() + i0 * k);
  }
  return pm;
}

PackedMatrix PackedMatrix::PackRight(const float* x, int64_t ld, bool trans, int64_t k, int64_t n) {
  PackedMatrix pm = Allocate(Side::kRight, k, n);
  for (int64_t j0 = 0; j0 < n; j0 += kPanelCols) {
    const int64_t cols = std::min(kPanelCols, n - j0);
    gemm_internal::PackRightPanel(x, ld, trans, 0, k, j0, cols, gemm_internal::PanelWidth(cols),
                                  pm.data_.get() + j0 * k);
  }
  return pm;
}

std::vector<std::byte> PackedMatrix::Serialize() const {
  std::vector<std::byte> out(kHeaderBytes + static_cast<size_t>(num_floats_) * sizeof(float));
  std::memcpy(out.data(), kMagic, 4);
  PutU64(out.data() + 8, kVersion);
  PutU64(out.data() + 16, static_cast<uint64_t>(side_));
  PutU64(out.data() + 24, static_cast<uint64_t>(rows_));
  PutU64(out.data() + 32, static_cast<uint64_t>(cols_));
  PutU64(out.data() + 40, static_cast<uint64_t>(kPanelRows));
  PutU64(out.data() + 48, static_cast<uint64_t>(kPanelCols));
  // Floats are stored in host order; every supported host is little-endian.
  static_assert(std::endian::native == std::endian::little);
  if (num_floats_ > 0) {
    std::memcpy(out.data() + kHeaderBytes, data_.get(),
                static_cast<size_t>(num_floats_) * sizeof(float));
  }
  return out;
}

Result<PackedMatrix> PackedMatrix::Deserialize(std::span<const std::byte> bytes) {
  return Deserialize(bytes, nullptr);
}

Result<PackedMatrix> PackedMatrix::Deserialize(std::span<const std::byte> bytes,
                                               std::shared_ptr<const void> owner) {
  if (bytes.size() < kHeaderBytes || std::memcmp(bytes.data(), kMagic, 4) != 0) {
    return Status::InvalidArgument("packed matrix: missing ORPK header");
  }
  const uint64_t version = GetU64(bytes.data() + 8);
  if (version != kVersion) {
    return Status::InvalidArgument("packed matrix: version " + std::to_string(version) +
                                   ", this build reads " + std::to_string(kVersion));
  }
  const uint64_t side = GetU64(bytes.data() + 16);
  const uint64_t rows = GetU64(bytes.data() + 24);
  const uint64_t cols = GetU64(bytes.data() + 32);
  if (side > 1 || GetU64(bytes.data() + 40) != kPanelRows ||
      GetU64(bytes.data() + 48) != kPanelCols) {
    return Status::InvalidArgument("packed matrix: unknown side or panel sizes");
  }
  constexpr uint64_t kMaxDim = uint64_t{1} << 31;
  if (rows > kMaxDim || cols > kMaxDim) {
    return Status::InvalidArgument("packed matrix: dimensions out of range");
  }
  const Side s = static_cast<Side>(side);
  const uint64_t floats = static_cast<uint64_t>(
      LayoutFloats(s, static_cast<int64_t>(rows), static_cast<int64_t>(cols)));
  if (floats > (uint64_t{1} << 34) / sizeof(float) ||
      bytes.size() != kHeaderBytes + floats * sizeof(float)) {
    return Status::InvalidArgument("packed matrix: " + std::to_string(bytes.size()) +
                                   " bytes do not match a " + std::to_string(rows) + "x" +
                                   std::to_string(cols) + " layout");
  }
  const std::byte* src = bytes.data() + kHeaderBytes;
  if (owner != nullptr && floats > 0 && reinterpret_cast<uintptr_t>(src) % alignof(float) == 0) {
    PackedMatrix pm;
    pm.side_ = s;
    pm.rows_ = static_cast<int64_t>(rows);
    pm.cols_ = static_cast<int64_t>(cols);
    pm.num_floats_ = static_cast<int64_t>(floats);
    // Aliasing constructor: shares `owner`, points at the floats. The
    // matrix never writes through it.
    pm.data_ = std::shared_ptr<float>(std::const_pointer_cast<void>(owner),
                                      reinterpret_cast<float*>(const_cast<std::byte*>(src)));
    return pm;
  }
  PackedMatrix pm = Allocate(s, static_cast<int64_t>(rows), static_cast<int64_t>(cols));
  if (floats > 0) std::memcpy(pm.data_.get(), src, floats * sizeof(float));
  return pm;
}

}  // namespace orrery::ops::cpu
