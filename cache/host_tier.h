// The host tier wired to real loads: HostCache (cache/host_cache.h) decides
// which model versions stay in RAM within --host-cache-bytes, ModelCache
// holds the compiled models, and loader threads perform HostCache's load
// actions (ModelLoader: segment read with io_uring + import) in
// predicted-start order, reporting each one's measured duration with
// FinishMove. An eviction drops the compiled model from ModelCache (requests
// still running keep theirs through their shared_ptr).
//
// A model's size in the tier is its segment's size (the ONNX size for a
// record without a segment) rounded up as its read buffer is: to 2 MiB from
// 2 MiB up, to 4 KiB below. A model larger than the tier is refused at
// upload (CheckFits: RESOURCE_EXHAUSTED naming both sizes).
//
// Acquire pins the version for one request and blocks until it is resident
// (a load on a loader thread, or joining one in flight); the returned Pin
// releases it. When pinned or loading models hold all the room, Acquire waits
// for a release (UNAVAILABLE after `acquire_timeout_ns`). PredictReady says
// beforehand when a version would be resident (for admission).
//
// Keep-alive and pre-warm (cache/README.md): with `keepalive` on, the owner
// calls Maintain() periodically, more often than `prewarm_margin_ns` (the
// server: every --keepalive-tick-ms): it unloads what the idle-time windows say will not
// be used before it could be reloaded, and starts the reloads that are due,
// on the loader threads like any load. Thread-safe.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <queue>
#include <thread>
#include <vector>

#include "base/clock.h"
#include "base/status.h"
#include "cache/host_cache.h"
#include "cache/model_cache.h"
#include "cache/model_key.h"
#include "storage/catalog.h"

namespace orrery {

class HostTier {
 public:
  struct Options {
    int64_t budget_bytes = int64_t{4} << 30;
    int loader_threads = 2;
    int64_t acquire_timeout_ns = 30 * kNsPerSec;
    EvictionPolicy policy = EvictionPolicy::kMissCost;
    // Keep-alive expiry and pre-warm by idle-time windows (needs Maintain()
    // calls); off: residency follows demand and eviction alone.
    bool keepalive = true;
    // How far ahead of its predicted reload start a pre-warm is started;
    // must exceed the period Maintain() is called with.
    int64_t prewarm_margin_ns = 50 * kNsPerMs;
  };

  // What one Maintain() call did.
  struct MaintainReport {
    std::vector<ModelKey> expired;    // unloaded by the keep-alive policy
    std::vector<ModelKey> prewarmed;  // reloads started ahead of demand
  };

  // INVALID_ARGUMENT for a budget <= 0, loader_threads < 1 or a prewarm
  // margin <= 0. `cache` and `clock` must outlive the tier.
  static Result<std::unique_ptr<HostTier>> Create(const Options& options, ModelCache* cache,
                                                  const Clock* clock);
  ~HostTier();  // stops the loaders (after the loads they run)

  static ModelKey KeyOf(const ModelRecord& record);
  // What the tier charges for `record`.
  static int64_t BytesOf(const ModelRecord& record);

  // RESOURCE_EXHAUSTED (naming both sizes) if `record` can never fit.
  Status CheckFits(const ModelRecord& record) const;
  // Makes a version known (at upload after the commit, and at start-up).
  Status Register(const ModelRecord& record);
  // Forgets a deleted version; one still pinned stays until the next start.
  void Unregister(const ModelRecord& record);

  // A pinned, resident model for one request; unpins on destruction.
  class Pin {
   public:
    Pin() = default;
    Pin(Pin&& other) noexcept;
    Pin& operator=(Pin&& other) noexcept;
    ~Pin();
    const ModelCache::ModelPtr& model() const { return model_; }
    // Bytes this acquisition loaded into the tier: the model's size when it
    // started the load (a miss), 0 when it hit or joined a load in flight.
    // What metering bills the request for.
    int64_t bytes_loaded() const { return bytes_loaded_; }
    // How the acquisition found the version (hit: resident, join: moving,
    // miss: absent), and how long it waited for room first (pinned or loading models held it): what a
    // request that missed its deadline is traced with (api/miss_causes.h).
    Residency state_before() const { return state_before_; }
    int64_t room_wait_ns() const { return room_wait_ns_; }

   private:
    friend class HostTier;
    HostTier* tier_ = nullptr;
    ModelKey key_;
    ModelCache::ModelPtr model_;
    int64_t bytes_loaded_ = 0;
    Residency state_before_ = Residency::kResident;
    int64_t room_wait_ns_ = 0;
  };
  // Blocks for the load on a miss. Errors: the load's (NOT_FOUND if the
  // version is gone, ...), RESOURCE_EXHAUSTED for a model that never fits,
  // UNAVAILABLE when no room was freed within the timeout.
  // With wait_for_room false, UNAVAILABLE at once instead of waiting.
  Result<Pin> Acquire(const ModelRecord& record, bool wait_for_room = true);

