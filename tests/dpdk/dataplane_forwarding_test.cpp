// The live dataplane forwarding with rules: counts per rule and port, arrival order kept
// through the all-forwarded and the split TX paths, a single port sending back out of itself.
#include <gtest/gtest.h>

#include <map>
#include "live_dataplane_fixture.hpp"

namespace sluice {
namespace {

using testing::dscp_of;
using testing::LiveDataplane;
using testing::PacketBuilder;
using testing::port_stats;
using testing::RingPort;
using testing::rule;
using testing::small_config;
using testing::src_of;
using testing::udp_frame;

// The EAL is initialised once per test executable (test_dpdk_dataplane links every
// dataplane_*_test.cpp), here.
auto* const kEalEnv = ::testing::AddGlobalTestEnvironment(new testing::EalEnvironment);

TEST_F(LiveDataplane, ForwardsBetweenAPairAndCountsPerRule) {
  // Rates of 0.001pps: in a test lasting seconds only the burst is admitted, so the expected
  // counts do not depend on timing.
  const std::string yaml = R"(
default: {action: pass}
rules:
  - {name: dns, match: {proto: udp, dst-port: 53}, key: none, rate: 0.001pps, burst: 3,
     algorithm: token-bucket, action: drop}
  - {name: web, match: {proto: tcp, dst-port: 80}, key: src-ip, rate: 0.001pps, burst: 2,
     algorithm: gcra, action: "mark-dscp:EF"}
  - {name: ntp-dry, match: {proto: udp, dst-port: 123}, key: none, rate: 0.001pps, burst: 1,
     action: pass}
)";
  auto [a, b] = start_pair(yaml);

  inject(a, 0, udp_frame("10.0.0.1", 53), 10);                                      // 3 pass, 7 drop
  inject(a, 0, PacketBuilder().ipv4("10.0.0.2", "192.0.2.1").tcp(999, 80).build(), 5);  // 2 + 3 marked
  inject(a, 0, udp_frame("10.0.0.3", 123), 4);                                      // all pass (dry run)
  inject(a, 0, udp_frame("10.0.0.4", 9999), 3);                                     // default
  inject(a, 0, std::vector<uint8_t>(10, 0xee), 2);                                  // malformed: default
  inject(b, 0, udp_frame("10.9.0.1", 9999), 6);                                     // back the other way

  EXPECT_EQ(collect(b, 3 + 5 + 4 + 3 + 2), 17u);
  EXPECT_EQ(collect(a, 6), 6u);
  size_t marked = 0;
  for (rte_mbuf* m : received)
    if (rte_pktmbuf_data_len(m) >= 34 && dscp_of(m) == 46) ++marked;
  EXPECT_EQ(marked, 3u);

  dp->stop();
  const CountersSnapshot s = dp->snapshot();
  const auto& dns = rule(s, "dns").traffic;
  EXPECT_EQ(dns.pkts(Outcome::matched), 10u);
  EXPECT_EQ(dns.pkts(Outcome::conformed), 3u);
  EXPECT_EQ(dns.pkts(Outcome::dropped), 7u);
  const auto& web = rule(s, "web").traffic;
  EXPECT_EQ(web.pkts(Outcome::matched), 5u);
  EXPECT_EQ(web.pkts(Outcome::conformed), 2u);
  EXPECT_EQ(web.pkts(Outcome::marked), 3u);
  EXPECT_EQ(rule(s, "web").active_flows, 1u);
  const auto& ntp = rule(s, "ntp-dry").traffic;
  EXPECT_EQ(ntp.pkts(Outcome::exceeded), 3u);
  EXPECT_EQ(ntp.pkts(Outcome::passed), 4u);
  EXPECT_EQ(ntp.pkts(Outcome::dropped), 0u);
  const auto& def = s.default_rule.traffic;
  EXPECT_EQ(def.pkts(Outcome::matched), 3u + 2u + 6u);
  EXPECT_EQ(def.pkts(Outcome::malformed), 2u);
  EXPECT_EQ(def.pkts(Outcome::passed), 11u);
  // Port counters (rte_eth_stats) in the snapshot.
  EXPECT_EQ(port_stats(s, a.id()).rx_packets, 24u);
  EXPECT_EQ(port_stats(s, a.id()).tx_packets, 6u);
  EXPECT_EQ(port_stats(s, b.id()).rx_packets, 6u);
  EXPECT_EQ(port_stats(s, b.id()).tx_packets, 17u);
  const WorkerStats t = dp->totals();
  EXPECT_EQ(t.rx_packets, 30u);
  EXPECT_EQ(t.tx_packets, 23u);
  EXPECT_EQ(t.tx_dropped, 0u);
}

TEST_F(LiveDataplane, ARulePinningItsKeyToAPrefixPolicesEachKeyInItsDenseTable) {
  // dst 192.0.2.0/24 with key dst-ip: a dense table (dense_key.hpp), here the one-rule loop
  // over the worker's mbufs; the VLAN-tagged frames take the general stages to the same
  // buckets. Rates of 0.001pps: only the bursts are admitted.
  const std::string yaml = R"(
default: {action: pass}
rules:
  - {name: per-dst, match: {proto: udp, dst: 192.0.2.0/24}, key: dst-ip, rate: 0.001pps,
     burst: 2, algorithm: token-bucket, action: drop}
)";
  auto [a, b] = start_pair(yaml);
  auto to = [](const std::string& dst, bool vlan = false) {
    PacketBuilder p;
    if (vlan) p.vlan(7);
    return p.ipv4("10.0.0.1", dst).udp(1000, 53).build();
  };
  inject(a, 0, to("192.0.2.0"), 3);        // 2 pass, 1 drop
  inject(a, 0, to("192.0.2.255"), 4);      // 2 pass, 2 drop
  inject(a, 0, to("192.0.2.0", true), 2);  // its bucket is empty: 2 drop
  inject(a, 0, to("192.0.3.0"), 3);        // outside the prefix: the default passes them
  inject(a, 0, to("192.0.1.255"), 2);      // the same
  EXPECT_EQ(collect(b, 2 + 2 + 3 + 2), 9u);
  dp->stop();
  const CountersSnapshot s = dp->snapshot();
  const auto& r = rule(s, "per-dst");
  EXPECT_EQ(r.traffic.pkts(Outcome::matched), 9u);
  EXPECT_EQ(r.traffic.pkts(Outcome::conformed), 4u);
  EXPECT_EQ(r.traffic.pkts(Outcome::dropped), 5u);
  EXPECT_EQ(r.active_flows, 2u);
  EXPECT_EQ(r.flows_evicted, 0u);
  EXPECT_EQ(s.default_rule.traffic.pkts(Outcome::passed), 5u);
}

