#include "cache/model_loader.h"

#include <string>
#include <utility>

#include <spdlog/spdlog.h>

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

SegmentExpectation ExpectationOf(const ModelRecord& record) {
  return SegmentExpectation{.layout_version = kPackedWeightsVersion,
                            .content_id = SegmentContentId(record),
                            .header_crc32c = record.segment_header_crc32c()};
}

std::string Describe(const ModelRecord& r) {
  return "tenant " + r.tenant_id() + " model '" + r.name() + "' v" + std::to_string(r.version());
}

}  // namespace

Result<std::unique_ptr<CompiledModel>> ModelLoader::Load(const ModelRecord& record) {
  ORRERY_ASSIGN_OR_RETURN(std::string bytes,
                          catalog_->GetModelBlob(record.tenant_id(), record.name(), record.version()));
  const bool has_segment = segments_ != nullptr && !record.segment_file().empty();
  if (has_segment) {
    AlignedBuffer buffer;
    Result<std::span<const std::byte>> payload =
        segments_->Read(record.segment_file(), ExpectationOf(record), &buffer);
    if (payload.ok()) {
      size_t imported = 0;
      Status import_status;
      ORRERY_ASSIGN_OR_RETURN(
          std::unique_ptr<CompiledModel> model,
          CompiledModel::Compile(bytes, {.packed_weights = *payload,
                                         .imported = &imported,
                                         .import_status = &import_status}));
      if (import_status.ok()) {
        segment_loads_.fetch_add(1, std::memory_order_relaxed);
        spdlog::debug("{}: loaded with {} packed weight entries from segment {}", Describe(record),
                      imported, record.segment_file());
        return model;
      }
      // Verified bytes this build cannot use: the model packed as usual;
      // rewrite the segment below so the next load imports.
      spdlog::warn("{}: segment {} not importable, rebuilding it: {}", Describe(record),
                   record.segment_file(), import_status.message());
      segment_rebuilds_.fetch_add(1, std::memory_order_relaxed);
      compiles_.fetch_add(1, std::memory_order_relaxed);
      ModelRecord copy = record;
      if (Status s = WriteSegment(*model, record.segment_file(), &copy); !s.ok()) {
        spdlog::warn("{}: rewriting segment {} failed: {}", Describe(record), record.segment_file(),
                     s.message());
      }
      return model;
    }
    if (payload.status().code() == StatusCode::kUnavailable ||
        payload.status().code() == StatusCode::kResourceExhausted) {
      // An I/O or memory error says nothing about the file: serve from the
      // ONNX but leave the segment alone.
      spdlog::warn("{}: reading segment {} failed, compiling from the ONNX: {}", Describe(record),
                   record.segment_file(), payload.status().message());
    } else {
      spdlog::warn("{}: segment {} unusable, rebuilding it from the ONNX: {}", Describe(record),
                   record.segment_file(), payload.status().message());
      segment_rebuilds_.fetch_add(1, std::memory_order_relaxed);
    }
  }
  compiles_.fetch_add(1, std::memory_order_relaxed);
  ORRERY_ASSIGN_OR_RETURN(std::unique_ptr<CompiledModel> model, CompiledModel::Compile(bytes));
  if (has_segment) {
    ModelRecord copy = record;
    if (Status s = WriteSegment(*model, record.segment_file(), &copy); !s.ok()) {
      spdlog::warn("{}: rewriting segment {} failed: {}", Describe(record), record.segment_file(),
                   s.message());
    } else if (record.segment_header_crc32c() != 0 &&
               copy.segment_header_crc32c() != record.segment_header_crc32c()) {
      // Packing is deterministic, so this only happens when the build that
      // wrote the record packed differently; every load then rebuilds.
      spdlog::warn("{}: rebuilt segment {} differs from the recorded one", Describe(record),
                   record.segment_file());
    }
  }
  return model;
}

Status ModelLoader::WriteSegment(const CompiledModel& model, std::string_view name,
                                 ModelRecord* record) {
  if (segments_ == nullptr) return Status::FailedPrecondition("no segment store");
  ORRERY_ASSIGN_OR_RETURN(std::vector<std::byte> payload, ExportPackedWeights(model));
  ORRERY_ASSIGN_OR_RETURN(SegmentFileInfo info,
                          segments_->Write(name, kPackedWeightsVersion, SegmentContentId(*record), payload));
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
                          .compiles = compiles_.load(std::memory_order_relaxed)};
}

}  // namespace orrery
