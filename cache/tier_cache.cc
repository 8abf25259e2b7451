#include "cache/tier_cache.h"

#include <algorithm>
#include <cmath>
#include <tuple>
#include <utility>

namespace orrery {

Status TierCache::NotRegistered(const ModelKey& key) const {
  return Status::NotFound("model " + key.ToString() + " is not registered with the " + options_.name + " cache");
}

std::string_view ResidencyName(Residency r) {
  switch (r) {
    case Residency::kAbsent: return "absent";
    case Residency::kMoving: return "moving";
    case Residency::kResident: return "resident";
  }
  return "unknown";
}

TierCache::TierCache(const TierOptions& options, const Clock* clock)
    : options_(options),
      clock_(clock),
      timeline_(options.timeline != nullptr
                    ? options.timeline
                    : std::make_shared<ResourceTimeline>(std::max(options.concurrency, 1))),
      transfer_(options.transfer),
      move_lateness_(options.move_slack.quantile, options.move_slack.window, options.move_slack.max_age_ns) {
  if (options_.granule_bytes <= 0) options_.granule_bytes = 1;
  last_tick_ns_ = clock_->NowNs();
  stats_.name = options_.name;
  stats_.capacity_bytes = options_.capacity_bytes;
}

Status TierCache::Validate(const TierOptions& o) {
  if (o.capacity_bytes <= 0) {
    return Status::InvalidArgument(o.name + " cache capacity must be > 0 bytes, got " +
                                   std::to_string(o.capacity_bytes));
  }
  if (o.granule_bytes <= 0 || o.capacity_bytes % o.granule_bytes != 0) {
    return Status::InvalidArgument(o.name + " cache capacity " + std::to_string(o.capacity_bytes) +
                                   " is not a positive multiple of its page size " +
                                   std::to_string(o.granule_bytes));
  }
  if (o.concurrency < 1) {
    return Status::InvalidArgument(o.name + " cache concurrency must be >= 1, got " +
                                   std::to_string(o.concurrency));
  }
  return Status::Ok();
}

int64_t TierCache::Charge(int64_t bytes) const {
  const int64_t g = options_.granule_bytes;
  return (bytes + g - 1) / g * g;
}

void TierCache::Tick(int64_t now_ns) {
  if (now_ns > last_tick_ns_) {
    stats_.idle_byte_ns +=
        static_cast<double>(resident_ - pinned_resident_) * static_cast<double>(now_ns - last_tick_ns_);
    last_tick_ns_ = now_ns;
  }
}

Status TierCache::CheckFits(const ModelKey& key, int64_t bytes) const {
  const int64_t charged = Charge(bytes);
  if (charged <= options_.capacity_bytes) return Status::Ok();
  std::string msg = "model " + key.ToString() + " needs " + std::to_string(bytes) + " bytes";
  if (options_.granule_bytes > 1) {
    msg += " (" + std::to_string(charged / options_.granule_bytes) + " pages of " +
           std::to_string(options_.granule_bytes) + ")";
  }
  msg += " but the " + options_.name + " cache holds only " + std::to_string(options_.capacity_bytes) +
         " bytes: it can never be loaded there";
  return Status::ResourceExhausted(std::move(msg));
}

Status TierCache::Register(const ModelKey& key, int64_t bytes) {
  if (bytes <= 0) {
    return Status::InvalidArgument("model " + key.ToString() + " has a weight size of " +
                                   std::to_string(bytes) + " bytes; it must be > 0");
  }
  ORRERY_RETURN_IF_ERROR(CheckFits(key, bytes));
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(key);
  if (it == entries_.end()) {
    Entry e(options_.rate_tau_ns);
    e.bytes = bytes;
    e.charged = Charge(bytes);
    entries_.emplace(key, std::move(e));
    return Status::Ok();
  }
  if (it->second.bytes == bytes) return Status::Ok();
  if (it->second.state != Residency::kAbsent) {
    return Status::FailedPrecondition("model " + key.ToString() + " is " +
                                      std::string(ResidencyName(it->second.state)) + " in the " +
                                      options_.name + " cache with " + std::to_string(it->second.bytes) +
                                      " bytes; its size cannot change to " + std::to_string(bytes));
  }
  it->second.bytes = bytes;
  it->second.charged = Charge(bytes);
  return Status::Ok();
}

Status TierCache::Unregister(const ModelKey& key) {
  std::lock_guard<std::mutex> lock(mu_);
  Tick(clock_->NowNs());
  auto it = entries_.find(key);
  if (it == entries_.end()) return Status::Ok();
  // A deleted model's operator pins go with it (nobody could unpin it by
  // name any more).
  if (Entry& e = it->second; e.operator_pins > 0) {
    e.pins -= e.operator_pins;
    e.operator_pins = 0;
    if (e.pins == 0 && e.state == Residency::kResident) pinned_resident_ -= e.charged;
  }
  if (it->second.pins > 0 || it->second.state == Residency::kMoving) {
    return Status::FailedPrecondition("model " + key.ToString() + " is in use in the " + options_.name +
                                      " cache (pinned or moving); retry once released");
  }
  if (it->second.state == Residency::kResident) Drop(it, /*expired=*/false);
  entries_.erase(it);
  return Status::Ok();
}

Status TierCache::SetTenantWeight(const std::string& tenant, double weight) {
  if (!(weight > 0) || !std::isfinite(weight)) {
    return Status::InvalidArgument("tenant " + tenant + " weight must be a finite number > 0, got " +
                                   std::to_string(weight));
  }
  std::lock_guard<std::mutex> lock(mu_);
  weights_[tenant] = weight;
  return Status::Ok();
}

double TierCache::Weight(const std::string& tenant) const {
  auto it = weights_.find(tenant);
  return it == weights_.end() ? 1.0 : it->second;
}

double TierCache::Share(const std::string& tenant, const std::string& requester) const {
  double sum = 0;
  bool requester_counted = false;
  for (const auto& [t, used] : tenant_used_) {
    if (used <= 0) continue;
    sum += Weight(t);
    if (t == requester) requester_counted = true;
  }
  if (!requester_counted) sum += Weight(requester);
  return static_cast<double>(options_.capacity_bytes) * Weight(tenant) / sum;
}

double TierCache::ExpectedRate(const Entry& e, int64_t now_ns) const {
  const double rate = e.rate.PerSec(now_ns);
  if (!options_.keepalive || !e.seen) return rate;
  const KeepAliveWindows w = e.idle.Windows(options_.keepalive_options);
  if (!w.valid || !w.predictable) return rate;
  const int64_t since = now_ns - e.last_use_ns;
  if (since > w.keepalive_ns) return rate;  // the window was missed: no better guess than the rate
  // Not expected before it could be reloaded: holding it is worth nothing now.
  if (const int64_t headroom = IdleHeadroomNs(e, w); headroom > 0 && since < headroom) return 0;
  // Expected within the window: at least one request before it closes.
  const double remaining_s = static_cast<double>(std::max<int64_t>(w.keepalive_ns - since, kNsPerMs)) / 1e9;
  return std::max(rate, 1.0 / remaining_s);
}

double TierCache::ValuePerByte(const Entry& e, int64_t now_ns) const {
  return ExpectedRate(e, now_ns) * static_cast<double>(transfer_.PredictNs(e.bytes)) /
         static_cast<double>(e.charged);
}

int64_t TierCache::ReloadNs(const Entry& e) const {
  return transfer_.PredictNs(e.bytes) + options_.prewarm_margin_ns;
}

int64_t TierCache::IdleHeadroomNs(const Entry& e, const KeepAliveWindows& w) const {
  if (!w.predictable) return 0;
  return std::max<int64_t>(w.prewarm_ns - ReloadNs(e), 0);
}

bool TierCache::Protected(const Entry& e, int64_t now_ns) const {
  if (!options_.keepalive || !e.seen) return false;
  return Protected(e, e.idle.Windows(options_.keepalive_options), now_ns);
}

bool TierCache::Protected(const Entry& e, const KeepAliveWindows& w, int64_t now_ns) const {
  if (!w.valid) return false;
  const int64_t since = now_ns - e.last_use_ns;
  if (since > w.keepalive_ns) return false;
  // Not expected before it could be reloaded: holding it now only idles memory.
  if (const int64_t headroom = IdleHeadroomNs(e, w); headroom > 0 && since < headroom) return false;
  return true;
}

bool TierCache::ShouldPrewarmLocked(const Entry& e, int64_t t_ns) const {
  if (!options_.keepalive || !e.seen || e.state != Residency::kAbsent) return false;
  const KeepAliveWindows w = e.idle.Windows(options_.keepalive_options);
  if (!w.valid || !w.predictable) return false;
  const int64_t since = t_ns - e.last_use_ns;
  const int64_t reload = ReloadNs(e);
  return since >= 0 && since <= w.keepalive_ns && since >= w.prewarm_ns - reload;
}

std::optional<std::vector<TierCache::Entries::iterator>> TierCache::PlanEviction(
    const ModelKey& requester, int64_t needed, bool prewarm, int64_t now_ns) {
  int64_t free = options_.capacity_bytes - used_;
  std::vector<Entries::iterator> victims;
  if (free >= needed) return victims;

  std::map<std::string, int64_t> used = tenant_used_;
  used[requester.tenant] += needed;
  std::map<std::string, double> share;
  for (const auto& [t, u] : used) share[t] = Share(t, requester.tenant);

  struct Candidate {
    Entries::iterator it;
    bool prot;
    double value;
  };
  const auto req_it = entries_.find(requester);
  const double req_value = req_it == entries_.end() ? 0 : ValuePerByte(req_it->second, now_ns);
  const bool req_over = static_cast<double>(used[requester.tenant]) > share[requester.tenant];
  std::vector<Candidate> cands;
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    const Entry& e = it->second;
    if (e.state != Residency::kResident || e.pins > 0 || it->first == requester) continue;
    Candidate c{it, Protected(e, now_ns), ValuePerByte(e, now_ns)};
    if (prewarm) {
      // Ahead of demand, displace only what is worth less and not expected
      // soon, and never another tenant's model to grow past the share.
      if (c.prot || !(c.value < req_value)) continue;
      if (req_over && it->first.tenant != requester.tenant) continue;
    }
    cands.push_back(c);
  }

