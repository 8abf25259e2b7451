// The residency logic shared by the host cache (disk -> RAM) and the device
// cache (RAM -> device pages): which model versions are resident in one
// bounded tier, which are moving into it, which are pinned, what to evict and
// when to pre-warm. It moves no bytes itself: moves are returned as actions
// with a predicted start and end on the tier's resource timeline (the loader
// or the link), the caller performs them in predicted-start order and reports
// each one's end with FinishMove. All times come from the injected Clock, so
// every decision is deterministic under a FakeClock.
//
// States per registered model: kAbsent (on the tier below) -> kMoving
// (bytes reserved, move in flight) -> kResident. Pinned (pin count > 0) while
// a request uses it; a pinned or moving entry is never evicted.
//
// Eviction (policy kMissCost), one victim at a time until the new entry fits,
// among resident unpinned entries, smallest first of:
//   1. tenant within its fair share (those over it go first: share =
//      capacity * weight / sum of weights of tenants holding bytes, the
//      requester included; the requester's incoming bytes count);
//   2. expected miss cost per byte: expected rate (req/s) * predicted reload
//      time / bytes. The expected rate is the recent rate (rate_estimator.h),
//      except for a predictable model (idle_histogram.h): 0 before its
//      window opens (it will be pre-warmed), at least 1 / (time left in the
//      window) inside it;
//   3. last use, then key (determinism).
// Policy kLru is plain least-recently-used (no shares, no keep-alive), the
// baseline the benchmarks compare against. A model larger than the tier can
// never fit and is refused at Register (RESOURCE_EXHAUSTED naming both sizes).
//
// Thread-safe (one mutex); every call is O(entries) at most, except eviction,
// O(entries x victims).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/clock.h"
#include "base/windowed_quantile.h"
#include "cache/idle_histogram.h"
#include "cache/model_key.h"
#include "cache/rate_estimator.h"
#include "cache/timeline.h"
#include "cache/transfer_model.h"

