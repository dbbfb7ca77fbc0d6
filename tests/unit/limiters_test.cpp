// Profile builder ranges and errors (SPEC §2 limits), and the lock-free wrappers, single
// charges and bursts.
#include <gtest/gtest.h>

#include <atomic>
#include <random>

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
                 bits_per_sec(2'500'000'000ull), bits_per_sec(1), pps(123'456'789),
                 bits_per_sec(9'999'999'999ull), bits_per_sec(399'999'999'999ull)}) {
    uint64_t burst = r.unit == CostUnit::packets ? 1 : 64;
    auto p = make_rate_profile(r, burst);
    ASSERT_TRUE(p.ok()) << p.error().message;
    uint64_t cost = r.unit == CostUnit::packets ? 1 : 64;
    double exact_u = double(cost) * 1e9 / r.tokens_per_sec() * double(p->time_mult);
    double ours_u = double(sl_cost_u(&*p, cost));
    EXPECT_GE(ours_u, exact_u - 1e-9) << format_rate(r);  // never under-charges
    EXPECT_LT((ours_u - exact_u) / exact_u, 1e-4) << format_rate(r);
    double exact_burst_u = double(burst) * 1e9 / r.tokens_per_sec() * double(p->time_mult);
    // Never holds more than B tokens as they are charged, and within 1e-4 of the exact fill.
    EXPECT_LE(p->burst_u, sl_cost_u(&*p, burst)) << format_rate(r);
    EXPECT_LT(std::abs(exact_burst_u - double(p->burst_u)) / exact_burst_u, 1e-4);
  }
}

