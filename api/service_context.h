// What every gRPC service needs from the server: the components below the
// API layer and the server-wide limits. Owned by Server; services borrow it.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "cache/model_cache.h"
#include "scheduler/scheduler.h"
#include "storage/catalog.h"
#include "tenancy/tenants.h"

namespace orrery {

struct ServiceContext {
  Catalog* catalog = nullptr;
  Tenants* tenants = nullptr;
  ModelCache* cache = nullptr;
  FairScheduler* scheduler = nullptr;
  std::string admin_token;
  uint64_t max_model_bytes = 0;
  // False while draining: ServerReady reports it and new inferences are refused.
  std::atomic<bool> ready{false};
};

}  // namespace orrery
