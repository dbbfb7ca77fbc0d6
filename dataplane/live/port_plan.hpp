// Which port forwards to which, how many queues each gets, and which worker polls which RX
// queue (SPEC §1: pairs 0<->1, 2<->3, ..., or back out of the same port when there is one).
// Pure: the caller asks the devices for their limits; planning needs no DPDK, so its rules
// are unit-tested without EAL.
//
// Queues: a pair gets min(workers, every limit of both ports) queues on both ports, so RX queue
// q of a port always transmits on TX queue q of its peer. That map is one-to-one, so giving each
// RX queue to exactly one worker gives each TX queue exactly one user: no TX locks. RX queues are
// dealt to workers round-robin in (port, queue) order: with as many queues as workers, worker w
// polls queue w of every port; with fewer (a single-queue device), the queues still spread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "result.hpp"

namespace sluice {

struct PortLimits {
  uint16_t port = 0;
  uint16_t max_rx_queues = 1;
  uint16_t max_tx_queues = 1;
};

struct RxAssignment {
  uint16_t rx_port = 0;
  uint16_t queue = 0;    // the RX queue on rx_port, and the TX queue on tx_port
  uint16_t tx_port = 0;  // the peer (or rx_port itself when there is a single port)
  unsigned worker = 0;   // index into the worker list
};

struct PortPlan {
  std::vector<uint16_t> ports;       // in the order given
  std::vector<uint16_t> peer;        // peer[i]: the port ports[i] forwards to
  std::vector<uint16_t> queues;      // queues[i]: RX and TX queues configured on ports[i]
  std::vector<RxAssignment> rx;      // every RX queue, each polled by one worker
  std::vector<std::string> notes;    // fallbacks worth telling the operator (fewer queues, ...)
};

// Errors (all usage errors, exit 2): no ports, an odd number of ports above one, no workers,
// a port listed twice.
Result<PortPlan> plan_ports(const std::vector<PortLimits>& ports, unsigned workers);

}  // namespace sluice
