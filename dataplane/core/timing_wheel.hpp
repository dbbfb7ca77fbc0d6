// Holds items until their departure time: the shaper's TX queue (one per worker, single-threaded)
// and the offline replay's departure queue.
//
// A ring of time slots of width slot_ns covering the horizon; each slot is an intrusive FIFO list
// over a node pool allocated in the constructor, so push() and drain() never allocate. Items are
// released in slot order and, within a slot, in push order.
//
// Granularity: an item is due once its slot has started, i.e. drain(now) may release an item up
// to slot_ns - 1 before its depart_ns. fn receives the exact depart_ns, so a caller that must never
// be early can stamp departures with it, or push depart_ns + slot_ns - 1.
//
// Not thread-safe: one owner (a worker or the replay loop).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "result.hpp"

namespace sluice {

template <class T>
class TimingWheel {
 public:
  // slot_ns: slot width (e.g. 1000 = 1 us). horizon_ns: the furthest departure accepted, relative
  // to the wheel's current time (start_ns, then the latest now_ns given to drain()).
  // capacity: max items held. An invalid_input error for a zero slot width, a ring that would
  // need more than 2^28 slots, or capacity >= 2^32.
  static Result<TimingWheel> create(uint64_t slot_ns, uint64_t horizon_ns, size_t capacity,
                                    uint64_t start_ns) {
    if (slot_ns == 0) return invalid_input("timing wheel: slot width must be > 0");
    if (capacity >= kNil)
      return invalid_input("timing wheel: capacity " + std::to_string(capacity) +
                           " too large (at most " + std::to_string(kNil - 1) + ")");
    // Any accepted departure is at most ceil(horizon/slot) slots past the current one, so this
    // many slots never alias two live departure slots.
    const uint64_t span = horizon_ns / slot_ns + (horizon_ns % slot_ns != 0) + 1;
    if (span > kMaxSlots)
      return invalid_input("timing wheel: horizon " + std::to_string(horizon_ns) + " ns / slot " +
                           std::to_string(slot_ns) + " ns needs more than 2^28 slots");
    return TimingWheel(slot_ns, horizon_ns, span, capacity, start_ns);
  }

  // False (and the item stays with the caller) if the wheel is full or depart_ns is beyond the
  // current time + horizon. A depart_ns in the past is due at once.
  bool push(uint64_t depart_ns, T&& item) { return emplace(depart_ns, std::move(item)); }
  bool push(uint64_t depart_ns, const T& item) { return emplace(depart_ns, item); }

  // Releases every item whose slot has started at now_ns (slot order, push order within a slot),
  // calling fn(depart_ns, T&&), at most max_items per call; returns the number released. A
  // now_ns earlier than a previous one releases nothing new. Cost: O(items released + slots
  // walked), and slots walked never exceed the ring, however far now_ns jumps. fn may push().
  template <class F>
  size_t drain(uint64_t now_ns, F&& fn, size_t max_items = std::numeric_limits<size_t>::max()) {
    now_ns_ = std::max(now_ns_, now_ns);
    const uint64_t due = now_ns_ / slot_ns_;
    size_t released = 0;
    // All items lie in [cur_, cur_ + ring), so the walk ends within one turn of the ring.
    while (size_ != 0 && cur_ <= due) {
      Slot& s = ring_[cur_ & mask_];
      while (s.head != kNil) {
        if (released == max_items) return released;
        release_head(s, fn);
        ++released;
      }
      if (cur_ == due) break;
      ++cur_;
    }
    if (size_ == 0) cur_ = std::max(cur_, due);  // jump over empty time in O(1)
    return released;
  }

  // Releases everything, in departure-slot order (shutdown / end of replay). fn must not push.
  template <class F>
  size_t drain_all(F&& fn) {
    size_t released = 0;
    for (uint64_t i = 0; size_ != 0; ++i) {
      Slot& s = ring_[(cur_ + i) & mask_];
      while (s.head != kNil) {
        release_head(s, fn);
        ++released;
      }
    }
    return released;
  }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  size_t capacity() const { return nodes_.size(); }
  uint64_t now_ns() const { return now_ns_; }
  uint64_t slot_ns() const { return slot_ns_; }
  uint64_t horizon_ns() const { return horizon_ns_; }

 private:
  static constexpr uint32_t kNil = std::numeric_limits<uint32_t>::max();

  // Parameters checked by create().
  TimingWheel(uint64_t slot_ns, uint64_t horizon_ns, uint64_t span, size_t capacity,
              uint64_t start_ns)
      : slot_ns_(slot_ns), horizon_ns_(horizon_ns), now_ns_(start_ns) {
    uint64_t nslots = 1;
    while (nslots < span) nslots <<= 1;
    mask_ = nslots - 1;
    ring_.resize(nslots);
    nodes_.resize(capacity);
    for (size_t i = 0; i < capacity; ++i) nodes_[i].next = i + 1 < capacity ? uint32_t(i + 1) : kNil;
    free_ = capacity ? 0 : kNil;
    cur_ = start_ns / slot_ns;
  }
  static constexpr uint64_t kMaxSlots = uint64_t{1} << 28;

  struct Node {
    uint64_t depart_ns = 0;
    uint32_t next = kNil;
    std::optional<T> item;  // engaged while the node is queued
  };
  struct Slot {
    uint32_t head = kNil;
    uint32_t tail = kNil;
  };

  template <class U>
  bool emplace(uint64_t depart_ns, U&& item) {
    if (free_ == kNil) return false;
    if (depart_ns > now_ns_ && depart_ns - now_ns_ > horizon_ns_) return false;
    const uint64_t slot = std::max(depart_ns / slot_ns_, cur_);
    // After partial drains cur_ can lag behind now; never let the ring wrap onto it.
    if (slot - cur_ > mask_) return false;
    const uint32_t n = free_;
    Node& node = nodes_[n];
    free_ = node.next;
    node.depart_ns = depart_ns;
    node.next = kNil;
    node.item.emplace(std::forward<U>(item));
    Slot& s = ring_[slot & mask_];
    if (s.tail == kNil)
      s.head = n;
    else
      nodes_[s.tail].next = n;
    s.tail = n;
    ++size_;
    return true;
  }

  // Unlinks and frees the head node before calling fn, so fn may push() into the wheel.
  template <class F>
  void release_head(Slot& s, F& fn) {
    const uint32_t n = s.head;
    Node& node = nodes_[n];
    s.head = node.next;
    if (s.head == kNil) s.tail = kNil;
    const uint64_t depart = node.depart_ns;
    T item = std::move(*node.item);
    node.item.reset();
    node.next = free_;
    free_ = n;
    --size_;
    fn(depart, std::move(item));
  }

  uint64_t slot_ns_;
  uint64_t horizon_ns_;
  uint64_t now_ns_;  // the wheel's current time: start_ns, then the latest drain() time
  uint64_t cur_;     // absolute number of the oldest slot that may hold items (<= now's slot)
  uint64_t mask_;
  std::vector<Slot> ring_;
  std::vector<Node> nodes_;
  uint32_t free_;
  size_t size_ = 0;
};

}  // namespace sluice
