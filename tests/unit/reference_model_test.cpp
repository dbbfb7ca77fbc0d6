// Each algorithm, through its lock-free wrapper, against the exact real-number model of
// SPEC §3 on random traces: conforming counts per bucket within one packet.
#include <gtest/gtest.h>

#include <random>

#include "limiter_profile.hpp"
#include "limiters.hpp"
#include "rates.hpp"
#include "reference_model.hpp"

using namespace sluice;
using namespace sluice::testing;

namespace {

struct Case {
  Rate rate;
  uint64_t burst;
};

// Rates across the supported range, bursts from one packet to about a second of traffic.
std::vector<Case> random_cases(std::mt19937_64& rng, int n) {
  const Rate rates[] = {pps(1),        pps(3, 2),      pps(1000),
                        pps(123'457),  pps(10'000'000), bits_per_sec(64'000),
                        bits_per_sec(10'000'000), bits_per_sec(2'500'000'000ull),
                        bits_per_sec(100'000'000'000ull), bits_per_sec(400'000'000'000ull),
                        bytes_per_sec(125'000)};
  std::vector<Case> out;
  for (int i = 0; i < n; ++i) {
    Rate r = rates[rng() % std::size(rates)];
    double per_sec = r.tokens_per_sec();
    uint64_t lo = r.unit == CostUnit::packets ? 1 : 1518;
    uint64_t hi = std::max<uint64_t>(lo + 1, uint64_t(per_sec * (0.001 + double(rng() % 1000) / 1000.0)));
    out.push_back({r, lo + rng() % (hi - lo)});
  }
  return out;
}

// Arrival gaps around the rate: mostly faster than it (so the limiter is busy), with idle
// gaps now and then.
struct Trace {
  std::vector<uint64_t> t, cost;
};

Trace random_trace(std::mt19937_64& rng, const Case& c, size_t n) {
  Trace tr;
  bool bytes = c.rate.unit == CostUnit::bytes;
  double per_token_ns = 1e9 / c.rate.tokens_per_sec();
  double load = 0.5 + double(rng() % 300) / 100.0;  // offered load 0.5x .. 3.5x the rate
  uint64_t t = rng() >> 2;
  for (size_t i = 0; i < n; ++i) {
    uint64_t cost = bytes ? 64 + rng() % 1455 : 1;
    double mean = per_token_ns * double(cost) / load;
    double gap = std::exponential_distribution<>(1.0)(rng) * mean;
    if (rng() % 500 == 0) gap += per_token_ns * double(c.burst) * 2;  // an idle period
    t += uint64_t(gap);
    tr.t.push_back(t);
    tr.cost.push_back(cost);
  }
  return tr;
}

}  // namespace

class PolicerVsModel : public ::testing::TestWithParam<Algorithm> {};

TEST_P(PolicerVsModel, WithinOnePacketOfTheExactModel) {
  std::mt19937_64 rng(GetParam() == Algorithm::gcra ? 7 : 11);
  for (const Case& c : random_cases(rng, 60)) {
    auto p = make_rate_profile(c.rate, c.burst);
    ASSERT_TRUE(p.ok()) << p.error().message;
    Trace tr = random_trace(rng, c, 4000);
    ExactTokenBucket model(c.rate, c.burst, tr.t[0]);
    std::atomic<uint64_t> word{GetParam() == Algorithm::gcra ? sl_gcra_init(&*p, tr.t[0])
                                                             : sl_tb_init(&*p, tr.t[0])};
    int64_t ours = 0, exact = 0;
    for (size_t i = 0; i < tr.t.size(); ++i) {
      ours += GetParam() == Algorithm::gcra ? gcra_charge(*p, word, tr.t[i], tr.cost[i])
                                            : token_bucket_charge(*p, word, tr.t[i], tr.cost[i]);
      exact += model.charge(tr.t[i], tr.cost[i]);
    }
    EXPECT_LE(std::abs(ours - exact), 1) << format_rate(c.rate) << " burst " << c.burst;
    EXPECT_GT(exact, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Algorithms, PolicerVsModel,
                         ::testing::Values(Algorithm::token_bucket, Algorithm::gcra),
                         [](const auto& info) {
                           return info.param == Algorithm::gcra ? "Gcra" : "TokenBucket";
                         });

TEST(ShaperVsModel, DeparturesMatchAndStreamConforms) {
  std::mt19937_64 rng(3);
  for (const Case& c : random_cases(rng, 40)) {
    uint64_t max_delay = 1 + rng() % (50 * kMs);
    auto s = make_shaper_profile(c.rate, c.burst, max_delay);
    ASSERT_TRUE(s.ok()) << s.error().message;
    Trace tr = random_trace(rng, c, 3000);
    ExactShaper model(c.rate, c.burst, max_delay, tr.t[0]);
    std::atomic<uint64_t> word{sl_gcra_init(&s->rate, tr.t[0])};
    // The departure stream, checked against an exact bucket of the same (r, B).
    ExactTokenBucket check(c.rate, c.burst, tr.t[0]);
    int64_t ours = 0, exact = 0;
    uint64_t last_depart = 0;
    for (size_t i = 0; i < tr.t.size(); ++i) {
      uint64_t delay = 0;
      i128 depart_scaled = 0;
      bool a = shaper_charge(*s, word, tr.t[i], tr.cost[i], &delay);
      bool b = model.offer(tr.t[i], tr.cost[i], &depart_scaled);
      ours += a;
      exact += b;
      if (!a) continue;
      uint64_t depart = tr.t[i] + delay;
      ASSERT_LE(delay, max_delay);
      ASSERT_GE(depart, last_depart) << "departures out of arrival order";
      last_depart = depart;
      ASSERT_TRUE(check.charge(depart, tr.cost[i]))
          << format_rate(c.rate) << " burst " << c.burst << ": departure " << i
          << " does not conform";
      if (a && b && std::abs(ours - exact) == 0) {
        // Same packets so far: departure within rounding of the exact one (ceil to 1 ns
        // plus < 1e-4 of the time since the bucket was last full, bounded by max-delay).
        i128 num = model.scale().num;
        i128 exact_ns_ceil = (depart_scaled + num - 1) / num;
        EXPECT_GE(i128(depart) + 1, exact_ns_ceil);
        EXPECT_LE(i128(depart), exact_ns_ceil + 1 + i128(max_delay / 5000));
      }
    }
    EXPECT_LE(std::abs(ours - exact), 1) << format_rate(c.rate) << " burst " << c.burst;
  }
}

TEST(MetersVsModel, SrtcmColoursWithinOnePacket) {
  std::mt19937_64 rng(5);
  for (const Case& c : random_cases(rng, 40)) {
    uint64_t ebs = rng() % 3 == 0 ? 0 : c.burst + rng() % (c.burst + 1);
    auto m = make_srtcm_profile(c.rate, c.burst, ebs);
    ASSERT_TRUE(m.ok()) << m.error().message;
    Trace tr = random_trace(rng, c, 3000);
    ExactSrtcm model(c.rate, c.burst, ebs, tr.t[0]);
    MeterWord word{};
    sl_meter_state st;
    sl_srtcm_init(&*m, tr.t[0], &st);
    meter_store(word, MeterWord{st.e0, st.e1});
    int64_t ours[3] = {}, exact[3] = {};
    for (size_t i = 0; i < tr.t.size(); ++i) {
      ours[srtcm_charge(*m, word, tr.t[i], tr.cost[i])]++;
      exact[int(model.charge(tr.t[i], tr.cost[i]))]++;
    }
    for (int col = 0; col < 3; ++col)
      EXPECT_LE(std::abs(ours[col] - exact[col]), 1)
          << format_rate(c.rate) << " cbs " << c.burst << " ebs " << ebs << " colour " << col;
  }
}

TEST(MetersVsModel, TrtcmColoursWithinOnePacket) {
  std::mt19937_64 rng(6);
  for (const Case& c : random_cases(rng, 40)) {
    Rate pir = c.rate;
    pir.per_sec_num *= 2;
    uint64_t pbs = c.burst * 2;
    auto m = make_trtcm_profile(c.rate, c.burst, pir, pbs);
    if (!m.ok()) continue;  // a doubled rate may leave the supported range
    Trace tr = random_trace(rng, c, 3000);
    ExactTrtcm model(c.rate, c.burst, pir, pbs, tr.t[0]);
    MeterWord word{};
    sl_meter_state st;
    sl_trtcm_init(&*m, tr.t[0], &st);
    meter_store(word, MeterWord{st.e0, st.e1});
    int64_t ours[3] = {}, exact[3] = {};
    for (size_t i = 0; i < tr.t.size(); ++i) {
      ours[trtcm_charge(*m, word, tr.t[i], tr.cost[i])]++;
      exact[int(model.charge(tr.t[i], tr.cost[i]))]++;
    }
    for (int col = 0; col < 3; ++col)
      EXPECT_LE(std::abs(ours[col] - exact[col]), 1)
          << format_rate(c.rate) << " cbs " << c.burst << " colour " << col;
  }
}

// Windows have no rounding: they must match a plain counter exactly.
TEST(WindowsVsModel, FixedWindowExact) {
  std::mt19937_64 rng(8);
  for (int trial = 0; trial < 50; ++trial) {
    uint64_t window = kMs * (1 + rng() % 1000), limit = 1 + rng() % 500;
    auto w = make_window_profile(window, limit, false);
    ASSERT_TRUE(w.ok());
    uint64_t t = rng() >> 4, cur_idx = t / window, count = 0;
    std::atomic<uint64_t> word{sl_fixed_window_init(&*w, t)};
    int64_t ours = 0, exact = 0;
    for (int i = 0; i < 5000; ++i) {
      t += rng() % (4 * window / limit + 1);
      if (t / window != cur_idx) cur_idx = t / window, count = 0;
      bool e = count + 1 <= limit;
      count += e;
      exact += e;
      ours += fixed_window_charge(*w, word, t, 1);
    }
    EXPECT_EQ(ours, exact);
  }
}

TEST(WindowsVsModel, SlidingWindowEstimateNeverExceedsLimit) {
  std::mt19937_64 rng(9);
  for (int trial = 0; trial < 50; ++trial) {
    uint64_t window = kMs * (1 + rng() % 1000), limit = 1 + rng() % 500;
    auto w = make_window_profile(window, limit, true);
    ASSERT_TRUE(w.ok());
    uint64_t t = rng() >> 4;
    std::atomic<uint64_t> word{sl_sliding_window_init(&*w, t)};
    std::vector<uint64_t> admitted_at;
    for (int i = 0; i < 5000; ++i) {
      t += rng() % (4 * window / limit + 1);
      if (!sliding_window_charge(*w, word, t, 1)) continue;
      admitted_at.push_back(t);
      // Exact weighted estimate with real numbers, from the admitted times themselves.
      uint64_t idx = t / window, start = idx * window;
      double cur = 0, prev = 0;
      for (uint64_t a : admitted_at) {
        if (a / window == idx) cur += 1;
        else if (a / window + 1 == idx) prev += 1;
      }
      double estimate = cur + prev * double(window - (t - start)) / double(window);
      ASSERT_LE(estimate, double(limit) + 1e-9);
    }
    EXPECT_GE(admitted_at.size(), std::min<size_t>(limit, 5000));
  }
}
