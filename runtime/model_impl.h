// CompiledModel's internals, shared by model.cc and execution.cc.
#pragma once

#include <memory>

#include "runtime/model.h"
#include "runtime/plan.h"
#include "runtime/plan_cache.h"

namespace orrery {

struct CompiledModel::Impl {
  ModelSignature signature;
  std::shared_ptr<const runtime::Plan> plan;  // shape-generic
  std::unique_ptr<runtime::PlanCache> cache;  // plans specialised per input shapes
};

}  // namespace orrery
