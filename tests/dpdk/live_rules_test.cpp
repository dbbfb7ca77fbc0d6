// Rules changed on a running dataplane (SPEC §4), in-process on ring ports with two workers
// forwarding: a new rate shows in the admitted rate within one measurement interval, 10,000
// changes while traffic flows lose and miscount no packet and leak no mbuf, and the time
// from apply() to "every worker runs it" (printed: p50 / p99 / max; the targets are for
// scripts/bench.sh, not for this test).
#include <rte_cycles.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "live_rig.hpp"

namespace sluice {
namespace {

using testing::find_rule;
using testing::rules_of;
using testing::udp_frame;
using testing::wait_until;
using Clock = std::chrono::steady_clock;

auto* const kEalEnv = ::testing::AddGlobalTestEnvironment(new testing::EalEnvironment);

class LiveRules : public testing::LiveRig {
 protected:
  // The tests count every packet: stopping the traffic waits until the workers took it all.
  LiveRules() { drain_on_stop = true; }

  uint64_t conformed(const std::string& rule) {
    const CountersSnapshot s = dp->snapshot();
    const RuleSnapshot* r = find_rule(s, rule);
    return r ? r->traffic.pkts(Outcome::conformed) : 0;
  }
};

std::string rate_rule(int pps) {
  // A burst of 100 ms of traffic: a worker descheduled for less than that (a shared CI
  // machine) loses no tokens, so the admitted rate follows the configured one.
  return "default: {action: pass}\nrules:\n  - {name: limit, key: none, rate: " +
         std::to_string(pps) + "pps, burst: " + std::to_string(pps / 10) + ", action: drop}\n";
}

TEST_F(LiveRules, ANewRateShowsInTheAdmittedRateWithinOneInterval) {
  start(rate_rule(1000));
  start_traffic({udp_frame("10.0.0.1", 9), udp_frame("10.0.0.2", 9)});
  constexpr auto kInterval = std::chrono::milliseconds(600);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the first burst spent
  auto t0 = Clock::now();
  uint64_t c0 = conformed("limit");
  std::this_thread::sleep_for(kInterval);
  auto t1 = Clock::now();
  uint64_t c1 = conformed("limit");
  auto diff = target->apply(rules_of(rate_rule(4000)));
  ASSERT_TRUE(diff) << diff.error().message;
  ASSERT_EQ(diff->rules.size(), 1u);
  EXPECT_TRUE(diff->rules[0].keeps_state);
  // The very next interval, measured from the moment apply() returned.
  auto t2 = Clock::now();
  uint64_t c2 = conformed("limit");
  std::this_thread::sleep_for(kInterval);
  auto t3 = Clock::now();
  uint64_t c3 = conformed("limit");
  const double before = double(c1 - c0) / std::chrono::duration<double>(t1 - t0).count();
  const double after = double(c3 - c2) / std::chrono::duration<double>(t3 - t2).count();
  std::printf("admitted %.0f pps at 1000 pps, %.0f pps in the interval after the change to "
              "4000 pps (offered %llu)\n",
              before, after, static_cast<unsigned long long>(offered.load()));
  // Bounds of B + r*T over each interval (plus the snapshot's read skew), and a floor that
  // tells the two rates apart whatever the machine's load.
  const double t01 = std::chrono::duration<double>(t1 - t0).count();
  const double t23 = std::chrono::duration<double>(t3 - t2).count();
  EXPECT_LE(double(c1 - c0), 100 + 1000 * (t01 + 0.05));
  EXPECT_GE(before, 600);
  EXPECT_LE(double(c3 - c2), 400 + 4000 * (t23 + 0.05));
  EXPECT_GE(after, 2400) << "the new rate from the first interval on";
  // The counters and the rule list follow the running set (telemetry reads the same).
  const CountersSnapshot s = dp->snapshot();
  ASSERT_EQ(s.rules.size(), 1u);
  EXPECT_EQ(s.rules[0].name, "limit");
  EXPECT_EQ(target->generation(), 1u);
}

std::string churn_rules(int i) {
  // "per-src" is kept through every change (its rate moves); "side" changes its action
  // (kept); every 100th change adds or removes "extra" in front of the others and every
  // 250th moves "side" to a new match (new state): removals stay within the reported 256.
  std::string y = "default: {action: pass}\nrules:\n";
  if ((i / 100) % 2 == 1) y += "  - {name: extra, match: {dst-port: 7}, rate: 5pps, burst: 5}\n";
  y += "  - {name: per-src, match: {dst-port: 9}, key: src-ip, rate: " +
       std::to_string(100 + i % 50) + "pps, burst: 20, action: drop}\n";
  y += "  - {name: side, match: {dst-port: " + std::to_string(10 + (i / 250) % 2) +
       "}, rate: 200pps, burst: 10, action: " + (i % 2 ? "drop" : "mark-dscp:EF") + "}\n";
  return y;
}

TEST_F(LiveRules, TenThousandChangesWhileTrafficFlowsLoseNoPacketAndLeakNoMbuf) {
  start(churn_rules(0));
  std::vector<std::vector<uint8_t>> frames;
  for (int s = 0; s < 16; ++s) frames.push_back(udp_frame("10.1.0." + std::to_string(s + 1), 9));
  frames.push_back(udp_frame("10.2.0.1", 10));
  frames.push_back(udp_frame("10.2.0.1", 11));
  frames.push_back(udp_frame("10.2.0.1", 7));
  frames.push_back(udp_frame("10.2.0.1", 12));  // default
  start_traffic(frames);
  const int kChanges = std::getenv("SLUICE_CHANGES") ? std::atoi(std::getenv("SLUICE_CHANGES")) : 10'000;
  std::vector<double> latency_us, visible_us;
  latency_us.reserve(kChanges);
  visible_us.reserve(kChanges);
  for (int i = 1; i <= kChanges; ++i) {
    RuleSet next = rules_of(churn_rules(i));
    const uint64_t t0 = rte_rdtsc();
    auto d = target->apply(std::move(next));
    latency_us.push_back(double(rte_rdtsc() - t0) * 1e6 / double(rte_get_tsc_hz()));
    ASSERT_TRUE(d) << i << ": " << d.error().message;
    // By the workers' own clocks: from the call to the last worker's first loop on it.
    ASSERT_TRUE(wait_until([&] { return pipeline->swap_visibility().workers_entered == 2; }));
    visible_us.push_back(double(pipeline->swap_visibility().last_entered_after_ns) / 1e3);
  }
  stop_traffic();
  dp->stop();
  collect_rest();  // stop() flushes what the workers still buffered for TX
  for (auto* v : {&latency_us, &visible_us}) std::sort(v->begin(), v->end());
  std::printf("apply latency over %d changes, 2 workers forwarding: p50 %.1f us, p99 %.1f us, "
              "max %.1f us; %llu packets offered\n",
              kChanges, latency_us[latency_us.size() / 2], latency_us[latency_us.size() * 99 / 100],
              latency_us.back(), static_cast<unsigned long long>(offered.load()));
  std::printf("visible on both workers (their clocks) after: p50 %.1f us, p99 %.1f us, max %.1f us\n",
              visible_us[visible_us.size() / 2], visible_us[visible_us.size() * 99 / 100],
              visible_us.back());
  EXPECT_EQ(target->generation(), uint64_t(kChanges));

  const CountersSnapshot s = dp->snapshot();
  const WorkerStats t = dp->totals();
  ASSERT_GT(t.rx_packets, 0u);
  EXPECT_EQ(t.rx_packets, offered.load());
  // Every packet counted exactly once: by a running rule, a removed one, or the default...
  uint64_t matched = s.default_rule.traffic.pkts(Outcome::matched);
  uint64_t dropped = s.default_rule.traffic.pkts(Outcome::dropped);
  for (const auto* list : {&s.rules, &s.removed})
    for (const RuleSnapshot& r : *list) {
      matched += r.traffic.pkts(Outcome::matched);
      dropped += r.traffic.pkts(Outcome::dropped);
    }
  EXPECT_EQ(matched, t.rx_packets);
  // ... and rx = tx + every counted drop.
  EXPECT_EQ(t.rx_packets, t.tx_packets + dropped + t.tx_dropped + t.shaper_overflow +
                              t.shutdown_dropped);
  EXPECT_EQ(collected.load(), t.tx_packets);
  const RuleSnapshot* per_src = find_rule(s, "per-src");
  ASSERT_NE(per_src, nullptr);
  EXPECT_GT(per_src->traffic.pkts(Outcome::dropped), 0u) << "the limit held throughout";
  EXPECT_EQ(per_src->active_flows, 16u) << "flows kept across every change";
}

TEST_F(LiveRules, ARefusedChangeLeavesTheRunningRulesAndTheirCounters) {
  start(rate_rule(1000));
  start_traffic({udp_frame("10.0.0.1", 9)});
  ASSERT_TRUE(wait_until([&] { return conformed("limit") > 0; }));
  auto refused = target->apply(rules_of(
      "rules:\n  - {name: s, rate: 10pps, burst: 2, algorithm: leaky-bucket, max-delay: 5s}\n"));
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("shaping horizon"), std::string::npos);
  EXPECT_EQ(target->generation(), 0u);
  const uint64_t before = conformed("limit");
  ASSERT_TRUE(wait_until([&] { return conformed("limit") > before; }));
  stop_traffic();
  dp->stop();
  EXPECT_FALSE(target->apply(rules_of(rate_rule(10))));  // stopped: refused
}

}  // namespace
}  // namespace sluice