  while (free < needed) {
    size_t best = cands.size();
    for (size_t i = 0; i < cands.size(); ++i) {
      if (best == cands.size()) {
        best = i;
        continue;
      }
      const Candidate& a = cands[i];
      const Candidate& b = cands[best];
      bool better;
      if (options_.policy == EvictionPolicy::kLru) {
        better = std::tie(a.it->second.last_use_ns, a.it->first) <
                 std::tie(b.it->second.last_use_ns, b.it->first);
      } else {
        const std::string& ta = a.it->first.tenant;
        const std::string& tb = b.it->first.tenant;
        const int ca = static_cast<double>(used[ta]) > share[ta] ? 0 : 1;
        const int cb = static_cast<double>(used[tb]) > share[tb] ? 0 : 1;
        better = std::make_tuple(ca, a.value, a.it->second.last_use_ns, std::cref(a.it->first)) <
                 std::make_tuple(cb, b.value, b.it->second.last_use_ns, std::cref(b.it->first));
      }
      if (better) best = i;
    }
    if (best == cands.size()) return std::nullopt;
    const Candidate c = cands[best];
    cands.erase(cands.begin() + static_cast<std::ptrdiff_t>(best));
    free += c.it->second.charged;
    used[c.it->first.tenant] -= c.it->second.charged;
    victims.push_back(c.it);
  }
  return victims;
}

