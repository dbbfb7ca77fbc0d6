// FlowTable under concurrent find_or_insert() and expire(): no duplicate flows, exact
// capacity, every slot's state written by its owner. Also run under TSan (scripts/test.sh).
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "flow_table.hpp"
#include "flow_table_helpers.hpp"

namespace sluice {
namespace {

using namespace flow_table_testing;

// Start all threads at once so their inserts of the same new hashes actually overlap.
class StartLine {
 public:
  explicit StartLine(int n) : waiting_(n) {}
  void arrive_and_wait() {
    waiting_.fetch_sub(1);
    while (waiting_.load() > 0) std::this_thread::yield();
  }

 private:
  std::atomic<int> waiting_;
};

void check_consistent(const FlowTable& t) {
  const auto tags = live_tags(t);
  const std::set<uint64_t> distinct(tags.begin(), tags.end());
  EXPECT_EQ(distinct.size(), tags.size()) << "duplicate tags in the table";
  EXPECT_EQ(t.active(), tags.size());
  EXPECT_LE(t.active(), t.capacity());
  // Every slot's state was written by init for the flow that owns it.
  for (size_t i = 0; i < t.slot_count(); ++i) {
    if (t.tag_word(i) == FlowTable::kEmpty) continue;
    ConstState s = t.state_at(i);
    EXPECT_EQ(FlowTable::tag_of(s[0].load()), t.fingerprint_at(i));
    EXPECT_EQ(s[1].load(), ~s[0].load());
  }
}

TEST(FlowTableConcurrency, SameNewFlowsFromAllThreadsShareOneSlot) {
  // Plenty of room, no expiry, no eviction: every thread inserts the same hashes in the same
  // order, so most inserts race another thread's insert of the same new flow.
  for (int threads : {2, 3, 4}) {
    FlowTable t = make_table(1 << 16, kNever, ~0ull >> 1);
    constexpr uint64_t kFlows = 20'000;
    std::vector<std::vector<ConstState>> got(threads, std::vector<ConstState>(kFlows));
    std::atomic<uint64_t> creates{0};
    StartLine start(threads);
    std::vector<std::thread> pool;
    for (int th = 0; th < threads; ++th) {
      pool.emplace_back([&, th] {
        start.arrive_and_wait();
        for (uint64_t i = 0; i < kFlows; ++i) {
          auto r = put(t, mix(i), 0);
          if (r.outcome == Outcome::created) creates.fetch_add(1);
          got[th][i] = r.state;  // nullptr on no_slot (only if a peer stalled mid-claim)
        }
      });
    }
    for (auto& th : pool) th.join();
    check_consistent(t);
    EXPECT_EQ(creates.load(), t.active());
    uint64_t present = 0;
    for (uint64_t i = 0; i < kFlows; ++i) {
      ConstState s = t.find(mix(i));
      present += s != nullptr;
      for (int th = 0; th < threads; ++th)
        if (got[th][i]) {
          EXPECT_EQ(got[th][i], s) << "threads disagree on flow " << i;
        }
    }
    EXPECT_EQ(present, t.active());
    EXPECT_GE(present, kFlows * 99 / 100) << "no_slot only when a peer was preempted mid-claim";
  }
}

// Spin barrier (yielding: the tests run more threads than cores).
class Barrier {
 public:
  explicit Barrier(int n) : n_(n) {}
  void wait() {
    const uint64_t gen = gen_.load();
    if (arrived_.fetch_add(1) + 1 == n_) {
      arrived_.store(0);
      gen_.fetch_add(1);
      return;
    }
    while (gen_.load() == gen) std::this_thread::yield();
  }

