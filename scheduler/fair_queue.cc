#include "scheduler/fair_queue.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace orrery {
namespace {
constexpr double kMinWeight = 1e-6;
}  // namespace

FairQueue::Tenant& FairQueue::GetTenant(const std::string& tenant) {
  auto [it, inserted] = tenants_.try_emplace(tenant);
  if (inserted) it->second.weight = default_weight_;
  return it->second;
}

void FairQueue::SetWeight(const std::string& tenant, double weight) {
  GetTenant(tenant).weight = std::max(weight, kMinWeight);
}

double FairQueue::weight(const std::string& tenant) const {
  auto it = tenants_.find(tenant);
  return it == tenants_.end() ? default_weight_ : it->second.weight;
}

int64_t FairQueue::ChargeNs(const Item& item) const {
  const double lanes = std::max(capacity_.lanes, 1e-9);
  double share = static_cast<double>(item.cost_ns) / lanes;  // ns of the whole system
  if (capacity_.devices > 0) share = std::max(share, static_cast<double>(item.device_ns) / capacity_.devices);
  if (capacity_.link_bytes_per_ns > 0) {
    share = std::max(share, static_cast<double>(item.link_bytes) / capacity_.link_bytes_per_ns);
  }
  return std::max<int64_t>(item.cost_ns, std::llround(share * lanes));
}

void FairQueue::Push(const std::string& tenant, Item item) {
  Tenant& t = GetTenant(tenant);
  t.queued_ns += item.cost_ns;
  t.queued_charge += ChargeNs(item);
  ++t.queued;
  locations_[item.id] = tenant;
  std::string model = item.model_id;
  t.by_model[model].push_back(Queued{next_seq_++, std::move(item)});
}

const std::string* FairQueue::NextTenant() const {
  const std::string* best = nullptr;
  double best_start = 0;
  for (const auto& [name, t] : tenants_) {
    if (t.queued == 0) continue;
    double s = StartTag(t);
    if (best == nullptr || s < best_start) {  // map order breaks ties by name
      best = &name;
      best_start = s;
    }
  }
  return best;
}

std::deque<FairQueue::Queued>* FairQueue::OldestQueue(Tenant& t) {
  std::deque<Queued>* oldest = nullptr;
  for (auto& [model, q] : t.by_model) {
    if (!q.empty() && (oldest == nullptr || q.front().seq < oldest->front().seq)) oldest = &q;
  }
  return oldest;
}

std::optional<double> FairQueue::VirtualStartOf(const std::string& tenant) const {
  auto it = tenants_.find(tenant);
  if (it == tenants_.end() || it->second.queued == 0) return std::nullopt;
  return StartTag(it->second);
}

std::optional<FairQueue::Dispatch> FairQueue::Peek() const {
  const std::string* name = NextTenant();
  if (name == nullptr) return std::nullopt;
  return PeekOf(*name);
}

std::optional<FairQueue::Dispatch> FairQueue::PeekOf(const std::string& tenant) const {
  auto it = tenants_.find(tenant);
  if (it == tenants_.end() || it->second.queued == 0) return std::nullopt;
  // OldestQueue does not modify; the const_cast avoids a duplicate helper.
  Tenant& t = const_cast<Tenant&>(it->second);
  std::deque<Queued>* q = OldestQueue(t);
  return Dispatch{tenant, q->front().item, t.weight, StartTag(t)};
}

FairQueue::Dispatch FairQueue::Charge(const std::string& tenant, Item item, double max_virtual_time) {
  Tenant& t = tenants_.at(tenant);
  double start = StartTag(t);
  const int64_t charge = ChargeNs(item);
  t.finish = start + static_cast<double>(charge) / t.weight;
  t.service_ns += charge;
  virtual_time_ = std::max(virtual_time_, std::min(start, max_virtual_time));
  return Dispatch{tenant, std::move(item), t.weight, start};
}

std::optional<FairQueue::Dispatch> FairQueue::Pop() {
  const std::string* name = NextTenant();
  if (name == nullptr) return std::nullopt;
  std::string tenant = *name;
  std::deque<Queued>* q = OldestQueue(tenants_.at(tenant));
  uint64_t id = q->front().item.id;
  std::optional<Item> item = Extract(tenant, id);
  return Charge(tenant, std::move(*item));
}