namespace orrery {

enum class Residency { kAbsent, kMoving, kResident };
std::string_view ResidencyName(Residency r);

enum class EvictionPolicy { kMissCost, kLru };

struct TierOptions {
  std::string name = "tier";        // "host", "device": used in messages
  int64_t capacity_bytes = 0;       // > 0
  int64_t granule_bytes = 1;        // entries are charged whole granules (device pages)
  int concurrency = 1;              // moves in flight (slots of the timeline)
  // The resource moves run on; null: the cache makes its own with
  // `concurrency` slots. A device cache passes its device's link, so that
  // its transfers queue with every other copy on that link.
  std::shared_ptr<ResourceTimeline> timeline;
  TransferModel::Options transfer;  // the move's cost model
  EvictionPolicy policy = EvictionPolicy::kMissCost;
  bool keepalive = true;            // protect / expire / pre-warm by idle-time windows
  KeepAliveOptions keepalive_options;
  // Pre-warm this long before the predicted reload must start (covers the
  // caller's polling period and queueing on the timeline).
  int64_t prewarm_margin_ns = 50 * kNsPerMs;
  int64_t rate_tau_ns = 30 * kNsPerSec;  // horizon of the request-rate estimate
  // Move slack: PredictReady plans a move's remaining wait longer than the
  // timeline says, by the `quantile` of how much later than predicted recent
  // moves ended ((measured end - start) / (predicted end - start) - 1, for
  // moves predicted at least `min_wait_ns` long; the last `window`, no older
  // than `max_age_ns`), within [0, max]; 0 until `min_samples` were seen.
  // Loads queue behind each other and run on a CPU shared with the lanes,
  // so they end later than predicted in bursts; a request admitted on the
  // bare prediction was loaded and then missed its deadline (api/
  // miss_causes.h). max 0: off (the device tier).
  struct MoveSlack {
    double quantile = 0.99;
    size_t window = 256;
    int64_t max_age_ns = 10 * kNsPerSec;
    size_t min_samples = 20;
    int64_t min_wait_ns = kNsPerMs;
    double max = 0;
  } move_slack;
};

// A move into the tier (a load or a transfer) the caller must perform.
struct TierAction {
  uint64_t id = 0;  // pass to FinishMove
  ModelKey key;
  int64_t bytes = 0;
  Interval predicted;  // on the tier's timeline
  bool prewarm = false;
};

struct Acquisition {
  Residency state_before = Residency::kAbsent;
  int64_t ready_ns = 0;  // predicted time the weights are resident (now when they are)
  std::optional<TierAction> action;  // the move this call started, if any
  std::vector<ModelKey> evicted;     // entries dropped to make room
};

// Where a model stands for a request arriving now (admission's view).
struct Readiness {
  Residency state = Residency::kAbsent;
  int64_t ready_ns = 0;  // predicted time resident (now when it is)
};

struct TierEntryInfo {
  ModelKey key;
  int64_t bytes = 0;
  int64_t charged_bytes = 0;
  Residency state = Residency::kAbsent;
  int pins = 0;           // requests using it + operator pins
  int operator_pins = 0;  // of which OperatorPin
  bool used = false;      // has had a request (last_use_ns is meaningful)
  int64_t last_use_ns = 0;
  double rate_per_sec = 0;
  KeepAliveWindows windows;
};

struct TierStats {
  std::string name;
  int64_t capacity_bytes = 0;
  int64_t used_bytes = 0;      // resident + moving (charged)
  int64_t resident_bytes = 0;
  int64_t pinned_bytes = 0;    // resident and pinned
  size_t entries = 0;          // registered
  size_t resident = 0;
  uint64_t hits = 0;           // acquired while resident
  uint64_t joins = 0;          // acquired while moving (waits for a move in flight)
  uint64_t misses = 0;         // acquired while absent: a cold move
  uint64_t moves_started = 0;
  uint64_t moves_failed = 0;
  uint64_t prewarms = 0;       // moves started ahead of demand
  uint64_t evictions = 0;
  uint64_t expirations = 0;    // unloaded by the keep-alive policy
  int64_t bytes_moved = 0;
  int64_t move_ns = 0;         // summed measured durations of successful moves
  // Integral of resident-but-unpinned bytes over time (byte-ns): memory held
  // for models nobody is using.
  double idle_byte_ns = 0;
  double bytes_per_sec = 0;    // the transfer model's current bandwidth
  double move_slack = 0;       // the slack PredictReady plans moves with now (TierOptions::move_slack)
};

class TierCache {
 public:
  TierCache(const TierOptions& options, const Clock* clock);
  virtual ~TierCache() = default;

  // INVALID_ARGUMENT unless capacity > 0, granule > 0 and capacity is a
  // multiple of granule, concurrency >= 1.
  static Status Validate(const TierOptions& options);

  // RESOURCE_EXHAUSTED if `bytes` can never fit this tier (checked at upload).
  Status CheckFits(const ModelKey& key, int64_t bytes) const;
  // Makes a model known (absent). Idempotent for the same size; a new size is
  // taken only while absent (FAILED_PRECONDITION otherwise). INVALID_ARGUMENT
  // for bytes <= 0; RESOURCE_EXHAUSTED as CheckFits.
  Status Register(const ModelKey& key, int64_t bytes);
  // Forgets it (model deleted); drops its operator pins first.
  // FAILED_PRECONDITION while a request pins it or it is moving.
  Status Unregister(const ModelKey& key);
  // A tenant's weight for the fair share of this tier (default 1).
  Status SetTenantWeight(const std::string& tenant, double weight);

