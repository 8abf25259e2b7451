// Turning a model record into a compiled model. When the record names a
// segment (storage/segment_store.h) of layout kModelSegmentLayoutVersion, the
// load reads it with io_uring and rebuilds the compiled model from its
// sections (`model_image`: runtime/model_image.h, `packed_weights`:
// runtime/packed_weights.h) with CompiledModel::Load: no catalog read, no
// ONNX parsing, folding or packing. A segment of the older layout
// (kPackedWeightsSegmentLayoutVersion: packed weights only) compiles the ONNX from the
// catalog with its packed weights. A segment that is missing, corrupt or not the one the
// record expects is never served: the load logs a warning, counts it,
// compiles from the ONNX (packing) and rewrites the segment under the same
// name. Writing a new version's segment at upload is here too, so that one
// place decides what a segment holds.
//
// Costs: Load blocks for one segment read (io_uring) and CompiledModel::Load;
// on the old layout also a catalog blob read and CompiledModel::Compile; on a
// rebuild those, packing and a segment write (two syncs). Thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>

#include "base/status.h"
#include "runtime/model.h"
#include "storage/catalog.h"
#include "storage/segment_store.h"

namespace orrery {

struct ModelLoaderStats {
  uint64_t segment_loads = 0;     // loads that imported a verified segment
  uint64_t segment_rebuilds = 0;  // missing / corrupt / mismatched segments rebuilt
  uint64_t compiles = 0;          // loads that packed from the ONNX (rebuilds included)
  uint64_t image_loads = 0;       // segment loads that skipped the ONNX (model image)
};

// Segment layout (header field "payload layout version") of a model
// segment holding both a model image and packed weights. Layout
// kPackedWeightsSegmentLayoutVersion segments hold packed weights only.
inline constexpr uint32_t kPackedWeightsSegmentLayoutVersion = 1;
inline constexpr uint32_t kModelSegmentLayoutVersion = 2;

class ModelLoader {
 public:
  // `segments` may be null: every load compiles, nothing is written.
  // `packed_only_images`: segments written here keep weight matrices only
  // in their packed form (runtime/model_image.h ModelImageOptions), about
  // half the bytes to store, read and cache; off for a GPU, whose upload
  // needs the values: such a loader compiles the ONNX of a version whose
  // segment holds weights packed only, importing the segment's packed
  // weights (and leaves the segment as is).
  ModelLoader(const Catalog* catalog, SegmentStore* segments, bool packed_only_images = true)
      : catalog_(catalog), segments_(segments), packed_only_images_(packed_only_images) {}

  Result<std::unique_ptr<CompiledModel>> Load(const ModelRecord& record);

  // Exports `model`'s image and packed weights (specialising it if needed)
  // and writes them as segment `name` for `record` (its sha256 must be set); fills the
  // record's segment fields. Call before committing the record.
  // FAILED_PRECONDITION when there is no segment store; export and write
  // errors otherwise (the caller decides whether an upload fails).
  Status WriteSegment(const CompiledModel& model, std::string_view name, ModelRecord* record);

  // Deletes the segment files of `records` (after their catalog delete);
  // failures are logged (start-up recovery removes what is left).
  void RemoveSegments(const std::vector<ModelRecord>& records);

  ModelLoaderStats stats() const;
  SegmentStore* segments() const { return segments_; }

 private:
  // The model from a layout-2 segment's sections, borrowing `buffer`.
  Result<std::unique_ptr<CompiledModel>> LoadImage(const ModelRecord& record, std::span<const std::byte> image,
                                                   std::span<const std::byte> packed,
                                                   std::shared_ptr<const AlignedBuffer> buffer);
  // The record's ONNX compiled with a segment's packed weights, so nothing
  // is packed again (a segment load). If this build cannot import them, the
  // model is packed as usual (a compile) and, with `rewrite_unimportable`,
  // the segment rewritten.
  Result<std::unique_ptr<CompiledModel>> CompileWithPackedWeights(const ModelRecord& record,
                                                                  std::span<const std::byte> packed,
                                                                  bool rewrite_unimportable);
  // WriteSegment under the record's own name, logging failures.
  void RewriteSegment(const CompiledModel& model, const ModelRecord& record);

  const Catalog* catalog_;
  SegmentStore* segments_;
  const bool packed_only_images_;
  std::atomic<uint64_t> segment_loads_{0}, segment_rebuilds_{0}, compiles_{0}, image_loads_{0};
};

// The content id a segment of `record` carries: derived from the ONNX's
// SHA-256, so a segment from other bytes is rejected.
uint64_t SegmentContentId(const ModelRecord& record);

}  // namespace orrery