 private:
  const int n_;
  std::atomic<int> arrived_{0};
  std::atomic<uint64_t> gen_{0};
};

TEST(FlowTableConcurrency, RacingClaimsOfOneNewFlowInAChurningSet) {
  // The hard case for "no duplicates": threads insert the same new flow at the same moment but
  // with different clocks (lcores read the clock per burst), so they disagree on which slot of
  // the full set is expired or least recently used and claim *different* slots. Each round all
  // threads insert the round's flow (plus a private one for churn); between rounds we check that
  // the flow is in at most one slot and every thread that got a slot got that one.
  for (int threads : {2, 3, 4}) {
    FlowTable t = one_set(8, 8 * kTick, 0);  // a single set; expiry after ~9 ticks, eviction at once
    constexpr int kRounds = 20000;
    Barrier barrier(threads);
    std::vector<ConstState> got(threads);
    int dup_rounds = 0, disagree_rounds = 0;  // written by thread 0 only
    std::vector<std::thread> pool;
    for (int th = 0; th < threads; ++th) {
      pool.emplace_back([&, th] {
        std::mt19937_64 rng(th * 7919 + threads);
        for (int r = 0; r < kRounds; ++r) {
          const uint64_t h = mix(uint64_t(r) << 8);
          const uint64_t now = uint64_t(r) * kTick + uint64_t(th) * 3 * kTick + rng() % kTick;
          const bool churn = r % 2 == 1;  // odd rounds: another flow's claim races ours
          barrier.wait();
          if (churn && th % 2 == 1) put(t, mix(uint64_t(r) << 8 | uint64_t(th + 1)), now);
          got[th] = put(t, h, now).state;
          if (churn && th % 2 == 0) put(t, mix(uint64_t(r) << 8 | uint64_t(th + 1)), now);
          barrier.wait();
          if (th == 0) {
            int copies = 0;
            for (size_t i = 0; i < t.slot_count(); ++i) {
              copies += (t.tag_word(i) & ~FlowTable::kLifeMask) ==
                        FlowTable::tag_of(h) << FlowTable::kFingerprintShift;
            }
            ConstState const home = t.find(h);
            bool agree = true;
            for (ConstState s : got) agree &= s == nullptr || s == home;
            dup_rounds += copies > 1;
            // With churn a peer may evict the flow right after it was created: only the
            // quiet rounds can demand that all threads got the same slot.
            disagree_rounds += !churn && !agree;
          }
          barrier.wait();
          // Churn between rounds: a private flow per thread, at a skewed time.
          put(t, mix(uint64_t(r) << 8 | uint64_t(th + 1)), now + rng() % (4 * kTick));
        }
      });
    }
    for (auto& th : pool) th.join();
    EXPECT_EQ(dup_rounds, 0) << threads << " threads: flow in two slots";
    EXPECT_EQ(disagree_rounds, 0) << threads << " threads: threads got different slots";
    check_consistent(t);
  }
}

TEST(FlowTableConcurrency, OverlappingInsertsEvictionsAndExpiry) {
  // A small, hot table: concurrent inserts of overlapping hash sets with eviction and expiry
  // churning constantly, plus a thread sweeping. At the end: no duplicates, exact count.
  for (int threads : {2, 4}) {
    FlowTable t = make_table(64, 4 * kTick, 0);
    StartLine start(threads + 1);
    std::atomic<bool> done{false};
    std::vector<std::thread> pool;
    for (int th = 0; th < threads; ++th) {
      pool.emplace_back([&, th] {
        std::mt19937_64 rng(th);
        start.arrive_and_wait();
        for (uint64_t i = 0; i < 200'000; ++i) {
          const uint64_t h = mix(rng() % 300);  // overlapping across threads
          const uint64_t now = (i / 500) * kTick;
          auto r = put(t, h, now);
          if (r.state) {
            ASSERT_NE(r.outcome, Outcome::no_slot);
          }
          ASSERT_LE(t.active(), 64u);
        }
      });
    }
    std::thread sweeper([&] {
      start.arrive_and_wait();
      uint64_t k = 0;
      while (!done.load()) t.expire((k++ / 50) * kTick, 16);
    });
    for (auto& th : pool) th.join();
    done = true;
    sweeper.join();
    check_consistent(t);
    EXPECT_GT(t.evicted(), 0u);
  }
}

TEST(FlowTableConcurrency, ConcurrentCapacityIsExact) {
  // Many sets, tiny capacity, distinct hashes per thread: exactly `capacity` flows get in.
  FlowTable t = make_table(100, kNever, ~0ull >> 1);
  StartLine start(4);
  std::atomic<uint64_t> created{0};
  std::vector<std::thread> pool;
  for (int th = 0; th < 4; ++th) {
    pool.emplace_back([&, th] {
      start.arrive_and_wait();
      for (uint64_t i = 0; i < 5000; ++i)
        if (put(t, mix(uint64_t(th) << 32 | i), 0).outcome == Outcome::created) created.fetch_add(1);
    });
  }
  for (auto& th : pool) th.join();
  check_consistent(t);
  EXPECT_EQ(created.load(), t.active());
  // 200 slots, capacity 100, every set offered far more than 8 flows: exactly 100 get in.
  EXPECT_EQ(t.active(), 100u);
}

}  // namespace
}  // namespace sluice
