// Profile builder ranges and errors (SPEC §2 limits), and the lock-free wrappers.
#include <gtest/gtest.h>

#include "limiter_profile.hpp"
#include "limiters.hpp"
#include "rates.hpp"

using namespace sluice;
using namespace sluice::testing;

TEST(LimiterProfile, AcceptsTheWholeDocumentedRange) {
  // 1 pps .. 800 Mpps and 1 bit/s .. 400 Gbit/s, with bursts up to one second of traffic.
  for (uint64_t n : {1ull, 10ull, 1000ull, 1'000'000ull, 800'000'000ull}) {
    EXPECT_TRUE(make_rate_profile(pps(n), 1).ok()) << n;
    EXPECT_TRUE(make_rate_profile(pps(n), n).ok()) << n;
  }
  for (uint64_t bits : {8ull, 64'000ull, 1'000'000'000ull, 400'000'000'000ull}) {
    EXPECT_TRUE(make_rate_profile(bits_per_sec(bits), 64).ok()) << bits;
    EXPECT_TRUE(make_rate_profile(bits_per_sec(bits), std::max<uint64_t>(64, bits / 8)).ok())
        << bits;
  }
  EXPECT_TRUE(make_rate_profile(bits_per_sec(1), 64).ok());
}

TEST(LimiterProfile, RateIsExactToOnePartIn10k) {
  for (Rate r : {pps(1), pps(999'983), pps(800'000'000), bits_per_sec(400'000'000'000ull),
                 bits_per_sec(2'500'000'000ull), bits_per_sec(1)}) {
    uint64_t burst = r.unit == CostUnit::packets ? 1 : 64;
    auto p = make_rate_profile(r, burst);
    ASSERT_TRUE(p.ok()) << p.error().message;
    uint64_t cost = r.unit == CostUnit::packets ? 1 : 64;
    double exact_u = double(cost) * 1e9 / r.tokens_per_sec() * double(1ull << p->time_shift);
    double ours_u = double(sl_cost_u(&*p, cost));
    EXPECT_GE(ours_u, exact_u - 1e-9) << format_rate(r);  // never under-charges
    EXPECT_LT((ours_u - exact_u) / exact_u, 1e-4) << format_rate(r);
    double exact_burst_u = double(burst) * 1e9 / r.tokens_per_sec() * double(1ull << p->time_shift);
    EXPECT_LE(double(p->burst_u), exact_burst_u + 1e-6);  // never over-fills
    EXPECT_LT((exact_burst_u - double(p->burst_u)) / exact_burst_u, 1e-4);
  }
}

TEST(LimiterProfile, RejectsWhatCannotBeRepresented) {
  auto err = [](auto r) { return r.ok() ? std::string() : r.error().message; };
  EXPECT_NE(err(make_rate_profile(pps(0), 1)).find("positive"), std::string::npos);
  EXPECT_NE(err(make_rate_profile(pps(10), 0)).find("at least 1 packet"), std::string::npos);
  EXPECT_NE(err(make_rate_profile(bits_per_sec(8000), 63)).find("64 bytes"), std::string::npos);
  EXPECT_NE(err(make_rate_profile(pps(10'000'000'000ull), 1)).find("exact"), std::string::npos);
  EXPECT_NE(err(make_rate_profile(pps(1), 10'000'000)).find("too long"), std::string::npos);
  EXPECT_NE(err(make_shaper_profile(pps(10), 1, 0)).find("max-delay"), std::string::npos);
  EXPECT_NE(err(make_trtcm_profile(pps(10), 1, pps(5), 1)).find("PIR >= CIR"), std::string::npos);
  EXPECT_NE(err(make_window_profile(10, 5, false)).find("window"), std::string::npos);
  EXPECT_NE(err(make_window_profile(kSec, 0, true)).find("limit"), std::string::npos);
}

TEST(LimiterProfile, ChecksEveryAlgorithmOfARule) {
  Rule r;
  r.rate = pps(100);
  r.burst = 10;
  for (Algorithm a : {Algorithm::token_bucket, Algorithm::gcra, Algorithm::srtcm}) {
    r.algorithm = a;
    EXPECT_TRUE(check_rule_limits(r).ok());
  }
  r.algorithm = Algorithm::leaky_bucket;
  EXPECT_FALSE(check_rule_limits(r).ok());  // no max-delay
  r.max_delay_ns = 5 * kMs;
  EXPECT_TRUE(check_rule_limits(r).ok());
  r.algorithm = Algorithm::trtcm;
  r.peak_rate = pps(200);
  r.peak_burst = 20;
  EXPECT_TRUE(check_rule_limits(r).ok());
  r.algorithm = Algorithm::fixed_window;
  EXPECT_FALSE(check_rule_limits(r).ok());  // no window
  r.window_ns = kSec;
  r.limit = 100;
  EXPECT_TRUE(check_rule_limits(r).ok());
}

TEST(LimiterProfile, HugeWindowLimitsAreScaledNotCrashed) {
  for (bool sliding : {false, true}) {
    auto w = make_window_profile(kSec, UINT64_MAX, sliding);
    ASSERT_TRUE(w.ok());
    EXPECT_GT(w->unit_cost, 1u);
    EXPECT_LE(w->limit_units, sliding ? SL_SW_COUNT_MASK : SL_FW_COUNT_MASK);
  }
}

TEST(Limiters, RefusalDoesNotWriteTheWord) {
  auto p = make_rate_profile(pps(10), 1);
  ASSERT_TRUE(p.ok());
  std::atomic<uint64_t> w{sl_tb_init(&*p, 0)};
  ASSERT_TRUE(token_bucket_charge(*p, w, 0, 1));
  uint64_t before = w.load();
  EXPECT_FALSE(token_bucket_charge(*p, w, 1, 1));
  EXPECT_EQ(w.load(), before);
}

TEST(Limiters, RefundsRestoreTheCharge) {
  auto p = make_rate_profile(pps(10), 2);
  ASSERT_TRUE(p.ok());
  std::atomic<uint64_t> tb{sl_tb_init(&*p, 0)}, gc{sl_gcra_init(&*p, 0)};
  ASSERT_TRUE(token_bucket_charge(*p, tb, 0, 1));
  ASSERT_TRUE(token_bucket_charge(*p, tb, 0, 1));
  ASSERT_TRUE(gcra_charge(*p, gc, 0, 1));
  ASSERT_TRUE(gcra_charge(*p, gc, 0, 1));
  token_bucket_refund(*p, tb, 0, 1);
  gcra_refund(*p, gc, 0, 1);
  EXPECT_TRUE(token_bucket_charge(*p, tb, 0, 1));
  EXPECT_TRUE(gcra_charge(*p, gc, 0, 1));
  EXPECT_FALSE(token_bucket_charge(*p, tb, 0, 1));
  EXPECT_FALSE(gcra_charge(*p, gc, 0, 1));

  auto w = make_window_profile(kSec, 2, false);
  ASSERT_TRUE(w.ok());
  std::atomic<uint64_t> fw{sl_fixed_window_init(&*w, 5)};
  ASSERT_TRUE(fixed_window_charge(*w, fw, 5, 1));
  ASSERT_TRUE(fixed_window_charge(*w, fw, 5, 1));
  fixed_window_refund(*w, fw, 5, 1);
  EXPECT_TRUE(fixed_window_charge(*w, fw, 5, 1));
  EXPECT_FALSE(fixed_window_charge(*w, fw, 5, 1));
}

// The single-writer publish must decide exactly as the CAS one does.
TEST(Limiters, SingleWriterDecidesAsShared) {
  auto p = make_rate_profile(bits_per_sec(10'000'000), 3000);
  auto m = make_trtcm_profile(bits_per_sec(10'000'000), 3000, bits_per_sec(20'000'000), 6000);
  ASSERT_TRUE(p.ok() && m.ok());
  std::atomic<uint64_t> a{sl_tb_init(&*p, 0)}, b{sl_tb_init(&*p, 0)};
  sl_meter_state st;
  sl_trtcm_init(&*m, 0, &st);
  MeterWord ma{st.e0, st.e1}, mb{st.e0, st.e1};
  uint64_t t = 0, x = 1;
  for (int i = 0; i < 20000; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    t += (x >> 40) % 2000;
    uint64_t cost = 64 + (x >> 20) % 1400;
    ASSERT_EQ(token_bucket_charge(*p, a, t, cost, Sharing::shared),
              token_bucket_charge(*p, b, t, cost, Sharing::single_writer));
    ASSERT_EQ(trtcm_charge(*m, ma, t, cost, Sharing::shared),
              trtcm_charge(*m, mb, t, cost, Sharing::single_writer));
  }
  EXPECT_EQ(a.load(), b.load());
}

TEST(Limiters, MeterStateRoundTrips) {
  MeterWord w{};
  meter_store(w, MeterWord{1, 2});
  MeterWord r = meter_load(w);
  EXPECT_EQ(r.e0, 1u);
  EXPECT_EQ(r.e1, 2u);
}