void TierCache::Drop(Entries::iterator it, bool expired) {
  Entry& e = it->second;
  OnFree(it->first);
  used_ -= e.charged;
  resident_ -= e.charged;
  auto tu = tenant_used_.find(it->first.tenant);
  if (tu != tenant_used_.end() && (tu->second -= e.charged) <= 0) tenant_used_.erase(tu);
  e.state = Residency::kAbsent;
  ++(expired ? stats_.expirations : stats_.evictions);
}

TierAction TierCache::StartMove(Entries::iterator it, int64_t now_ns, bool prewarm) {
  Entry& e = it->second;
  OnReserve(it->first, e.charged);
  used_ += e.charged;
  tenant_used_[it->first.tenant] += e.charged;
  e.state = Residency::kMoving;
  TierAction action;
  action.key = it->first;
  action.bytes = e.bytes;
  action.prewarm = prewarm;
  action.id = timeline_->Reserve(now_ns, transfer_.PredictNs(e.bytes), &action.predicted);
  e.action_id = action.id;
  e.move_predicted = action.predicted;
  e.move_started_ns = now_ns;
  actions_.emplace(action.id, it->first);
  ++stats_.moves_started;
  if (prewarm) ++stats_.prewarms;
  return action;
}

Result<Acquisition> TierCache::Acquire(const ModelKey& key) { return AcquireFor(key, Purpose::kRequest); }

