// A compiled model: an ONNX graph imported, checked and turned into an
// executable plan for Orrery's CPU kernels.
//
// Cost: Compile is proportional to the model size (parses the protobuf, runs
// the ONNX checker, converts initializers, folds constant subgraphs). The
// first Run with a new set of input shapes specialises the plan for them
// (shape inference, shape-computation folding, a memory plan) and caches it
// (LRU, 16 shape sets); later Runs with those shapes reuse it and a pooled
// arena, allocating only their outputs. Run is safe to call from many
// threads at once on the same CompiledModel; for step-by-step execution see
// runtime/execution.h.
#pragma once

#include <cstdint>
#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "ops/parallel.h"
#include "runtime/tensor.h"

namespace orrery {

namespace runtime {
struct Plan;  // runtime/plan.h
}  // namespace runtime
struct ModelImageOptions;  // runtime/model_image.h

// A graph input or output as seen by clients. Dynamic dims are -1.
struct TensorSpec {
  std::string name;
  DType dtype = DType::kUndefined;
  Shape shape;
  // False when the model does not declare a rank: `shape` is then empty and
  // any rank is accepted.
  bool rank_known = true;
};

struct ModelSignature {
  std::vector<TensorSpec> inputs;   // excludes initializers
  std::vector<TensorSpec> outputs;
  int64_t opset = 0;                // default-domain opset import
  size_t node_count = 0;
};

// Counters of a model's cache of shape-specialised plans.
struct PlanCacheStats {
  uint64_t hits = 0;
  uint64_t misses = 0;  // specialisations attempted
  uint64_t evictions = 0;
  size_t entries = 0;
  size_t capacity = 0;
};

class Execution;

class CompiledModel {
 public:
  // Parses, validates and compiles ONNX bytes. Errors (all INVALID_ARGUMENT):
  // unparseable protobuf, ONNX checker failures, external-data initializers,
  // opset < 7, and unsupported ops (message names the node and the op).
  static Result<std::unique_ptr<CompiledModel>> Compile(std::string_view onnx_bytes);

  // Compile, taking the constant operands' packed form from `packed_weights`
  // (runtime/packed_weights.h, exported from a model compiled from the same
  // bytes) instead of packing them. Entries that do not fit are ignored and
  // packed as usual; *imported (if non-null) gets how many were taken. A
  // malformed blob is ignored, not an error: *import_status (if non-null)
  // gets why.
  struct CompileOptions {
    std::span<const std::byte> packed_weights;
    size_t* imported = nullptr;
    Status* import_status = nullptr;
  };
  static Result<std::unique_ptr<CompiledModel>> Compile(std::string_view onnx_bytes,
                                                        const CompileOptions& options);

  // Rebuilds a model from what an earlier compile exported, without the
  // ONNX: `image` from ExportModelImage (runtime/model_image.h) and, when
  // non-empty, `packed_weights` from ExportPackedWeights of the same model.
  // No protobuf parsing, import, folding or fusion; packed matrices are
  // seeded into the NodeCaches so nothing is packed. The result runs
  // bit-identically to the compiled model. Errors: DATA_LOSS for malformed
  // bytes (naming the field), FAILED_PRECONDITION for another image or
  // packed-weights version; callers then compile from the ONNX. Cost: one
  // pass over the image, a copy of its constants and of the packed weights
  // (none with `owner`, see below), and (for static inputs) specialising the
  // one plan, as Compile does.
  struct LoadOptions {
    std::span<const std::byte> image = {};
    std::span<const std::byte> packed_weights = {};
    // When set, it keeps `image` and `packed_weights` alive and unchanged
    // (e.g. the segment's page-aligned read buffer): constants and packed
    // matrices borrow those bytes instead of copying them, and the model
    // shares ownership of `owner` for as long as it (or a plan) lives.
    std::shared_ptr<const void> owner = nullptr;
    size_t* imported = nullptr;  // packed entries taken, if non-null
  };
  static Result<std::unique_ptr<CompiledModel>> Load(const LoadOptions& options);

  const ModelSignature& signature() const;

  // Runs one inference. Inputs are matched by name; every graph input must be
  // given exactly once with the right dtype and a shape compatible with the
  // declared one (INVALID_ARGUMENT naming the input otherwise). Returns the
  // graph outputs in signature order. Kernels may use `threads` (lent by
  // the caller, see ops/parallel.h); by default they run on this thread.
  Result<std::vector<NamedTensor>> Run(const std::vector<NamedTensor>& inputs,
                                       ops::ThreadGroup* threads = nullptr) const;

  PlanCacheStats plan_cache_stats() const;

  // The shape-generic plan (after folding and fusion), for other backends
  // that specialise it themselves (runtime/cuda/cuda_executor.h). Shared:
  // it lives as long as the model or the caller's copy.
  std::shared_ptr<const runtime::Plan> shape_generic_plan() const;

  ~CompiledModel();
  CompiledModel(const CompiledModel&) = delete;
  CompiledModel& operator=(const CompiledModel&) = delete;

 private:
  friend class Execution;
  friend Result<std::vector<std::byte>> ExportPackedWeights(const CompiledModel& model);
  friend Result<std::vector<std::byte>> ExportModelImage(const CompiledModel& model,
                                                          const ModelImageOptions& options);
  struct Impl;
  explicit CompiledModel(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace orrery
