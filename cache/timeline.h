// A resource (the loader, a host -> device link, a device's compute queue) as
// a timeline of reservations on `slots` identical servers: the loader with k
// reads in flight has k slots, a link has one, so concurrent copies queue.
//
// Reserve places work on the slot that frees first (ties: lowest slot), never
// before `earliest_ns`, and returns its predicted [start, end). When work
// finishes (Finish, with the measured end) or is cancelled, the later
// reservations on its slot are re-timed from the real end, so predictions
// stay true as measurements arrive. Finished intervals are kept as busy
// periods for utilisation until Prune drops them.
//
// Thread-safe (one mutex), so that a device's link can be shared by its cache
// and other copies. Costs: Predict/Reserve O(slots), Finish/Get
// O(reservations on the timeline), BusyNs O(history).
#pragma once

#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <vector>

namespace orrery {

struct Interval {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  int64_t duration_ns() const { return end_ns - start_ns; }
};

class ResourceTimeline {
 public:
  explicit ResourceTimeline(int slots);

  ResourceTimeline(const ResourceTimeline&) = delete;
  ResourceTimeline& operator=(const ResourceTimeline&) = delete;

  int slots() const { return static_cast<int>(slots_.size()); }

  // Where work of `duration_ns` (>= 0) would go if reserved now.
  Interval Predict(int64_t earliest_ns, int64_t duration_ns) const;
  // Reserves it; returns an id (> 0) and writes the predicted interval.
  uint64_t Reserve(int64_t earliest_ns, int64_t duration_ns, Interval* predicted);
  // The current prediction for a pending reservation; nullopt once finished.
  std::optional<Interval> Get(uint64_t id) const;
  // The work ended at `end_ns` (measured): its slot is free from then on and
  // its later reservations move accordingly. The interval [predicted start,
  // end_ns) joins the busy history. False for an unknown id.
  bool Finish(uint64_t id, int64_t end_ns);
  // Drops a pending reservation (never ran); later ones move up.
  bool Cancel(uint64_t id);

  // Earliest time any slot has nothing reserved (INT64_MIN if never used).
  int64_t FreeAtNs() const;
  size_t pending() const;
  // Slot-nanoseconds busy within [from_ns, to_ns), finished and pending work
  // counted; divide by (to - from) * slots() for utilisation.
  int64_t BusyNs(int64_t from_ns, int64_t to_ns) const;
  // Forgets finished intervals that ended before `before_ns`.
  void Prune(int64_t before_ns);

 private:
  struct Reservation {
    uint64_t id;
    int64_t earliest_ns;
    int64_t duration_ns;
    Interval at;
  };
  struct Slot {
    std::deque<Reservation> queue;
    int64_t free_at_ns = INT64_MIN;  // end of the last finished work
  };
  int64_t TailNs(const Slot& slot) const;
  bool Remove(uint64_t id, std::optional<int64_t> end_ns);

  mutable std::mutex mu_;
  std::vector<Slot> slots_;
  std::vector<Interval> history_;
  uint64_t next_id_ = 1;
};

}  // namespace orrery
