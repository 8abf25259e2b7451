#include "cache/model_loader.h"

#include <span>
#include <string>
#include <utility>

#include <spdlog/spdlog.h>

#include "runtime/model_image.h"
#include "runtime/packed_weights.h"
#include "storage/aligned_buffer.h"

namespace orrery {

uint64_t SegmentContentId(const ModelRecord& record) {
  // FNV-1a over the hex digest: stable, and any other ONNX bytes give
  // another id with overwhelming probability.
  uint64_t h = 1469598103934665603ull;
  for (char c : record.sha256()) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ull;
  }
  return h;
}

namespace {

// The record's segment, of either layout: a verified header page is all we
// need to know which one it is.
SegmentExpectation ExpectationOf(const ModelRecord& record) {
  return SegmentExpectation{.layout_version = 0,
                            .content_id = SegmentContentId(record),
                            .header_crc32c = record.segment_header_crc32c()};
}

std::string Describe(const ModelRecord& r) {
  return "tenant " + r.tenant_id() + " model '" + r.name() + "' v" + std::to_string(r.version());
}

}  // namespace

Result<std::unique_ptr<CompiledModel>> ModelLoader::LoadImage(const ModelRecord& record,
                                                              std::span<const std::byte> image,
                                                              std::span<const std::byte> packed,
                                                              std::shared_ptr<const AlignedBuffer> buffer) {
  size_t imported = 0;
  // The model borrows the read buffer (constants and packed matrices point
  // into it), so it lives as long as the model.
  ORRERY_ASSIGN_OR_RETURN(std::unique_ptr<CompiledModel> model,
                          CompiledModel::Load({.image = image,
                                               .packed_weights = packed,
                                               .owner = std::move(buffer),
                                               .imported = &imported}));
  spdlog::debug("{}: loaded from segment {} without the ONNX ({} packed weight entries)",
                Describe(record), record.segment_file(), imported);
  return model;
}

Result<std::unique_ptr<CompiledModel>> ModelLoader::Load(const ModelRecord& record) {
  const bool has_segment = segments_ != nullptr && !record.segment_file().empty();
  // Why the segment was not used; rebuild it unless the read itself failed.
  bool rebuild = false;
  if (has_segment) {
    auto shared_buffer = std::make_shared<AlignedBuffer>();
    AlignedBuffer& buffer = *shared_buffer;
    Result<SegmentHeader> header = segments_->ReadVerified(record.segment_file(), ExpectationOf(record), &buffer);
    if (header.ok() && header->layout_version == kModelSegmentLayoutVersion) {
      Result<std::span<const std::byte>> image = SegmentStore::Section(*header, buffer, kModelImageSection);
      Result<std::span<const std::byte>> packed = SegmentStore::Section(*header, buffer, kPackedWeightsSection);
      const Status sections = image.ok() ? packed.status() : image.status();
      if (sections.ok() && !packed_only_images_ && runtime::ImageHasPackedOnlyConstants(*image)) {
        // Written packed only by a CPU server; this one (a GPU's) needs the
        // values, so it compiles the ONNX, with the segment's packed weights
        // (the image is not decoded). A rewrite would not match the header
        // CRC the record holds, so the segment stays as it is.
        spdlog::info("{}: segment {} keeps weights packed only; compiling the ONNX for their values",
                     Describe(record), record.segment_file());
        return CompileWithPackedWeights(record, *packed, /*rewrite_unimportable=*/false);
      }
      // The compiled model itself: no catalog read, no ONNX.
      Result<std::unique_ptr<CompiledModel>> model =
          sections.ok() ? LoadImage(record, *image, *packed, std::move(shared_buffer))
                        : Result<std::unique_ptr<CompiledModel>>(sections);
      if (model.ok()) {
        segment_loads_.fetch_add(1, std::memory_order_relaxed);
        image_loads_.fetch_add(1, std::memory_order_relaxed);
        return model;
      }
      spdlog::warn("{}: segment {} not loadable, rebuilding it from the ONNX: {}", Describe(record),
                   record.segment_file(), model.status().message());
      rebuild = true;
    } else if (header.ok() && header->layout_version == kPackedWeightsSegmentLayoutVersion) {
      // A segment from before model images (packed weights only): compile
      // the ONNX with them. Kept as it is: rewriting it in the new layout
      // would no longer match the header CRC the record holds.
      Result<std::span<const std::byte>> payload =
          SegmentStore::Section(*header, buffer, kPackedWeightsSection);
      if (payload.ok()) return CompileWithPackedWeights(record, *payload, /*rewrite_unimportable=*/true);
      spdlog::warn("{}: segment {} unusable, rebuilding it from the ONNX: {}", Describe(record),
                   record.segment_file(), payload.status().message());
      rebuild = true;
    } else if (header.ok()) {
      spdlog::warn("{}: segment {} has layout {} this build does not read, rebuilding it", Describe(record),
                   record.segment_file(), header->layout_version);
      rebuild = true;
    } else if (header.status().code() == StatusCode::kUnavailable ||
               header.status().code() == StatusCode::kResourceExhausted) {
      // An I/O or memory error says nothing about the file: serve from the
      // ONNX but leave the segment alone.
      spdlog::warn("{}: reading segment {} failed, compiling from the ONNX: {}", Describe(record),
                   record.segment_file(), header.status().message());
    } else {
      spdlog::warn("{}: segment {} unusable, rebuilding it from the ONNX: {}", Describe(record),
                   record.segment_file(), header.status().message());
      rebuild = true;
    }
  }
  if (rebuild) segment_rebuilds_.fetch_add(1, std::memory_order_relaxed);
  compiles_.fetch_add(1, std::memory_order_relaxed);
  ORRERY_ASSIGN_OR_RETURN(std::string onnx,
                          catalog_->GetModelBlob(record.tenant_id(), record.name(), record.version()));
  ORRERY_ASSIGN_OR_RETURN(std::unique_ptr<CompiledModel> model, CompiledModel::Compile(onnx));
  if (rebuild) RewriteSegment(*model, record);
  return model;
}

