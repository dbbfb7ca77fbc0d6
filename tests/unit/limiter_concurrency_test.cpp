// Several threads charging one shared bucket under one shared fake clock (SPEC §3 State and
// concurrency): no update is ever lost, and admitted cost never exceeds B + r*T. Built and
// run under ThreadSanitizer too (scripts/test.sh).
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "limiter_profile.hpp"
#include "limiters.hpp"
#include "rates.hpp"

using namespace sluice;
using namespace sluice::testing;

namespace {

constexpr int kThreads = 4;

// Runs `body(thread_index)` on kThreads threads released together.
template <class Body>
void run_threads(Body body) {
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i)
    threads.emplace_back([&, i] {
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
      body(i);
    });
  go.store(true, std::memory_order_release);
  for (auto& t : threads) t.join();
}

// A clock shared by all threads: each thread reads it, and thread 0 also advances it, so
// threads see the same and slightly stale times, as lcores reading the TSC once per burst do.
struct SharedClock {
  std::atomic<uint64_t> now_ns;
  explicit SharedClock(uint64_t start) : now_ns(start) {}
  uint64_t read() const { return now_ns.load(std::memory_order_relaxed); }
  void advance(uint64_t d) { now_ns.fetch_add(d, std::memory_order_relaxed); }
};

}  // namespace

// Frozen clock: exactly B is admitted whatever the interleaving; one more would be a lost
// update (two threads both taking the last token).
TEST(LimiterConcurrency, FrozenClockAdmitsExactlyTheBurst) {
  for (bool gcra : {false, true}) {
    auto p = make_rate_profile(pps(1000), 5000);
    ASSERT_TRUE(p.ok());
    std::atomic<uint64_t> word{gcra ? sl_gcra_init(&*p, kSec) : sl_tb_init(&*p, kSec)};
    std::atomic<uint64_t> admitted{0};
    run_threads([&](int) {
      uint64_t mine = 0;
      for (int i = 0; i < 20000; ++i)
        mine += gcra ? gcra_charge(*p, word, kSec, 1) : token_bucket_charge(*p, word, kSec, 1);
      admitted += mine;
    });
    EXPECT_EQ(admitted.load(), 5000u) << (gcra ? "gcra" : "token-bucket");
  }
}

TEST(LimiterConcurrency, AdmittedCostWithinBurstPlusRateTimesTime) {
  for (bool gcra : {false, true}) {
    const uint64_t burst = 100, rate = 1'000'000;  // 1 Mpps, 100 packets
    auto p = make_rate_profile(pps(rate), burst);
    ASSERT_TRUE(p.ok());
    SharedClock clock(5 * kSec);
    uint64_t start = clock.read();
    std::atomic<uint64_t> word{gcra ? sl_gcra_init(&*p, start) : sl_tb_init(&*p, start)};
    std::atomic<uint64_t> admitted{0};
    run_threads([&](int idx) {
      uint64_t mine = 0;
      for (int i = 0; i < 50000; ++i) {
        if (idx == 0 && i % 4 == 0) clock.advance(500);  // ~0.5 packet per advance
        uint64_t now = clock.read();
        mine += gcra ? gcra_charge(*p, word, now, 1) : token_bucket_charge(*p, word, now, 1);
      }
      admitted += mine;
    });
    uint64_t elapsed = clock.read() - start;
    uint64_t bound = burst + elapsed * rate / kSec;
    EXPECT_LE(admitted.load(), bound) << (gcra ? "gcra" : "token-bucket");
    // Offered load is far above the rate, so nothing may stall either: all but what the
    // last clock step had not yet refilled is admitted.
    EXPECT_GE(admitted.load() + 2, bound) << (gcra ? "gcra" : "token-bucket");
  }
}

