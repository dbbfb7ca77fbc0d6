// An ethdev port as an owned resource: Port::open() configures queues and starts the device;
// stop() stops it (idempotent), the destructor stops and closes it. Close releases the port's
// queues (and with them any mbufs the driver still holds), so the mempool must outlive it.
//
// One driver does not give everything back at close: net_af_xdp (zero-copy UMEM mode, the
// mode DPDK 22.11 builds on current kernels) takes 2048 mbufs per RX queue from the pool at
// RX queue set-up for its fill ring and keeps exactly that many there (each mbuf it hands out
// is replaced by a fresh one); neither rte_eth_dev_stop nor rte_eth_dev_close returns them
// (drivers/net/af_xdp/rte_eth_af_xdp.c: xsk_configure, af_xdp_rx_zc, eth_dev_close). They go
// away only with the pool. keeps_setup_mbufs() says whether this port's driver is such a one.
#pragma once

#include <rte_mempool.h>

#include <cstdint>
#include <string>
#include <utility>

#include "counters.hpp"
#include "packet_ring_drops.hpp"
#include "port_plan.hpp"
#include "result.hpp"

namespace sluice {

struct PortErrors {
  uint16_t port = 0;
  uint64_t rx_nombuf = 0;  // rte_eth_stats.rx_nombuf
  uint64_t rx_errors = 0;  // ierrors
  uint64_t tx_errors = 0;  // oerrors
};

struct PortSetup {
  uint16_t queues = 1;     // RX queues and TX queues, one of each per queue index
  uint16_t rx_desc = 1024; // descriptors per queue (adjusted to what the device allows)
  uint16_t tx_desc = 1024;
  rte_mempool* pool = nullptr;
};

class Port {
 public:
  // What the device allows (rte_eth_dev_info_get). Errors: no such port.
  static Result<PortLimits> limits(uint16_t port);

  // Configures RX/TX queues (RSS across RX queues where the device has it, else a logged
  // fallback), enables promiscuous mode where supported, starts the port, logs its link.
  static Result<Port> open(uint16_t port, const PortSetup& setup);

  Port(Port&& other) noexcept
      : id_(other.id_), queues_(other.queues_), state_(std::exchange(other.state_, State::none)),
        name_(std::move(other.name_)), driver_(std::move(other.driver_)),
        last_link_(std::move(other.last_link_)), ring_drops_(std::move(other.ring_drops_)) {}
  Port& operator=(Port&&) = delete;
  Port(const Port&) = delete;
  Port& operator=(const Port&) = delete;
  ~Port();

  uint16_t id() const { return id_; }
  uint16_t queues() const { return queues_; }
  const std::string& name() const { return name_; }      // "net_af_xdp0", "0000:3b:00.0"
  const std::string& driver() const { return driver_; }  // "net_af_xdp", "net_ixgbe"
  // True when the driver keeps the mbufs it took at set-up until the pool is freed (see above).
  bool keeps_setup_mbufs() const;

  // One rte_eth_stats_get, as SPEC §5 port counters (rx, tx, missed) and the rest an operator
  // needs: RX mbuf allocation failures (pool too small for what the device holds: see
  // --mbufs), RX and TX errors. Zeros if the driver cannot say. On net_af_packet, `missed`
  // adds what the kernel dropped on the RX rings, which the driver does not report
  // (packet_ring_drops.hpp).
  struct Reading {
    PortSnapshot counters;
    PortErrors errors;
  };
  Reading read() const;
  // Offers every TX queue an empty burst, so that drivers which free sent mbufs only on a later
  // TX call (net_af_xdp: from its completion ring) give them back now. Only while started (a
  // stopped port's burst functions are dummies) and only when no worker uses its TX queues.
  void reclaim_tx();
  // Logs the link when it changed since the last call (or open). Control thread only.
  void log_link_change();
  // Stops the device (workers must be joined first). Idempotent.
  void stop();

 private:
  enum class State : uint8_t { none, configured, started, stopped };
  explicit Port(uint16_t id) : id_(id) {}
  std::string link_text() const;

  uint16_t id_ = 0;
  uint16_t queues_ = 0;
  State state_ = State::none;
  std::string name_;
  std::string driver_;
  std::string last_link_;
  PacketRingDrops ring_drops_;  // net_af_packet only: its sockets, until stop()
};

}  // namespace sluice