Result<std::unique_ptr<CompiledModel>> ModelLoader::CompileWithPackedWeights(const ModelRecord& record,
                                                                             std::span<const std::byte> packed,
                                                                             bool rewrite_unimportable) {
  ORRERY_ASSIGN_OR_RETURN(std::string onnx,
                          catalog_->GetModelBlob(record.tenant_id(), record.name(), record.version()));
  size_t imported = 0;
  Status import_status;
  ORRERY_ASSIGN_OR_RETURN(
      std::unique_ptr<CompiledModel> model,
      CompiledModel::Compile(onnx, {.packed_weights = packed, .imported = &imported, .import_status = &import_status}));
  if (import_status.ok()) {
    segment_loads_.fetch_add(1, std::memory_order_relaxed);
    spdlog::debug("{}: loaded with {} packed weight entries from segment {}", Describe(record), imported,
                  record.segment_file());
    return model;
  }
  // Verified bytes this build cannot use: the model was packed as usual.
  compiles_.fetch_add(1, std::memory_order_relaxed);
  if (!rewrite_unimportable) {
    spdlog::warn("{}: segment {} not importable, packed from the ONNX: {}", Describe(record),
                 record.segment_file(), import_status.message());
    return model;
  }
  // Rewrite the segment so the next load skips the ONNX.
  spdlog::warn("{}: segment {} not importable, rebuilding it: {}", Describe(record), record.segment_file(),
               import_status.message());
  segment_rebuilds_.fetch_add(1, std::memory_order_relaxed);
  RewriteSegment(*model, record);
  return model;
}

void ModelLoader::RewriteSegment(const CompiledModel& model, const ModelRecord& record) {
  ModelRecord copy = record;
  if (Status s = WriteSegment(model, record.segment_file(), &copy); !s.ok()) {
    spdlog::warn("{}: rewriting segment {} failed: {}", Describe(record), record.segment_file(),
                 s.message());
  } else if (record.segment_header_crc32c() != 0 &&
             copy.segment_header_crc32c() != record.segment_header_crc32c()) {
    // Compiling and packing are deterministic, so this only happens when the
    // build that wrote the record wrote something else (an older layout);
    // every load then rebuilds until the model is uploaded again.
    spdlog::warn("{}: rebuilt segment {} differs from the recorded one", Describe(record),
                 record.segment_file());
  }
}

Status ModelLoader::WriteSegment(const CompiledModel& model, std::string_view name,
                                 ModelRecord* record) {
  if (segments_ == nullptr) return Status::FailedPrecondition("no segment store");
  ORRERY_ASSIGN_OR_RETURN(std::vector<std::byte> packed, ExportPackedWeights(model));
  Result<std::vector<std::byte>> image = ExportModelImage(model, {.packed_only = packed_only_images_});
  SegmentFileInfo info;
  if (image.ok()) {
    const SegmentSectionData sections[] = {{kModelImageSection, *image}, {kPackedWeightsSection, packed}};
    ORRERY_ASSIGN_OR_RETURN(info, segments_->WriteSections(name, kModelSegmentLayoutVersion,
                                                           SegmentContentId(*record), sections));
  } else {
    // A plan the image cannot hold (string constants): packed weights only,
    // loads compile the ONNX with them.
    spdlog::debug("model '{}': no model image in its segment: {}", record->name(), image.status().message());
    ORRERY_ASSIGN_OR_RETURN(info, segments_->Write(name, kPackedWeightsSegmentLayoutVersion, SegmentContentId(*record), packed));
  }
  record->set_segment_file(info.name);
  record->set_segment_bytes(info.bytes);
  record->set_segment_header_crc32c(info.header_crc32c);
  record->set_segment_format_version(info.format_version);
  return Status::Ok();
}

void ModelLoader::RemoveSegments(const std::vector<ModelRecord>& records) {
  if (segments_ == nullptr) return;
  for (const ModelRecord& r : records) {
    if (r.segment_file().empty()) continue;
    if (Status s = segments_->Remove(r.segment_file()); !s.ok()) {
      spdlog::warn("{}: removing segment {} failed (start-up recovery will): {}", Describe(r),
                   r.segment_file(), s.message());
    }
  }
}

ModelLoaderStats ModelLoader::stats() const {
  return ModelLoaderStats{.segment_loads = segment_loads_.load(std::memory_order_relaxed),
                          .segment_rebuilds = segment_rebuilds_.load(std::memory_order_relaxed),
                          .compiles = compiles_.load(std::memory_order_relaxed),
                          .image_loads = image_loads_.load(std::memory_order_relaxed)};
}

}  // namespace orrery
