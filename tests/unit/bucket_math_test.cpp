// The bucket arithmetic of bucket_math.h, called directly (single-threaded, no atomics):
// the regressions the issue names, clock wrap, backward steps, long idle, and the
// token-bucket/gcra identity.
#include <gtest/gtest.h>

#include <random>

#include "bucket_math.h"
#include "limiter_profile.hpp"
#include "rates.hpp"

using namespace sluice;
using namespace sluice::testing;

namespace {

sl_rate_profile profile(const Rate& r, uint64_t burst) {
  auto p = make_rate_profile(r, burst);
  EXPECT_TRUE(p.ok()) << (p.ok() ? "" : p.error().message);
  return *p;
}

// Runs one policer over (time, cost) arrivals, returning how many conformed.
template <class Decide>
uint64_t run(Decide decide, uint64_t word, const std::vector<std::pair<uint64_t, uint64_t>>& in) {
  uint64_t admitted = 0;
  for (auto [t, c] : in) {
    uint64_t next;
    if (decide(word, t, c, &next)) ++admitted;
    word = next;
  }
  return admitted;
}

struct Policer {
  const char* name;
  bool tb;
};

class BothPolicers : public ::testing::TestWithParam<bool> {
 protected:
  // token-bucket when GetParam() is true, gcra otherwise.
  uint64_t init(const sl_rate_profile& p, uint64_t now) {
    return GetParam() ? sl_tb_init(&p, now) : sl_gcra_init(&p, now);
  }
  bool decide(const sl_rate_profile& p, uint64_t& word, uint64_t now, uint64_t cost) {
    uint64_t next;
    int ok = GetParam() ? sl_tb_decide(&p, word, now, cost, &next)
                        : sl_gcra_decide(&p, word, now, cost, &next);
    word = next;
    return ok != 0;
  }
};

}  // namespace

TEST_P(BothPolicers, StartsFullAndAdmitsExactlyTheBurst) {
  auto p = profile(pps(10), 5);
  uint64_t w = init(p, 1000);
  int admitted = 0;
  for (int i = 0; i < 20; ++i) admitted += decide(p, w, 1000, 1);
  EXPECT_EQ(admitted, 5);
}

TEST_P(BothPolicers, RefillsAtTheRate) {
  auto p = profile(pps(10), 1);
  uint64_t w = init(p, 0);
  EXPECT_TRUE(decide(p, w, 0, 1));
  EXPECT_FALSE(decide(p, w, 99'999'999, 1));  // 1 ns short of 100 ms
  EXPECT_TRUE(decide(p, w, 100'000'000, 1));
  EXPECT_FALSE(decide(p, w, 100'000'001, 1));
}

// Regression: a bucket polled every nanosecond at 1 pps must still admit one packet per
// second. Implementations that advance the timestamp while truncating the refill to whole
// tokens never accumulate a token and stall.
TEST_P(BothPolicers, NoStallWhenPolledEveryNanosecond) {
  auto p = profile(pps(1), 1);
  uint64_t w = init(p, 0);
  uint64_t admitted = 0;
  // 3 s of polling every ns would be 3e9 calls; poll every ns around each expected
  // admission and every 997 ns in between, which truncating code also starves on.
  for (uint64_t t = 0; t <= 3 * kSec; t += (t % kSec < 2000 || t % kSec > kSec - 2000) ? 1 : 997)
    admitted += decide(p, w, t, 1);
  EXPECT_EQ(admitted, 4u);  // t = 0, 1 s, 2 s, 3 s
}

// Regression: with arrivals faster than the rate, the next permit time must move by one
// interval per admitted packet. The wrong formula max(now + T, pre) admits everything once
// pre > now; max(now, pre) + T is right.
TEST_P(BothPolicers, NoOverAdmissionUnderQueueing) {
  auto p = profile(pps(1000), 10);
  uint64_t w = init(p, 0);
  uint64_t admitted = 0;
  for (uint64_t t = 0; t < kSec; t += 100 * kUs) admitted += decide(p, w, t, 1);  // 10 kpps offered
  // B + r*T = 10 + 1000 * (1 s - 100 us): 1009 at most, and the exact model admits 1009.
  EXPECT_LE(admitted, 1010u);
  EXPECT_GE(admitted, 1008u);
}

