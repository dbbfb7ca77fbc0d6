// FlowTable's home halves (find_or_insert_home): workers that share a table each look in and
// claim in their own half of a set first, so that workers seeing different flows (RSS) write
// different cache lines. Placement, lookups across halves, and no duplicates when two homes
// race for the same new flows. Also run under TSan (scripts/test.sh).
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <set>
#include <thread>
#include <vector>

#include "flow_table.hpp"
#include "flow_table_helpers.hpp"

namespace sluice {
namespace {

using namespace flow_table_testing;

constexpr uint64_t kNow = 5 * kTick;

// init_with() for a table of t.state_words() words a flow (it writes two).
FlowTable::Lookup put_home(FlowTable& t, unsigned home, uint64_t hash, uint64_t now_ns = kNow) {
  const unsigned words = t.state_words();
  return t.find_or_insert_home(t.first_line(hash), home, hash, t.tick_of(now_ns),
                               [hash, words](State s) {
                                 if (words == 2) init_with(hash)(s);
                                 else s[0].store(hash, std::memory_order_relaxed);
                               });
}

unsigned way_of(const FlowTable& t, ConstState s) {
  return unsigned(t.slot_of(s) % FlowTable::kWays);
}

// The layout the home halves rely on: a set is two halves, each its 4 tags and then those
// ways' state words, so with one state word a flow a half is one cache line.
TEST(FlowTableHome, AHalfIsItsTagsThenTheirStateWords) {
  for (unsigned words : {1u, 2u}) {
    FlowTable t = make_table(4096, kNever, 1'000'000, words);
    const auto* base = static_cast<const char*>(t.data());
    const size_t half_bytes = FlowTable::kHalfWays * (1 + words) * 8;
    for (size_t set : {size_t{0}, size_t{5}, size_t{1023}}) {
      for (unsigned way = 0; way < FlowTable::kWays; ++way) {
        const auto* state = reinterpret_cast<const char*>(t.state_at(set * FlowTable::kWays + way));
        const size_t half = way / FlowTable::kHalfWays, q = way % FlowTable::kHalfWays;
        const size_t tags_bytes = FlowTable::kHalfWays * 8;
        EXPECT_EQ(size_t(state - base),
                  set * 2 * half_bytes + half * half_bytes + tags_bytes + q * words * 8)
            << "words " << words << " set " << set << " way " << way;
      }
    }
    if (words == 1) {
      EXPECT_EQ(half_bytes, 64u) << "one line a half";
    }
  }
}

TEST(FlowTableHome, EachHomeClaimsItsOwnHalfFirst) {
  // One set (capacity 8, one slot a flow): its halves are ways 0-3 and 4-7.
  FlowTable t = one_set(8, kNever, 0);
  std::vector<ConstState> ones, zeros;
  for (uint64_t i = 0; i < 4; ++i) {
    const auto r = put_home(t, 1, mix(100 + i));
    ASSERT_EQ(r.outcome, Outcome::created);
    EXPECT_GE(way_of(t, r.state), FlowTable::kHalfWays) << "home 1 takes ways 4-7 first";
    ones.push_back(r.state);
  }
  // Home 1's half is full: its next flow goes to the other half.
  const auto spill = put_home(t, 1, mix(200));
  ASSERT_EQ(spill.outcome, Outcome::created);
  EXPECT_LT(way_of(t, spill.state), FlowTable::kHalfWays);
  for (uint64_t i = 0; i < 3; ++i) {
    const auto r = put_home(t, 0, mix(300 + i));
    ASSERT_EQ(r.outcome, Outcome::created);
    EXPECT_LT(way_of(t, r.state), FlowTable::kHalfWays);
    zeros.push_back(r.state);
  }
  EXPECT_EQ(t.active(), 8u);
  // Every flow is found from either home and by the single-writer lookup, in its own slot.
  for (uint64_t i = 0; i < 4; ++i) {
    for (unsigned home : {0u, 1u}) {
      const auto r = put_home(t, home, mix(100 + i));
      EXPECT_EQ(r.outcome, Outcome::found);
      EXPECT_EQ(r.state, ones[i]);
    }
    EXPECT_EQ(t.find(mix(100 + i)), ones[i]);
    EXPECT_EQ(put(t, mix(100 + i), kNow).state, ones[i]);
  }
  EXPECT_EQ(put_home(t, 1, mix(200)).state, spill.state);
  for (uint64_t i = 0; i < 3; ++i) EXPECT_EQ(put_home(t, 1, mix(300 + i)).state, zeros[i]);
  EXPECT_EQ(t.active(), 8u) << "lookups from the other home made no copies";
  EXPECT_EQ(live_tags(t).size(), 8u);
}

// Two homes filling a table with their own flows: nearly every flow sits in its home's half
// of its first or second set, and flows of a single writer are found from a home.
TEST(FlowTableHome, TwoHomesKeepTheirFlowsInTheirHalves) {
  for (unsigned words : {1u, 2u}) {
    constexpr uint64_t kFlows = 8192;
    FlowTable t = make_table(kFlows, kNever, 1'000'000, words);
    uint64_t at_home = 0;
    for (uint64_t i = 0; i < kFlows; ++i) {
      const unsigned home = unsigned(i % 2);
      const auto r = put_home(t, home, mix(i));
      ASSERT_TRUE(r.outcome == Outcome::created) << i;
      at_home += way_of(t, r.state) / FlowTable::kHalfWays == home;
    }
    EXPECT_EQ(t.active(), kFlows);
    // Each home holds ~2 flows a set in 4 ways: only a set whose both candidate halves are
    // full (a few in a thousand) sends a flow to the other half.
    EXPECT_GT(double(at_home), 0.99 * double(kFlows)) << "words " << words;
    for (uint64_t i = 0; i < kFlows; ++i) {
      const auto r = put_home(t, unsigned(i % 2), mix(i));
      ASSERT_EQ(r.outcome, Outcome::found) << i;
      ASSERT_EQ(r.state, t.find(mix(i))) << i;
      ASSERT_EQ(put_home(t, unsigned(1 - i % 2), mix(i)).state, r.state) << i;
    }
  }
}

// The same new flows claimed at once from both homes and by the whole-set lookup: each
// flow gets one slot, and every thread that got one got that one.
TEST(FlowTableHome, RacingHomesMakeEachFlowOnce) {
  FlowTable t = make_table(1 << 14, kNever, ~0ull >> 1);
  constexpr uint64_t kFlows = 12'000;
  constexpr int kThreads = 3;  // home 0, home 1, and a whole-set writer
  std::vector<std::vector<ConstState>> got(kThreads, std::vector<ConstState>(kFlows));
  std::atomic<int> waiting{kThreads};
  std::vector<std::thread> pool;
  for (int th = 0; th < kThreads; ++th) {
    pool.emplace_back([&, th] {
      waiting.fetch_sub(1);
      while (waiting.load() > 0) std::this_thread::yield();
      for (uint64_t i = 0; i < kFlows; ++i) {
        const uint64_t h = mix(th == 1 ? kFlows - 1 - i : i);  // home 1 meets the others midway
        const auto r = th == 2 ? put(t, h, kNow) : put_home(t, unsigned(th), h);
        got[size_t(th)][th == 1 ? kFlows - 1 - i : i] = r.state;
      }
    });
  }
  for (auto& th : pool) th.join();
  const auto tags = live_tags(t);
  const std::set<uint64_t> distinct(tags.begin(), tags.end());
  EXPECT_EQ(distinct.size(), tags.size()) << "duplicate flows";
  EXPECT_EQ(t.active(), tags.size());
  uint64_t present = 0;
  for (uint64_t i = 0; i < kFlows; ++i) {
    ConstState s = t.find(mix(i));
    present += s != nullptr;
    if (s) {
      EXPECT_EQ(s[0].load(), mix(i)) << "the slot's words are its flow's";
    }
    for (int th = 0; th < kThreads; ++th)
      if (got[size_t(th)][i]) {  // null only if a peer stalled mid-claim (bounded wait)
        EXPECT_EQ(got[size_t(th)][i], s) << "thread " << th << " flow " << i;
      }
  }
  EXPECT_EQ(present, kFlows);
}

}  // namespace
}  // namespace sluice
