// CountersHandoff: a running worker's counters reach the control thread as one consistent cut
// (SPEC §5 counters, read live). Built and run under ThreadSanitizer too (scripts/test.sh),
// which would flag a reader touching the copy before the worker published it.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "counters.hpp"
#include "counters_handoff.hpp"

using namespace sluice;

namespace {

constexpr size_t kRules = 3;

// One packet as the pipeline counts it: matched first, then its outcome, a word at a time.
void count_packet(WorkerCounters& c, size_t rule, bool pass, uint64_t bytes) {
  TrafficCounters& t = c.rule(rule);
  t.add(Outcome::matched, bytes);
  t.add(pass ? Outcome::conformed : Outcome::exceeded, bytes);
  t.add(pass ? Outcome::passed : Outcome::dropped, bytes);
}

// What every consistent cut satisfies: each matched packet has exactly one outcome.
void expect_consistent(const WorkerCounters& c) {
  for (size_t r = 0; r < c.per_rule.size(); ++r) {
    const TrafficCounters& t = c.per_rule[r];
    ASSERT_EQ(t.pkts(Outcome::matched), t.pkts(Outcome::passed) + t.pkts(Outcome::dropped))
        << "rule " << r;
    ASSERT_EQ(t.pkts(Outcome::matched), t.pkts(Outcome::conformed) + t.pkts(Outcome::exceeded))
        << "rule " << r;
    ASSERT_EQ(t.byts(Outcome::matched), t.byts(Outcome::passed) + t.byts(Outcome::dropped))
        << "rule " << r;
  }
}

TEST(CountersHandoff, AnswersOnlyAtTheWorkersNextServe) {
  WorkerCounters live(kRules);
  CountersHandoff h(live);
  count_packet(live, 0, true, 100);
  h.ask();
  EXPECT_FALSE(h.answered());
  h.serve(live);
  ASSERT_TRUE(h.answered());
  EXPECT_EQ(h.answer().per_rule[0].pkts(Outcome::passed), 1u);
  EXPECT_EQ(h.answer().per_rule[0].byts(Outcome::matched), 100u);
}

TEST(CountersHandoff, ServingUnaskedCopiesNothing) {
  WorkerCounters live(kRules);
  CountersHandoff h(live);
  h.ask();
  h.serve(live);
  ASSERT_TRUE(h.answered());
  count_packet(live, 1, false, 60);
  h.serve(live);  // nobody asked again: the answer stays as it was asked for
  EXPECT_EQ(h.answer().per_rule[1].pkts(Outcome::matched), 0u);
  h.ask();
  h.serve(live);
  EXPECT_EQ(h.answer().per_rule[1].pkts(Outcome::dropped), 1u);
}

TEST(CountersHandoff, AQuestionAskedAgainIsAnsweredWithTheLatestCounters) {
  WorkerCounters live(kRules);
  CountersHandoff h(live);
  h.ask();  // the reader gives up on this one...
  count_packet(live, 2, true, 64);
  h.ask();  // ...and asks again
  EXPECT_FALSE(h.answered());
  count_packet(live, 2, true, 64);
  h.serve(live);
  ASSERT_TRUE(h.answered());
  EXPECT_EQ(h.answer().per_rule[2].pkts(Outcome::matched), 2u);
}

// A worker thread counting bursts as fast as it can, a reader asking over and over: every
// answer is a consistent cut, answers never go backwards, and they follow the worker.
TEST(CountersHandoff, EveryLiveAnswerIsAConsistentCutThatOnlyGrows) {
  WorkerCounters live(kRules);
  CountersHandoff h(live);
  std::atomic<bool> stop{false};
  std::thread worker([&] {
    uint64_t n = 0;
    while (!stop.load(std::memory_order_relaxed)) {
      const uint64_t burst = 1 + n % 32;
      for (uint64_t i = 0; i < burst; ++i, ++n)
        count_packet(live, n % (kRules + 1), n % 3 != 0, 60 + n % 1400);
      h.serve(live);
    }
  });

  std::vector<uint64_t> last(kRules + 1, 0);
  uint64_t first_total = 0, last_total = 0;
  for (int q = 0; q < 2000; ++q) {
    h.ask();
    while (!h.answered()) std::this_thread::yield();
    const WorkerCounters& a = h.answer();
    expect_consistent(a);
    if (::testing::Test::HasFatalFailure()) break;
    uint64_t total = 0;
    for (size_t r = 0; r <= kRules; ++r) {
      const uint64_t m = a.per_rule[r].pkts(Outcome::matched);
      ASSERT_GE(m, last[r]) << "rule " << r << " went backwards at answer " << q;
      last[r] = m;
      total += m;
    }
    if (q == 0) first_total = total;
    last_total = total;
  }
  stop.store(true, std::memory_order_relaxed);
  worker.join();
  EXPECT_GT(last_total, first_total) << "the answers did not follow the worker";
  // The worker's own counters, now that it stopped, are at least the last answer.
  for (size_t r = 0; r <= kRules; ++r) EXPECT_GE(live.per_rule[r].pkts(Outcome::matched), last[r]);
}

}  // namespace
