// SPEC §3 exactness at the edges (issue 13): a burst that exactly fills the bucket at high
// byte rates, first packets after idles of days to a year, and a property sweep over rates,
// bursts, frame sizes and idles in which token-bucket and gcra decide identically and agree
// with the exact real-number model (tests/common/reference_model.hpp).
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "bucket_math.h"
#include "limiter_profile.hpp"
#include "rates.hpp"
#include "reference_model.hpp"

using namespace sluice;
using namespace sluice::testing;

namespace {

constexpr uint64_t kDay = 86400 * kSec;
constexpr uint64_t kYear = 365 * kDay;

sl_rate_profile profile(const Rate& r, uint64_t burst) {
  auto p = make_rate_profile(r, burst);
  EXPECT_TRUE(p.ok()) << format_rate(r) << " burst " << burst << ": "
                      << (p.ok() ? "" : p.error().message);
  return p.ok() ? *p : sl_rate_profile{};
}

// Both policers on one profile, fed the same packets; each call returns token-bucket's
// decision and checks gcra's is the same.
class PolicerPair {
 public:
  PolicerPair(const sl_rate_profile& p, uint64_t start_ns)
      : p_(p), tb_(sl_tb_init(&p_, start_ns)), gcra_(sl_gcra_init(&p_, start_ns)) {}
  bool decide(uint64_t now_ns, uint64_t cost) {
    uint64_t next_tb, next_gcra;
    bool a = sl_tb_decide(&p_, tb_, now_ns, cost, &next_tb) != 0;
    bool b = sl_gcra_decide(&p_, gcra_, now_ns, cost, &next_gcra) != 0;
    tb_ = next_tb;
    gcra_ = next_gcra;
    EXPECT_EQ(a, b) << "token-bucket and gcra disagree at " << now_ns << " cost " << cost;
    return a;
  }

 private:
  sl_rate_profile p_;
  uint64_t tb_, gcra_;
};

// Whether the profile keeps time in units in which every token's interval is whole (no
// rounding anywhere: decisions equal the exact model's one for one).
bool exact_profile(const Rate& r, const sl_rate_profile& p) {
  unsigned __int128 interval = (unsigned __int128)1000000000u * r.per_sec_den * p.time_mult;
  return interval % r.per_sec_num == 0 &&
         sl_cost_u(&p, 1) == uint64_t(interval / r.per_sec_num);
}

}  // namespace

