// What the flow-table tests share: hash sources, an init that marks a slot's owner, and
// readers of the table's state.
#pragma once

#include <atomic>
#include <cstdint>
#include <set>
#include <vector>

#include <gtest/gtest.h>

#include "flow_table.hpp"

namespace sluice::flow_table_testing {

inline constexpr uint64_t kTick = uint64_t{1} << FlowTable::kTickShift;  // ~1.05 ms
inline constexpr uint64_t kNever = 0;                                      // idle_timeout: no expiry
using Outcome = FlowTable::Outcome;

// splitmix64: well-spread distinct hashes from a counter.
inline uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

using State = std::atomic<uint64_t>*;
using ConstState = const std::atomic<uint64_t>*;

// init callback that records the flow's hash in state[0] (so tests can check who owns a slot).
inline auto init_with(uint64_t hash) {
  return [hash](State s) {
    s[0].store(hash, std::memory_order_relaxed);
    s[1].store(~hash, std::memory_order_relaxed);
  };
}

// FlowTable::create() for a table the test needs: a refusal fails the test (value() of an
// error throws bad_variant_access, which gtest reports).
inline FlowTable make_table(uint64_t capacity, uint64_t idle_timeout_ns,
                            uint64_t min_evict_idle_ns = 1'000'000, unsigned state_words = 2,
                            unsigned slots_per_flow = FlowTable::kSlack) {
  auto t = FlowTable::create(capacity, idle_timeout_ns, min_evict_idle_ns, state_words, slots_per_flow);
  if (!t) ADD_FAILURE() << t.error().message;
  return std::move(t).value();
}

// A table whose flows of capacity <= 8 all share one set (no slack), for set-level tests.
inline FlowTable one_set(uint64_t capacity, uint64_t idle_timeout_ns, uint64_t min_evict_idle_ns) {
  return make_table(capacity, idle_timeout_ns, min_evict_idle_ns, 2, 1);
}

inline FlowTable::Lookup put(FlowTable& t, uint64_t hash, uint64_t now_ns) {
  return t.find_or_insert(hash, now_ns, init_with(hash));
}

// Fingerprints of the live (published) flows in the table; fails the test on pending leftovers.
inline std::multiset<uint64_t> live_tags(const FlowTable& t) {
  std::multiset<uint64_t> tags;
  for (size_t i = 0; i < t.slot_count(); ++i) {
    const uint64_t word = t.tag_word(i);
    EXPECT_EQ(word & FlowTable::kPending, 0u) << "slot " << i << " left pending";
    if (word != FlowTable::kEmpty) tags.insert(t.fingerprint_at(i));
  }
  return tags;
}

// n distinct hashes that all map to the same set as `seed_hash`.
inline std::vector<uint64_t> same_set_hashes(const FlowTable& t, size_t n, uint64_t salt = 0) {
  std::vector<uint64_t> out;
  const size_t set = t.set_index(mix(salt));
  for (uint64_t i = salt; out.size() < n; ++i)
    if (t.set_index(mix(i)) == set) out.push_back(mix(i));
  return out;
}

}  // namespace sluice::flow_table_testing
