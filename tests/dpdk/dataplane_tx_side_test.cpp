// The TX side of the live dataplane: shaped packets leave at their departure time, TX
// back-pressure keeps packets until the device takes them, and the live report counts what a
// full shaper wheel dropped and what was held at shutdown.
#include <gtest/gtest.h>

#include "../e2e/mini_json.hpp"
#include "live/report.hpp"
#include "live_dataplane_fixture.hpp"

namespace sluice {
namespace {

using testing::LiveDataplane;
using testing::RingPort;
using testing::rule;
using testing::small_config;
using testing::udp_frame;
using testing::wait_until;

TEST_F(LiveDataplane, ShapedPacketsLeaveAtTheirDepartureTimeNeverEarlier) {
  // 1000 packets/s, burst 1: the k-th of a back-to-back train departs k ms after the first.
  const std::string yaml = R"(
default: {action: pass}
rules:
  - {name: shape, key: none, rate: 1000pps, burst: 1, algorithm: leaky-bucket, max-delay: 100ms}
)";
  // Named references, not a structured binding: the lambda below captures b (clang 14
  // refuses to capture a binding).
  const PortPair ports = start_pair(yaml);
  RingPort& a = ports.a;
  RingPort& b = ports.b;

  constexpr int kTrain = 20;
  std::vector<rte_mbuf*> frames;
  for (int i = 0; i < kTrain; ++i) frames.push_back(testing::make_mbuf(dp->mempool(), udp_frame("10.0.0.1", 7)));
  const double ns_per_tick = 1e9 / double(rte_get_tsc_hz());
  const uint64_t t0 = rte_rdtsc();  // before any of them can have been received
  for (rte_mbuf* m : frames) ASSERT_TRUE(a.inject(0, m));

