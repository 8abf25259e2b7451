#include "cache/host_tier.h"

#include <utility>

#include <spdlog/spdlog.h>

namespace orrery {

ModelKey HostTier::KeyOf(const ModelRecord& record) {
  return ModelKey{record.tenant_id(), record.name(), record.version()};
}

int64_t HostTier::BytesOf(const ModelRecord& record) {
  const uint64_t b = record.segment_bytes() > 0 ? record.segment_bytes() : record.size_bytes();
  return static_cast<int64_t>(std::max<uint64_t>(b, 1));
}

Result<std::unique_ptr<HostTier>> HostTier::Create(const Options& options, ModelCache* cache,
                                                   const Clock* clock) {
  if (options.loader_threads < 1) return Status::InvalidArgument("host tier: loader threads must be >= 1");
  HostCacheOptions hc;
  hc.budget_bytes = options.budget_bytes;
  hc.load_concurrency = options.loader_threads;
  // Keep-alive expiry needs a periodic caller; the server has none yet, so
  // residency is decided by demand and eviction alone.
  hc.keepalive = false;
  ORRERY_ASSIGN_OR_RETURN(std::unique_ptr<HostCache> host, HostCache::Create(hc, clock));
  return std::unique_ptr<HostTier>(new HostTier(options, std::move(host), cache, clock));
}

HostTier::HostTier(const Options& options, std::unique_ptr<HostCache> host, ModelCache* cache,
                   const Clock* clock)
    : options_(options), host_(std::move(host)), cache_(cache), clock_(clock) {
  for (int i = 0; i < options.loader_threads; ++i) loaders_.emplace_back([this] { LoaderLoop(); });
}

HostTier::~HostTier() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  for (std::thread& t : loaders_) t.join();
  // Jobs never started: their waiters get an error rather than hang.
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [id, promise] : promises_) promise.set_value(Status::Unavailable("server shutting down"));
  promises_.clear();
}

Status HostTier::CheckFits(const ModelRecord& record) const {
  return host_->CheckFits(KeyOf(record), BytesOf(record));
}

Status HostTier::Register(const ModelRecord& record) { return host_->Register(KeyOf(record), BytesOf(record)); }

void HostTier::Unregister(const ModelRecord& record) {
  Status s = host_->Unregister(KeyOf(record));
  if (!s.ok() && s.code() != StatusCode::kNotFound) {
    spdlog::debug("host tier: {} stays registered: {}", KeyOf(record).ToString(), s.message());
  }
}

void HostTier::LoaderLoop() {
  while (true) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      work_cv_.wait(lock, [this] { return stop_ || !jobs_.empty(); });
      if (stop_) return;
      job = jobs_.top();
      jobs_.pop();
    }
    const int64_t started = clock_->NowNs();
    Status outcome = cache_->Get(job.record).status();
    if (Status s = host_->FinishMove(job.action.id, started, outcome); !s.ok()) {
      spdlog::warn("host tier: finishing the load of {}: {}", job.action.key.ToString(), s.message());
    }
    if (!outcome.ok()) {
      spdlog::warn("host tier: loading {} failed: {}", job.action.key.ToString(), outcome.message());
    }
    std::lock_guard<std::mutex> lock(mu_);
    auto it = promises_.find(job.action.id);
    if (it != promises_.end()) {
      it->second.set_value(outcome);
      promises_.erase(it);
    }
    // Only this load's entry: the key may have been evicted and a newer
    // load queued meanwhile.
    if (auto l = loads_.find(job.action.key); l != loads_.end() && l->second.action_id == job.action.id) {
      loads_.erase(l);
    }
  }
}

Result<HostTier::Pin> HostTier::Acquire(const ModelRecord& record, bool wait_for_room) {
  const ModelKey key = KeyOf(record);
  const int64_t give_up = clock_->NowNs() + options_.acquire_timeout_ns;
  Result<Acquisition> acq = Status::Unavailable("not tried");
  while (true) {
    acq = host_->Acquire(key);
    if (acq.status().code() == StatusCode::kNotFound) {
      // Not registered (e.g. registered at start-up before a size change):
      // register now; RESOURCE_EXHAUSTED if it can never fit.
      ORRERY_RETURN_IF_ERROR(Register(record));
      continue;
    }
    if (acq.status().code() != StatusCode::kUnavailable) break;
    // Pinned or loading models hold the room: wait for a release.
    std::unique_lock<std::mutex> lock(mu_);
    if (!wait_for_room || clock_->NowNs() >= give_up) {
      return acq.status().WithPrefix("host cache full of models in use");
    }
    release_cv_.wait_for(lock, std::chrono::milliseconds(20));
  }
  ORRERY_RETURN_IF_ERROR(acq.status());
  Pin pin;
  pin.tier_ = this;
  pin.key_ = key;
  for (const ModelKey& k : acq->evicted) cache_->EraseVersion(k.tenant, k.model, k.version);

  std::shared_future<Status> wait;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (acq->action.has_value()) {
      std::promise<Status>& promise = promises_[acq->action->id];
      wait = promise.get_future().share();
      loads_[key] = Load{acq->action->id, wait};
      jobs_.push(Job{*acq->action, record});
      work_cv_.notify_one();
    } else if (auto it = loads_.find(key); it != loads_.end()) {
      wait = it->second.done;  // joins a load in flight
    }
  }
  if (wait.valid()) ORRERY_RETURN_IF_ERROR(wait.get());
  // Resident: the compiled model is in ModelCache (Get only loads here if it
  // was dropped meanwhile, e.g. by a delete of the model).
  ORRERY_ASSIGN_OR_RETURN(pin.model_, cache_->Get(record));
  return pin;
}

void HostTier::Release(const ModelKey& key) {
  if (Status s = host_->Release(key); !s.ok()) {
    spdlog::warn("host tier: releasing {}: {}", key.ToString(), s.message());
  }
  release_cv_.notify_all();
}

HostTier::Pin::Pin(Pin&& other) noexcept
    : tier_(std::exchange(other.tier_, nullptr)), key_(std::move(other.key_)), model_(std::move(other.model_)) {}

HostTier::Pin& HostTier::Pin::operator=(Pin&& other) noexcept {
  if (this != &other) {
    if (tier_ != nullptr) tier_->Release(key_);
    tier_ = std::exchange(other.tier_, nullptr);
    key_ = std::move(other.key_);
    model_ = std::move(other.model_);
  }
  return *this;
}

HostTier::Pin::~Pin() {
  if (tier_ != nullptr) tier_->Release(key_);
}

}  // namespace orrery
