// An ethdev port as an owned resource: Port::open() configures queues and starts the device;
// stop() stops it (idempotent), the destructor stops and closes it. Close releases the port's
// queues (and with them any mbufs the driver still holds), so the mempool must outlive it.
#pragma once

#include <rte_mempool.h>

#include <cstdint>
#include <string>
#include <utility>

#include "counters.hpp"
#include "port_plan.hpp"
#include "result.hpp"

namespace sluice {

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
        last_link_(std::move(other.last_link_)) {}
  Port& operator=(Port&&) = delete;
  Port(const Port&) = delete;
  Port& operator=(const Port&) = delete;
  ~Port();

  uint16_t id() const { return id_; }
  uint16_t queues() const { return queues_; }

  // rte_eth_stats as SPEC §5 port counters (rx, tx, missed).
  PortSnapshot stats() const;
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
  std::string last_link_;
};

}  // namespace sluice