TEST_P(BothPolicers, CostAboveBurstNeverConforms) {
  auto p = profile(bits_per_sec(8'000'000), 1500);
  uint64_t w = init(p, 0);
  EXPECT_FALSE(decide(p, w, 10 * kSec, 1501));
  EXPECT_TRUE(decide(p, w, 10 * kSec, 1500));  // exactly B passes a full bucket
  EXPECT_FALSE(decide(p, w, 10 * kSec, 64));
}

TEST_P(BothPolicers, ClockWrapIsSeamless) {
  auto p = profile(pps(1000), 2);
  uint64_t start = UINT64_MAX - 1500 * kUs;  // 1.5 ms before now_ns wraps
  uint64_t w = init(p, start);
  EXPECT_TRUE(decide(p, w, start, 1));
  EXPECT_TRUE(decide(p, w, start, 1));
  EXPECT_FALSE(decide(p, w, start, 1));
  EXPECT_TRUE(decide(p, w, start + kMs, 1));       // still before the wrap
  EXPECT_FALSE(decide(p, w, start + kMs + 1, 1));
  EXPECT_TRUE(decide(p, w, start + 2 * kMs, 1));   // 0.5 ms after the wrap
  EXPECT_FALSE(decide(p, w, start + 2 * kMs, 1));
  EXPECT_TRUE(decide(p, w, start + 4 * kMs, 1));   // refilled across the wrap: 2 tokens
  EXPECT_TRUE(decide(p, w, start + 4 * kMs, 1));
  EXPECT_FALSE(decide(p, w, start + 4 * kMs, 1));
}

TEST_P(BothPolicers, SmallBackwardStepAddsNoTokens) {
  auto p = profile(pps(1000), 3);
  uint64_t w = init(p, 10 * kSec);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(decide(p, w, 10 * kSec, 1));
  // The clock steps back 0.5 ms: no time passes, so the empty bucket stays empty (a naive
  // unsigned elapsed would refill it completely).
  EXPECT_FALSE(decide(p, w, 10 * kSec - 500 * kUs, 1));
  EXPECT_FALSE(decide(p, w, 10 * kSec, 1));
  EXPECT_TRUE(decide(p, w, 10 * kSec + kMs, 1));
}

TEST_P(BothPolicers, LargeBackwardStepDoesNotStall) {
  auto p = profile(pps(1000), 3);
  uint64_t w = init(p, 3600 * kSec);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(decide(p, w, 3600 * kSec, 1));
  // The clock steps back an hour. The bucket re-bases as empty at the new clock and refills
  // at the rate from there, instead of refusing everything for an hour.
  uint64_t back = 10 * kSec;
  EXPECT_FALSE(decide(p, w, back, 1));
  EXPECT_TRUE(decide(p, w, back + kMs, 1));
  EXPECT_FALSE(decide(p, w, back + kMs, 1));
  uint64_t admitted = 0;
  for (uint64_t t = back + 2 * kMs; t < back + 102 * kMs; t += 100 * kUs)
    admitted += decide(p, w, t, 1);
  EXPECT_GE(admitted, 99u);
  EXPECT_LE(admitted, 103u);
}

TEST_P(BothPolicers, StepBackBeyondStaleToleranceRebases) {
  auto p = profile(pps(1000), 3);
  uint64_t w = init(p, 100 * kSec);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(decide(p, w, 100 * kSec, 1));
  // Within fill time + tolerance (1 s by default) a step back only reads as fewer tokens.
  EXPECT_FALSE(decide(p, w, 100 * kSec - 500 * kMs, 1));
  EXPECT_FALSE(decide(p, w, 100 * kSec - 500 * kMs + 2 * kMs, 1));
  // With no tolerance (a single reader, as in replay) the same step re-bases at once: the
  // bucket is empty at the new clock and refills from there.
  set_stale_read_tolerance(p, 0);
  EXPECT_FALSE(decide(p, w, 100 * kSec - 500 * kMs, 1));
  EXPECT_TRUE(decide(p, w, 100 * kSec - 500 * kMs + kMs, 1));
}