Result<Acquisition> TierCache::OperatorPin(const ModelKey& key) { return AcquireFor(key, Purpose::kOperatorPin); }

Result<Acquisition> TierCache::Load(const ModelKey& key) { return AcquireFor(key, Purpose::kLoad); }

Result<Acquisition> TierCache::AcquireFor(const ModelKey& key, Purpose purpose) {
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t now = clock_->NowNs();
  Tick(now);
  auto it = entries_.find(key);
  if (it == entries_.end()) {
    return NotRegistered(key);
  }
  Entry& e = it->second;
  Acquisition acq;
  acq.state_before = e.state;
  std::vector<Entries::iterator> victims;
  if (e.state == Residency::kAbsent) {
    std::optional<std::vector<Entries::iterator>> plan = PlanEviction(key, e.charged, false, now);
    if (!plan.has_value()) {
      return Status::Unavailable("the " + options_.name + " cache cannot make room for model " +
                                 key.ToString() + " (" + std::to_string(e.charged) + " bytes): " +
                                 std::to_string(options_.capacity_bytes - used_) +
                                 " bytes free and the rest pinned or loading; retry later");
    }
    victims = std::move(*plan);
  }
  const bool request = purpose == Purpose::kRequest;
  if (request) {
    if (e.seen) e.idle.Add(now - e.last_use_ns);
    e.rate.Arrive(now);
    e.last_use_ns = now;
    e.seen = true;
  }

  switch (e.state) {
    case Residency::kResident:
      if (request) ++stats_.hits;
      acq.ready_ns = now;
      break;
    case Residency::kMoving: {
      if (request) ++stats_.joins;
      std::optional<Interval> iv = timeline_->Get(e.action_id);
      acq.ready_ns = iv.has_value() ? iv->end_ns : now;
      break;
    }
    case Residency::kAbsent:
      if (request) ++stats_.misses;
      for (Entries::iterator v : victims) {
        acq.evicted.push_back(v->first);
        Drop(v, /*expired=*/false);
      }
      acq.action = StartMove(it, now, /*prewarm=*/false);
      acq.ready_ns = acq.action->predicted.end_ns;
      break;
  }
  if (purpose == Purpose::kLoad) return acq;
  if (purpose == Purpose::kOperatorPin) ++e.operator_pins;
  if (e.pins++ == 0 && e.state == Residency::kResident) pinned_resident_ += e.charged;
  return acq;
}

Status TierCache::OperatorUnpin(const ModelKey& key) {
  std::lock_guard<std::mutex> lock(mu_);
  Tick(clock_->NowNs());
  auto it = entries_.find(key);
  if (it == entries_.end()) {
    return NotRegistered(key);
  }
  Entry& e = it->second;
  if (e.operator_pins == 0) {
    return Status::FailedPrecondition("model " + key.ToString() + " is not pinned by an operator in the " +
                                      options_.name + " cache");
  }
  --e.operator_pins;
  if (--e.pins == 0 && e.state == Residency::kResident) pinned_resident_ -= e.charged;
  return Status::Ok();
}

Status TierCache::Release(const ModelKey& key) {
  std::lock_guard<std::mutex> lock(mu_);
  Tick(clock_->NowNs());
  auto it = entries_.find(key);
  if (it == entries_.end() || it->second.pins - it->second.operator_pins == 0) {
    return Status::FailedPrecondition("model " + key.ToString() + " is not pinned by a request in the " +
                                      options_.name + " cache");
  }
  Entry& e = it->second;
  if (--e.pins == 0 && e.state == Residency::kResident) pinned_resident_ -= e.charged;
  return Status::Ok();
}

