// In-process EAL for the dpdk suite. DPDK allows one rte_eal_init per process, so one gtest
// environment owns it for the whole binary: no PCI, no hugepages (-m 512 of ordinary memory),
// a file prefix unique to this process (its runtime directory is removed at the end), and
// three lcores: 0 = main (the test thread, control), 1 and 2 = workers pinned to two CPUs.
// Tests choose their worker lcores through DataplaneConfig::worker_lcores.
//
// Without root (or if EAL cannot start) every test skips with the reason.
#pragma once

#include <rte_eal.h>
#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_ring.h>
#include <sched.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "live/eal.hpp"

namespace sluice::testing {

class EalEnvironment : public ::testing::Environment {
 public:
  static bool ready() { return eal_ != nullptr; }
  static const std::string& skip_reason() { return reason_; }

  void SetUp() override {
    if (geteuid() != 0) {
      reason_ = "the dpdk suite needs root (EAL device and memory set-up)";
      return;
    }
    auto eal = Eal::init(args());
    if (!eal) {
      reason_ = "EAL unavailable: " + eal.error().message;
      return;
    }
    runtime_dir_ = rte_eal_get_runtime_dir();
    eal_ = std::move(eal).value().release();
  }

  void TearDown() override {
    delete eal_;  // rte_eal_cleanup
    eal_ = nullptr;
    // The runtime directory is ours alone (the prefix carries our pid).
    if (!runtime_dir_.empty()) {
      std::error_code ec;
      std::filesystem::remove_all(runtime_dir_, ec);
    }
  }

 private:
  static std::vector<std::string> args() {
    // Lcore 0 may float over every CPU we have; workers 1 and 2 get a CPU each (the same one
    // on a single-CPU machine: still correct, only slower).
    cpu_set_t set;
    CPU_ZERO(&set);
    sched_getaffinity(0, sizeof set, &set);
    std::vector<int> cpus;
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) cpus.push_back(c);
    if (cpus.empty()) cpus.push_back(0);
    std::string all;
    for (int c : cpus) {
      if (!all.empty()) all += ',';
      all += std::to_string(c);
    }
    const std::string lcores = "0@(" + all + "),1@" + std::to_string(cpus[0]) + ",2@" +
                               std::to_string(cpus[cpus.size() > 1 ? 1 : 0]);
    return {"sluice-dpdk-test", "--no-pci",   "--no-huge",       "-m", "512",
            "--file-prefix",    "sluice-test-" + std::to_string(getpid()),
            "--lcores",         lcores,       "--no-telemetry"};
  }

  static inline Eal* eal_ = nullptr;
  static inline std::string reason_;
  std::string runtime_dir_;
};

// Skips the current test when EAL is not available.
#define SLUICE_REQUIRE_EAL()                                                            \
  do {                                                                                  \
    if (!::sluice::testing::EalEnvironment::ready())                                    \
      GTEST_SKIP() << ::sluice::testing::EalEnvironment::skip_reason();                 \
  } while (0)

// An ethdev made of rings the test holds (rte_eth_from_rings): the test enqueues frames on an
// RX ring and dequeues what the dataplane sent from a TX ring. Queue q of the port is ring q.
class RingPort {
 public:
  RingPort(unsigned queues, unsigned rx_size = 4096, unsigned tx_size = 4096) {
    static unsigned next = 0;
    name_ = "sr" + std::to_string(next++);
    for (unsigned q = 0; q < queues; ++q) {
      // Single producer, single consumer: the test on one side, one worker on the other.
      rx_.push_back(rte_ring_create((name_ + "rx" + std::to_string(q)).c_str(), rx_size,
                                    SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ));
      tx_.push_back(rte_ring_create((name_ + "tx" + std::to_string(q)).c_str(), tx_size,
                                    SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ));
      if (rx_.back() == nullptr || tx_.back() == nullptr) throw std::runtime_error("ring create");
    }
    const int id = rte_eth_from_rings(name_.c_str(), rx_.data(), queues, tx_.data(), queues,
                                      SOCKET_ID_ANY);
    if (id < 0) throw std::runtime_error("rte_eth_from_rings failed");
    id_ = uint16_t(id);
  }
  // Call free_all() first if the rings may still hold mbufs of a pool that is gone.
  ~RingPort() {
    uint16_t id;
    // The dataplane normally closed the port; close it if it did not (a failed set-up).
    if (rte_eth_dev_get_port_by_name(name_.c_str(), &id) == 0) {
      rte_eth_dev_stop(id);
      rte_eth_dev_close(id);
    }
    for (rte_ring* r : rx_) rte_ring_free(r);
    for (rte_ring* r : tx_) rte_ring_free(r);
  }
  RingPort(const RingPort&) = delete;
  RingPort& operator=(const RingPort&) = delete;

  uint16_t id() const { return id_; }
  unsigned queues() const { return unsigned(rx_.size()); }

  bool inject(unsigned q, rte_mbuf* m) { return rte_ring_sp_enqueue(rx_[q], m) == 0; }
  // Dequeues what the dataplane sent on every TX queue.
  size_t collect(std::vector<rte_mbuf*>& out) {
    size_t n = 0;
    for (rte_ring* r : tx_) {
      void* objs[64];
      unsigned k;
      while ((k = rte_ring_sc_dequeue_burst(r, objs, 64, nullptr)) != 0) {
        for (unsigned i = 0; i < k; ++i) out.push_back(static_cast<rte_mbuf*>(objs[i]));
        n += k;
      }
    }
    return n;
  }
  // Frees everything still in the rings (not yet received, or sent and not collected).
  void free_all() {
    for (auto* rings : {&rx_, &tx_})
      for (rte_ring* r : *rings) {
        void* obj;
        while (rte_ring_sc_dequeue(r, &obj) == 0) rte_pktmbuf_free(static_cast<rte_mbuf*>(obj));
      }
  }

 private:
  std::string name_;
  std::vector<rte_ring*> rx_, tx_;
  uint16_t id_ = 0;
};

// A frame copied into a fresh mbuf of `pool`.
inline rte_mbuf* make_mbuf(rte_mempool* pool, const std::vector<uint8_t>& frame) {
  rte_mbuf* m = rte_pktmbuf_alloc(pool);
  if (m == nullptr) return nullptr;
  char* data = rte_pktmbuf_append(m, uint16_t(frame.size()));
  if (data == nullptr) {
    rte_pktmbuf_free(m);
    return nullptr;
  }
  std::memcpy(data, frame.data(), frame.size());
  return m;
}

inline void free_all(std::vector<rte_mbuf*>& v) {
  for (rte_mbuf* m : v) rte_pktmbuf_free(m);
  v.clear();
}

// Polls pred every 200 us until it holds or `timeout` passes.
inline bool wait_until(const std::function<bool()>& pred,
                       std::chrono::milliseconds timeout = std::chrono::milliseconds(5000)) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > end) return pred();
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return true;
}

}  // namespace sluice::testing
