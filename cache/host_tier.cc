#include "cache/host_tier.h"

#include <malloc.h>
#include <pthread.h>

#include <utility>

#include <spdlog/spdlog.h>

#include "storage/aligned_buffer.h"

namespace orrery {

ModelKey HostTier::KeyOf(const ModelRecord& record) {
  return ModelKey{record.tenant_id(), record.name(), record.version()};
}

int64_t HostTier::BytesOf(const ModelRecord& record) {
  const uint64_t b = std::max<uint64_t>(record.segment_bytes() > 0 ? record.segment_bytes() : record.size_bytes(), 1);
  // What the segment's read buffer really takes (the loaded model lives in
  // it): AlignedBuffer rounds to whole 2 MiB huge pages from 2 MiB up, to
  // 4 KiB below. Charging the bare size let 1,000 models of ~3.3 MB hold
  // ~20% more RAM than --host-cache-bytes.
  const uint64_t unit = b >= AlignedBuffer::kHugePage ? AlignedBuffer::kHugePage : AlignedBuffer::kAlignment;
  return static_cast<int64_t>((b + unit - 1) / unit * unit);
}

Result<std::unique_ptr<HostTier>> HostTier::Create(const Options& options, ModelCache* cache,
                                                   const Clock* clock) {
  if (options.loader_threads < 1) return Status::InvalidArgument("host tier: loader threads must be >= 1");
  if (options.prewarm_margin_ns <= 0) return Status::InvalidArgument("host tier: the prewarm margin must be > 0");
  HostCacheOptions hc;
  hc.budget_bytes = options.budget_bytes;
  hc.load_concurrency = options.loader_threads;
  hc.policy = options.policy;
  // Expiry and pre-warm happen in Maintain(), which the owner calls.
  hc.keepalive = options.keepalive && options.policy != EvictionPolicy::kLru;
  hc.prewarm_margin_ns = options.prewarm_margin_ns;
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

Status HostTier::Register(const ModelRecord& record) {
  ORRERY_RETURN_IF_ERROR(host_->Register(KeyOf(record), BytesOf(record)));
  std::lock_guard<std::mutex> lock(mu_);
  records_.insert_or_assign(KeyOf(record), record);
  return Status::Ok();
}

void HostTier::Unregister(const ModelRecord& record) {
  Status s = host_->Unregister(KeyOf(record));
  if (!s.ok() && s.code() != StatusCode::kNotFound) {
    spdlog::debug("host tier: {} stays registered: {}", KeyOf(record).ToString(), s.message());
    return;
  }
  std::lock_guard<std::mutex> lock(mu_);
  records_.erase(KeyOf(record));
}

Result<Readiness> HostTier::PredictReady(const ModelRecord& record) {
  Result<Readiness> ready = host_->PredictReady(KeyOf(record));
  if (ready.status().code() != StatusCode::kNotFound) return ready;
  ORRERY_RETURN_IF_ERROR(Register(record));
  return host_->PredictReady(KeyOf(record));
}

void HostTier::TrimAfterDrops() {
#ifdef __GLIBC__
  // Dropped models free their segment buffers (mmapped: back to the kernel
  // at once) and their plans, run states and small structures, which stay in
  // glibc's arenas as free chunks. Give those pages back too, at most once
  // a second and only after something was dropped.
  const TierStats st = host_->Stats();
  const uint64_t drops = st.evictions + st.expirations;
  const int64_t now = clock_->NowNs();
  if (drops == trimmed_at_drops_ || now - trimmed_at_ns_ < kNsPerSec) return;
  trimmed_at_drops_ = drops;
  trimmed_at_ns_ = now;
  malloc_trim(0);
  // Trimming locks each arena while it returns pages; a long one stalls the
  // lanes' allocations (a suspect for bursts of late requests).
  spdlog::debug("host tier: malloc_trim took {} us", (clock_->NowNs() - now) / 1000);
#endif
}

HostTier::MaintainReport HostTier::Maintain() {
  MaintainReport report;
  TrimAfterDrops();
  if (!host_->options().keepalive) return report;
  report.expired = host_->ExpireIdle();
  for (const ModelKey& k : report.expired) cache_->EraseVersion(k.tenant, k.model, k.version);
  if (!report.expired.empty()) release_cv_.notify_all();
  for (const ModelKey& key : host_->PrewarmDue(clock_->NowNs())) {
    ModelRecord record;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = records_.find(key);
      if (it == records_.end()) continue;
      record = it->second;
    }
    Acquisition acq;
    Result<std::optional<TierAction>> started = host_->Prewarm(key, &acq.evicted);
    if (!started.ok() || !started->has_value()) continue;  // no room worth taking, or gone
    acq.action = **started;
    (void)StartOrJoin(acq, key, record);  // nobody waits for a pre-warm
    report.prewarmed.push_back(key);
  }
  return report;
}

void HostTier::LoaderLoop() {
  // Named, so that its CPU time shows apart from the lanes' (top -H, /proc).
  (void)pthread_setname_np(pthread_self(), "orrery-loader");
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
  const int64_t asked_ns = clock_->NowNs();
  const int64_t give_up = asked_ns + options_.acquire_timeout_ns;
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
  pin.state_before_ = acq->state_before;
  pin.room_wait_ns_ = clock_->NowNs() - asked_ns;
  std::shared_future<Status> wait = StartOrJoin(*acq, key, record);
  if (wait.valid()) ORRERY_RETURN_IF_ERROR(wait.get());
  if (acq->action.has_value()) pin.bytes_loaded_ = acq->action->bytes;
  // Resident: the compiled model is in ModelCache (Get only loads here if it
  // was dropped meanwhile, e.g. by a delete of the model).
  ORRERY_ASSIGN_OR_RETURN(pin.model_, cache_->Get(record));
  return pin;
}

std::shared_future<Status> HostTier::StartOrJoin(const Acquisition& acq, const ModelKey& key,
                                                 const ModelRecord& record) {
  for (const ModelKey& k : acq.evicted) cache_->EraseVersion(k.tenant, k.model, k.version);
  std::lock_guard<std::mutex> lock(mu_);
  if (acq.action.has_value()) {
    std::promise<Status>& promise = promises_[acq.action->id];
    std::shared_future<Status> wait = promise.get_future().share();
    loads_[key] = Load{acq.action->id, wait};
    jobs_.push(Job{*acq.action, record});
    work_cv_.notify_one();
    return wait;
  }
  if (auto it = loads_.find(key); it != loads_.end()) return it->second.done;  // joins a load in flight
  return {};
}

ModelCache::ModelPtr HostTier::Peek(const ModelKey& key) {
  std::optional<ModelRecord> record;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = records_.find(key);
    if (it == records_.end()) return nullptr;
    record = it->second;
  }
  return cache_->Peek(*record);
}