TEST_P(BothPolicers, IdleForDaysRefillsToExactlyTheBurst) {
  for (Rate r : {pps(1000), pps(1'000'000), bits_per_sec(10'000'000'000ull),
                 bits_per_sec(400'000'000'000ull)}) {
    for (uint64_t days : {1ull, 3ull, 5ull}) {
      uint64_t burst = r.unit == CostUnit::packets ? 100 : 150'000;
      uint64_t cost = r.unit == CostUnit::packets ? 1 : 1500;
      auto p = profile(r, burst);
      uint64_t w = init(p, 0);
      while (decide(p, w, 0, cost)) {
      }
      uint64_t later = days * 86400 * kSec;
      int admitted = 0;
      while (admitted < 1000 && decide(p, w, later, cost)) ++admitted;
      // These rates have exact profiles (a token's interval is whole units): exactly B.
      EXPECT_EQ(uint64_t(admitted), burst / cost) << format_rate(r) << " idle " << days << " d";
    }
  }
}

TEST_P(BothPolicers, RefundGivesBackButNeverOverfills) {
  auto p = profile(pps(100), 4);
  uint64_t w = init(p, 0);
  ASSERT_TRUE(decide(p, w, 0, 1));
  w = GetParam() ? sl_tb_refund(&p, w, 0, 1) : sl_gcra_refund(&p, w, 0, 1);
  w = GetParam() ? sl_tb_refund(&p, w, 0, 1) : sl_gcra_refund(&p, w, 0, 1);  // already full
  int admitted = 0;
  while (decide(p, w, 0, 1)) ++admitted;
  EXPECT_EQ(admitted, 4);
}

INSTANTIATE_TEST_SUITE_P(Policers, BothPolicers, ::testing::Values(true, false),
                         [](const auto& info) { return info.param ? "TokenBucket" : "Gcra"; });

// SPEC §3: gcra must give identical results to token-bucket.
TEST(BucketMath, TokenBucketAndGcraDecideIdentically) {
  std::mt19937_64 rng(42);
  const Rate rates[] = {pps(1), pps(1000), pps(999'983), bits_per_sec(64'000),
                        bits_per_sec(2'500'000'000ull), bits_per_sec(400'000'000'000ull),
                        Rate{CostUnit::packets, 7, 3}};
  for (const Rate& r : rates) {
    bool bytes = r.unit == CostUnit::bytes;
    double per_token_ns = 1e9 * double(r.per_sec_den) / double(r.per_sec_num);
    for (int trial = 0; trial < 20; ++trial) {
      uint64_t burst = bytes ? 64 + rng() % 100000 : 1 + rng() % 200;
      auto p = profile(r, burst);
      uint64_t t = rng();
      uint64_t tb = sl_tb_init(&p, t), gc = sl_gcra_init(&p, t);
      for (int i = 0; i < 5000; ++i) {
        uint64_t cost = bytes ? 60 + rng() % 1455 : 1;
        t += uint64_t(per_token_ns * double(cost) * std::exponential_distribution<>(1.1)(rng));
        uint64_t ntb, ngc;
        int a = sl_tb_decide(&p, tb, t, cost, &ntb);
        int b = sl_gcra_decide(&p, gc, t, cost, &ngc);
        ASSERT_EQ(a, b) << format_rate(r) << " burst " << burst << " packet " << i;
        tb = ntb;
        gc = ngc;
      }
    }
  }
}

// sl_tb_decide_at (the burst pipeline's token bucket, its time and cost parts worked out
// once per burst) against sl_tb_decide: the same decision and the same next word, on words
// of every kind (full, draining, empty, stale by a backward step, idle for ages) and costs
// up to past the burst.
TEST(BucketMath, TokenBucketDecideAtMatchesDecide) {
  std::mt19937_64 rng(7);
  const Rate rates[] = {pps(1), pps(1000), pps(1'000'000), bits_per_sec(64'000),
                        bits_per_sec(10'000'000'000ull), Rate{CostUnit::packets, 7, 3}};
  uint64_t conformed = 0, refused = 0;
  for (const Rate& r : rates) {
    const bool bytes = r.unit == CostUnit::bytes;
    for (int trial = 0; trial < 20; ++trial) {
      const uint64_t burst = bytes ? 64 + rng() % 100000 : 1 + rng() % 200;
      const sl_rate_profile p = profile(r, burst);
      uint64_t t = rng() >> (rng() % 3 == 0 ? 0 : 20);
      uint64_t word = sl_tb_init(&p, t);
      for (int i = 0; i < 3000; ++i) {
        const uint64_t cost = bytes ? 40 + rng() % (burst + 2000) : 1 + (rng() % 50 == 0) * burst;
        switch (rng() % 10) {
          case 0: t -= rng() % 2'000'000'000; break;                  // a step back
          case 1: t += rng() >> 8; break;                             // a long idle
          case 2: word = rng(); break;                                // any word at all
          default: t += rng() % 2'000'000; break;
        }
        uint64_t want = 0, got = 0;
        const int a = sl_tb_decide(&p, word, t, cost, &want);
        sl_tb_at at;
        sl_tb_at_time(&p, t, &at);
        sl_tb_at_cost(&p, cost, &at);
        const int b = sl_tb_decide_at(&at, word, &got);
        ASSERT_EQ(a, b) << format_rate(r) << " burst " << burst << " step " << i;
        ASSERT_EQ(want, got) << format_rate(r) << " burst " << burst << " step " << i;
        (a ? conformed : refused) += 1;
        word = want;
      }
    }
  }
  EXPECT_GT(conformed, 1000u);  // both outcomes were exercised
  EXPECT_GT(refused, 1000u);
}

TEST(BucketMath, ShaperDelaysToTheEarliestConformingTime) {
  auto s = make_shaper_profile(pps(1000), 1, 5 * kMs);
  ASSERT_TRUE(s.ok());
  uint64_t w = sl_gcra_init(&s->rate, 0), next, delay;
  ASSERT_TRUE(sl_shaper_decide(&*s, w, 0, 1, &next, &delay));
  EXPECT_EQ(delay, 0u);
  w = next;
  for (uint64_t i = 1; i <= 5; ++i) {  // five more at t=0 leave at 1, 2, 3, 4, 5 ms
    ASSERT_TRUE(sl_shaper_decide(&*s, w, 0, 1, &next, &delay)) << i;
    EXPECT_EQ(delay, i * kMs);
    w = next;
  }
  EXPECT_FALSE(sl_shaper_decide(&*s, w, 0, 1, &next, &delay));  // would wait 6 ms > 5 ms
  EXPECT_EQ(next, w);                                           // and charges nothing
  ASSERT_TRUE(sl_shaper_decide(&*s, w, 2 * kMs, 1, &next, &delay));
  EXPECT_EQ(delay, 4 * kMs);  // leaves at 6 ms, after the one leaving at 5 ms
}

TEST(BucketMath, SrtcmColoursAndOverflow) {
  auto m = make_srtcm_profile(pps(1000), 2, 3);
  ASSERT_TRUE(m.ok());
  sl_meter_state st, next;
  sl_srtcm_init(&*m, 0, &st);
  std::vector<int> colours;
  for (int i = 0; i < 6; ++i) {
    colours.push_back(sl_srtcm_decide(&*m, &st, 0, 1, &next));
    st = next;
  }
  EXPECT_EQ(colours, (std::vector<int>{SL_GREEN, SL_GREEN, SL_YELLOW, SL_YELLOW, SL_YELLOW, SL_RED}));
  // 3 ms later: C refills first (2 tokens), the 3rd token overflows into E.
  colours.clear();
  for (int i = 0; i < 4; ++i) {
    colours.push_back(sl_srtcm_decide(&*m, &st, 3 * kMs, 1, &next));
    st = next;
  }
  EXPECT_EQ(colours, (std::vector<int>{SL_GREEN, SL_GREEN, SL_YELLOW, SL_RED}));
}

// sl_srtcm_decide takes a short path when the committed bucket is not full; it must give the
// very words and colour of sl_srtcm_decide_general (RFC 2697 on the two empty times) in
// every case. Random walks over real
// traffic (bursts at one instant, idle gaps that fill both buckets, stale and stepped-back
// clocks, costs above either burst), plus arbitrary states near t that traffic rarely makes.
TEST(BucketMath, SrtcmShortPathEqualsGeneral) {
  struct Case {
    Rate cir;
    uint64_t cbs, ebs;
  };
  const Case cases[] = {{pps(1000), 2, 3},
                        {bits_per_sec(1'000'000'000), 16384, 16384},
                        {bits_per_sec(10'000'000), 3000, 6000},
                        {bits_per_sec(400'000'000'000), 1'000'000, 1},
                        {pps(1), 1, 100}};
  std::mt19937_64 rng(2697);
  uint64_t colours[3] = {}, committed_full = 0, committed_not_full = 0, short_path = 0;
  uint64_t short_green_seen = 0, full_green_seen = 0;
  for (const Case& c : cases) {
    auto m = make_srtcm_profile(c.cir, c.cbs, c.ebs);
    ASSERT_TRUE(m.ok()) << m.error().message;
    const uint64_t fill_ns = m->committed.burst_u / m->committed.time_mult + 1;
    const uint64_t max_cost = std::max(c.cbs, c.ebs) + 2;
    uint64_t now = rng();
    sl_meter_state st;
    sl_srtcm_init(&*m, now, &st);
    for (int i = 0; i < 200'000; ++i) {
      switch (rng() % 16) {
        case 0: now += rng() % (4 * fill_ns); break;       // idle: buckets fill
        case 1: now -= rng() % (2 * fill_ns); break;       // stale read or step back
        case 2: now += rng(); break;                       // anything, wrap included
        case 3: {                                          // a state traffic rarely makes
          const uint64_t t = sl_time_u(&m->committed, now);
          st.e0 = t - (rng() % (3 * m->committed.burst_u + 3)) + m->committed.burst_u;
          st.e1 = (rng() % (3 * m->excess_burst_u + 3)) - m->excess_burst_u - 1;  // X
          break;
        }
        default: now += rng() % (fill_ns / 8 + 1); break;  // loaded: back to back
      }
      const uint64_t cost = rng() % 8 == 0 ? rng() % (2 * max_cost) : 1 + rng() % max_cost;
      const sl_s64 dc = sl_credit(sl_time_u(&m->committed, now), st.e0);
      ++(dc < sl_s64(m->committed.burst_u) ? committed_not_full : committed_full);
      short_path += sl_srtcm_short_path(&*m, &st, now);
      sl_meter_state fast{}, general{};
      const sl_colour a = sl_srtcm_decide(&*m, &st, now, cost, &fast);
      const sl_colour b = sl_srtcm_decide_general(&*m, &st, now, cost, &general);
      ASSERT_EQ(a, b) << "case " << (&c - cases) << " step " << i;
      ASSERT_EQ(fast.e0, general.e0) << "case " << (&c - cases) << " step " << i;
      ASSERT_EQ(fast.e1, general.e1) << "case " << (&c - cases) << " step " << i;
      // The burst pipeline's green test (sl_srtcm_green_at).
      sl_srtcm_at at;
      sl_srtcm_at_time(&*m, now, &at);
      sl_meter_state at_next{};
      const bool green_at = sl_srtcm_green_at(&at, &st, cost, &at_next) != 0;
      const bool short_path_now = sl_srtcm_short_path(&*m, &st, now) != 0;
      const bool full = dc >= sl_s64(m->committed.burst_u);
      // Green from it exactly when sl_srtcm_decide colours green on a full committed bucket
      // or on its short path, with the same words.
      ASSERT_EQ(green_at, a == SL_GREEN && (full || short_path_now))
          << "case " << (&c - cases) << " step " << i;
      if (green_at) {
        ASSERT_EQ(at_next.e0, fast.e0) << "case " << (&c - cases) << " step " << i;
        ASSERT_EQ(at_next.e1, fast.e1) << "case " << (&c - cases) << " step " << i;
        ++(full ? full_green_seen : short_green_seen);
      }
      ++colours[a];
      st = fast;
    }
  }
  // The walk reached every colour, and both sides of the short path's condition.
  for (uint64_t n : colours) EXPECT_GT(n, 10'000u);
  EXPECT_GT(committed_full, 10'000u);
  EXPECT_GT(committed_not_full, 10'000u);
  EXPECT_GT(short_path, 10'000u);
  EXPECT_GT(short_green_seen, 10'000u);
  EXPECT_GT(full_green_seen, 10'000u);
  EXPECT_GT(committed_full + committed_not_full - short_path, 10'000u);
}

TEST(BucketMath, TrtcmPeakCheckedFirst) {
  auto m = make_trtcm_profile(pps(1000), 2, pps(2000), 4);
  ASSERT_TRUE(m.ok());
  sl_meter_state st, next;
  sl_trtcm_init(&*m, 0, &st);
  std::vector<int> colours;
  for (int i = 0; i < 5; ++i) {
    colours.push_back(sl_trtcm_decide(&*m, &st, 0, 1, &next));
    st = next;
  }
  EXPECT_EQ(colours, (std::vector<int>{SL_GREEN, SL_GREEN, SL_YELLOW, SL_YELLOW, SL_RED}));
}

TEST(BucketMath, FixedWindowCountsPerWindow) {
  auto w = make_window_profile(kSec, 3, false);
  ASSERT_TRUE(w.ok());
  uint64_t word = 0, next;
  int admitted = 0;
  for (int i = 0; i < 5; ++i) {
    admitted += sl_fixed_window_decide(&*w, word, 5 * kSec + 10, 1, &next);
    word = next;
  }
  EXPECT_EQ(admitted, 3);
  EXPECT_TRUE(sl_fixed_window_decide(&*w, word, 6 * kSec, 1, &next));  // new window
  word = next;
  // A backward step into the previous window is no time passing: still this window's count.
  EXPECT_TRUE(sl_fixed_window_decide(&*w, word, 5 * kSec + 20, 1, &next));
  word = next;
  EXPECT_TRUE(sl_fixed_window_decide(&*w, word, 5 * kSec + 20, 1, &next));
  word = next;
  EXPECT_FALSE(sl_fixed_window_decide(&*w, word, 5 * kSec + 20, 1, &next));
}

TEST(BucketMath, SlidingWindowWeighsThePreviousWindow) {
  auto w = make_window_profile(kSec, 100, true);
  ASSERT_TRUE(w.ok());
  uint64_t word = 0, next;
  for (int i = 0; i < 100; ++i) {
    ASSERT_TRUE(sl_sliding_window_decide(&*w, word, 10 * kSec + i, 1, &next));
    word = next;
  }
  EXPECT_FALSE(sl_sliding_window_decide(&*w, word, 10 * kSec + 500, 1, &next));
  word = next;
  // 25% into the next window the previous one weighs 75%: 25 more fit.
  int admitted = 0;
  for (int i = 0; i < 40; ++i) {
    admitted += sl_sliding_window_decide(&*w, word, 11 * kSec + kSec / 4, 1, &next);
    word = next;
  }
  EXPECT_EQ(admitted, 25);
  // Two windows later everything is forgotten.
  admitted = 0;
  for (int i = 0; i < 150; ++i) {
    admitted += sl_sliding_window_decide(&*w, word, 13 * kSec + kSec / 2, 1, &next);
    word = next;
  }
  EXPECT_EQ(admitted, 100);
}
