// Packed weights of a compiled model as bytes, and back: what the server
// stores as a segment (storage/segment_store.h) so that loading a model again
// skips packing its constant GEMM / Conv operands.
//
// Export specialises the model for its signature's shapes (dynamic dims taken
// as 1), which runs every kernel's Prepare and so fills each node's NodeCache
// (ops/registry.h), then serialises the entries of kernels that have
// KernelDef::serialize_cached (Conv, Gemm, MatMul). Import, run by
// CompiledModel::Compile before anything is prepared, seeds those NodeCaches.
// Entries are keyed by step index, op type, cache key and
// ops::kCachedStateVersion; any entry that does not match (another build,
// another model) is ignored and that node packs as usual, and kernels check
// the dimensions of what they get, so stale bytes cost time, never results.
//
// Blob layout (little-endian): "ORPW", u32 version (kPackedWeightsVersion),
// u32 ops::kCachedStateVersion, u32 entry count, then per entry u32 step,
// u32 cache key, u32 op type length, u64 byte count, the op type, zero
// padding to the next multiple of 64 bytes from the blob's start (version 2
// on; version 1 had none and is still read), the bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "base/status.h"
#include "runtime/model.h"

namespace orrery {

inline constexpr uint32_t kPackedWeightsVersion = 2;     // written
inline constexpr uint32_t kPackedWeightsMinVersion = 1;  // oldest read

// Cost: specialising the plan for one set of shapes if not yet cached (packs
// every constant operand once) and a copy of the packed weights. Errors:
// those of specialisation (the signature's shapes do not plan).
Result<std::vector<std::byte>> ExportPackedWeights(const CompiledModel& model);

namespace runtime {
struct Plan;
// Seeds the plan's NodeCaches from an exported blob; returns how many
// entries were taken. INVALID_ARGUMENT for a malformed blob (nothing taken);
// entries that do not match the plan are skipped. Cost: one copy of the
// packed weights, or none when `owner` is non-null: the packed matrices then
// borrow the blob's bytes and share ownership of `owner`, which must keep
// them alive and unchanged (ops/cpu/packed_state.h). Called by
// CompiledModel::Compile and CompiledModel::Load.
Result<size_t> ImportPackedWeights(const Plan& plan, std::span<const std::byte> blob,
                                   std::shared_ptr<const void> owner = nullptr);
}  // namespace runtime

}  // namespace orrery
