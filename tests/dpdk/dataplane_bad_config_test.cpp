// The documented errors for bad port and lcore sets, and a failed device set-up that leaves
// nothing behind.
#include <gtest/gtest.h>

#include "live_dataplane_fixture.hpp"

namespace sluice {
namespace {

using testing::make_pipeline;
using testing::RingPort;
using testing::small_config;

class BadConfig : public ::testing::Test {
 protected:
  void SetUp() override {
    SLUICE_REQUIRE_EAL();
    pipeline = make_pipeline("default: {action: pass}\n");
  }
  Result<std::unique_ptr<Dataplane>> create(DataplaneConfig c) {
    return Dataplane::create(*pipeline, c);
  }
  std::unique_ptr<Pipeline> pipeline;
};

TEST_F(BadConfig, OddPortCountIsAUsageError) {
  RingPort a(1), b(1), c(1);
  auto dp = create(small_config({a.id(), b.id(), c.id()}, {1}));
  ASSERT_FALSE(dp);
  EXPECT_EQ(dp.error().kind, ErrorKind::invalid_input);
  EXPECT_NE(dp.error().message.find("odd number of ports (3)"), std::string::npos)
      << dp.error().message;
}

TEST_F(BadConfig, NoPortsIsAUsageError) {
  auto dp = create(small_config({}, {1}));
  ASSERT_FALSE(dp);
  EXPECT_EQ(dp.error().kind, ErrorKind::invalid_input);
  EXPECT_NE(dp.error().message.find("no ports"), std::string::npos) << dp.error().message;
}

TEST_F(BadConfig, UnknownPortOrLcoreIsAUsageError) {
  auto dp = create(small_config({RTE_MAX_ETHPORTS - 1}, {1}));
  ASSERT_FALSE(dp);
  EXPECT_EQ(dp.error().kind, ErrorKind::invalid_input);
  EXPECT_NE(dp.error().message.find("no such port"), std::string::npos) << dp.error().message;

  RingPort a(1);
  dp = create(small_config({a.id()}, {rte_get_main_lcore()}));
  ASSERT_FALSE(dp);
  EXPECT_EQ(dp.error().kind, ErrorKind::invalid_input);
  EXPECT_NE(dp.error().message.find("not an EAL worker lcore"), std::string::npos);
}

TEST_F(BadConfig, FailedDeviceSetUpIsARuntimeErrorAndLeavesNothingBehind) {
  // A port someone else already started cannot be configured (EBUSY). The pair's first port
  // is set up and started before that: the failed create must close it again.
  RingPort first(1), busy(1);
  rte_mempool* pool = rte_pktmbuf_pool_create("badcfg_pool", 511, 0, 0, RTE_MBUF_DEFAULT_BUF_SIZE,
                                              SOCKET_ID_ANY);
  ASSERT_NE(pool, nullptr);
  rte_eth_conf conf{};
  ASSERT_EQ(rte_eth_dev_configure(busy.id(), 1, 1, &conf), 0);
  ASSERT_EQ(rte_eth_rx_queue_setup(busy.id(), 0, 64, SOCKET_ID_ANY, nullptr, pool), 0);
  ASSERT_EQ(rte_eth_tx_queue_setup(busy.id(), 0, 64, SOCKET_ID_ANY, nullptr), 0);
  ASSERT_EQ(rte_eth_dev_start(busy.id()), 0);
  auto dp = create(small_config({first.id(), busy.id()}, {1}));
  ASSERT_FALSE(dp);
  EXPECT_EQ(dp.error().kind, ErrorKind::runtime);
  EXPECT_NE(dp.error().message.find("port " + std::to_string(busy.id()) + ": cannot configure device"),
            std::string::npos)
      << dp.error().message;
  EXPECT_FALSE(rte_eth_dev_is_valid_port(first.id())) << "the port set up before the failure is still open";
  EXPECT_TRUE(rte_eth_dev_is_valid_port(busy.id())) << "a port we could not take was closed";
  ASSERT_EQ(rte_eth_dev_stop(busy.id()), 0);
  rte_mempool_free(pool);
}

}  // namespace
}  // namespace sluice
