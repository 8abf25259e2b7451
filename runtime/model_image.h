// A compiled model as bytes, and back without the ONNX: the plan after
// import, folding and fusion (steps with their op types, attributes, value
// slots and liveness; the constants still read; the signature), so that a
// cold load skips protobuf parsing, initializer conversion, folding and
// fusion. The server stores it as a segment section beside the packed
// weights (cache/model_loader.h, docs/storage.md).
//
// Layout (little-endian): "ORCG", u32 kModelImageVersion, u32
// ops::kCachedStateVersion, u32 reserved (0); then the signature and the plan
// as length-prefixed fields (see model_image.cc). Every count and length is
// checked against the bytes left before anything is allocated; every slot
// index against the plan's slot count; every op type against this build's
// registry; every step's inputs must be produced earlier (graph input,
// constant or an earlier step's output), so hostile bytes give an error,
// never a crash. Integrity (checksums) is the segment's job: each section
// carries a CRC32C (storage/segment_format.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "base/status.h"
#include "runtime/model.h"
#include "runtime/plan.h"

namespace orrery {

// Bump whenever the image layout or the meaning of a plan field changes; an
// image of another version is refused (FAILED_PRECONDITION) and the caller
// recompiles from the ONNX.
// 2: a flags word before each constant (packed only, see below); written
// only by an image with such a constant, others are still version 1.
inline constexpr uint32_t kModelImageVersion = 2;
inline constexpr uint32_t kModelImageMinVersion = 1;  // the oldest read

struct ModelImageOptions {
  // Leave out the values of constants that exist in memory only to be
  // packed: every step reading one is a kernel whose node cache holds its
  // packed form (ops::KernelDef::packed_input), which ExportPackedWeights
  // stores, no unfused original step reads it and it is no graph output.
  // The image then loads only with those packed weights (CompiledModel::Load
  // checks), and holds about half the bytes of a model of weight matrices.
  // Only for models whose inputs are static but for their first dim: a
  // plan for other shapes could need another packed layout. Export the
  // packed weights first (it specialises the plan, which fills the caches);
  // with empty caches nothing is left out.
  bool packed_only = false;
};

// Cost: one pass over the plan and a copy of the constants still read
// (folded weights and other initializers; packed operands are not here).
// UNIMPLEMENTED for a plan holding string constants.
Result<std::vector<std::byte>> ExportModelImage(const CompiledModel& model, const ModelImageOptions& options = {});

namespace runtime {
// The plan and signature an image holds, with every step's kernel resolved
// from this build's registry. DATA_LOSS naming the field for malformed bytes
// (truncated, bad magic, out-of-range slot or count, unknown op type, a step
// reading a value nothing produced before it); FAILED_PRECONDITION for
// another kModelImageVersion or ops::kCachedStateVersion. Used by
// CompiledModel::Load. Cost: one pass and a copy of the constants, or, with
// an `owner` keeping `image` alive and unchanged, none: constants (stored
// 64-byte aligned in the image) borrow its bytes when they are aligned in
// memory (an image read into a page-aligned buffer). A constant stored
// without its values (ModelImageOptions::packed_only) decodes as a tensor
// without a buffer; CheckPackedOnlyConstants tells whether the imported
// packed weights stand in for every one.
struct DecodedImage {
  Plan plan;
  ModelSignature signature;
};
Result<DecodedImage> DecodeModelImage(std::span<const std::byte> image,
                                      std::shared_ptr<const void> owner = nullptr);
// Whether the plan has constants without values (ModelImageOptions::packed_only).
bool HasPackedOnlyConstants(const Plan& plan);
// The same asked of an image's header, before decoding it: version 2 is
// written only when some constant is stored without values. Reads 8 bytes;
// false for bytes that are no image (DecodeModelImage reports those).
bool ImageHasPackedOnlyConstants(std::span<const std::byte> image);
// OK when every constant without values is read only by steps whose node
// cache holds its packed form (after ImportPackedWeights); else DATA_LOSS
// naming the constant. The rule ExportModelImage left them out by.
Status CheckPackedOnlyConstants(const Plan& plan);
}  // namespace runtime

}  // namespace orrery
