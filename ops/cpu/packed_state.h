// The shape-independent prepared state of the GEMM-based kernels (Gemm,
// MatMul, Conv): constant operands packed once per node and kept in its
// NodeCache (ops/registry.h), plus their serialisation so that the runtime
// can store them (runtime/packed_weights.h) and skip packing on a later load.
//
// Kernels check what they get from the cache against the shapes they expect
// (MatchesPacked) and repack on a mismatch, so imported state that does not
// fit (another build, another model) costs time, never a wrong result.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"
#include "ops/cpu/gemm/sgemm.h"
#include "ops/registry.h"

namespace orrery::ops::cpu {

// One packed operand (Gemm's A or B, MatMul's B).
struct PackedOperand final : PreparedKernel {
  explicit PackedOperand(PackedMatrix m) : matrix(std::move(m)) {}
  PackedMatrix matrix;
};

// Conv's weights, one packed matrix per group.
struct PackedGroups final : PreparedKernel {
  std::vector<PackedMatrix> groups;
};

inline bool MatchesPacked(const PackedMatrix& m, PackedMatrix::Side side, int64_t rows,
                          int64_t cols) {
  return m.side() == side && m.rows() == rows && m.cols() == cols;
}

// Prepare's error when a constant operand whose values a model image left
// out (KernelDef::packed_input; the tensor is unbound()) must be packed
// anew, no fitting packed form having come with the image: the caller
// recompiles from the ONNX.
Status PackedValuesMissing(std::string_view op, std::string_view operand);

// KernelDef::serialize_cached / deserialize_cached for node caches holding
// PackedOperand (Gemm, MatMul) or PackedGroups (Conv). Cost: one copy of the
// packed floats. Deserialize errors are INVALID_ARGUMENT.
Result<std::vector<std::byte>> SerializePackedOperand(const PreparedKernel& cached);
Result<std::shared_ptr<const PreparedKernel>> DeserializePackedOperand(
    uint32_t key, std::span<const std::byte> bytes);
Result<std::vector<std::byte>> SerializePackedGroups(const PreparedKernel& cached);
Result<std::shared_ptr<const PreparedKernel>> DeserializePackedGroups(
    uint32_t key, std::span<const std::byte> bytes);

// The same deserializers, borrowing the packed floats from `bytes` (kept
// alive by `owner`) instead of copying them (PackedMatrix::Deserialize with
// an owner). BorrowingDeserializer maps a KernelDef's deserialize_cached to
// its borrowing twin, or nullptr when it has none (the caller then copies).
using DeserializeBorrowedFn = Result<std::shared_ptr<const PreparedKernel>> (*)(
    uint32_t key, std::span<const std::byte> bytes, std::shared_ptr<const void> owner);
Result<std::shared_ptr<const PreparedKernel>> DeserializePackedOperandBorrowed(
    uint32_t key, std::span<const std::byte> bytes, std::shared_ptr<const void> owner);
Result<std::shared_ptr<const PreparedKernel>> DeserializePackedGroupsBorrowed(
    uint32_t key, std::span<const std::byte> bytes, std::shared_ptr<const void> owner);
DeserializeBorrowedFn BorrowingDeserializer(DeserializeCachedFn fn);

}  // namespace orrery::ops::cpu