TEST(LimiterConcurrency, ByteRateUnderContention) {
  const uint64_t burst = 15000, bytes_per_sec = 125'000'000;  // 1 Gbit/s
  auto p = make_rate_profile(Rate{CostUnit::bytes, bytes_per_sec, 1}, burst);
  ASSERT_TRUE(p.ok());
  SharedClock clock(kSec);
  uint64_t start = clock.read();
  std::atomic<uint64_t> word{sl_tb_init(&*p, start)};
  std::atomic<uint64_t> admitted_bytes{0};
  run_threads([&](int idx) {
    uint64_t mine = 0;
    for (int i = 0; i < 40000; ++i) {
      if (idx == 0 && i % 2 == 0) clock.advance(3000);
      uint64_t cost = 64 + uint64_t((i * 7919 + idx * 104729) % 1455);
      if (token_bucket_charge(*p, word, clock.read(), cost)) mine += cost;
    }
    admitted_bytes += mine;
  });
  uint64_t elapsed = clock.read() - start;
  EXPECT_LE(admitted_bytes.load(), burst + elapsed * bytes_per_sec / kSec);
  EXPECT_GE(admitted_bytes.load() + 2 * 1518, burst + elapsed * bytes_per_sec / kSec);
}

TEST(LimiterConcurrency, WindowsNeverExceedTheLimit) {
  auto w = make_window_profile(kSec, 777, false);
  auto sw = make_window_profile(kSec, 777, true);
  ASSERT_TRUE(w.ok() && sw.ok());
  std::atomic<uint64_t> fixed{sl_fixed_window_init(&*w, 3 * kSec)};
  std::atomic<uint64_t> sliding{sl_sliding_window_init(&*sw, 3 * kSec)};
  std::atomic<uint64_t> a{0}, b{0};
  run_threads([&](int) {
    uint64_t x = 0, y = 0;
    for (int i = 0; i < 10000; ++i) {
      x += fixed_window_charge(*w, fixed, 3 * kSec + 5, 1);
      y += sliding_window_charge(*sw, sliding, 3 * kSec + 5, 1);
    }
    a += x;
    b += y;
  });
  EXPECT_EQ(a.load(), 777u);
  EXPECT_EQ(b.load(), 777u);
}

TEST(LimiterConcurrency, MetersLoseNoUpdate) {
  auto m = make_trtcm_profile(pps(1000), 300, pps(2000), 700);
  ASSERT_TRUE(m.ok());
  MeterWord word{};
  sl_meter_state st;
  sl_trtcm_init(&*m, kSec, &st);
  meter_store(word, MeterWord{st.e0, st.e1});
  std::atomic<uint64_t> colours[3] = {};
  run_threads([&](int) {
    uint64_t local[3] = {};
    for (int i = 0; i < 5000; ++i) local[trtcm_charge(*m, word, kSec, 1)]++;
    for (int c = 0; c < 3; ++c) colours[c] += local[c];
  });
  EXPECT_EQ(colours[SL_GREEN].load(), 300u);   // CBS
  EXPECT_EQ(colours[SL_YELLOW].load(), 400u);  // PBS - CBS
  EXPECT_EQ(colours[SL_RED].load(), uint64_t(kThreads) * 5000 - 700);
}

TEST(LimiterConcurrency, ShaperDeparturesStayDistinctAndOrdered) {
  auto s = make_shaper_profile(pps(1'000'000), 1, 10 * kMs);
  ASSERT_TRUE(s.ok());
  std::atomic<uint64_t> word{sl_gcra_init(&s->rate, kSec)};
  std::vector<std::vector<uint64_t>> departs(kThreads);
  run_threads([&](int idx) {
    for (int i = 0; i < 4000; ++i) {
      uint64_t delay;
      if (shaper_charge(*s, word, kSec, 1, &delay)) departs[idx].push_back(kSec + delay);
    }
  });
  std::vector<uint64_t> all;
  for (auto& d : departs) all.insert(all.end(), d.begin(), d.end());
  std::sort(all.begin(), all.end());
  // 1 Mpps with a 10 ms horizon: exactly 10001 slots of 1 us (0 .. 10 ms), one packet each.
  ASSERT_EQ(all.size(), 10001u);
  for (size_t i = 1; i < all.size(); ++i) ASSERT_GE(all[i] - all[i - 1], 1000u) << i;
}