// Rates stated with few significant digits get a time unit in which a token's interval is
// whole: nothing is rounded (10 Gbit/s: a byte is 4/5 ns, 4 units of 1/5 ns).
TEST(LimiterProfile, RoundRatesGetExactProfiles) {
  struct Case {
    Rate rate;
    uint32_t mult;
    uint64_t units_per_token;
  };
  for (const Case& c : {Case{bits_per_sec(10'000'000'000ull), 5, 4},
                        Case{bits_per_sec(400'000'000'000ull), 50, 1},
                        Case{bits_per_sec(1'000'000'000ull), 1, 8},
                        Case{bits_per_sec(2'500'000'000ull), 5, 16},
                        Case{pps(800'000'000), 4, 5}, Case{pps(3), 3, 1'000'000'000},
                        Case{pps(7, 3), 7, 3'000'000'000}, Case{bits_per_sec(1), 1, 8'000'000'000}}) {
    auto p = make_rate_profile(c.rate, c.rate.unit == CostUnit::packets ? 1 : 1500);
    ASSERT_TRUE(p.ok()) << p.error().message;
    EXPECT_EQ(p->time_mult, c.mult) << format_rate(c.rate);
    if ((c.mult & (c.mult - 1)) == 0) {
      EXPECT_EQ(1u << p->time_shift, c.mult);  // the shaper shifts
    }
    EXPECT_EQ(p->interval_fp, c.units_per_token << SL_INTERVAL_FRAC_BITS) << format_rate(c.rate);
    EXPECT_EQ(p->burst_u, p->burst_tokens * c.units_per_token) << format_rate(c.rate);
  }
  // Many significant digits: a power-of-two unit with fraction bits (the fallback).
  auto odd = make_rate_profile(bits_per_sec(9'999'999'999ull), 1500);
  ASSERT_TRUE(odd.ok());
  EXPECT_EQ(odd->time_mult, 1u << odd->time_shift);
  EXPECT_NE(odd->interval_fp % (1u << SL_INTERVAL_FRAC_BITS), 0u);
}

TEST(LimiterProfile, RejectsWhatCannotBeRepresented) {
  auto err = [](auto r) { return r.ok() ? std::string() : r.error().message; };
  EXPECT_NE(err(make_rate_profile(pps(0), 1)).find("positive"), std::string::npos);
  EXPECT_NE(err(make_rate_profile(pps(10), 0)).find("at least 1 packet"), std::string::npos);
  EXPECT_NE(err(make_rate_profile(bits_per_sec(8000), 63)).find("64 bytes"), std::string::npos);
  // A rate above the range whose interval is no whole number of units (a round one, such as
  // 10 Gpps, is exact at 1/10 ns and has no precision to lose).
  EXPECT_NE(err(make_rate_profile(pps(9'999'999'999ull), 1)).find("exact"), std::string::npos);
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
  auto sr = make_srtcm_profile(bits_per_sec(10'000'000), 3000, 6000);
  ASSERT_TRUE(p.ok() && m.ok() && sr.ok());
  std::atomic<uint64_t> a{sl_tb_init(&*p, 0)}, b{sl_tb_init(&*p, 0)};
  sl_meter_state st;
  sl_trtcm_init(&*m, 0, &st);
  MeterWord ma{st.e0, st.e1}, mb{st.e0, st.e1};
  sl_srtcm_init(&*sr, 0, &st);
  MeterWord sa{st.e0, st.e1}, sb{st.e0, st.e1};  // shared: 8- and 16-byte CAS paths
  uint64_t t = 0, x = 1;
  for (int i = 0; i < 20000; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    t += (x >> 40) % 2000;
    uint64_t cost = 64 + (x >> 20) % 1400;
    ASSERT_EQ(token_bucket_charge(*p, a, t, cost, Sharing::shared),
              token_bucket_charge(*p, b, t, cost, Sharing::single_writer));
    ASSERT_EQ(trtcm_charge(*m, ma, t, cost, Sharing::shared),
              trtcm_charge(*m, mb, t, cost, Sharing::single_writer));
    ASSERT_EQ(srtcm_charge(*sr, sa, t, cost, Sharing::shared),
              srtcm_charge(*sr, sb, t, cost, Sharing::single_writer));
  }
  EXPECT_EQ(a.load(), b.load());
  EXPECT_EQ(meter_load(sa).e0, meter_load(sb).e0);
  EXPECT_EQ(meter_load(sa).e1, meter_load(sb).e1);
}

TEST(Limiters, MeterStateRoundTrips) {
  MeterWord w{};
  meter_store(w, MeterWord{1, 2});
  MeterWord r = meter_load(w);
  EXPECT_EQ(r.e0, 1u);
  EXPECT_EQ(r.e1, 2u);
}

// ------------------------------------------------------------------------------ bursts

namespace {

// Random bursts for the burst API: 0..kMaxBurst packets of random costs at one time; time
// moves by gaps up to max_gap_ns, and now and then idles for days or steps back, a little
// (a stale read, within the tolerance) or a lot (the bucket re-bases).
struct BurstTrace {
  std::mt19937_64 rng;
  uint64_t min_cost, max_cost, max_gap_ns;
  uint64_t now = 7 * kSec;
  uint64_t costs[kMaxBurst] = {};
  uint32_t n = 0;

  bool uniform = false;  // one cost per burst instead of one per packet

  BurstTrace(uint64_t seed, uint64_t min_c, uint64_t max_c, uint64_t gap, bool same = false)
      : rng(seed), min_cost(min_c), max_cost(max_c), max_gap_ns(gap), uniform(same) {}

  void next() {
    switch (rng() % 32) {
      case 0: now += 3 * 24 * 3600 * kSec; break;
      case 1: now -= rng() % (SL_STEP_TOLERANCE_NS / 2); break;
      case 2: now -= 5 * SL_STEP_TOLERANCE_NS; break;
      default: now += rng() % max_gap_ns;
    }
    n = uint32_t(rng() % 2 ? rng() % 9 : rng() % (kMaxBurst + 1));
    if (rng() % 8 == 0) n = kMaxBurst;
    auto draw = [&] { return min_cost + rng() % (max_cost - min_cost + 1); };
    const uint64_t one = uniform ? draw() : 0;
    for (uint32_t i = 0; i < n; ++i) costs[i] = uniform ? one : draw();
  }
};

// Drives `rounds` random bursts through burst(now, costs, n, results), and the same packets
// one by one through single(now, cost) on a second copy of the state: every packet must get
// the same result, and the two states must be equal after every burst.
template <class Burst, class Single, class SameState>
void expect_burst_as_singles(BurstTrace trace, int rounds, Burst&& burst, Single&& single,
                             SameState&& same_state) {
  uint64_t results[kMaxBurst];
  uint64_t packets = 0, distinct[2] = {};
  for (int r = 0; r < rounds; ++r) {
    trace.next();
    burst(trace.now, trace.costs, trace.n, results);
    for (uint32_t i = 0; i < trace.n; ++i) {
      uint64_t expected = single(trace.now, trace.costs[i]);
      ASSERT_EQ(results[i], expected) << "round " << r << " packet " << i << " of " << trace.n;
      ++distinct[expected == 0 ? 0 : 1];
    }
    packets += trace.n;
    ASSERT_TRUE(same_state()) << "round " << r;
  }
  // The trace must exercise both outcomes, or the comparison proves little.
  EXPECT_GT(distinct[0], packets / 50);
  EXPECT_GT(distinct[1], packets / 50);
}

constexpr int kBurstRounds = 4000;
const Sharing kSharings[] = {Sharing::shared, Sharing::single_writer};

}  // namespace

TEST(LimiterBursts, PolicersDecideAsSingleCharges) {
  struct Setup {
    Rate rate;
    uint64_t burst, min_cost, max_cost, max_gap_ns, stale_ns;
    bool uniform = false;  // one cost for all the packets of a burst
  };
  // Costs up to past the burst (never conform), gaps around the time a burst refills. The
  // last four: every packet of a burst costs the same (a pps rule; a flood of one frame size,
  // larger than the burst at times), which police_burst decides in closed form.
  const Setup setups[] = {
      {bits_per_sec(10'000'000), 3000, 64, 3100, 8 * kMs, SL_STEP_TOLERANCE_NS},
      {pps(1000), 5, 1, 6, 20 * kMs, SL_STEP_TOLERANCE_NS},
      {bits_per_sec(2'500'000'000ull), 64 * 1024, 64, 9000, 800 * kUs, 0},
      {pps(1000), 5, 1, 1, 20 * kMs, SL_STEP_TOLERANCE_NS, true},
      {pps(3, 7), 40, 1, 1, 9 * kSec, SL_STEP_TOLERANCE_NS, true},
      {bits_per_sec(2'500'000'000ull), 64 * 1024, 64, 9000, 800 * kUs, 0, true},
      {bits_per_sec(10'000'000), 3000, 64, 3100, 8 * kMs, SL_STEP_TOLERANCE_NS, true},
  };
  uint64_t seed = 1;
  for (const Setup& su : setups) {
    auto p = make_rate_profile(su.rate, su.burst);
    ASSERT_TRUE(p.ok()) << p.error().message;
    set_stale_read_tolerance(*p, su.stale_ns);
    for (Sharing sharing : kSharings) {
      for (bool gcra : {false, true}) {
        SCOPED_TRACE(::testing::Message() << format_rate(su.rate) << (gcra ? " gcra" : " tb")
                                        << (sharing == Sharing::shared ? " shared" : " single")
                                        << (su.uniform ? " uniform" : ""));
        uint64_t init = gcra ? sl_gcra_init(&*p, 7 * kSec) : sl_tb_init(&*p, 7 * kSec);
        std::atomic<uint64_t> a{init}, b{init};
        expect_burst_as_singles(
            BurstTrace(seed++, su.min_cost, su.max_cost, su.max_gap_ns, su.uniform), kBurstRounds,
            [&](uint64_t now, const uint64_t* costs, uint32_t n, uint64_t* out) {
              uint64_t mask = gcra ? gcra_charge_burst(*p, a, now, costs, n, sharing)
                                   : token_bucket_charge_burst(*p, a, now, costs, n, sharing);
              for (uint32_t i = 0; i < n; ++i) out[i] = (mask >> i) & 1;
              ASSERT_EQ(n == kMaxBurst ? 0 : mask >> n, 0u) << "bits beyond the burst";
            },
            [&](uint64_t now, uint64_t cost) -> uint64_t {
              return gcra ? gcra_charge(*p, b, now, cost) : token_bucket_charge(*p, b, now, cost);
            },
            [&] { return a.load() == b.load(); });
      }
    }
  }
}

TEST(LimiterBursts, ShaperDecidesAsSingleCharges) {
  auto s = make_shaper_profile(bits_per_sec(10'000'000), 3000, 5 * kMs);
  ASSERT_TRUE(s.ok());
  for (Sharing sharing : kSharings) {
    std::atomic<uint64_t> a{sl_gcra_init(&s->rate, 7 * kSec)}, b{a.load()};
    expect_burst_as_singles(
        BurstTrace(11, 64, 3100, 30 * kMs), kBurstRounds,
        [&](uint64_t now, const uint64_t* costs, uint32_t n, uint64_t* out) {
          uint64_t delays[kMaxBurst];
          uint64_t mask = shaper_charge_burst(*s, a, now, costs, n, delays, sharing);
          // accepted: 1 + its delay; dropped: 0
          for (uint32_t i = 0; i < n; ++i) out[i] = (mask >> i) & 1 ? 1 + delays[i] : 0;
        },
        [&](uint64_t now, uint64_t cost) -> uint64_t {
          uint64_t delay = 0;
          return shaper_charge(*s, b, now, cost, &delay) ? 1 + delay : 0;
        },
        [&] { return a.load() == b.load(); });
  }
}

TEST(LimiterBursts, WindowsDecideAsSingleCharges) {
  for (bool sliding : {false, true}) {
    auto w = make_window_profile(kMs, 50000, sliding);
    ASSERT_TRUE(w.ok());
    for (Sharing sharing : kSharings) {
      SCOPED_TRACE(sliding ? "sliding" : "fixed");
      uint64_t init = sliding ? sl_sliding_window_init(&*w, 7 * kSec)
                              : sl_fixed_window_init(&*w, 7 * kSec);
      std::atomic<uint64_t> a{init}, b{init};
      expect_burst_as_singles(
          BurstTrace(21 + sliding, 64, 1600, 600 * kUs), kBurstRounds,
          [&](uint64_t now, const uint64_t* costs, uint32_t n, uint64_t* out) {
            uint64_t mask = sliding ? sliding_window_charge_burst(*w, a, now, costs, n, sharing)
                                    : fixed_window_charge_burst(*w, a, now, costs, n, sharing);
            for (uint32_t i = 0; i < n; ++i) out[i] = (mask >> i) & 1;
          },
          [&](uint64_t now, uint64_t cost) -> uint64_t {
            return sliding ? sliding_window_charge(*w, b, now, cost)
                           : fixed_window_charge(*w, b, now, cost);
          },
          [&] { return a.load() == b.load(); });
    }
  }
}

TEST(LimiterBursts, MetersDecideAsSingleCharges) {
  auto sr = make_srtcm_profile(bits_per_sec(10'000'000), 3000, 6000);
  auto tr = make_trtcm_profile(bits_per_sec(10'000'000), 3000, bits_per_sec(20'000'000), 6000);
  ASSERT_TRUE(sr.ok() && tr.ok());
  for (bool trtcm : {false, true}) {
    const sl_meter_profile& m = trtcm ? *tr : *sr;
    for (Sharing sharing : kSharings) {
      SCOPED_TRACE(trtcm ? "trtcm" : "srtcm");
      sl_meter_state st;
      (trtcm ? sl_trtcm_init : sl_srtcm_init)(&m, 7 * kSec, &st);
      MeterWord a{st.e0, st.e1}, b{st.e0, st.e1};
      auto charge = trtcm ? trtcm_charge : srtcm_charge;
      auto charge_burst = trtcm ? trtcm_charge_burst : srtcm_charge_burst;
      // Colours as results: 0 only for red, so both outcome counts mean something.
      expect_burst_as_singles(
          BurstTrace(31 + trtcm, 64, 6100, 10 * kMs), kBurstRounds,
          [&](uint64_t now, const uint64_t* costs, uint32_t n, uint64_t* out) {
            sl_colour colours[kMaxBurst];
            uint64_t green = charge_burst(m, a, now, costs, n, colours, sharing);
            for (uint32_t i = 0; i < n; ++i) {
              out[i] = colours[i] == SL_RED ? 0 : 1 + colours[i];
              ASSERT_EQ((green >> i) & 1, colours[i] == SL_GREEN ? 1u : 0u) << i;
            }
          },
          [&](uint64_t now, uint64_t cost) -> uint64_t {
            sl_colour c = charge(m, b, now, cost, Sharing::shared);
            return c == SL_RED ? 0 : 1 + c;
          },
          [&] {
            MeterWord x = meter_load(a), y = meter_load(b);
            return x.e0 == y.e0 && x.e1 == y.e1;
          });
    }
  }
}

// A burst of nothing reads the bucket and changes nothing.
TEST(LimiterBursts, EmptyBurstWritesNothing) {
  auto p = make_rate_profile(pps(10), 3);
  ASSERT_TRUE(p.ok());
  std::atomic<uint64_t> w{sl_tb_init(&*p, kSec)};
  const uint64_t before = w.load();
  EXPECT_EQ(token_bucket_charge_burst(*p, w, 2 * kSec, nullptr, 0), 0u);
  EXPECT_EQ(w.load(), before);
  const uint64_t costs[5] = {1, 1, 1, 1, 1};
  EXPECT_EQ(token_bucket_charge_burst(*p, w, 2 * kSec, costs, 5), 0b00111u);
}