  // The state `record` is in (resident, loading, absent) and the predicted
  // time (on clock()) it would be resident if a request acquired it now:
  // now when resident, a load's predicted end on the loader timeline when
  // loading or absent. Records no request. Errors: NOT_FOUND /
  // RESOURCE_EXHAUSTED as Register (it registers on demand).
  Result<Readiness> PredictReady(const ModelRecord& record);

  // Starts loading `record` if it is absent, without waiting or pinning:
  // for a request that admission rejected because of the load, so that the
  // model's next requests find it resident or loading, instead of every
  // short-deadline request being rejected for a load that never starts.
  // Not a request (no miss recorded, nobody billed). Uses only an idle
  // loader: UNAVAILABLE (nothing started) while any load is in flight, or
  // when pinned or loading models hold the room.
  Status StartLoad(const ModelRecord& record);

  // One keep-alive tick: ExpireIdle, then Prewarm for every model whose
  // reload is due now (PrewarmDue); with keepalive off, nothing of that.
  // Either way, at most once a second and only after models were evicted
  // or expired, malloc_trim returns the freed pages of glibc's arenas (what
  // dropped models' plans and run states leave there). O(entries).
  MaintainReport Maintain();

  TierStats stats() const { return host_->Stats(); }
  const Options& options() const { return options_; }

  // ---- Operator actions (AdminService). None of them is a request: no
  // arrival, hit or miss is recorded, and nobody is billed for their loads.

  // Every registered version, in key order. O(entries).
  std::vector<TierEntryInfo> List() const { return host_->List(); }
  // NOT_FOUND if `key` is not registered.
  Result<TierEntryInfo> Info(const ModelKey& key) const;
  // The compiled model of `key` when it is in host RAM now, else null.
  // Never loads, records nothing (the device tier's GPU transfer reads the
  // weights it uploads from it: api/device_tier.h).
  ModelCache::ModelPtr Peek(const ModelKey& key);
  // Drops a resident version (and its compiled model). No-op when absent;
  // FAILED_PRECONDITION while pinned or loading; NOT_FOUND if unknown.
  Status Evict(const ModelKey& key);
  // Pins `record` until OperatorUnpin (never evicted meanwhile), loading it
  // first if absent; blocks until it is resident. UNAVAILABLE at once (no
  // wait) when pinned or loading models hold the room; a failed load undoes
  // the pin and returns the load's error.
  Status OperatorPin(const ModelRecord& record);
  // FAILED_PRECONDITION if there is no operator pin; NOT_FOUND if unknown.
  Status OperatorUnpin(const ModelKey& key);
  // Loads `record` if absent (evicting as a miss would) without pinning it;
  // blocks until resident. UNAVAILABLE at once when there is no room.
  Status Prefetch(const ModelRecord& record);
  // The clock the tier's times (TierEntryInfo::last_use_ns) are on.
  const Clock& clock() const { return *clock_; }

  HostTier(const HostTier&) = delete;
  HostTier& operator=(const HostTier&) = delete;

 private:
  void TrimAfterDrops();  // called by Maintain (one thread)
  uint64_t trimmed_at_drops_ = 0;
  int64_t trimmed_at_ns_ = INT64_MIN / 2;

  struct Job {
    TierAction action;
    ModelRecord record;
    bool operator<(const Job& o) const {  // priority_queue: earliest start on top
      return action.predicted.start_ns > o.action.predicted.start_ns ||
             (action.predicted.start_ns == o.action.predicted.start_ns && action.id > o.action.id);
    }
  };

  HostTier(const Options& options, std::unique_ptr<HostCache> host, ModelCache* cache, const Clock* clock);
  void LoaderLoop();
  void Release(const ModelKey& key);
  // Drops evicted models' compiled forms and queues `acq`'s load, if any.
  // Returns what to wait on for `key` to be resident: the new load, a load
  // in flight, or nothing (invalid) when it already is.
  std::shared_future<Status> StartOrJoin(const Acquisition& acq, const ModelKey& key, const ModelRecord& record);
  // OperatorPin (pin) or Prefetch: the host cache's OperatorPin / Load, with
  // registration on demand, then waits for residency.
  Status OperatorLoad(const ModelRecord& record, bool pin);

  const Options options_;
  std::unique_ptr<HostCache> host_;
  ModelCache* cache_;
  const Clock* clock_;

  std::mutex mu_;
  std::condition_variable work_cv_;     // loaders: a job or stop
  std::condition_variable release_cv_;  // acquirers waiting for room
  std::priority_queue<Job> jobs_;
  // Loads queued or running, by key: what a request that joins waits on.
  struct Load {
    uint64_t action_id = 0;
    std::shared_future<Status> done;
  };
  std::map<ModelKey, Load> loads_;
  std::map<uint64_t, std::promise<Status>> promises_;  // by action id
  // Every registered version's record: what a pre-warm loads.
  std::map<ModelKey, ModelRecord> records_;
  bool stop_ = false;
  std::vector<std::thread> loaders_;
};

}  // namespace orrery