  // A request needs `key` now: records the arrival (rate, idle gaps), pins
  // the entry and, if absent, makes room and starts a move. NOT_FOUND if not
  // registered; UNAVAILABLE (nothing changed) when the room cannot be made
  // because pinned or moving entries hold it: retry after a Release.
  Result<Acquisition> Acquire(const ModelKey& key);
  // Undoes one Acquire. FAILED_PRECONDITION if not pinned.
  Status Release(const ModelKey& key);
  // The caller's move `action_id` ended now; `started_ns` is when it really
  // began (for the bandwidth sample). A failed move leaves the entry absent
  // (its pins stay until released). NOT_FOUND for an unknown action.
  Status FinishMove(uint64_t action_id, int64_t started_ns, const Status& outcome);

  // Starts a move ahead of demand, without pinning, if it fits in free memory
  // or by evicting only unprotected entries that are worth less (lower miss
  // cost per byte) and, when the tenant is over its share, only its own.
  // nullopt when already resident/moving or no such room exists. The
  // entries dropped for the room are appended to `evicted` when given (the
  // caller frees their bytes).
  Result<std::optional<TierAction>> Prewarm(const ModelKey& key, std::vector<ModelKey>* evicted = nullptr);
  // A request for `key` served without this tier (the device tier: one the
  // placement kept on the CPU): counts in the model's request rate and idle
  // gaps, so that its value against resident entries is known, but pins,
  // moves and counts (hits / misses) nothing. NOT_FOUND when unregistered.
  Status NoteDemand(const ModelKey& key);
  // True if `key` is absent, predictable (idle_histogram.h) and should be
  // moving in at time `t_ns`: its expected window opens within the reload
  // time + margin and has not closed.
  bool ShouldPrewarm(const ModelKey& key, int64_t t_ns) const;
  // Every registered key for which ShouldPrewarm(key, t_ns) holds, in key order.
  std::vector<ModelKey> PrewarmDue(int64_t t_ns) const;
  // Unloads resident unpinned entries the keep-alive policy does not expect
  // to be used before they could be reloaded: past their keep-alive window
  // (and, unless predictable with a pre-warm window later than the reload
  // time + margin, idle for keepalive_options.min_idle_ns), or
  // (predictable ones) before their prewarm window by more than the reload
  // time + margin.
  // Returns them. No-op unless options.keepalive.
  std::vector<ModelKey> ExpireIdle();
  // Operator eviction. FAILED_PRECONDITION while pinned or moving.
  Status Evict(const ModelKey& key);
  // Operator pin: pins `key` like a request (never evicted while pinned) and
  // starts its move if absent (evicting as a miss would), but is not a
  // request: no arrival, hit or miss is recorded. Undone by OperatorUnpin
  // only. Errors as Acquire.
  Result<Acquisition> OperatorPin(const ModelKey& key);
  // FAILED_PRECONDITION if `key` has no operator pin; NOT_FOUND if unknown.
  Status OperatorUnpin(const ModelKey& key);
  // Operator prefetch: starts `key`'s move if absent, evicting as a miss
  // would, without pinning it and without recording a request. No action
  // when already resident or moving. Errors as Acquire.
  Result<Acquisition> Load(const ModelKey& key);

  Residency state(const ModelKey& key) const;  // kAbsent for unknown keys
  std::optional<TierEntryInfo> Info(const ModelKey& key) const;
  // Every registered entry, in key order. O(entries).
  std::vector<TierEntryInfo> List() const;
  // Predicted time `key` would be resident if acquired now: now when resident,
  // the move's predicted end when moving, else now's prediction of a new move
  // on the timeline (evictions assumed possible); the wait until then is
  // stretched by the move slack (TierOptions::move_slack). NOT_FOUND if unknown.
  Result<int64_t> PredictReadyNs(const ModelKey& key) const;
  // The same with the state it was predicted from.
  Result<Readiness> PredictReady(const ModelKey& key) const;
  // Predicted duration of a move of `bytes` (the transfer model's).
  int64_t PredictMoveNs(int64_t bytes) const;
  // Where a move of `key`'s bytes that cannot start before `earliest_ns`
  // would sit on the timeline if started now (placement: a device transfer
  // after a host load). NOT_FOUND if unknown.
  Result<Interval> PredictMove(const ModelKey& key, int64_t earliest_ns) const;
  TierStats Stats() const;
  const TierOptions& options() const { return options_; }
  // The resource moves run on (the loader; a device's link).
  const ResourceTimeline& timeline() const { return *timeline_; }

