#include "cache/timeline.h"

#include <algorithm>

namespace orrery {

ResourceTimeline::ResourceTimeline(int slots) : slots_(static_cast<size_t>(std::max(slots, 1))) {}

int64_t ResourceTimeline::TailNs(const Slot& slot) const {
  return slot.queue.empty() ? slot.free_at_ns : slot.queue.back().at.end_ns;
}

Interval ResourceTimeline::Predict(int64_t earliest_ns, int64_t duration_ns) const {
  std::lock_guard<std::mutex> lock(mu_);
  duration_ns = std::max<int64_t>(duration_ns, 0);
  int64_t best = INT64_MAX;
  for (const Slot& s : slots_) best = std::min(best, std::max(earliest_ns, TailNs(s)));
  return Interval{best, best + duration_ns};
}

uint64_t ResourceTimeline::Reserve(int64_t earliest_ns, int64_t duration_ns, Interval* predicted) {
  std::lock_guard<std::mutex> lock(mu_);
  duration_ns = std::max<int64_t>(duration_ns, 0);
  size_t best_slot = 0;
  int64_t best = INT64_MAX;
  for (size_t i = 0; i < slots_.size(); ++i) {
    int64_t start = std::max(earliest_ns, TailNs(slots_[i]));
    if (start < best) {
      best = start;
      best_slot = i;
    }
  }
  Reservation r{next_id_++, earliest_ns, duration_ns, Interval{best, best + duration_ns}};
  slots_[best_slot].queue.push_back(r);
  if (predicted != nullptr) *predicted = r.at;
  return r.id;
}

std::optional<Interval> ResourceTimeline::Get(uint64_t id) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const Slot& s : slots_) {
    for (const Reservation& r : s.queue) {
      if (r.id == id) return r.at;
    }
  }
  return std::nullopt;
}

bool ResourceTimeline::Remove(uint64_t id, std::optional<int64_t> end_ns) {
  std::lock_guard<std::mutex> lock(mu_);
  for (Slot& s : slots_) {
    for (size_t i = 0; i < s.queue.size(); ++i) {
      if (s.queue[i].id != id) continue;
      const Reservation r = s.queue[i];
      int64_t prev_end;
      if (end_ns.has_value()) {
        const int64_t start = std::min(r.at.start_ns, *end_ns);
        history_.push_back(Interval{start, *end_ns});
        prev_end = *end_ns;
      } else {
        prev_end = i == 0 ? s.free_at_ns : s.queue[i - 1].at.end_ns;
      }
      s.queue.erase(s.queue.begin() + static_cast<std::ptrdiff_t>(i));
      if (i == 0 && end_ns.has_value()) s.free_at_ns = *end_ns;
      // Re-time what was queued behind it on this slot.
      for (size_t j = i; j < s.queue.size(); ++j) {
        Reservation& next = s.queue[j];
        next.at.start_ns = std::max(next.earliest_ns, prev_end);
        next.at.end_ns = next.at.start_ns + next.duration_ns;
        prev_end = next.at.end_ns;
      }
      if (s.queue.empty() && end_ns.has_value()) s.free_at_ns = std::max(s.free_at_ns, *end_ns);
      return true;
    }
  }
  return false;
}

bool ResourceTimeline::Finish(uint64_t id, int64_t end_ns) { return Remove(id, end_ns); }

bool ResourceTimeline::Cancel(uint64_t id) { return Remove(id, std::nullopt); }

int64_t ResourceTimeline::FreeAtNs() const {
  std::lock_guard<std::mutex> lock(mu_);
  int64_t best = INT64_MAX;
  for (const Slot& s : slots_) best = std::min(best, TailNs(s));
  return best;
}

size_t ResourceTimeline::pending() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (const Slot& s : slots_) n += s.queue.size();
  return n;
}

int64_t ResourceTimeline::BusyNs(int64_t from_ns, int64_t to_ns) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto overlap = [&](const Interval& iv) {
    return std::max<int64_t>(0, std::min(to_ns, iv.end_ns) - std::max(from_ns, iv.start_ns));
  };
  int64_t busy = 0;
  for (const Interval& iv : history_) busy += overlap(iv);
  for (const Slot& s : slots_) {
    for (const Reservation& r : s.queue) busy += overlap(r.at);
  }
  return busy;
}

void ResourceTimeline::Prune(int64_t before_ns) {
  std::lock_guard<std::mutex> lock(mu_);
  std::erase_if(history_, [&](const Interval& iv) { return iv.end_ns < before_ns; });
}

}  // namespace orrery
