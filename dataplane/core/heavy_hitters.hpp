// The heaviest (rule state, flow key) pairs of a stream in fixed memory: weighted Space-Saving
// (Metwally, Agrawal, El Abbadi 2005). `capacity` counters; a new key takes the smallest
// counter when all are in use and inherits its weight as its possible overestimate (`error`).
// Guarantees: a key whose true weight is above W / capacity (W: the stream's total) holds a
// counter, and every counter's weight is its key's true weight plus at most `error`
// (error <= W / capacity).
//
// Everything is allocated by the constructor; add() and clear() never allocate. add() costs a
// hash-index probe and a heap sift (O(log capacity)): it runs on sampled packets only
// (flow_sampler.hpp), never on every packet.
#pragma once

#include <cstdint>
#include <vector>

#include "flow_key.hpp"
#include "result.hpp"

namespace sluice {

// One counted key. `weight` is what the sketch ranks by (packets or bytes, as the caller
// chose); `packets` and `bytes` are what the key brought since it took its counter (not
// inherited: lower bounds).
struct FlowCount {
  uint64_t state_id = 0;  // RuleState::id of the rule the key belongs to
  FlowKey key;
  uint64_t weight = 0;
  uint64_t error = 0;  // weight inherited from the key this one replaced (overestimate bound)
  uint64_t packets = 0;
  uint64_t bytes = 0;
};

class HeavyHitters {
 public:
  // Most counters a sketch may hold: heap positions and index entries are 16-bit.
  static constexpr size_t kMaxCapacity = 32768;

  // Whether a capacity can be built: callers check their configuration with it first.
  static Status check_capacity(size_t capacity);

  // `capacity` in [1, kMaxCapacity] (check_capacity; outside it is clamped there, never
  // thrown: no exception leaves the core); `seed` keys the index hash (random per start, so
  // no stream can choose collisions in it).
  HeavyHitters(size_t capacity, uint64_t seed);

  // Counts `weight` for (state_id, key), with the packets and bytes it stands for.
  void add(uint64_t state_id, const FlowKey& key, uint64_t weight, uint64_t packets,
           uint64_t bytes);
  void clear();

  size_t size() const { return size_; }
  size_t capacity() const { return entries_.size(); }
  // The counters in no particular order: [0, size()).
  const FlowCount* begin() const { return entries_.data(); }
  const FlowCount* end() const { return entries_.data() + size_; }
  // The smallest weight held (0 while not full): no key outside the sketch weighs more.
  uint64_t min_weight() const { return size_ < entries_.size() ? 0 : entries_[heap_[0]].weight; }
  // Bytes the sketch holds (fixed from construction).
  size_t memory_bytes() const;

 private:
  static constexpr uint16_t kEmpty = 0xffff;
  uint64_t hash_of(uint64_t state_id, const FlowKey& key) const;
  // The index slot holding (state_id, key), or the empty slot where it would go.
  size_t find_slot(uint64_t state_id, const FlowKey& key, uint64_t hash) const;
  void index_erase(size_t slot);
  void sift_up(size_t pos);
  void sift_down(size_t pos);
  void swap_heap(size_t a, size_t b);

  uint64_t seed_;
  size_t size_ = 0;
  std::vector<FlowCount> entries_;
  std::vector<uint64_t> hashes_;   // per entry: its index hash
  std::vector<uint16_t> heap_;     // min-heap of entry numbers by weight
  std::vector<uint16_t> heap_at_;  // per entry: its position in heap_
  std::vector<uint16_t> index_;    // open addressing (linear probing): entry number or kEmpty
  size_t index_mask_ = 0;
};

}  // namespace sluice
