#include "runtime/model.h"

#include <onnx/onnx_pb.h>

#include <algorithm>

#include "ops/registry.h"
#include "runtime/execution.h"
#include "runtime/graph.h"
#include "runtime/model_impl.h"
#include "runtime/model_image.h"
#include "runtime/packed_weights.h"
#include "runtime/plan.h"
#include "runtime/plan_cache.h"

namespace orrery {

namespace {

TensorSpec SpecOf(const runtime::Value& v) {
  return TensorSpec{.name = v.name, .dtype = v.dtype, .shape = v.shape, .rank_known = v.has_shape};
}

bool IsStatic(const TensorSpec& s) {
  if (!s.rank_known) return false;
  for (int64_t d : s.shape) {
    if (d < 0) return false;
  }
  return true;
}

// Static shape inference over the plan. With fully static inputs any error
// is the model's fault and rejects it; with dynamic inputs the pass (dims
// taken as 1) only fills in undeclared output dtypes and ranks.
Status InferSignature(const runtime::Plan& plan, ModelSignature* sig) {
  bool all_static = true;
  std::vector<ops::TensorType> in_types;
  for (const TensorSpec& s : sig->inputs) {
    all_static = all_static && IsStatic(s);
    ops::TensorType t{s.dtype, s.shape};
    for (int64_t& d : t.shape) d = d < 0 ? 1 : d;
    in_types.push_back(std::move(t));
  }
  bool rank_unknown = false;
  for (const TensorSpec& s : sig->inputs) rank_unknown = rank_unknown || !s.rank_known;
  if (rank_unknown) return Status::Ok();
  // Declared dims come from the model: kernels' inference may only see
  // shapes within the tensor size cap.
  for (const ops::TensorType& t : in_types) {
    if (!CheckedNumElements(t.shape, t.dtype).ok()) return Status::Ok();
  }
  auto types = runtime::InferPlanTypes(plan, in_types);
  if (!types.ok()) {
    if (all_static) return types.status();
    return Status::Ok();
  }
  for (size_t i = 0; i < sig->outputs.size(); ++i) {
    TensorSpec& out = sig->outputs[i];
    const auto& t = (*types)[static_cast<size_t>(plan.output_slots[i])];
    if (!t.has_value()) continue;
    if (out.dtype == DType::kUndefined) out.dtype = t->dtype;
    if (!out.rank_known) {
      out.rank_known = true;
      out.shape = t->shape;
      if (!all_static) {
        for (int64_t& d : out.shape) d = -1;
      }
    }
  }
  return Status::Ok();
}

// A model whose inputs are all static has one possible plan: Compile and
// Load specialise it at once so that the first request does not pay for
// it (a failure is left for Run to report).
bool AllStatic(const ModelSignature& sig) { return std::all_of(sig.inputs.begin(), sig.inputs.end(), IsStatic); }

}  // namespace

Status CompiledModel::Impl::SpecializeForSignature() const {
  std::vector<Tensor> shapes;
  for (const TensorSpec& s : signature.inputs) {
    Shape shape = s.shape;
    for (int64_t& d : shape) {
      if (d < 0) d = 1;
    }
    shapes.push_back(Tensor::Unbound(s.dtype, std::move(shape)));
  }
  std::vector<const Tensor*> inputs;
  for (const Tensor& t : shapes) inputs.push_back(&t);
  return cache->Get(inputs).status();
}

CompiledModel::CompiledModel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CompiledModel::~CompiledModel() = default;

const ModelSignature& CompiledModel::signature() const { return impl_->signature; }

std::shared_ptr<const runtime::Plan> CompiledModel::shape_generic_plan() const { return impl_->plan; }

Result<std::unique_ptr<CompiledModel>> CompiledModel::Compile(std::string_view onnx_bytes) {
  return Compile(onnx_bytes, CompileOptions{});
}

Result<std::unique_ptr<CompiledModel>> CompiledModel::Compile(std::string_view onnx_bytes,
                                                              const CompileOptions& options) {
  onnx::ModelProto model;
  ORRERY_RETURN_IF_ERROR(runtime::ParseModel(onnx_bytes, &model));
  const ops::OpRegistry& registry = ops::OpRegistry::Global();
  ORRERY_ASSIGN_OR_RETURN(runtime::Graph graph, runtime::ImportModel(model, registry));
  ORRERY_RETURN_IF_ERROR(runtime::CheckModel(model));

  auto impl = std::make_unique<Impl>();
  ORRERY_ASSIGN_OR_RETURN(runtime::Plan plan, runtime::CompilePlan(graph, registry));
  impl->plan = std::make_shared<const runtime::Plan>(std::move(plan));
  ModelSignature& sig = impl->signature;
  sig.opset = graph.opset;
  sig.node_count = graph.original_node_count;
  for (int id : graph.inputs) sig.inputs.push_back(SpecOf(graph.values[static_cast<size_t>(id)]));
  for (int id : graph.outputs) sig.outputs.push_back(SpecOf(graph.values[static_cast<size_t>(id)]));
  Status st = InferSignature(*impl->plan, &sig);
  if (!st.ok()) return st.WithPrefix("shape inference");
  if (!options.packed_weights.empty()) {
    Result<size_t> imported = runtime::ImportPackedWeights(*impl->plan, options.packed_weights);
    if (!imported.ok()) {
      if (options.import_status != nullptr) *options.import_status = imported.status();
    } else if (options.imported != nullptr) {
      *options.imported = *imported;
    }
  }
  impl->cache = std::make_unique<runtime::PlanCache>(impl->plan);
  if (AllStatic(sig)) (void)impl->SpecializeForSignature();
  return std::unique_ptr<CompiledModel>(new CompiledModel(std::move(impl)));
}

Result<std::unique_ptr<CompiledModel>> CompiledModel::Load(const LoadOptions& options) {
  ORRERY_ASSIGN_OR_RETURN(runtime::DecodedImage decoded, runtime::DecodeModelImage(options.image, options.owner));
  auto impl = std::make_unique<Impl>();
  impl->signature = std::move(decoded.signature);
  impl->plan = std::make_shared<const runtime::Plan>(std::move(decoded.plan));
  if (!options.packed_weights.empty()) {
    Result<size_t> imported = runtime::ImportPackedWeights(*impl->plan, options.packed_weights, options.owner);
    if (!imported.ok()) {
      // The packed weights came with the image: a blob this build cannot
      // read means the segment is stale, so the caller rebuilds it.
      const StatusCode code = imported.status().message().find("version") != std::string::npos
                                  ? StatusCode::kFailedPrecondition
                                  : StatusCode::kDataLoss;
      return Status(code, imported.status().message());
    }
    if (options.imported != nullptr) *options.imported = *imported;
  }
  impl->cache = std::make_unique<runtime::PlanCache>(impl->plan);
  if (runtime::HasPackedOnlyConstants(*impl->plan)) {
    // Weights held only in packed form: the packed weights must stand in
    // for every one, and the plan must specialise with them (another ISA
    // may choose other layouts, which would need the values): else the
    // caller recompiles from the ONNX.
    ORRERY_RETURN_IF_ERROR(runtime::CheckPackedOnlyConstants(*impl->plan));
    if (Status s = impl->SpecializeForSignature(); !s.ok()) {
      return Status::DataLoss("model image with packed-only weights does not plan here: " + s.message());
    }
  } else if (AllStatic(impl->signature)) {
    (void)impl->SpecializeForSignature();
  }
  return std::unique_ptr<CompiledModel>(new CompiledModel(std::move(impl)));
}

Result<std::vector<NamedTensor>> CompiledModel::Run(const std::vector<NamedTensor>& inputs,
                                                    ops::ThreadGroup* threads) const {
  ORRERY_ASSIGN_OR_RETURN(Execution ex, Execution::Start(*this, inputs, {.threads = ops::NumThreads(threads)}));
  while (!ex.done()) ORRERY_RETURN_IF_ERROR(ex.Step(threads));
  return ex.TakeOutputs();
}

PlanCacheStats CompiledModel::plan_cache_stats() const { return impl_->cache->stats(); }

}  // namespace orrery