Result<TierEntryInfo> HostTier::Info(const ModelKey& key) const {
  std::optional<TierEntryInfo> info = host_->Info(key);
  if (!info.has_value()) {
    return Status::NotFound("model " + key.ToString() + " is not registered with the host cache");
  }
  return *info;
}

Status HostTier::Evict(const ModelKey& key) {
  ORRERY_RETURN_IF_ERROR(host_->Evict(key));
  // Requests already running keep their compiled model through its shared_ptr.
  cache_->EraseVersion(key.tenant, key.model, key.version);
  release_cv_.notify_all();  // room for acquirers waiting on a full cache
  return Status::Ok();
}

Status HostTier::OperatorLoad(const ModelRecord& record, bool pin) {
  const ModelKey key = KeyOf(record);
  Result<Acquisition> acq = pin ? host_->OperatorPin(key) : host_->Load(key);
  if (acq.status().code() == StatusCode::kNotFound) {
    ORRERY_RETURN_IF_ERROR(Register(record));
    acq = pin ? host_->OperatorPin(key) : host_->Load(key);
  }
  ORRERY_RETURN_IF_ERROR(acq.status());
  std::shared_future<Status> wait = StartOrJoin(*acq, key, record);
  Status loaded = wait.valid() ? wait.get() : Status::Ok();
  // A pinned version's compiled model must be there (it may have been
  // dropped meanwhile by a delete). Not for a prefetch: unpinned, it may be
  // evicted again already, and Get would then hold a model the tier does
  // not account for.
  if (loaded.ok() && pin) loaded = cache_->Get(record).status();
  if (!loaded.ok() && pin) {
    if (Status s = host_->OperatorUnpin(key); !s.ok()) {
      spdlog::warn("host tier: undoing the pin of {}: {}", key.ToString(), s.message());
    }
    release_cv_.notify_all();
  }
  return loaded;
}

Status HostTier::StartLoad(const ModelRecord& record) {
  // Only on an idle loader: loads started for rejected requests while
  // others are queued would lengthen every predicted load, reject more
  // requests and start more loads (a storm of 8,000 loads in 20 s in the
  // many-models scenario).
  const TierStats stats = host_->Stats();
  if (stats.used_bytes > stats.resident_bytes) return Status::Unavailable("the loader is busy with other loads");
  const ModelKey key = KeyOf(record);
  Result<Acquisition> acq = host_->Load(key);
  if (acq.status().code() == StatusCode::kNotFound) {
    ORRERY_RETURN_IF_ERROR(Register(record));
    acq = host_->Load(key);
  }
  ORRERY_RETURN_IF_ERROR(acq.status());
  (void)StartOrJoin(*acq, key, record);
  return Status::Ok();
}

Status HostTier::OperatorPin(const ModelRecord& record) { return OperatorLoad(record, /*pin=*/true); }

Status HostTier::Prefetch(const ModelRecord& record) { return OperatorLoad(record, /*pin=*/false); }

Status HostTier::OperatorUnpin(const ModelKey& key) {
  ORRERY_RETURN_IF_ERROR(host_->OperatorUnpin(key));
  release_cv_.notify_all();
  return Status::Ok();
}

void HostTier::Release(const ModelKey& key) {
  if (Status s = host_->Release(key); !s.ok()) {
    spdlog::warn("host tier: releasing {}: {}", key.ToString(), s.message());
  }
  release_cv_.notify_all();
}

HostTier::Pin::Pin(Pin&& other) noexcept
    : tier_(std::exchange(other.tier_, nullptr)),
      key_(std::move(other.key_)),
      model_(std::move(other.model_)),
      bytes_loaded_(std::exchange(other.bytes_loaded_, 0)),
      state_before_(other.state_before_),
      room_wait_ns_(other.room_wait_ns_) {}

HostTier::Pin& HostTier::Pin::operator=(Pin&& other) noexcept {
  if (this != &other) {
    if (tier_ != nullptr) tier_->Release(key_);
    tier_ = std::exchange(other.tier_, nullptr);
    key_ = std::move(other.key_);
    model_ = std::move(other.model_);
    bytes_loaded_ = std::exchange(other.bytes_loaded_, 0);
    state_before_ = other.state_before_;
    room_wait_ns_ = other.room_wait_ns_;
  }
  return *this;
}

HostTier::Pin::~Pin() {
  if (tier_ != nullptr) tier_->Release(key_);
}

}  // namespace orrery
