// CompiledModel's internals, shared by model.cc and execution.cc.
#pragma once

#include <memory>

#include "base/status.h"
#include "runtime/model.h"
#include "runtime/plan.h"
#include "runtime/plan_cache.h"

namespace orrery {

struct CompiledModel::Impl {
  ModelSignature signature;
  std::shared_ptr<const runtime::Plan> plan;  // shape-generic
  std::unique_ptr<runtime::PlanCache> cache;  // plans specialised per input shapes

  // Specialises the plan for the signature's shapes, dynamic dims as 1:
  // runs every kernel's Prepare (which fills the NodeCaches) and caches the
  // plan. Unbound tensors carry the types without buffers.
  Status SpecializeForSignature() const;
};

}  // namespace orrery
