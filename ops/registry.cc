#include "ops/registry.h"

#include <cstdio>
#include <cstdlib>
#include <limits>

namespace orrery::ops {

std::string_view BackendName(Backend backend) {
  switch (backend) {
    case Backend::kCpu: return "cpu";
  }
  return "unknown";
}

Status OpRegistry::Register(KernelDef def) {
  if (def.op_type.empty() || def.infer == nullptr ||
      (def.compute == nullptr) || def.min_inputs < 0 || def.max_inputs < def.min_inputs ||
      def.min_outputs < 1 || def.max_outputs < def.min_outputs ||
      (def.serialize_cached == nullptr) != (def.deserialize_cached == nullptr)) {
    return Status::InvalidArgument("incomplete kernel definition for '" + def.op_type + "'");
  }
  auto key = std::make_pair(def.op_type, def.backend);
  if (kernels_.count(key) != 0) {
    return Status::AlreadyExists("kernel '" + def.op_type + "' already registered for " +
                                 std::string(BackendName(def.backend)));
  }
  kernels_.emplace(std::move(key), std::move(def));
  return Status::Ok();
}

const KernelDef* OpRegistry::Find(std::string_view op_type, Backend backend) const {
  auto it = kernels_.find(std::make_pair(std::string(op_type), backend));
  return it == kernels_.end() ? nullptr : &it->second;
}

std::vector<std::string> OpRegistry::OpTypes(Backend backend) const {
  std::vector<std::string> out;
  for (const auto& [key, def] : kernels_) {
    if (key.second == backend) out.push_back(key.first);
  }
  return out;
}

Result<KernelDef*> OpRegistry::Mutable(std::string_view op_type, Backend backend) {
  auto it = kernels_.find(std::make_pair(std::string(op_type), backend));
  if (it == kernels_.end()) {
    return Status::NotFound("kernel '" + std::string(op_type) + "' is not registered");
  }
  return &it->second;
}

Status OpRegistry::SetCost(std::string_view op_type, Backend backend, CostFn cost) {
  ORRERY_ASSIGN_OR_RETURN(KernelDef * def, Mutable(op_type, backend));
  if (def->cost == nullptr) def->cost = cost;
  return Status::Ok();
}

Result<std::shared_ptr<const PreparedKernel>> NodeCache::GetOrMake(uint32_t key, MakeFn make) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = values_.find(key);
  if (it != values_.end()) return it->second;
  ORRERY_ASSIGN_OR_RETURN(std::shared_ptr<const PreparedKernel> value, make());
  values_.emplace(key, value);
  return value;
}

std::vector<std::pair<uint32_t, std::shared_ptr<const PreparedKernel>>> NodeCache::Snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  return {values_.begin(), values_.end()};
}

void NodeCache::Insert(uint32_t key, std::shared_ptr<const PreparedKernel> value) {
  std::lock_guard<std::mutex> lock(mu_);
  values_.emplace(key, std::move(value));
}

Status PrepareAndCompute(PrepareFn prepare, ComputeFn compute, const KernelContext& ctx,
                         std::span<const TensorType> output_types, std::span<Tensor> outputs) {
  if (prepare == nullptr) return compute(ctx, outputs);
  std::vector<TensorType> in_types(ctx.inputs.size());
  for (size_t i = 0; i < ctx.inputs.size(); ++i) {
    if (ctx.inputs[i] != nullptr) in_types[i] = {ctx.inputs[i]->dtype(), ctx.inputs[i]->shape()};
  }
  PrepareContext pctx{.inputs = in_types,
                      .values = ctx.inputs,
                      .outputs = output_types,
                      .attrs = ctx.attrs,
                      .opset = ctx.opset};
  ORRERY_ASSIGN_OR_RETURN(Prepared prepared, prepare(pctx));
  const int threads = NumThreads(ctx.threads);
  const size_t per_thread = ScratchStride(prepared.scratch_bytes);
  std::vector<std::byte> heap;
  std::span<std::byte> scratch;
  if (per_thread > 0) {
    // Over-allocate to align the start like an arena.
    heap.resize(per_thread * static_cast<size_t>(threads) + kTensorAlignment);
    void* p = heap.data();
    size_t space = heap.size();
    std::align(kTensorAlignment, per_thread * static_cast<size_t>(threads), p, space);
    scratch = std::span<std::byte>(static_cast<std::byte*>(p),
                                   per_thread * static_cast<size_t>(threads));
  }
  KernelContext kctx{ctx.inputs, ctx.attrs, ctx.opset, prepared.kernel.get(), scratch,
                     ctx.threads};
  return compute(kctx, outputs);
}

Status OpRegistry::SetOverwritesOutputs(std::string_view op_type, Backend backend) {
  ORRERY_ASSIGN_OR_RETURN(KernelDef * def, Mutable(op_type, backend));
  def->overwrites_outputs = true;
  return Status::Ok();
}

Status OpRegistry::SetValuesCheckedInCompute(std::string_view op_type, Backend backend) {
  ORRERY_ASSIGN_OR_RETURN(KernelDef * def, Mutable(op_type, backend));
  def->values_checked_in_compute = true;
  return Status::Ok();
}

OpCost BytesMovedCost(const CostContext& ctx) {
  OpCost c;
  auto add = [&c](const TensorType& t) {
    if (!t.present()) return;
    Result<int64_t> n = CheckedNumElements(t.shape, t.dtype);
    if (!n.ok()) return;
    const int64_t b = *n * static_cast<int64_t>(DTypeSize(t.dtype));  // <= kMaxTensorBytes
    c.bytes = b > std::numeric_limits<int64_t>::max() - c.bytes
                  ? std::numeric_limits<int64_t>::max()
                  : c.bytes + b;
  };
  for (const TensorType& t : ctx.inputs) add(t);
  for (const TensorType& t : ctx.outputs) add(t);
  return c;
}

const OpRegistry& OpRegistry::Global() {
  static const OpRegistry* const registry = [] {
    static OpRegistry r;
    Status st = RegisterCpuKernels(&r);
    if (st.ok()) st = RegisterCpuCosts(&r);
    if (!st.ok()) {
      // A programming error in the built-in kernel table; fail loudly.
      std::fprintf(stderr, "orrery: kernel registration failed: %s\n", st.ToString().c_str());
      std::abort();
    }
    return &r;
  }();
  return *registry;
}

}  // namespace orrery::ops