// Regression: at 10 Gbit/s a byte lasts 0.8 ns, which no binary fraction holds; costs were
// rounded up per packet and the burst down, so two 750-byte frames (exactly the burst) no
// longer fitted and the second was refused. The exact model passes both.
TEST(BucketExactness, BurstThatExactlyFillsTheBucketPassesWhole) {
  struct Case {
    uint64_t bits_per_sec, burst, frame;
  };
  const Case cases[] = {{10'000'000'000ull, 1500, 750},  {10'000'000'000ull, 1500, 500},
                        {2'500'000'000ull, 1500, 750},   {25'000'000'000ull, 9000, 1500},
                        {100'000'000'000ull, 3000, 1000},
                        {400'000'000'000ull, 1280, 64},  {400'000'000'000ull, 1'500'000, 1500},
                        {40'000'000'000ull, 64 * 7, 64}, {1'500'000ull, 1518, 759}};
  for (const Case& c : cases) {
    const Rate r = bits_per_sec(c.bits_per_sec);
    auto p = profile(r, c.burst);
    PolicerPair pair(p, 5 * kSec);
    ExactTokenBucket model(r, c.burst, 5 * kSec);
    uint64_t ours = 0, exact = 0;
    for (uint64_t sent = 0; sent < c.burst + c.frame; sent += c.frame) {
      ours += pair.decide(5 * kSec, c.frame);
      exact += model.charge(5 * kSec, c.frame);
    }
    EXPECT_EQ(exact, c.burst / c.frame);
    EXPECT_EQ(ours, exact) << format_rate(r) << " burst " << c.burst << " frames " << c.frame;
  }
}

// Regression: the same at a pps rate whose interval is not a binary fraction (1/3 s).
TEST(BucketExactness, PpsBurstThatExactlyFillsTheBucketPassesWhole) {
  for (Rate r : {pps(3), pps(7, 3), pps(999'983), pps(123'456'789)}) {
    for (uint64_t burst : {1ull, 3ull, 10ull}) {
      auto p = profile(r, burst);
      PolicerPair pair(p, 7 * kSec);
      uint64_t ours = 0;
      for (uint64_t i = 0; i < burst + 2; ++i) ours += pair.decide(7 * kSec, 1);
      EXPECT_EQ(ours, burst) << format_rate(r) << " burst " << burst;
    }
  }
}

// Regression: after a long idle the first packet was refused (the credit wrapped into what
// reads as a backward clock step), and token-bucket (credit mod 2^63) and gcra (mod 2^64)
// disagreed about it.
TEST(BucketExactness, FirstPacketAfterLongIdleConforms) {
  struct Case {
    Rate rate;
    uint64_t burst, cost, idle_ns;
  };
  const Case cases[] = {{pps(800'000'000), 1, 1, 10 * kDay},
                        {bits_per_sec(400'000'000'000ull), 64, 64, 10 * kDay},
                        {bits_per_sec(400'000'000'000ull), 64 * 20, 64, 10 * kDay},
                        {bits_per_sec(10'000'000'000ull), 1500, 1500, 100 * kDay},
                        {bits_per_sec(10'000'000'000ull), 15000, 1500, kYear},
                        {pps(800'000'000), 100, 1, kYear},
                        {pps(1), 1, 1, kYear}};
  for (const Case& c : cases) {
    auto p = profile(c.rate, c.burst);
    for (uint64_t start : {uint64_t{0}, 12345 * kSec, UINT64_MAX - kSec}) {
      PolicerPair pair(p, start);
      uint64_t first = 0, later = 0;
      while (first < c.burst / c.cost + 5 && pair.decide(start, c.cost)) ++first;
      EXPECT_EQ(first, c.burst / c.cost) << format_rate(c.rate);
      for (uint64_t i = 0; i < c.burst / c.cost + 5; ++i)
        later += pair.decide(start + c.idle_ns, c.cost);
      EXPECT_EQ(later, c.burst / c.cost)
          << format_rate(c.rate) << " burst " << c.burst << " after " << c.idle_ns / kDay
          << " days from " << start;
    }
  }
}

namespace {

struct SweepCase {
  Rate rate;
  uint64_t burst;
};

std::string describe(const SweepCase& c) {
  return format_rate(c.rate) + " burst " + std::to_string(c.burst);
}

std::vector<SweepCase> sweep_cases() {
  const Rate pps_rates[] = {pps(1),      pps(3, 2),     pps(7, 3),         pps(1000),
                            pps(123'457), pps(999'983), pps(10'000'000),   pps(123'456'789),
                            pps(800'000'000)};
  const Rate byte_rates[] = {bits_per_sec(1),
                             bits_per_sec(64'000),
                             bits_per_sec(1'500'000),
                             bits_per_sec(10'000'000),
                             bytes_per_sec(125'000),
                             bits_per_sec(1'000'000'000),
                             bits_per_sec(2'500'000'000ull),
                             bits_per_sec(9'999'999'999ull),
                             bits_per_sec(10'000'000'000ull),
                             bits_per_sec(25'000'000'000ull),
                             bits_per_sec(100'000'000'000ull),
                             bits_per_sec(400'000'000'000ull)};
  std::vector<SweepCase> out;
  for (const Rate& r : pps_rates) {
    const uint64_t per_sec = std::max<uint64_t>(1, r.per_sec_num / r.per_sec_den);
    for (uint64_t burst : {uint64_t{1}, uint64_t{2}, uint64_t{10}, per_sec / 100 + 3, per_sec})
      out.push_back({r, burst});
  }
  for (const Rate& r : byte_rates) {
    const uint64_t per_sec = r.per_sec_num / r.per_sec_den;
    for (uint64_t burst : {uint64_t{64}, uint64_t{1500}, uint64_t{1518 * 4},
                           std::max<uint64_t>(64, per_sec / 1000), std::max<uint64_t>(64, per_sec)})
      out.push_back({r, burst});
  }
  return out;
}

}  // namespace

// Property: for every rate, burst, frame size and idle, token-bucket and gcra decide each
// packet identically, and the conforming count matches the exact model within one packet;
// where the profile is exact (every rate given with few significant digits), decision for
// decision. Each trace: a full bucket drained at one instant, then rounds of (idle, a burst
// at one instant, a stretch offered at twice the rate).
TEST(BucketExactness, SweepMatchesTheExactModel) {
  const uint64_t idles[] = {0, kSec, kDay, 10 * kDay, 100 * kDay, kYear};
  std::mt19937_64 rng(13);
  uint64_t exact_profiles = 0, fallback_profiles = 0;
  for (const SweepCase& c : sweep_cases()) {
    auto made = make_rate_profile(c.rate, c.burst);
    if (!made.ok()) {
      // Only bursts longer than the representable 2^47 units may be refused.
      EXPECT_NE(made.error().message.find("too long"), std::string::npos) << describe(c);
      continue;
    }
    const sl_rate_profile p = *made;
    const bool exact = exact_profile(c.rate, p);
    ++(exact ? exact_profiles : fallback_profiles);
    const bool bytes = c.rate.unit == CostUnit::bytes;
    const std::vector<uint64_t> frames =
        bytes ? std::vector<uint64_t>{64, 750, 1500, 0} : std::vector<uint64_t>{1};
    for (uint64_t frame : frames) {
      if (frame > c.burst || (frame == 0 && c.burst < 1518)) continue;
      auto cost_of = [&] { return frame != 0 ? frame : 64 + rng() % 1455; };  // 0: mixed sizes
      const uint64_t start = rng() >> 1;  // the model does not wrap: keep 2^63 ns of room
      PolicerPair pair(p, start);
      ExactTokenBucket model(c.rate, c.burst, start);
      uint64_t t = start;
      int64_t ours = 0, theirs = 0;
      auto offer = [&](uint64_t cost) {
        const bool a = pair.decide(t, cost), b = model.charge(t, cost);
        ours += a;
        theirs += b;
        if (exact) {
          ASSERT_EQ(a, b) << describe(c) << " frame " << frame << " at +" << (t - start);
        }
      };
      const double per_token_ns = 1e9 / c.rate.tokens_per_sec();
      for (uint64_t idle : idles) {
        t += idle;
        const uint64_t in_burst = std::min<uint64_t>(c.burst / std::max<uint64_t>(frame, 1) + 3,
                                                     300);
        for (uint64_t i = 0; i < in_burst; ++i) offer(cost_of());
        for (int i = 0; i < 200; ++i) {
          const uint64_t cost = cost_of();
          t += uint64_t(per_token_ns * double(cost) / 2.0 * (0.5 + double(rng() % 1000) / 1000));
          offer(cost);
        }
        if (::testing::Test::HasFatalFailure()) return;
      }
      EXPECT_LE(std::abs(ours - theirs), 1) << describe(c) << " frame " << frame;
      EXPECT_GT(theirs, 0);
    }
  }
  // Both kinds of profile were exercised.
  EXPECT_GT(exact_profiles, 50u);
  EXPECT_GT(fallback_profiles, 5u);
}

// Regression (found by tests/fuzz/fuzz_bucket_diff): with a fine fallback unit (46 Mpps, u =
// 2^-12 ns) an idle of ~25 days leaves the credit 2^58 u behind the clock mod 2^63. When
// 2^59 u behind still counted as a backward step, that read as a step and re-based the
// bucket empty; only the last 2^56 u do now, and the bucket is full.
TEST(BucketExactness, IdleEndingJustBeforeAWrapOfTheCreditIsFull) {
  const Rate r = pps(18'949'967'491ull, 411);
  auto p = profile(r, 1000);
  ASSERT_EQ(p.time_mult, 4096u);
  const uint64_t idle_ns = ((uint64_t{1} << 63) - (uint64_t{1} << 58)) / p.time_mult;
  for (uint64_t start : {uint64_t{0}, 987654321 * kSec}) {
    PolicerPair pair(p, start);
    uint64_t first = 0, later = 0;
    for (int i = 0; i < 1005; ++i) first += pair.decide(start, 1);
    for (int i = 0; i < 1005; ++i) later += pair.decide(start + idle_ns, 1);
    EXPECT_EQ(first, 1000u);
    EXPECT_EQ(later, 1000u) << "after " << idle_ns / kDay << " days";
  }
  // A step back of an hour is still one: the bucket re-bases empty, then refills.
  PolicerPair pair(p, 100'000 * kSec);
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE(pair.decide(100'000 * kSec, 1));
  EXPECT_FALSE(pair.decide(100'000 * kSec - 3600 * kSec, 1));
}