Status TierCache::FinishMove(uint64_t action_id, int64_t started_ns, const Status& outcome) {
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t now = clock_->NowNs();
  Tick(now);
  auto a = actions_.find(action_id);
  if (a == actions_.end()) {
    return Status::NotFound("no " + options_.name + " cache move with id " + std::to_string(action_id));
  }
  auto it = entries_.find(a->second);
  actions_.erase(a);
  timeline_->Finish(action_id, now);
  if (it == entries_.end()) return Status::Ok();  // cannot happen: Unregister refuses moving entries
  Entry& e = it->second;
  e.action_id = 0;
  if (outcome.ok()) {
    transfer_.Observe(e.bytes, now - started_ns);
    const int64_t predicted_wait = e.move_predicted.end_ns - e.move_started_ns;
    if (predicted_wait >= options_.move_slack.min_wait_ns) {
      move_lateness_.Add(now, static_cast<double>(now - e.move_started_ns) / static_cast<double>(predicted_wait) - 1);
    }
    e.state = Residency::kResident;
    resident_ += e.charged;
    if (e.pins > 0) pinned_resident_ += e.charged;
    stats_.bytes_moved += e.bytes;
    stats_.move_ns += std::max<int64_t>(now - started_ns, 0);
  } else {
    ++stats_.moves_failed;
    OnFree(it->first);
    e.state = Residency::kAbsent;
    used_ -= e.charged;
    auto tu = tenant_used_.find(it->first.tenant);
    if (tu != tenant_used_.end() && (tu->second -= e.charged) <= 0) tenant_used_.erase(tu);
  }
  return Status::Ok();
}

Result<std::optional<TierAction>> TierCache::Prewarm(const ModelKey& key, std::vector<ModelKey>* evicted) {
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t now = clock_->NowNs();
  Tick(now);
  auto it = entries_.find(key);
  if (it == entries_.end()) {
    return NotRegistered(key);
  }
  if (it->second.state != Residency::kAbsent) return std::optional<TierAction>();
  std::optional<std::vector<Entries::iterator>> plan = PlanEviction(key, it->second.charged, true, now);
  if (!plan.has_value()) return std::optional<TierAction>();
  for (Entries::iterator v : *plan) {
    if (evicted != nullptr) evicted->push_back(v->first);
    Drop(v, /*expired=*/false);
  }
  return std::optional<TierAction>(StartMove(it, now, /*prewarm=*/true));
}

Status TierCache::NoteDemand(const ModelKey& key) {
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t now = clock_->NowNs();
  auto it = entries_.find(key);
  if (it == entries_.end()) return NotRegistered(key);
  Entry& e = it->second;
  if (e.seen) e.idle.Add(now - e.last_use_ns);
  e.rate.Arrive(now);
  e.last_use_ns = now;
  e.seen = true;
  return Status::Ok();
}

bool TierCache::ShouldPrewarm(const ModelKey& key, int64_t t_ns) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(key);
  return it != entries_.end() && ShouldPrewarmLocked(it->second, t_ns);
}

std::vector<ModelKey> TierCache::PrewarmDue(int64_t t_ns) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<ModelKey> due;
  for (const auto& [key, e] : entries_) {
    if (ShouldPrewarmLocked(e, t_ns)) due.push_back(key);
  }
  return due;
}

std::vector<ModelKey> TierCache::ExpireIdle() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<ModelKey> expired;
  if (!options_.keepalive) return expired;
  const int64_t now = clock_->NowNs();
  Tick(now);
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    const Entry& e = it->second;
    if (e.state != Residency::kResident || e.pins > 0 || !e.seen) continue;
    const KeepAliveWindows w = e.idle.Windows(options_.keepalive_options);
    if (!w.valid || Protected(e, w, now)) continue;
    // Only a window a pre-warm can act on is worth expiring at: a model used
    // every few ms (regular gaps look "predictable") whose reload takes longer
    // than its gaps would be unloaded by any stall of its callers and make the
    // next request pay the reload, deepening the stall. Such a model waits
    // min_idle_ns like an unpredictable one.
    const bool window_acts = IdleHeadroomNs(e, w) > 0;
    if (!window_acts && now - e.last_use_ns < options_.keepalive_options.min_idle_ns) continue;
    expired.push_back(it->first);
    Drop(it, /*expired=*/true);
  }
  return expired;
}

