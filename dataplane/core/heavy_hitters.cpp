#include "heavy_hitters.hpp"

#include <algorithm>
#include <string>
#include <utility>

namespace sluice {

Status HeavyHitters::check_capacity(size_t capacity) {
  if (capacity == 0 || capacity > kMaxCapacity)
    return invalid_input("heavy-hitter capacity must be in [1, " + std::to_string(kMaxCapacity) +
                         "], not " + std::to_string(capacity));
  return Ok{};
}

HeavyHitters::HeavyHitters(size_t capacity, uint64_t seed) : seed_(seed) {
  capacity = std::clamp<size_t>(capacity, 1, kMaxCapacity);
  entries_.resize(capacity);
  hashes_.resize(capacity);
  heap_.resize(capacity);
  heap_at_.resize(capacity);
  // At most half full, so a probe ends after a few slots.
  size_t slots = 1;
  while (slots < 2 * capacity) slots <<= 1;
  index_.assign(slots, kEmpty);
  index_mask_ = slots - 1;
}

size_t HeavyHitters::memory_bytes() const {
  return entries_.size() * (sizeof(FlowCount) + sizeof(uint64_t) + 2 * sizeof(uint16_t)) +
         index_.size() * sizeof(uint16_t);
}

uint64_t HeavyHitters::hash_of(uint64_t state_id, const FlowKey& key) const {
  return hash_flow_key(key, seed_ ^ (state_id * 0x9e3779b97f4a7c15ull));
}

size_t HeavyHitters::find_slot(uint64_t state_id, const FlowKey& key, uint64_t hash) const {
  size_t slot = hash & index_mask_;
  while (index_[slot] != kEmpty) {
    const FlowCount& e = entries_[index_[slot]];
    if (hashes_[index_[slot]] == hash && e.state_id == state_id && e.key == key) return slot;
    slot = (slot + 1) & index_mask_;
  }
  return slot;
}

void HeavyHitters::index_erase(size_t slot) {
  // Backward-shift deletion: entries after the hole that probed past it move into it, so
  // every probe still ends at the first empty slot.
  size_t hole = slot;
  size_t next = (hole + 1) & index_mask_;
  while (index_[next] != kEmpty) {
    const size_t home = hashes_[index_[next]] & index_mask_;
    // `next` may fill the hole iff its home is not cyclically within (hole, next].
    const bool stays = hole <= next ? (home > hole && home <= next) : (home > hole || home <= next);
    if (!stays) {
      index_[hole] = index_[next];
      hole = next;
    }
    next = (next + 1) & index_mask_;
  }
  index_[hole] = kEmpty;
}

void HeavyHitters::swap_heap(size_t a, size_t b) {
  std::swap(heap_[a], heap_[b]);
  heap_at_[heap_[a]] = uint16_t(a);
  heap_at_[heap_[b]] = uint16_t(b);
}

void HeavyHitters::sift_up(size_t pos) {
  while (pos > 0) {
    const size_t parent = (pos - 1) / 2;
    if (entries_[heap_[parent]].weight <= entries_[heap_[pos]].weight) return;
    swap_heap(pos, parent);
    pos = parent;
  }
}

void HeavyHitters::sift_down(size_t pos) {
  for (;;) {
    const size_t l = 2 * pos + 1, r = l + 1;
    size_t least = pos;
    if (l < size_ && entries_[heap_[l]].weight < entries_[heap_[least]].weight) least = l;
    if (r < size_ && entries_[heap_[r]].weight < entries_[heap_[least]].weight) least = r;
    if (least == pos) return;
    swap_heap(pos, least);
    pos = least;
  }
}

void HeavyHitters::add(uint64_t state_id, const FlowKey& key, uint64_t weight, uint64_t packets,
                       uint64_t bytes) {
  const uint64_t hash = hash_of(state_id, key);
  const size_t slot = find_slot(state_id, key, hash);
  if (index_[slot] != kEmpty) {  // counted already: its weight only grows
    const uint16_t e = index_[slot];
    FlowCount& c = entries_[e];
    c.weight += weight;
    c.packets += packets;
    c.bytes += bytes;
    sift_down(heap_at_[e]);
    return;
  }
  if (size_ < entries_.size()) {  // a free counter
    const uint16_t e = uint16_t(size_);
    entries_[e] = FlowCount{state_id, key, weight, 0, packets, bytes};
    hashes_[e] = hash;
    index_[slot] = e;
    heap_[size_] = e;
    heap_at_[e] = uint16_t(size_);
    ++size_;
    sift_up(size_ - 1);
    return;
  }
  // Full: the smallest counter changes hands, its weight the newcomer's possible excess.
  const uint16_t e = heap_[0];
  FlowCount& c = entries_[e];
  index_erase(find_slot(c.state_id, c.key, hashes_[e]));
  const uint64_t inherited = c.weight;
  c = FlowCount{state_id, key, inherited + weight, inherited, packets, bytes};
  hashes_[e] = hash;
  // The erase may have shifted entries: look the free slot up again.
  index_[find_slot(state_id, key, hash)] = e;
  sift_down(0);
}

void HeavyHitters::clear() {
  size_ = 0;
  std::fill(index_.begin(), index_.end(), kEmpty);
}

}  // namespace sluice
