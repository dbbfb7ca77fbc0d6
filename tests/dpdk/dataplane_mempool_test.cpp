// No mbuf leaks: the pool is full after shutdown with packets held in the wheel and after
// full speed on net_null, and `mbufs` sizes the pool exactly.
#include <gtest/gtest.h>

#include "../e2e/mini_json.hpp"
#include "live/report.hpp"
#include "live_dataplane_fixture.hpp"

namespace sluice {
namespace {

using testing::LiveDataplane;
using testing::make_pipeline;
using testing::RingPort;
using testing::rule;
using testing::small_config;
using testing::udp_frame;
using testing::wait_until;

TEST_F(LiveDataplane, MempoolIsFullAfterShutdownWithPacketsHeldInTheWheel) {
  // 10 packets/s, burst 1: of 10 back-to-back packets 1 leaves, 9 wait up to 900 ms.
  const std::string yaml = R"(
default: {action: pass}
rules:
  - {name: slow, key: none, rate: 10pps, burst: 1, algorithm: leaky-bucket, max-delay: 1s}
)";
  auto [a, b] = start_pair(yaml);
  const unsigned total = dp->mbufs_total();
  inject(a, 0, udp_frame("10.0.0.1", 7), 10);
  EXPECT_EQ(collect(b, 1, std::chrono::milliseconds(2000)), 1u);
  ASSERT_TRUE(wait_until([&] { return dp->totals().rx_packets == 10; }));
  dp->stop();  // 9 still in the timing wheel
  EXPECT_EQ(rule(dp->snapshot(), "slow").traffic.pkts(Outcome::delayed), 9u);
  EXPECT_EQ(dp->totals().shutdown_dropped, 9u);
  testing::free_all(received);
  EXPECT_EQ(dp->mbufs_in_use(), 0u);
  EXPECT_EQ(dp->mbufs_total(), total);
}

TEST_F(LiveDataplane, MbufsConfigSizesThePoolExactlyAndRefusesLessThanTheSetUpNeeds) {
  RingPort& a = add_port(1);
  pipeline = make_pipeline("default: {action: pass}\n");
  DataplaneConfig c = small_config({a.id()}, {1});
  c.mbufs = 100;
  auto refused = Dataplane::create(*pipeline, c);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().kind, ErrorKind::invalid_input);
  EXPECT_NE(refused.error().message.find("--mbufs 100 is too few"), std::string::npos)
      << refused.error().message;
  c.mbufs = kMaxPoolMbufs + 1;
  refused = Dataplane::create(*pipeline, c);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().kind, ErrorKind::invalid_input);

  c.mbufs = 5000;  // not 2^n - 1: taken as given
  auto created = Dataplane::create(*pipeline, c);
  ASSERT_TRUE(created) << created.error().message;
  dp = std::move(created).value();
  EXPECT_EQ(dp->mbufs_total(), 5000u);
  EXPECT_EQ(dp->report().mbufs.total, 5000u);
}

TEST_F(LiveDataplane, MempoolIsFullAfterShutdownOnNetNullAtFullSpeed) {
  // net_null receives as fast as the worker polls and frees on send; a shaper over
  // everything keeps up to 200 ms of packets in the wheel when we stop.
  const std::string yaml = R"(
default: {action: pass}
rules:
  - {name: all, key: none, rate: 1000pps, burst: 1, algorithm: leaky-bucket, max-delay: 200ms}
)";
  ASSERT_EQ(rte_vdev_init("net_null_livetest0", "copy=1,size=64"), 0);
  uint16_t id;
  ASSERT_EQ(rte_eth_dev_get_port_by_name("net_null_livetest0", &id), 0);
  start(yaml, small_config({id}, {1}));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  dp->stop();
  const WorkerStats t = dp->totals();
  const CountersSnapshot snap = dp->snapshot();  // rule() refers into it: keep it alive
  const auto& all = rule(snap, "all").traffic;
  EXPECT_GT(t.rx_packets, 1000u);
  EXPECT_GT(all.pkts(Outcome::delayed), 0u);
  EXPECT_GT(t.shutdown_dropped, 0u);  // there were packets in the wheel
  EXPECT_EQ(dp->mbufs_in_use(), 0u);
  dp.reset();
  rte_vdev_uninit("net_null_livetest0");
}

}  // namespace
}  // namespace sluice