// A burst whose packets all leave now goes to TX whole (process_burst says none is dropped or
// held); a burst with drops in it is split. Both keep the arrival order and count the same.
TEST_F(LiveDataplane, AllForwardedAndMixedBurstsLeaveInArrivalOrder) {
  const std::string yaml = R"(
default: {action: pass}
rules:
  - {name: nine, match: {proto: udp, dst-port: 9}, key: none, rate: 0.001pps, burst: 1,
     algorithm: token-bucket, action: drop}
)";
  auto [a, b] = start_pair(yaml);
  auto src = [](int i) { return "10.0." + std::to_string(i / 256) + "." + std::to_string(i % 256); };
  auto src_u32 = [](int i) { return uint32_t(10u << 24 | unsigned(i / 256) << 8 | unsigned(i % 256)); };
  constexpr int kEach = 200;

  // All forwarded: no frame matches the rule.
  for (int i = 0; i < kEach; ++i) inject(a, 0, udp_frame(src(i), 7));
  ASSERT_EQ(collect(b, kEach), size_t(kEach));
  for (int i = 0; i < kEach; ++i) EXPECT_EQ(src_of(received[size_t(i)]), src_u32(i)) << i;

  // Mixed: every third frame goes to port 9, and all of those but the first are dropped.
  std::vector<uint32_t> expected;
  for (int i = kEach; i < 2 * kEach; ++i) inject(a, 0, udp_frame(src(i), i % 3 == 0 ? 9 : 7));
  bool first_nine = true;
  for (int i = kEach; i < 2 * kEach; ++i) {
    if (i % 3 == 0) {
      if (!first_nine) continue;
      first_nine = false;
    }
    expected.push_back(src_u32(i));
  }
  ASSERT_EQ(collect(b, expected.size()), expected.size());
  ASSERT_EQ(received.size(), size_t(kEach) + expected.size());
  for (size_t k = 0; k < expected.size(); ++k)
    EXPECT_EQ(src_of(received[size_t(kEach) + k]), expected[k]) << k;

  dp->stop();
  const CountersSnapshot s = dp->snapshot();
  const auto& nine = rule(s, "nine").traffic;
  const uint64_t nines = uint64_t((2 * kEach - 1) / 3 - (kEach - 1) / 3);  // i % 3 == 0 in [200, 400)
  EXPECT_EQ(nine.pkts(Outcome::matched), nines);
  EXPECT_EQ(nine.pkts(Outcome::conformed), 1u);
  EXPECT_EQ(nine.pkts(Outcome::dropped), nines - 1);
  EXPECT_EQ(s.default_rule.traffic.pkts(Outcome::passed), uint64_t(2 * kEach) - nines);
  const WorkerStats t = dp->totals();
  EXPECT_EQ(t.rx_packets, uint64_t(2 * kEach));
  EXPECT_EQ(t.tx_packets, uint64_t(kEach) + expected.size());
  EXPECT_EQ(t.tx_dropped, 0u);
}

TEST_F(LiveDataplane, SinglePortSendsBackOutOfTheSamePort) {
  RingPort& a = add_port(1);
  start("default: {action: pass}\n", small_config({a.id()}, {1}));
  inject(a, 0, udp_frame("10.0.0.1", 7), 5);
  EXPECT_EQ(collect(a, 5), 5u);
}

}  // namespace
}  // namespace sluice
