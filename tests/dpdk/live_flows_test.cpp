// `flows top` on a running dataplane (LiveRulesTarget::top_flows), in-process on ring ports
// with two workers forwarding: traffic with known shares per source (A 4x, B 2x, C 1x, and
// one-off sources between them) offered on both RX queues, so every key is seen by both
// workers and their windows add up. The heavy keys come first in order with rates in
// proportion; --rule keeps one rule's flows; --by bps with other frame sizes reorders them;
// a rule removed while running drops out. Rates are read while the workers forward, through
// their burst-boundary hand-over (the workers never stop).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "live_rig.hpp"

namespace sluice {
namespace {

using testing::rules_of;
using testing::udp_frame;

auto* const kEalEnv = ::testing::AddGlobalTestEnvironment(new testing::EalEnvironment);

const char* const kRules = R"(
default: {action: pass}
rules:
  - {name: per-src, match: {proto: udp, dst-port: 9}, key: src-ip, rate: 10Mpps, burst: 100000, action: drop}
  - {name: per-dst, match: {proto: udp, dst-port: 10}, key: dst-ip, rate: 10Mpps, burst: 100000, action: drop}
  - {name: total, match: {proto: udp, dst-port: 11}, key: none, rate: 10Mpps, burst: 100000, action: drop}
)";

class LiveFlows : public testing::LiveRig {
 protected:
  LiveFlows() { flows_window_ns = 500'000'000; }  // half a second: the test waits for two

  // Two windows of traffic: the last complete one was full of it on both workers.
  static void wait_two_windows() { std::this_thread::sleep_for(std::chrono::milliseconds(1200)); }