Status TierCache::Evict(const ModelKey& key) {
  std::lock_guard<std::mutex> lock(mu_);
  Tick(clock_->NowNs());
  auto it = entries_.find(key);
  if (it == entries_.end()) {
    return NotRegistered(key);
  }
  if (it->second.pins > 0 || it->second.state == Residency::kMoving) {
    return Status::FailedPrecondition("model " + key.ToString() + " is in use in the " + options_.name +
                                      " cache (pinned or moving) and cannot be evicted now");
  }
  if (it->second.state == Residency::kResident) Drop(it, /*expired=*/false);
  return Status::Ok();
}

Residency TierCache::state(const ModelKey& key) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(key);
  return it == entries_.end() ? Residency::kAbsent : it->second.state;
}

TierEntryInfo TierCache::InfoLocked(const ModelKey& key, const Entry& e, int64_t now_ns) const {
  TierEntryInfo info;
  info.key = key;
  info.bytes = e.bytes;
  info.charged_bytes = e.charged;
  info.state = e.state;
  info.pins = e.pins;
  info.operator_pins = e.operator_pins;
  info.used = e.seen;
  info.last_use_ns = e.last_use_ns;
  info.rate_per_sec = e.rate.PerSec(now_ns);
  info.windows = e.idle.Windows(options_.keepalive_options);
  return info;
}

std::optional<TierEntryInfo> TierCache::Info(const ModelKey& key) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(key);
  if (it == entries_.end()) return std::nullopt;
  return InfoLocked(key, it->second, clock_->NowNs());
}

std::vector<TierEntryInfo> TierCache::List() const {
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t now = clock_->NowNs();
  std::vector<TierEntryInfo> out;
  out.reserve(entries_.size());
  for (const auto& [key, e] : entries_) out.push_back(InfoLocked(key, e, now));
  return out;
}

Result<int64_t> TierCache::PredictReadyNs(const ModelKey& key) const {
  ORRERY_ASSIGN_OR_RETURN(Readiness r, PredictReady(key));
  return r.ready_ns;
}

Result<Readiness> TierCache::PredictReady(const ModelKey& key) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(key);
  if (it == entries_.end()) {
    return NotRegistered(key);
  }
  const int64_t now = clock_->NowNs();
  const Entry& e = it->second;
  int64_t ready = now;
  switch (e.state) {
    case Residency::kResident: return Readiness{e.state, now};
    case Residency::kMoving: {
      std::optional<Interval> iv = timeline_->Get(e.action_id);
      ready = iv.has_value() ? std::max(now, iv->end_ns) : now;
      break;
    }
    case Residency::kAbsent:
      ready = timeline_->Predict(now, transfer_.PredictNs(e.bytes)).end_ns;
      break;
  }
  const double wait = static_cast<double>(ready - now) * (1 + MoveSlack(now));
  return Readiness{e.state, now + static_cast<int64_t>(std::min(wait, 1e18))};
}

double TierCache::MoveSlack(int64_t now_ns) const {
  const TierOptions::MoveSlack& o = options_.move_slack;
  if (o.max <= 0 || move_lateness_.size() < o.min_samples) return 0;
  return std::clamp(move_lateness_.Value(now_ns), 0.0, o.max);
}

int64_t TierCache::PredictMoveNs(int64_t bytes) const {
  std::lock_guard<std::mutex> lock(mu_);
  return transfer_.PredictNs(bytes);
}

Result<Interval> TierCache::PredictMove(const ModelKey& key, int64_t earliest_ns) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(key);
  if (it == entries_.end()) {
    return NotRegistered(key);
  }
  return timeline_->Predict(std::max(earliest_ns, clock_->NowNs()), transfer_.PredictNs(it->second.bytes));
}

TierStats TierCache::Stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  TierStats s = stats_;
  const int64_t now = clock_->NowNs();
  if (now > last_tick_ns_) {
    s.idle_byte_ns += static_cast<double>(resident_ - pinned_resident_) *
                      static_cast<double>(now - last_tick_ns_);
  }
  s.used_bytes = used_;
  s.resident_bytes = resident_;
  s.pinned_bytes = pinned_resident_;
  s.move_slack = MoveSlack(now);
  s.entries = entries_.size();
  s.resident = 0;
  for (const auto& [k, e] : entries_) s.resident += e.state == Residency::kResident ? 1 : 0;
  s.bytes_per_sec = transfer_.bytes_per_sec();
  return s;
}

}  // namespace orrery
