#include "flow_table.hpp"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "flow_table_helpers.hpp"

namespace sluice {
namespace {

using namespace flow_table_testing;

TEST(FlowTable, LayoutAndMemory) {
  for (unsigned words : {1u, 2u}) {
    for (uint64_t cap : {8ull, 100ull, 4096ull, 65536ull, 100'000ull, 1'000'000ull}) {
      FlowTable t = make_table(cap, 60'000'000'000ull, 1'000'000, words);
      const double per_flow = double(t.memory_bytes()) / double(cap);
      if (cap >= 100) {  // tiny tables are mostly the fixed header
        EXPECT_LE(per_flow, 64.0) << cap;
      }
      if (cap >= 4096) {  // kSlack slots of (tag + state words) per flow, plus a fixed header
        EXPECT_LT(per_flow, FlowTable::kSlack * 8.0 * (1 + words) + 0.1) << cap;
      }
      EXPECT_GE(t.slot_count(), cap * FlowTable::kSlack);
      EXPECT_LT(t.slot_count(), cap * FlowTable::kSlack + FlowTable::kWays);
      EXPECT_EQ(t.capacity(), cap);
      EXPECT_EQ(t.state_words(), words);
    }
  }
  FlowTable t = make_table(4096, 1);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data()) % 64, 0u) << "sets must be cache-line aligned";
  for (size_t i = 0; i < t.slot_count(); ++i)
    ASSERT_EQ(reinterpret_cast<uintptr_t>(t.state_at(i)) % 16, 0u)
        << "meters CAS their two words with cmpxchg16b";
  FlowTable big = make_table(1'000'000, 1);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(big.data()) % (2u << 20), 0u)
      << "large tables start on a 2 MB boundary (transparent huge pages)";
}

TEST(FlowTable, InsertThenFind) {
  FlowTable t = make_table(1024, 60 * 1000 * kTick);
  auto a = put(t, 111, 0);
  ASSERT_EQ(a.outcome, Outcome::created);
  ASSERT_NE(a.state, nullptr);
  EXPECT_EQ(a.state[0].load(), 111u);
  EXPECT_EQ(t.fingerprint_at(t.slot_of(a.state)), FlowTable::tag_of(111));

  bool called = false;
  auto b = t.find_or_insert(111, kTick, [&](State) { called = true; });
  EXPECT_EQ(b.outcome, Outcome::found);
  EXPECT_EQ(b.state, a.state);
  EXPECT_FALSE(called) << "init only runs for a new flow";
  EXPECT_EQ(t.tick_at(t.slot_of(b.state)), t.tick_of(kTick)) << "found touches the tick";

  auto c = put(t, 222, 0);
  EXPECT_EQ(c.outcome, Outcome::created);
  EXPECT_NE(c.state, a.state);
  EXPECT_EQ(t.active(), 2u);
  EXPECT_EQ(t.find(111), a.state);
  EXPECT_EQ(t.find(333), nullptr);
}

// The lookup compares a whole set at a time (SSE2 on x86: each 64-bit tag as two 32-bit
// halves): every fingerprint bit must count, in either half of the tag word, and a hit in
// way w must return way w's state, for every w.
TEST(FlowTable, LookupComparesEveryFingerprintBitInEveryWay) {
  FlowTable t = one_set(8, kNever, 0);
  std::vector<uint64_t> hashes;
  for (uint64_t i = 0; i < 8; ++i) hashes.push_back(mix(i + 1000));
  std::vector<ConstState> states;
  for (uint64_t h : hashes) {
    auto r = put(t, h, 5 * kTick);
    ASSERT_EQ(r.outcome, Outcome::created);
    states.push_back(r.state);
  }
  std::set<size_t> slots;
  for (size_t w = 0; w < hashes.size(); ++w) {
    EXPECT_EQ(t.find(hashes[w]), states[w]) << "flow " << w;
    EXPECT_EQ(states[w][0].load(), hashes[w]) << "flow " << w << " reads its own state";
    slots.insert(t.slot_of(states[w]));
    // Flip each fingerprint bit: tag bits 25..31 (low half) and 32..62 (high half).
    for (unsigned bit = 0; bit < FlowTable::kFingerprintBits; ++bit) {
      const uint64_t other = hashes[w] ^ (uint64_t{1} << bit);
      if (std::find(hashes.begin(), hashes.end(), other) != hashes.end()) continue;
      EXPECT_EQ(t.find(other), nullptr) << "flow " << w << " fingerprint bit " << bit;
    }
  }
  EXPECT_EQ(slots.size(), 8u) << "every way in use";
  // Bits above the fingerprint pick the set only: in a one-set table they name the same flow.
  EXPECT_EQ(t.find(hashes[3] ^ (uint64_t{1} << 50)), states[3]);
  // A tick in the tag word is not part of the comparison.
  auto again = put(t, hashes[5], 900 * kTick);
  EXPECT_EQ(again.outcome, Outcome::found);
  EXPECT_EQ(again.state, states[5]);
  EXPECT_EQ(t.tick_at(t.slot_of(states[5])), t.tick_of(900 * kTick));
}

TEST(FlowTable, ReservedTagValuesAreRemapped) {
  FlowTable t = make_table(64, kNever);
  // The fingerprint is the hash's low 38 bits; 0 would read as "empty", so it maps to 1.
  EXPECT_EQ(FlowTable::tag_of(0), 1u);
  EXPECT_EQ(FlowTable::tag_of(uint64_t{1} << 38), 1u);
  EXPECT_EQ(FlowTable::tag_of(FlowTable::kPending | 5), 5u) << "bit 63 is not part of it";
  auto a = put(t, 0, 0);
  EXPECT_EQ(a.outcome, Outcome::created);
  EXPECT_EQ(put(t, 0, 0).state, a.state);
  EXPECT_EQ(t.fingerprint_at(t.slot_of(a.state)), 1u);
  EXPECT_EQ(t.tag_word(t.slot_of(a.state)) & FlowTable::kPending, 0u);
  EXPECT_EQ(t.active(), 1u);
}

TEST(FlowTable, CapacityExactlyEnforced) {
  // 10 flows in 2 sets (16 slots): the 11th new flow finds free slots but no capacity, and
  // every live flow is recent, so it gets no slot.
  FlowTable t = one_set(10, kNever, 1000 * kTick);
  std::set<ConstState> slots;
  uint64_t created = 0, refused = 0;
  for (uint64_t i = 0; i < 200; ++i) {
    auto r = put(t, mix(i), 0);
    if (r.outcome == Outcome::created) {
      ++created;
      slots.insert(r.state);
    } else {
      ASSERT_EQ(r.outcome, Outcome::no_slot);
      ASSERT_EQ(r.state, nullptr);
      ++refused;
    }
    ASSERT_LE(t.active(), 10u);
  }
  EXPECT_EQ(created, 10u);
  EXPECT_EQ(slots.size(), 10u);
  EXPECT_EQ(t.active(), 10u);
  EXPECT_EQ(t.evicted(), 0u);
  EXPECT_EQ(live_tags(t).size(), 10u);
}

TEST(FlowTable, AtCapacityEvictsLruOfTheSetWhenIdleEnough) {
  // Capacity 8, one set: when full, a new flow replaces the least recently used one.
  FlowTable t = one_set(8, kNever, 2 * kTick);
  for (uint64_t i = 0; i < 8; ++i) ASSERT_EQ(put(t, 100 + i, i * 10 * kTick).outcome, Outcome::created);
  // Touch everything except flow 103 later on, so 103 becomes the LRU.
  for (uint64_t i = 0; i < 8; ++i)
    if (i != 3) {
      ASSERT_EQ(put(t, 100 + i, 100 * kTick).outcome, Outcome::found);
    }
  ConstState lru_slot = t.find(103);
  ASSERT_NE(lru_slot, nullptr);

  auto r = put(t, 999, 110 * kTick);
  EXPECT_EQ(r.outcome, Outcome::evicted);
  EXPECT_EQ(r.state, lru_slot) << "victim must be the least recently used slot";
  EXPECT_EQ(r.state[0].load(), 999u) << "init ran for the new flow";
  EXPECT_EQ(t.find(103), nullptr);
  EXPECT_EQ(t.evicted(), 1u);
  EXPECT_EQ(t.active(), 8u);

  // Next LRU: flows 100..107 except 103 were all touched at tick 100; 999 at 110. Touch all
  // but 105, once they are idle past the protection window (flow_eviction_test.cpp: flows seen
  // twice go only once idle that long).
  const uint64_t later = 110 * kTick + FlowTable::kProtectIdleNs + 2 * kTick;
  for (uint64_t h : {100, 101, 102, 104, 106, 107, 999}) put(t, h, later);
  auto r2 = put(t, 998, later + 10 * kTick);
  EXPECT_EQ(r2.outcome, Outcome::evicted);
  EXPECT_EQ(t.find(105), nullptr);
  EXPECT_EQ(t.evicted(), 2u);
}

TEST(FlowTable, SecondChoiceTakesTheOverflowOfAFullSet) {
  FlowTable t = make_table(4096, kNever, 0);
  auto hs = same_set_hashes(t, 12);  // 12 flows whose first choice is one 8-way set
  for (size_t i = 0; i < hs.size(); ++i)
    ASSERT_EQ(put(t, hs[i], i * kTick).outcome, Outcome::created) << i;
  EXPECT_EQ(t.active(), 12u);
  EXPECT_EQ(t.evicted(), 0u);
  size_t in_second = 0;
  for (uint64_t h : hs) {
    ConstState s = t.find(h);
    ASSERT_NE(s, nullptr);
    EXPECT_EQ(put(t, h, 20 * kTick).state, s) << "found where it was created";
    in_second += t.slot_of(s) / FlowTable::kWays == t.second_set_index(h);
  }
  EXPECT_GE(in_second, 4u) << "the first set holds at most 8";
}

TEST(FlowTable, BothChoicesFullEvictsEvenBelowCapacity) {
  FlowTable t = make_table(16, kNever, 0, 2, 1);  // two sets, room for 16 flows
  std::vector<uint64_t> hs;  // flows whose both choices are set 0
  for (uint64_t i = 0; hs.size() < 9; ++i)
    if (t.set_index(mix(i)) == 0 && t.second_set_index(mix(i)) == 0) hs.push_back(mix(i));
  for (size_t i = 0; i < 8; ++i) ASSERT_EQ(put(t, hs[i], i * kTick).outcome, Outcome::created);
  auto r = put(t, hs[8], 20 * kTick);
  EXPECT_EQ(r.outcome, Outcome::evicted);
  EXPECT_EQ(t.find(hs[0]), nullptr) << "hs[0] was the LRU of the set";
  EXPECT_EQ(t.active(), 8u);
}

TEST(FlowTable, AtCapacityEveryFlowFindsASlot) {
  // The point of two choices: with `capacity` live flows (half the slots), a flow essentially
  // never finds both of its sets full. 8-way sets with one choice left ~0.8% without a slot.
  const uint64_t cap = 200'000;
  FlowTable t = make_table(cap, kNever, 1000 * kTick);  // nobody idle enough to be evicted
  uint64_t refused = 0;
  for (uint64_t i = 0; i < cap; ++i) refused += put(t, mix(i ^ 0x5eed), 0).outcome != Outcome::created;
  EXPECT_LE(refused, cap / 100000) << "at most 0.001% refused";
  EXPECT_EQ(t.active(), cap - refused);
  // And nearly all stay in their first set, the one a burst prefetches.
  uint64_t in_second = 0;
  for (uint64_t i = 0; i < cap; ++i) {
    const uint64_t h = mix(i ^ 0x5eed);
    if (ConstState s = t.find(h)) in_second += t.slot_of(s) / FlowTable::kWays != t.set_index(h);
  }
  std::printf("at capacity: %llu of %llu flows refused, %.2f%% in their second set\n",
              static_cast<unsigned long long>(refused), static_cast<unsigned long long>(cap),
              100.0 * double(in_second) / double(cap));
  EXPECT_LT(in_second, cap * 5 / 100);
}

TEST(FlowTable, MinEvictIdleProtectsActiveFlows) {
  const uint64_t min_idle = 5 * kTick;
  FlowTable t = one_set(8, kNever, min_idle);
  for (uint64_t i = 0; i < 8; ++i) ASSERT_EQ(put(t, 100 + i, 0).outcome, Outcome::created);
  // Idle for exactly min_idle: not yet *certainly* idle that long at tick granularity.
  EXPECT_EQ(put(t, 999, min_idle).outcome, Outcome::no_slot);
  EXPECT_EQ(put(t, 999, min_idle + kTick / 2).outcome, Outcome::no_slot);
  EXPECT_EQ(t.evicted(), 0u);
  EXPECT_EQ(t.active(), 8u);
  EXPECT_EQ(t.find(999), nullptr);
  // Idle for min_idle plus a tick: certainly idle long enough.
  auto r = put(t, 999, min_idle + kTick);
  EXPECT_EQ(r.outcome, Outcome::evicted);
  EXPECT_EQ(t.evicted(), 1u);
  // A flood of new flows at one instant cannot push out the flows just touched.
  for (uint64_t i = 0; i < 8; ++i) put(t, 100 + i, 100 * kTick);
  put(t, 999, 100 * kTick);
  for (uint64_t i = 0; i < 1000; ++i) EXPECT_EQ(put(t, mix(i), 100 * kTick).outcome, Outcome::no_slot);
}

TEST(FlowTable, ZeroMinEvictIdleEvictsAtOnce) {
  FlowTable t = one_set(8, kNever, 0);
  for (uint64_t i = 0; i < 8; ++i) put(t, 100 + i, 0);
  EXPECT_EQ(put(t, 999, 0).outcome, Outcome::evicted);
}

TEST(FlowTable, LazyExpiryReusesIdleSlotWithoutEvicting) {
  const uint64_t timeout = 10 * kTick;
  FlowTable t = one_set(8, timeout, 1000 * kTick);  // eviction effectively off
  for (uint64_t i = 0; i < 8; ++i) ASSERT_EQ(put(t, 100 + i, 0).outcome, Outcome::created);
  for (uint64_t i = 1; i < 8; ++i) put(t, 100 + i, 5 * kTick);  // 100 stays idle since 0
  EXPECT_EQ(put(t, 999, timeout).outcome, Outcome::no_slot) << "not certainly idle yet";
  auto r = put(t, 999, timeout + kTick);
  EXPECT_EQ(r.outcome, Outcome::created) << "an expired flow's slot counts as free";
  EXPECT_EQ(t.find(100), nullptr);
  EXPECT_EQ(t.evicted(), 0u);
  EXPECT_EQ(t.active(), 8u);
  // An expired flow that comes back is found (until its slot is reused or swept)...
  FlowTable u = make_table(64, timeout);
  auto a = put(u, 5, 0);
  // ...and once swept it is a new flow with fresh state.
  EXPECT_EQ(u.expire(100 * kTick, u.slot_count()), 1u);
  auto b = put(u, 5, 100 * kTick);
  EXPECT_EQ(b.outcome, Outcome::created);
  (void)a;
}

TEST(FlowTable, ExpireSweepsIdleFlows) {
  const uint64_t timeout = 10 * kTick;
  FlowTable t = make_table(8192, timeout);  // roomy: no set overflows with 300 flows
  for (uint64_t i = 0; i < 300; ++i) ASSERT_EQ(put(t, mix(i), 0).outcome, Outcome::created);
  for (uint64_t i = 0; i < 100; ++i) put(t, mix(i), 8 * kTick);  // first 100 stay fresh
  EXPECT_EQ(t.active(), 300u);
  EXPECT_EQ(t.expire(5 * kTick, t.slot_count()), 0u) << "nothing idle long enough yet";
  EXPECT_EQ(t.expire(timeout + kTick, t.slot_count()), 200u);
  EXPECT_EQ(t.active(), 100u);
  EXPECT_EQ(live_tags(t).size(), 100u);
  for (uint64_t i = 0; i < 100; ++i) EXPECT_NE(t.find(mix(i)), nullptr);
  for (uint64_t i = 100; i < 300; ++i) EXPECT_EQ(t.find(mix(i)), nullptr);
  EXPECT_EQ(t.expire(8 * kTick + timeout + kTick, t.slot_count()), 100u);
  EXPECT_EQ(t.active(), 0u);
}

TEST(FlowTable, ExpireIsBoundedAndResumesFromCursor) {
  const uint64_t timeout = 10 * kTick;
  FlowTable t = make_table(1024, timeout);
  const size_t n = t.slot_count();
  ASSERT_EQ(n, 1024u * FlowTable::kSlack);
  // Fill every slot of the table (any order), all idle since 0.
  uint64_t live = 0;
  for (uint64_t i = 0; live < 700; ++i)
    if (put(t, mix(i), 0).outcome == Outcome::created) ++live;
  ASSERT_EQ(t.active(), 700u);
  // Count live slots per range [a, b) to know what each bounded call should free.
  auto live_in = [&](size_t a, size_t b) {
    size_t c = 0;
    for (size_t i = a; i < b; ++i) c += t.tag_word(i) != FlowTable::kEmpty;
    return c;
  };
  const uint64_t now = 100 * kTick;
  const size_t expect1 = live_in(0, 100);
  EXPECT_EQ(t.expire(now, 100), expect1);
  EXPECT_EQ(live_in(0, 100), 0u);
  EXPECT_EQ(t.active(), 700u - expect1);
  const size_t expect2 = live_in(100, 400);
  EXPECT_EQ(t.expire(now, 300), expect2) << "second call resumes at slot 100";
  EXPECT_EQ(live_in(0, 400), 0u);
  const size_t rest = live_in(400, n);
  EXPECT_EQ(rest, t.active());
  EXPECT_EQ(t.expire(now, 5 * n), rest) << "a large budget is one pass (wrapping)";
  EXPECT_EQ(t.active(), 0u);
  EXPECT_EQ(t.expire(now, 0), 0u);
}

TEST(FlowTable, ClockSteppingBackIsNotIdleness) {
  FlowTable t = make_table(8, 10 * kTick, 0);
  for (uint64_t i = 0; i < 8; ++i) put(t, 100 + i, 1000 * kTick);
  // Time goes back: last_seen is "in the future", so nothing is idle, nothing expires.
  EXPECT_EQ(t.expire(500 * kTick, t.slot_count()), 0u);
  EXPECT_EQ(t.active(), 8u);
}

TEST(FlowTable, TickWrapIsHandled) {
  // The tick is 24 bits: crossing 2^24 ticks must look like 1 tick of idleness, not -2^24.
  const uint64_t wrap_ns = (uint64_t{1} << FlowTable::kTickBits) * kTick;
  FlowTable t = make_table(8, 10 * kTick, 0);
  put(t, 7, wrap_ns - kTick);
  EXPECT_EQ(t.expire(wrap_ns + 2 * kTick, t.slot_count()), 0u);
  EXPECT_EQ(t.active(), 1u);
  EXPECT_EQ(t.expire(wrap_ns + 20 * kTick, t.slot_count()), 1u);
}

TEST(FlowTable, NeverExpiringFlowsStayOldForLruPastTheTickRange) {
  // No idle timeout: a flow idle for longer than the 24-bit tick range must still be the one
  // evicted, not look "just seen" because its distance wrapped. The sweep clamps its age.
  FlowTable t = one_set(8, kNever, 1000 * kTick);
  const uint64_t range = (uint64_t{1} << FlowTable::kTickBits) * kTick;
  for (uint64_t i = 0; i < 8; ++i) put(t, 100 + i, 0);
  // Sweeps every eighth of the range while the flows sit idle for 3/4 of it, as a worker would.
  // Unswept, flow 100's distance (3/4 of 2^24 ticks) would read as negative: "just seen",
  // protected by min_evict_idle, and the new flow would get no slot.
  const uint64_t end = range / 4 * 3;
  for (uint64_t now = range / 8; now <= end; now += range / 8) {
    EXPECT_EQ(t.expire(now, t.slot_count()), 0u) << "never expires";
  }
  for (uint64_t i = 1; i < 8; ++i) put(t, 100 + i, end);  // all but 100 touched
  auto r = put(t, 999, end + 2000 * kTick);
  EXPECT_EQ(r.outcome, Outcome::evicted) << "the long-idle flow is evictable";
  EXPECT_EQ(t.find(100), nullptr) << "the least recently used flow went";
}

TEST(FlowTable, FloodOfDistinctFlowsKeepsMemoryFixed) {
  FlowTable t = make_table(4096, 60'000'000'000ull);  // default min_evict_idle = 1 ms
  const size_t mem = t.memory_bytes();
  uint64_t created = 0, evicted = 0, refused = 0;
  uint64_t now = 0;
  for (uint64_t i = 0; i < 1'000'000; ++i) {
    if (i % 1000 == 0) now += kTick;  // ~1000 new flows per ms
    switch (put(t, mix(i), now).outcome) {
      case Outcome::created: ++created; break;
      case Outcome::evicted: ++evicted; break;
      case Outcome::no_slot: ++refused; break;
      case Outcome::found: break;
    }
    if (i % 4096 == 0) {
      ASSERT_LE(t.active(), 4096u);
    }
  }
  EXPECT_EQ(t.memory_bytes(), mem);
  EXPECT_LE(t.active(), 4096u);
  EXPECT_EQ(t.evicted(), evicted);
  EXPECT_GT(evicted, 0u);
  EXPECT_GT(refused, 0u) << "flows younger than min_evict_idle are protected";
  EXPECT_EQ(created + evicted + refused, 1'000'000u);
  EXPECT_EQ(live_tags(t).size(), t.active());
  EXPECT_LE(double(t.memory_bytes()) / 4096.0, 64.0);
}

// for_each_flow_slot() reads only the sets a claim marked; it must find every slot a full
// sweep of the tags finds, through creations in both sets, expiry, re-use and a flood with
// evictions, and nothing in an empty table.
TEST(FlowTable, FlowSlotWalkFindsWhatAFullSweepFinds) {
  auto full_sweep = [](const FlowTable& t) {
    std::vector<size_t> slots;
    for (size_t i = 0; i < t.slot_count(); ++i) {
      const uint64_t w = t.tag_word(i);
      if (w != FlowTable::kEmpty && !(w & FlowTable::kPending)) slots.push_back(i);
    }
    return slots;
  };
  auto walk = [](const FlowTable& t) {
    std::vector<size_t> slots;
    t.for_each_flow_slot([&](size_t i) { slots.push_back(i); });
    return slots;
  };
  const uint64_t timeout = 10 * kTick;
  FlowTable t = make_table(4096, timeout);
  EXPECT_TRUE(walk(t).empty());
  for (uint64_t i = 0; i < 3000; ++i) put(t, mix(i), 0);  // ~2% of them in their second set
  ASSERT_EQ(walk(t).size(), t.active());
  EXPECT_EQ(walk(t), full_sweep(t));
  // Half of them stay busy; the rest expire, then new flows reuse the freed slots.
  for (uint64_t i = 0; i < 1500; ++i) put(t, mix(i), timeout);
  t.expire(timeout + timeout / 2 + kTick, t.slot_count());
  EXPECT_EQ(walk(t), full_sweep(t));
  EXPECT_EQ(walk(t).size(), 1500u);
  for (uint64_t i = 0; i < 200'000; ++i) put(t, mix(1'000'000 + i), 2 * timeout + i * 100);
  EXPECT_GT(t.evicted(), 0u);
  EXPECT_EQ(walk(t), full_sweep(t));
  EXPECT_EQ(walk(t).size(), t.active());
}

TEST(FlowTable, ZeroCapacityAdmitsNoFlow) {
  FlowTable t = make_table(0, kNever, 0);
  EXPECT_EQ(put(t, 1, 0).outcome, Outcome::no_slot);
  EXPECT_EQ(t.active(), 0u);
}

// Pages are backed on first use: a table nobody touched costs no memory, however large, and
// a few flows cost a few 4 KB pages (small tables stay off 2 MB huge pages).
TEST(FlowTable, MemoryFollowsTheFlowsInUse) {
  FlowTable t = make_table(65536, 60'000'000'000ull, 1'000'000, 1);
  EXPECT_GE(t.reserved_bytes(), t.sets_bytes());
  EXPECT_LE(t.reserved_bytes(), t.memory_bytes()) << "no alignment slack off huge pages";
  EXPECT_EQ(t.resident_bytes(), 0u) << "an unused table holds no memory";
  EXPECT_EQ(t.expire(0, t.slot_count()), 0u);
  EXPECT_EQ(t.resident_bytes(), 0u) << "sweeping an empty table reads none of it";
  for (uint64_t i = 0; i < 4; ++i) ASSERT_EQ(put(t, mix(i), 0).outcome, Outcome::created);
  EXPECT_GT(t.resident_bytes(), 0u);
  // A new flow reads both of its candidate sets (a read maps the shared zero page, which
  // mincore() counts) and writes one.
  EXPECT_LE(t.resident_bytes(), 4u * 2 * 4096) << "four flows, at most eight pages";
  for (uint64_t i = 0; i < 4; ++i) EXPECT_NE(t.find(mix(i)), nullptr);
}

// A table of a few pages is zeroed heap memory, not a mapping of its own (a mapping, its page
// faults and its unmapping per small table were a fifth of the pipeline fuzzer's time): empty,
// aligned for the tag compare and cmpxchg16b, counted in totals(), and full at capacity like
// any other; moving it moves the memory, freed once.
TEST(FlowTable, SmallTablesAreZeroedHeapMemory) {
  for (unsigned words : {1u, 2u}) {
    const FlowTable::Totals before = FlowTable::totals();
    FlowTable made = make_table(200, kNever, 1'000'000'000, words);
    ASSERT_LE(made.sets_bytes(), FlowTable::kHeapTableBytes);
    EXPECT_EQ(made.reserved_bytes(), made.sets_bytes()) << "no alignment slack, no guard";
    EXPECT_EQ(made.resident_bytes(), made.sets_bytes()) << "written (zeroed) at creation";
    EXPECT_EQ(FlowTable::totals().tables, before.tables + 1);
    EXPECT_EQ(FlowTable::totals().reserved_bytes, before.reserved_bytes + made.sets_bytes());
    FlowTable t = std::move(made);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data()) % 64, 0u);
    for (size_t i = 0; i < t.slot_count(); ++i) {
      ASSERT_EQ(t.tag_word(i), FlowTable::kEmpty) << i;
      ASSERT_EQ(reinterpret_cast<uintptr_t>(t.state_at(i)) % (8u * words), 0u) << i;
    }
    auto add = [&t](uint64_t hash) {
      return t.find_or_insert(hash, 0, [hash](State st) { st[0].store(hash); }).outcome;
    };
    for (uint64_t i = 0; i < 200; ++i) ASSERT_EQ(add(mix(i)), Outcome::created) << i;
    EXPECT_EQ(add(mix(1000)), Outcome::no_slot) << "capacity holds on the heap too";
    for (uint64_t i = 0; i < 200; ++i) {
      ConstState st = t.find(mix(i));
      ASSERT_NE(st, nullptr) << i;
      EXPECT_EQ(st->load(), mix(i)) << i;
    }
  }
  // The next size up is a mapping again, backed as flows arrive.
  FlowTable larger = make_table(FlowTable::kHeapTableBytes / 16, kNever, 0, 1);
  EXPECT_GT(larger.sets_bytes(), FlowTable::kHeapTableBytes);
  EXPECT_EQ(larger.resident_bytes(), 0u);
}

// A table on huge pages is committed at creation: no 2 MB page faults on the first packets.
TEST(FlowTable, LargeTablesAreWrittenAtCreation) {
  FlowTable t = make_table(600'000, 60'000'000'000ull, 1'000'000, 1);  // ~19 MB
  ASSERT_GE(t.memory_bytes(), FlowTable::kHugePageTableBytes);
  EXPECT_GE(t.resident_bytes(), t.sets_bytes() - 4096);
}

// Resident set size of this process, from /proc/self/statm.
size_t rss_bytes() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return 0;
  unsigned long size = 0, resident = 0;
  const int got = std::fscanf(f, "%lu %lu", &size, &resident);
  std::fclose(f);
  return got == 2 ? size_t(resident) * size_t(sysconf(_SC_PAGESIZE)) : 0;
}

// The shape of 10,000 keyed rules without max-flows, scaled down: 2,000 default tables
// reserve 4 GB of address space and cost (almost) nothing until flows arrive.
TEST(FlowTable, ManyUnusedTablesStartSmall) {
  const FlowTable::Totals before = FlowTable::totals();
  const size_t rss_before = rss_bytes();
  std::vector<std::unique_ptr<FlowTable>> tables;
  for (int i = 0; i < 2000; ++i) {
    tables.push_back(std::make_unique<FlowTable>(make_table(65536, 60'000'000'000ull, 1'000'000, 1)));
    tables.back()->expire(0, 1024);
  }
  const FlowTable::Totals during = FlowTable::totals();
  EXPECT_EQ(during.tables - before.tables, 2000u);
  EXPECT_EQ(during.capacity_flows - before.capacity_flows, 2000u * 65536);
  EXPECT_GE(during.reserved_bytes - before.reserved_bytes, 2000u * (2u << 20));
  EXPECT_LE(during.reserved_bytes - before.reserved_bytes, 2000u * (2u << 20) + (1u << 20));
  const size_t grown = rss_bytes() - std::min(rss_bytes(), rss_before);
  EXPECT_LT(grown, size_t{64} << 20) << "2,000 unused tables must not be resident";
  tables.clear();
  EXPECT_EQ(FlowTable::totals().tables, before.tables);
  EXPECT_EQ(FlowTable::totals().reserved_bytes, before.reserved_bytes);
}

// Factories, not throwing constructors (result.hpp): a table no one can have is an
// invalid_input error, memory that cannot be reserved a runtime error saying how much.
TEST(FlowTable, CreateRefusesImpossibleParameters) {
  const FlowTable::Totals before = FlowTable::totals();
  auto too_big = FlowTable::create(FlowTable::kMaxCapacity + 1, kNever);
  ASSERT_FALSE(too_big);
  EXPECT_EQ(too_big.error().kind, ErrorKind::invalid_input);
  EXPECT_NE(too_big.error().message.find(std::to_string(FlowTable::kMaxCapacity + 1)), std::string::npos)
      << too_big.error().message;
  auto huge = FlowTable::create(~uint64_t{0}, kNever);
  ASSERT_FALSE(huge);
  EXPECT_EQ(huge.error().kind, ErrorKind::invalid_input);
  for (unsigned words : {0u, 3u}) {
    auto bad = FlowTable::create(8, kNever, 0, words);
    ASSERT_FALSE(bad) << words;
    EXPECT_EQ(bad.error().kind, ErrorKind::invalid_input);
  }
  for (unsigned slots : {0u, 9u}) EXPECT_FALSE(FlowTable::create(8, kNever, 0, 2, slots)) << slots;
  EXPECT_EQ(FlowTable::totals().tables, before.tables) << "a refused table must hold nothing";
}

TEST(FlowTable, CreateReportsMemoryItCannotReserve) {
  // Address space capped at what the process holds now plus 64 MB: a 2^30-flow table (32 GB
  // of reservation) cannot be mapped, whatever the machine has.
  rlimit saved{};
  ASSERT_EQ(getrlimit(RLIMIT_AS, &saved), 0);
  const FlowTable::Totals before = FlowTable::totals();
  long vm_pages = 0;
  if (std::FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld", &vm_pages) != 1) vm_pages = 0;
    std::fclose(f);
  }
  ASSERT_GT(vm_pages, 0);
  rlimit capped = saved;
  capped.rlim_cur = rlim_t(vm_pages) * rlim_t(sysconf(_SC_PAGESIZE)) + (rlim_t{64} << 20);
  if (saved.rlim_cur != RLIM_INFINITY && saved.rlim_cur < capped.rlim_cur) capped.rlim_cur = saved.rlim_cur;
  ASSERT_EQ(setrlimit(RLIMIT_AS, &capped), 0);
  auto t = FlowTable::create(uint64_t{1} << 30, kNever, 0, 1);
  ASSERT_EQ(setrlimit(RLIMIT_AS, &saved), 0);
  ASSERT_FALSE(t);
  EXPECT_EQ(t.error().kind, ErrorKind::runtime);
  EXPECT_NE(t.error().message.find("cannot reserve 32768 MB"), std::string::npos) << t.error().message;
  EXPECT_EQ(FlowTable::totals().tables, before.tables);
}

}  // namespace
}  // namespace sluice