std::optional<FairQueue::Item> FairQueue::Extract(const std::string& tenant, uint64_t id) {
  Tenant& t = tenants_.at(tenant);
  for (auto& [model, q] : t.by_model) {
    auto it = std::find_if(q.begin(), q.end(), [&](const Queued& e) { return e.item.id == id; });
    if (it == q.end()) continue;
    Item item = std::move(it->item);
    q.erase(it);
    if (q.empty()) t.by_model.erase(model);
    t.queued_ns -= item.cost_ns;
    t.queued_charge -= ChargeNs(item);
    --t.queued;
    locations_.erase(id);
    return item;
  }
  return std::nullopt;
}

std::optional<FairQueue::Dispatch> FairQueue::Take(uint64_t id) {
  auto loc = locations_.find(id);
  if (loc == locations_.end()) return std::nullopt;
  std::string tenant = loc->second;
  std::optional<Item> item = Extract(tenant, id);
  if (!item) return std::nullopt;
  // Out of fair order: the virtual time advances no further than the start
  // of what fair order would have served, so that the tenants passed over
  // keep their place (a tenant back from idle starts there too).
  double fair_start = std::numeric_limits<double>::infinity();
  if (const std::string* next = NextTenant()) fair_start = StartTag(tenants_.at(*next));
  return Charge(tenant, std::move(*item), fair_start);
}

std::vector<uint64_t> FairQueue::QueuedOf(const std::string& tenant, const std::string& model_id,
                                          size_t max) const {
  std::vector<uint64_t> out;
  auto t = tenants_.find(tenant);
  if (t == tenants_.end()) return out;
  auto q = t->second.by_model.find(model_id);
  if (q == t->second.by_model.end()) return out;
  for (const Queued& e : q->second) {
    if (out.size() >= max) break;
    out.push_back(e.item.id);
  }
  return out;
}

std::optional<FairQueue::Dispatch> FairQueue::Remove(uint64_t id) {
  auto loc = locations_.find(id);
  if (loc == locations_.end()) return std::nullopt;
  std::string tenant = loc->second;
  std::optional<Item> item = Extract(tenant, id);
  if (!item) return std::nullopt;
  const Tenant& t = tenants_.at(tenant);
  return Dispatch{tenant, std::move(*item), t.weight, StartTag(t)};
}

void FairQueue::Complete(const Dispatch& d, int64_t measured_ns) {
  auto it = tenants_.find(d.tenant);
  if (it == tenants_.end()) return;
  Tenant& t = it->second;
  Item measured = d.item;
  measured.cost_ns = measured_ns;
  int64_t delta = ChargeNs(measured) - ChargeNs(d.item);
  t.finish += static_cast<double>(delta) / d.weight;
  t.service_ns += delta;
}

double FairQueue::NewStartOf(const std::string& tenant) const {
  auto it = tenants_.find(tenant);
  if (it == tenants_.end()) return virtual_time_;
  return StartTag(it->second) + static_cast<double>(it->second.queued_charge) / it->second.weight;
}

bool FairQueue::ArrivalGoesAhead(const std::string& other, const std::string& tenant) const {
  return NewStartOf(other) < NewStartOf(tenant);
}

int64_t FairQueue::WorkAheadNs(const std::string& tenant) const {
  auto self = tenants_.find(tenant);
  const double x = NewStartOf(tenant);  // the new request's virtual start
  double ahead = self == tenants_.end() ? 0 : static_cast<double>(self->second.queued_ns);
  // Virtual spans are in charges (dominant shares); the work ahead is the
  // lane time of the part of each queue whose span lies before x.
  for (const auto& [name, t] : tenants_) {
    if (name == tenant || t.queued == 0 || t.queued_charge <= 0) continue;
    double span = static_cast<double>(t.queued_charge) / t.weight;
    double before = std::clamp((x - StartTag(t)) / span, 0.0, 1.0);
    ahead += before * static_cast<double>(t.queued_ns);
  }
  return std::llround(ahead);
}

size_t FairQueue::queued(const std::string& tenant) const {
  auto it = tenants_.find(tenant);
  return it == tenants_.end() ? 0 : it->second.queued;
}

std::vector<FairQueue::TenantView> FairQueue::Tenants() const {
  std::vector<TenantView> out;
  out.reserve(tenants_.size());
  for (const auto& [name, t] : tenants_) {
    out.push_back(TenantView{name, t.weight, t.finish, t.queued, t.queued_ns, t.service_ns});
  }
  return out;
}

}  // namespace orrery
