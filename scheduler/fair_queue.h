// Weighted fair queuing across tenants, with virtual time (start-time fair
// queuing, SFQ), charged by dominant resource share (DRF).
//
// Each tenant has a queue (FIFO per model inside it; the tenant's oldest
// request goes first) and a virtual finish tag F. When a tenant's request is
// dispatched it starts at S = max(V, F) and F becomes S + predicted / weight;
// when it ends, F is corrected by (measured - predicted) / weight. The next
// request comes from the backlogged tenant with the smallest S (ties: the
// tenant name), and the system virtual time V becomes that S. So:
//   - backlogged tenants receive service in proportion to their weights;
//   - work-conserving: an idle tenant is simply not a candidate, its share
//     goes to the others;
//   - no banked credit: a tenant returning from idle starts at max(V, F),
//     i.e. at the current virtual time, not at its old, smaller F.
// Weights can change at any time; they apply to the next charge.
//
// Multi-resource (dominant resource fairness): an item's demand is lane time
// plus, optionally, device time and link/loader bytes. Its charge is its
// dominant share -- the largest of demand / capacity over the resources --
// expressed in lane-ns (times the lane capacity), so that with lane time
// alone the charge is exactly the lane time. Two tenants that load different
// resources are then served so that their dominant shares grow alike,
// instead of the one light on lanes getting most of the dispatches. A
// resource with capacity 0 is not modelled (its demand is ignored).
//
// Items are opaque ids with a predicted cost; the caller keeps the requests.
// Not thread-safe (the scheduler calls it under its lock). Costs: Push O(log
// n), Peek/Pop O(tenants + models of the chosen tenant), Take/Remove O(queue
// of that model), WorkAheadNs O(tenants).
#pragma once

#include <cstdint>
#include <deque>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace orrery {

class FairQueue {
 public:
  struct Item {
    uint64_t id = 0;
    std::string model_id = {};
    int64_t cost_ns = 0;     // predicted lane time
    int64_t device_ns = 0;   // predicted device time (0 = none)
    int64_t link_bytes = 0;  // bytes to move over the link / loader (0 = none)
  };
  // Per resource, how much the system serves per ns.
  struct Capacity {
    double lanes = 1;               // lane-ns per ns
    double devices = 0;             // device-ns per ns; 0 = not modelled
    double link_bytes_per_ns = 0;   // 0 = not modelled
  };
  // A dispatched item and what its tenant was charged.
  struct Dispatch {
    std::string tenant;
    Item item;
    double weight = 1;           // at dispatch, for the correction
    double virtual_start = 0;
  };
  struct TenantView {
    std::string tenant;
    double weight = 1;
    double virtual_finish = 0;
    size_t queued = 0;
    int64_t queued_ns = 0;
    int64_t service_ns = 0;  // charged so far (dominant share in lane-ns, corrected by measured)
  };

  explicit FairQueue(double default_weight = 1.0) : default_weight_(default_weight) {}

  // Applies to later charges and corrections.
  void SetCapacity(const Capacity& capacity) { capacity_ = capacity; }
  // The item's charge: its dominant share in lane-ns (see above).
  int64_t ChargeNs(const Item& item) const;

  // weight > 0 (smaller values are clamped to a tiny positive weight).
  void SetWeight(const std::string& tenant, double weight);
  double weight(const std::string& tenant) const;

  void Push(const std::string& tenant, Item item);
  // What Pop() would return, without dispatching it.
  std::optional<Dispatch> Peek() const;
  // What the tenant's next dispatch would be (its oldest item at its start
  // tag), without dispatching it; nullopt when it has nothing queued.
  std::optional<Dispatch> PeekOf(const std::string& tenant) const;
  // Dispatches the next item by fair order and charges its tenant.
  std::optional<Dispatch> Pop();
  // Dispatches a given queued item out of fair order (a deadline at risk);
  // its tenant is charged exactly as by Pop.
  std::optional<Dispatch> Take(uint64_t id);
  // The virtual start the tenant's next dispatch would get; nullopt when it
  // has nothing queued. O(log tenants).
  std::optional<double> VirtualStartOf(const std::string& tenant) const;
  // Ids of the tenant's queued items of `model_id`, oldest first, at most
  // `max` (batching candidates). O(max).
  std::vector<uint64_t> QueuedOf(const std::string& tenant, const std::string& model_id, size_t max) const;
  // Removes a queued item without charging anyone (dropped before running).
  std::optional<Dispatch> Remove(uint64_t id);
  // A dispatched item ended after `measured_ns` of lane time: corrects its
  // tenant's finish tag and service by the difference between the charge
  // with the measured lane time (other resources as predicted) and the
  // charge at dispatch.
  void Complete(const Dispatch& d, int64_t measured_ns);

  // Predicted lane time dispatched before a new request of `tenant` would
  // start, if every tenant got its weighted share (GPS): the
  // tenant's own queue plus, for every other backlogged tenant u, the part
  // of u's queue whose virtual span lies before the new request's start.
  int64_t WorkAheadNs(const std::string& tenant) const;
  // Whether a request `other` pushed now would start, in virtual time, before
  // one `tenant` pushed now (each after its own queue): while that holds,
  // `other`'s new arrivals go ahead of `tenant`'s newest request, which
  // WorkAheadNs cannot see yet. O(log tenants).
  bool ArrivalGoesAhead(const std::string& other, const std::string& tenant) const;

  double virtual_time() const { return virtual_time_; }
  size_t size() const { return locations_.size(); }
  bool empty() const { return locations_.empty(); }
  size_t queued(const std::string& tenant) const;
  std::vector<TenantView> Tenants() const;

 private:
  struct Queued {
    uint64_t seq;  // arrival order across the tenant's models
    Item item;
  };
  struct Tenant {
    double weight = 1;
    double finish = 0;  // F
    int64_t queued_ns = 0;      // lane time
    int64_t queued_charge = 0;  // dominant-share charges (virtual span x weight)
    size_t queued = 0;
    int64_t service_ns = 0;
    std::map<std::string, std::deque<Queued>> by_model;
  };

  Tenant& GetTenant(const std::string& tenant);
  double StartTag(const Tenant& t) const { return t.finish > virtual_time_ ? t.finish : virtual_time_; }
  // The virtual start of a request the tenant would push now (after its
  // queue); the virtual time for an unknown tenant.
  double NewStartOf(const std::string& tenant) const;
  // The backlogged tenant with the smallest start tag, or null.
  const std::string* NextTenant() const;
  // The model queue holding the tenant's oldest item.
  static std::deque<Queued>* OldestQueue(Tenant& t);
  std::optional<Item> Extract(const std::string& tenant, uint64_t id);
  // Charges the tenant for `item` at its start tag; the virtual time moves
  // to that start, but not past max_virtual_time.
  Dispatch Charge(const std::string& tenant, Item item,
                  double max_virtual_time = std::numeric_limits<double>::infinity());

  double default_weight_;
  Capacity capacity_;
  double virtual_time_ = 0;
  uint64_t next_seq_ = 0;
  std::map<std::string, Tenant> tenants_;
  std::unordered_map<uint64_t, std::string> locations_;  // id -> tenant
};

}  // namespace orrery