  std::vector<double> arrival_ms;
  wait_until([&] {
    const size_t before = received.size();
    b.collect(received);
    const double now_ms = double(rte_rdtsc() - t0) * ns_per_tick / 1e6;
    for (size_t i = before; i < received.size(); ++i) arrival_ms.push_back(now_ms);
    return received.size() >= size_t(kTrain);
  });
  ASSERT_EQ(arrival_ms.size(), size_t(kTrain));
  for (int k = 0; k < kTrain; ++k) {
    // Departure k is k ms after the first packet was received, which is after t0.
    EXPECT_GE(arrival_ms[size_t(k)], double(k)) << "packet " << k << " left early";
  }
  // ...and not much later than due (generous: the machine is shared).
  EXPECT_LT(arrival_ms.back(), 19.0 + 200.0);
  dp->stop();
  const CountersSnapshot snap = dp->snapshot();  // rule() refers into it: keep it alive
  const auto& shape = rule(snap, "shape").traffic;
  EXPECT_EQ(shape.pkts(Outcome::delayed), uint64_t(kTrain - 1));
  EXPECT_EQ(shape.pkts(Outcome::dropped), 0u);
}

TEST_F(LiveDataplane, TxBackPressureKeepsPacketsUntilTheDeviceTakesThem) {
  // The peer's TX ring holds 63 packets, the worker's TX buffer 256 more: of 400, 81 drop.
  RingPort& a = add_port(1);
  RingPort& b = add_port(1, /*tx_size=*/64);
  start("default: {action: pass}\n", small_config({a.id(), b.id()}, {1}));
  inject(a, 0, udp_frame("10.0.0.1", 7), 400);
  ASSERT_TRUE(wait_until([&] { return dp->totals().rx_packets == 400; }));
  ASSERT_TRUE(wait_until([&] { return dp->totals().tx_dropped == 400 - 63 - 256; }))
      << dp->totals().tx_dropped;
  EXPECT_EQ(dp->totals().tx_packets, 63u);
  // The device drains: the buffered packets follow, none lost.
  EXPECT_EQ(collect(b, 63 + 256), 63u + 256u);
  EXPECT_EQ(dp->totals().tx_packets, 63u + 256u);

  // The operator sees the 81 in the live report, not only on stderr.
  dp->stop();
  const DataplaneReport r = dp->report();
  EXPECT_EQ(r.totals.tx_dropped, 81u);
  ASSERT_EQ(r.workers.size(), 1u);
  EXPECT_EQ(r.workers[0].lcore, 1u);
  EXPECT_EQ(r.workers[0].stats.tx_dropped, 81u);
  const testing::Json j = testing::Json::parse(live_report_json(dp->snapshot(), r));
  const testing::Json& d = j.at("dataplane");
  EXPECT_EQ(d.u64("rx_packets"), 400u);
  EXPECT_EQ(d.u64("tx_packets"), 63u + 256u);
  EXPECT_EQ(d.u64("dropped_tx_buffer_full"), 81u);
  EXPECT_EQ(d.u64("dropped_shaper_full"), 0u);
  EXPECT_EQ(d.u64("dropped_at_shutdown"), 0u);
  EXPECT_EQ(d.at("workers").items.at(0).u64("dropped_tx_buffer_full"), 81u);
  ASSERT_EQ(d.at("ports").items.size(), 2u);
  EXPECT_EQ(d.at("ports").items[0].u64("port"), a.id());
  EXPECT_EQ(d.at("ports").items[0].at("driver").str, "net_ring");
  // SPEC §5 per-port counters (rte_eth_stats_get), beside the rules.
  ASSERT_EQ(j.at("ports").items.size(), 2u);
  EXPECT_EQ(j.at("ports").items[0].u64("rx_packets"), 400u);
  EXPECT_EQ(j.at("ports").items[1].u64("tx_packets"), 63u + 256u);
  EXPECT_EQ(j.at("ports").items[1].u64("missed_packets"), 0u);
  EXPECT_EQ(j.at("default").u64("passed_packets"), 400u);
  EXPECT_NE(dataplane_report_table(r).find("dropped: tx-buffer-full 81  shaper-full 0  at-shutdown 0"),
            std::string::npos)
      << dataplane_report_table(r);
}

TEST_F(LiveDataplane, ReportCountsWhatAFullShaperWheelDroppedAndWhatWasHeldAtShutdown) {
  // One packet per 10 s, max-delay 55 s: of 50 back-to-back packets 1 leaves, 5 are delayed
  // by the rule (10 ... 50 s), 44 dropped by it. The wheel holds 2: 3 of the delayed are
  // dropped on the full wheel, 2 when the dataplane stops (long before the first is due).
  const std::string yaml = R"(
default: {action: pass}
rules:
  - {name: slow, key: none, rate: 0.1pps, burst: 1, algorithm: leaky-bucket, max-delay: 55s}
)";
  RingPort& a = add_port(1);
  RingPort& b = add_port(1);
  DataplaneConfig c = small_config({a.id(), b.id()}, {1});
  c.wheel_capacity = 2;
  start(yaml, c);
  inject(a, 0, udp_frame("10.0.0.1", 7), 50);
  EXPECT_EQ(collect(b, 1, std::chrono::milliseconds(2000)), 1u);
  ASSERT_TRUE(wait_until([&] { return dp->totals().rx_packets == 50; }));
  EXPECT_EQ(dp->report().totals.shaper_overflow, 3u);
  EXPECT_NE(dataplane_report_table(dp->report()).find("shaper-full 3  at-shutdown 0"), std::string::npos)
      << dataplane_report_table(dp->report());
  testing::free_all(received);
  dp->close();
  const DataplaneReport r = dp->report();
  const testing::Json j = testing::Json::parse(live_report_json(dp->snapshot(), r));
  const testing::Json& slow = j.at("rules").items.at(0);  // the rule's view
  EXPECT_EQ(slow.u64("delayed_packets"), 5u);
  EXPECT_EQ(slow.u64("dropped_packets"), 44u);
  const testing::Json& d = j.at("dataplane");
  EXPECT_EQ(d.u64("dropped_shaper_full"), 3u);
  EXPECT_EQ(d.u64("dropped_at_shutdown"), 2u);
  EXPECT_EQ(d.u64("dropped_tx_buffer_full"), 0u);
  EXPECT_EQ(d.u64("tx_packets"), 1u);
  // Closed: every mbuf is back, also those held in the wheel (ring ports keep none).
  EXPECT_EQ(d.u64("mbufs_total"), dp->mbufs_total());
  EXPECT_EQ(d.u64("mbufs_in_use"), 0u);
  EXPECT_EQ(d.u64("mbufs_kept_by_drivers"), 0u);
  EXPECT_EQ(d.u64("mbufs_leaked"), 0u);
}

}  // namespace
}  // namespace sluice
