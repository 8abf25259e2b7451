// Helpers for kernels with a Prepare (ops/registry.h): the prepared state
// of a call, and the fallback for callers that did not prepare.
#pragma once

#include <span>
#include <vector>

#include "base/status.h"
#include "ops/registry.h"

namespace orrery::ops::cpu {

// Compute for a caller that passed no preparation (direct calls): prepares
// now and runs `compute` with heap scratch. Allocates; planned steps never
// take this path.
inline Status ComputeUnprepared(PrepareFn prepare, ComputeFn compute, const KernelContext& ctx,
                                std::span<Tensor> outputs) {
  std::vector<TensorType> types;
  types.reserve(outputs.size());
  for (const Tensor& t : outputs) types.push_back({t.dtype(), t.shape()});
  return PrepareAndCompute(prepare, compute, ctx, types, outputs);
}

// The scratch of the calling thread `thread` as T[], or nullptr when the
// kernel asked for none.
template <typename T>
T* ScratchAs(const KernelContext& ctx, int thread = 0) {
  std::span<std::byte> s = ThreadScratch(ctx, thread);
  return s.empty() ? nullptr : reinterpret_cast<T*>(s.data());
}

}  // namespace orrery::ops::cpu