  std::vector<FlowRate> top(size_t n, std::string rule = "", bool by_bytes = false) {
    TopFlowsQuery q;
    q.count = n;
    q.rule = std::move(rule);
    q.by_bytes = by_bytes;
    auto flows = target->top_flows(q);
    EXPECT_TRUE(flows) << flows.error().message;
    return flows ? *flows : std::vector<FlowRate>{};
  }
};

// A 4x, B 2x, C 1x (of 64-byte frames), with 8 one-off sources: 8 of 15 packets are A, B, C.
std::vector<std::vector<uint8_t>> skewed_traffic(size_t size_b = 64, size_t size_c = 64) {
  std::vector<std::vector<uint8_t>> f;
  for (int rep = 0; rep < 8; ++rep) {
    for (int i = 0; i < 4; ++i) f.push_back(udp_frame("10.0.0.1", 9));
    for (int i = 0; i < 2; ++i) f.push_back(udp_frame("10.0.0.2", 9, size_b));
    f.push_back(udp_frame("10.0.0.3", 9, size_c));
    f.push_back(udp_frame("10.5.0." + std::to_string(rep + 1), 9));
  }
  // And a flow of the dst-ip rule, between A and B in rate.
  for (int i = 0; i < 24; ++i) f.push_back(udp_frame("10.7.0.1", 10));
  return f;
}

void print(const std::vector<FlowRate>& flows) {
  for (const FlowRate& f : flows)
    std::printf("  %-8s %-14s %10.0f pps %12.0f bit/s\n", f.rule.c_str(), f.key.c_str(),
                f.packets_per_sec, f.bits_per_sec);
}

TEST_F(LiveFlows, NamesTheHeavySourcesInOrderWithRatesInProportion) {
  start(kRules);
  start_traffic(skewed_traffic());
  wait_two_windows();
  const std::vector<FlowRate> flows = top(3, "per-src");
  print(flows);
  ASSERT_EQ(flows.size(), 3u);
  EXPECT_EQ(flows[0].key, "10.0.0.1");
  EXPECT_EQ(flows[1].key, "10.0.0.2");
  EXPECT_EQ(flows[2].key, "10.0.0.3");
  for (const FlowRate& f : flows) EXPECT_EQ(f.rule, "per-src");
  ASSERT_GT(flows[2].packets_per_sec, 0);
  EXPECT_NEAR(flows[0].packets_per_sec / flows[1].packets_per_sec, 2.0, 0.3);
  EXPECT_NEAR(flows[1].packets_per_sec / flows[2].packets_per_sec, 2.0, 0.3);
  EXPECT_NEAR(flows[0].bits_per_sec / flows[0].packets_per_sec, 64 * 8, 64 * 8 * 0.05);
  // Every rule: the dst-ip rule's one flow (3x C) ranks between A and B; key: none lists none.
  const std::vector<FlowRate> all = top(10);
  print(all);
  ASSERT_GE(all.size(), 4u);
  EXPECT_EQ(all[0].key, "10.0.0.1");
  EXPECT_EQ(all[1].rule, "per-dst");
  EXPECT_EQ(all[1].key, "192.0.2.10");
  EXPECT_EQ(all[2].key, "10.0.0.2");
  for (const FlowRate& f : all) EXPECT_NE(f.rule, "total");
  // The sampled rates add up to what the rule's counters saw over a second (within 35%: the
  // offered rate varies with the machine's load).
  auto matched = [&] {
    for (const RuleSnapshot& r : dp->snapshot().rules)
      if (r.name == "per-src") return r.traffic.pkts(Outcome::matched);
    return uint64_t{0};
  };
  const uint64_t m0 = matched();
  const auto t0 = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const std::vector<FlowRate> again = top(100, "per-src");
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const double counted = double(matched() - m0) /
                         std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  double sampled = 0;
  for (const FlowRate& f : again) sampled += f.packets_per_sec;
  std::printf("per-src: %.0f pps by the counters, %.0f pps by the sampled flows\n", counted, sampled);
  EXPECT_NEAR(sampled / counted, 1.0, 0.35);
}

TEST_F(LiveFlows, BitsPerSecondWithOtherFrameSizesChangesTheOrder) {
  start(kRules);
  // B 2x at 1000 bytes, C 1x at 600: by bytes B, C, then A (4x at 64).
  start_traffic(skewed_traffic(1000, 600));
  wait_two_windows();
  const std::vector<FlowRate> pps = top(3, "per-src");
  const std::vector<FlowRate> bps = top(3, "per-src", true);
  print(pps);
  print(bps);
  ASSERT_EQ(pps.size(), 3u);
  ASSERT_EQ(bps.size(), 3u);
  EXPECT_EQ(pps[0].key, "10.0.0.1");
  EXPECT_EQ(bps[0].key, "10.0.0.2");
  EXPECT_EQ(bps[1].key, "10.0.0.3");
  EXPECT_EQ(bps[2].key, "10.0.0.1");
  EXPECT_NEAR(bps[0].bits_per_sec / bps[1].bits_per_sec, 2000.0 / 600, 0.6);
}

TEST_F(LiveFlows, RulesThatNoLongerRunListNoFlowsAndKeyNoneIsRefused) {
  start(kRules);
  start_traffic(skewed_traffic());
  wait_two_windows();
  ASSERT_FALSE(top(10, "per-dst").empty());
  auto none = target->top_flows({10, "total", false});
  ASSERT_FALSE(none);
  EXPECT_NE(none.error().message.find("key: none"), std::string::npos);
  auto unknown = target->top_flows({10, "nope", false});
  ASSERT_FALSE(unknown);
  // per-dst removed: its flows are gone at once, though the last window still holds them.
  auto d = target->apply(rules_of(R"(
default: {action: pass}
rules:
  - {name: per-src, match: {proto: udp, dst-port: 9}, key: src-ip, rate: 10Mpps, burst: 100000, action: drop}
)"));
  ASSERT_TRUE(d) << d.error().message;
  for (const FlowRate& f : top(100)) EXPECT_EQ(f.rule, "per-src") << f.key;
  EXPECT_FALSE(target->top_flows({10, "per-dst", false}));
  stop_traffic();
  target->stop_changes();
  EXPECT_FALSE(target->top_flows({}));
}

}  // namespace
}  // namespace sluice
