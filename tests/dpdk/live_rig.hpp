// The rig of the live-dataplane tests, in-process on ring ports: rules from YAML text, UDP
// frames, small rings and pools, and a fixture with two workers forwarding from port a to
// port b while a traffic thread offers frames on both of a's RX queues (LiveRulesTarget on
// top, as sluiced's control socket uses it).
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "eal_env.hpp"
#include "live/dataplane.hpp"
#include "live/live_rules_target.hpp"
#include "packet_builder.hpp"
#include "pipeline.hpp"
#include "rules_loader.hpp"

namespace sluice::testing {

// Throws on a rules error: the tests' YAML is fixed, a throw is a bug in the test.
inline RuleSet rules_of(const std::string& yaml) {
  auto rules = load_rules_text(yaml, "test.yaml");
  if (!rules) throw std::runtime_error(rules.error().message);
  return std::move(rules).value();
}

inline std::vector<uint8_t> udp_frame(const std::string& src, uint16_t dport, size_t size = 64) {
  return PacketBuilder().ipv4(src, "192.0.2.10").udp(1024, dport).frame_size(size).build();
}

inline const RuleSnapshot* find_rule(const CountersSnapshot& s, const std::string& name) {
  for (const RuleSnapshot& r : s.rules)
    if (r.name == name) return &r;
  return nullptr;
}

// Small rings and pools: the tests send thousands of packets at a time, not millions.
inline DataplaneConfig small_config(std::vector<uint16_t> ports, std::vector<unsigned> lcores) {
  DataplaneConfig c;
  c.ports = std::move(ports);
  c.worker_lcores = std::move(lcores);
  c.rx_desc = 256;
  c.tx_desc = 256;
  c.tx_buffer_capacity = 256;
  c.wheel_capacity = 1024;
  c.mempool_cache = 32;
  return c;
}

// Two workers (lcores 1 and 2) forwarding port a (2 RX queues) to port b. Knobs, set in the
// derived fixture's constructor: flows_window_ns (the flows-top window) and drain_on_stop.
class LiveRig : public ::testing::Test {
 protected:
  void SetUp() override { SLUICE_REQUIRE_EAL(); }

  void TearDown() override {
    stop_traffic();
    if (dp) dp->stop();
    if (a) a->free_all();
    if (b) b->free_all();
    if (dp) {
      EXPECT_EQ(dp->mbufs_in_use(), 0u) << "mbufs leaked";
    }
    dp.reset();
    a.reset();
    b.reset();
  }

  void start(const std::string& yaml) {
    PipelineOptions opts;
    opts.hash_seed = 1;
    auto p = Pipeline::create(rules_of(yaml), opts);
    ASSERT_TRUE(p) << p.error().message;
    pipeline = std::move(p).value();
    a = std::make_unique<RingPort>(2, 4096, 4096);
    b = std::make_unique<RingPort>(2, 4096, 4096);
    DataplaneConfig c = small_config({a->id(), b->id()}, {1, 2});
    c.flows_window_ns = flows_window_ns;
    auto created = Dataplane::create(*pipeline, c);
    ASSERT_TRUE(created) << created.error().message;
    dp = std::move(created).value();
    target = std::make_unique<LiveRulesTarget>(*pipeline, *dp);
    ASSERT_TRUE(dp->start());
  }

  // A thread offers `frames` in order, round robin over both RX queues of port a, as fast as
  // the pool allows, and takes everything port b sends (counted in `offered`, `collected`).
  void start_traffic(std::vector<std::vector<uint8_t>> frames) {
    traffic = std::thread([this, frames = std::move(frames)] {
      std::vector<rte_mbuf*> out;
      size_t k = 0;
      while (!stop_.load(std::memory_order_relaxed)) {
        for (unsigned q = 0; q < 2; ++q) {
          for (int i = 0; i < 32; ++i) {
            rte_mbuf* m = make_mbuf(dp->mempool(), frames[k % frames.size()]);
            if (m == nullptr) break;  // pool busy: the workers free some
            if (!a->inject(q, m)) {
              rte_pktmbuf_free(m);
              break;
            }
            ++k;
            offered.fetch_add(1, std::memory_order_relaxed);
          }
        }
        collected.fetch_add(b->collect(out), std::memory_order_relaxed);
        free_all(out);
        // Leave the CPUs to the workers and the control thread most of the time: ~64
        // packets per 50 us is still ~1 Mpps, far above every rate limited here.
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
    });
  }

  // Stops offering; with drain_on_stop, also waits until the workers took every offered
  // packet and collects what they sent.
  void stop_traffic() {
    if (!traffic.joinable()) return;
    stop_ = true;
    traffic.join();
    if (!drain_on_stop) return;
    wait_until([&] { return dp->totals().rx_packets == offered.load(); });
    std::vector<rte_mbuf*> out;
    wait_until([&] {
      collected += b->collect(out);
      free_all(out);
      const WorkerStats t = dp->totals();
      return collected.load() == t.tx_packets;
    }, std::chrono::milliseconds(2000));
  }

  // What port b still holds (after dp->stop() flushed the workers' TX buffers).
  void collect_rest() {
    std::vector<rte_mbuf*> out;
    collected += b->collect(out);
    free_all(out);
  }

  uint64_t flows_window_ns = DataplaneConfig{}.flows_window_ns;
  bool drain_on_stop = false;

  std::unique_ptr<Pipeline> pipeline;
  std::unique_ptr<RingPort> a, b;
  std::unique_ptr<Dataplane> dp;
  std::unique_ptr<LiveRulesTarget> target;
  std::thread traffic;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> offered{0}, collected{0};
};

}  // namespace sluice::testing
