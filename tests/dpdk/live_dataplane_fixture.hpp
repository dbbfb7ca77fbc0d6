// The fixture of the live dataplane tests (dataplane_*_test.cpp): a Dataplane in-process on
// ring ports the test holds, frames injected from its own pool, and the checks every test
// ends with (workers stopped, every mbuf back in the pool).
#pragma once

#include <arpa/inet.h>
#include <rte_bus_vdev.h>
#include <rte_cycles.h>

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "live_rig.hpp"

namespace sluice::testing {

inline std::unique_ptr<Pipeline> make_pipeline(const std::string& yaml) {
  PipelineOptions opts;
  opts.hash_seed = 1;
  auto p = Pipeline::create(rules_of(yaml), opts);
  if (!p) throw std::runtime_error(p.error().message);
  return std::move(p).value();
}

inline const RuleSnapshot& rule(const CountersSnapshot& s, const std::string& name) {
  for (const RuleSnapshot& r : s.rules)
    if (r.name == name) return r;
  if (name == "default") return s.default_rule;
  throw std::runtime_error("no rule " + name);
}

inline const PortSnapshot& port_stats(const CountersSnapshot& s, uint16_t id) {
  for (const PortSnapshot& p : s.ports)
    if (p.port == id) return p;
  throw std::runtime_error("no port stats");
}

inline uint32_t src_of(const rte_mbuf* m) {
  const uint8_t* f = rte_pktmbuf_mtod(m, const uint8_t*);
  uint32_t a;
  std::memcpy(&a, f + 14 + 12, 4);
  return ntohl(a);
}

inline uint8_t dscp_of(const rte_mbuf* m) { return rte_pktmbuf_mtod(m, const uint8_t*)[14 + 1] >> 2; }

class LiveDataplane : public ::testing::Test {
 protected:
  void SetUp() override { SLUICE_REQUIRE_EAL(); }

  void TearDown() override {
    // Order matters: stop the workers, give every mbuf back, then destroy the dataplane
    // (which frees the pool), then the rings.
    if (dp) dp->stop();
    for (auto& p : ports) p->free_all();
    free_all(received);
    if (dp) {
      EXPECT_EQ(dp->mbufs_in_use(), 0u) << "mbufs leaked";
    }
    dp.reset();
    ports.clear();
  }

  RingPort& add_port(unsigned queues, unsigned tx_size = 4096) {
    ports.push_back(std::make_unique<RingPort>(queues, 4096, tx_size));
    return *ports.back();
  }

  void start(const std::string& yaml, DataplaneConfig config) {
    pipeline = make_pipeline(yaml);
    auto created = Dataplane::create(*pipeline, config);
    ASSERT_TRUE(created) << created.error().message;
    dp = std::move(created).value();
    ASSERT_TRUE(dp->start());
  }

  struct PortPair {
    RingPort& a;
    RingPort& b;
  };

  // Two ports of `queues` RX queues each, forwarding to each other, polled by `lcores`.
  PortPair start_pair(const std::string& yaml, std::vector<unsigned> lcores = {1}, unsigned queues = 1) {
    RingPort& a = add_port(queues);
    RingPort& b = add_port(queues);
    start(yaml, small_config({a.id(), b.id()}, std::move(lcores)));
    return {a, b};
  }

  // Sends frames into RX queue q of `port` from the dataplane's own pool.
  void inject(RingPort& port, unsigned q, const std::vector<uint8_t>& frame, int copies = 1) {
    for (int i = 0; i < copies; ++i) {
      rte_mbuf* m = make_mbuf(dp->mempool(), frame);
      ASSERT_NE(m, nullptr);
      ASSERT_TRUE(port.inject(q, m));
    }
  }

  // Collects from `port` until `n` packets arrived (or the timeout), then a little longer to
  // catch extras.
  size_t collect(RingPort& port, size_t n, std::chrono::milliseconds timeout = std::chrono::milliseconds(5000)) {
    const size_t before = received.size();
    wait_until([&] { port.collect(received); return received.size() - before >= n; }, timeout);
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    port.collect(received);
    return received.size() - before;
  }

  std::unique_ptr<Pipeline> pipeline;
  std::vector<std::unique_ptr<RingPort>> ports;
  std::unique_ptr<Dataplane> dp;
  std::vector<rte_mbuf*> received;
};

}  // namespace sluice::testing