 protected:
  // Hooks for a tier that must place the bytes (device pages): called under
  // the lock when an entry's bytes are reserved (a move starts) and freed
  // (evicted, expired, failed). Never fail: the accounting guarantees room.
  virtual void OnReserve(const ModelKey& /*key*/, int64_t /*charged_bytes*/) {}
  virtual void OnFree(const ModelKey& /*key*/) {}

 private:
  struct Entry {
    explicit Entry(int64_t tau_ns) : rate(tau_ns) {}
    int64_t bytes = 0;
    int64_t charged = 0;
    Residency state = Residency::kAbsent;
    int pins = 0;
    int operator_pins = 0;    // included in pins
    bool seen = false;        // has had a request
    int64_t last_use_ns = 0;  // last request arrival
    RateEstimator rate;
    IdleHistogram idle;
    uint64_t action_id = 0;   // while moving
    Interval move_predicted;  // the move's predicted interval when it started
    int64_t move_started_ns = 0;
  };
  using Entries = std::map<ModelKey, Entry>;

  int64_t Charge(int64_t bytes) const;
  void Tick(int64_t now_ns);
  double ExpectedRate(const Entry& e, int64_t now_ns) const;
  double ValuePerByte(const Entry& e, int64_t now_ns) const;
  // Predicted reload of e (its move now) + the pre-warm margin.
  int64_t ReloadNs(const Entry& e) const;
  // How long after its last use a predictable entry is not expected and could
  // still be reloaded in time (pre-warm window - ReloadNs); 0 when no pre-warm
  // could act on its window (not predictable, or the reload outlasts it).
  int64_t IdleHeadroomNs(const Entry& e, const KeepAliveWindows& w) const;
  bool Protected(const Entry& e, int64_t now_ns) const;
  // The same with e's windows already computed (keepalive on, e seen).
  bool Protected(const Entry& e, const KeepAliveWindows& w, int64_t now_ns) const;
  bool ShouldPrewarmLocked(const Entry& e, int64_t t_ns) const;
  double Share(const std::string& tenant, const std::string& requester) const;
  // Victims whose eviction frees `needed` bytes for `requester`, or nullopt.
  std::optional<std::vector<Entries::iterator>> PlanEviction(const ModelKey& requester,
                                                             int64_t needed, bool prewarm,
                                                             int64_t now_ns);
  // NOT_FOUND naming the key and this tier.
  Status NotRegistered(const ModelKey& key) const;
  void Drop(Entries::iterator it, bool expired);
  TierAction StartMove(Entries::iterator it, int64_t now_ns, bool prewarm);
  enum class Purpose { kRequest, kOperatorPin, kLoad };
  Result<Acquisition> AcquireFor(const ModelKey& key, Purpose purpose);
  TierEntryInfo InfoLocked(const ModelKey& key, const Entry& e, int64_t now_ns) const;
  double Weight(const std::string& tenant) const;

  TierOptions options_;
  const Clock* clock_;
  mutable std::mutex mu_;
  Entries entries_;
  std::map<std::string, double> weights_;
  std::map<std::string, int64_t> tenant_used_;  // charged bytes, resident + moving
  std::map<uint64_t, ModelKey> actions_;
  std::shared_ptr<ResourceTimeline> timeline_;
  TransferModel transfer_;
  int64_t used_ = 0;
  int64_t resident_ = 0;
  int64_t pinned_resident_ = 0;
  int64_t last_tick_ns_ = 0;
  TierStats stats_;
  mutable WindowedQuantile move_lateness_;  // for TierOptions::move_slack
  double MoveSlack(int64_t now_ns) const;
};

}  // namespace orrery
