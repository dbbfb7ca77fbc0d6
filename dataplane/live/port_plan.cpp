#include "port_plan.hpp"

#include <algorithm>
#include <set>

namespace sluice {

Result<PortPlan> plan_ports(const std::vector<PortLimits>& ports, unsigned workers) {
  if (ports.empty())
    return make_error(
        "no ports: give EAL a device (a PCI NIC with -a, or --vdev such as net_null0, "
        "net_ring0, net_pcap0,iface=eth0, net_af_xdp0,iface=eth0)");
  if (ports.size() > 1 && ports.size() % 2 != 0)
    return make_error("odd number of ports (" + std::to_string(ports.size()) +
                      "): ports forward in pairs 0<->1, 2<->3, ...; give an even number, or "
                      "one port to send traffic back out of it");
  if (workers == 0)
    return make_error(
        "no worker lcore: give EAL at least two lcores (e.g. -l 0,1); the main lcore runs "
        "control and statistics, every other lcore runs one worker");
  std::set<uint16_t> seen;
  for (const PortLimits& p : ports)
    if (!seen.insert(p.port).second)
      return make_error("port " + std::to_string(p.port) + " listed twice");

  PortPlan plan;
  const size_t n = ports.size();
  plan.ports.resize(n);
  plan.peer.resize(n);
  plan.queues.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const size_t j = n == 1 ? i : (i ^ 1);  // pairs (0,1), (2,3), ...
    const PortLimits& a = ports[i];
    const PortLimits& b = ports[j];
    const unsigned limit = std::min({unsigned(a.max_rx_queues), unsigned(a.max_tx_queues),
                                     unsigned(b.max_rx_queues), unsigned(b.max_tx_queues)});
    const unsigned q = std::max(1u, std::min(workers, limit));
    plan.ports[i] = a.port;
    plan.peer[i] = b.port;
    plan.queues[i] = uint16_t(q);
    if (q < workers && i <= j)
      plan.notes.push_back((i == j ? "port " + std::to_string(a.port)
                                   : "ports " + std::to_string(a.port) + " and " +
                                         std::to_string(b.port)) +
                           ": " +
                           std::to_string(q) + " queue(s) for " + std::to_string(workers) +
                           " workers (the device allows no more)");
  }
  unsigned next = 0;
  for (size_t i = 0; i < n; ++i)
    for (uint16_t q = 0; q < plan.queues[i]; ++q)
      plan.rx.push_back({plan.ports[i], q, plan.peer[i], next++ % workers});
  const unsigned busy = std::min<unsigned>(workers, unsigned(plan.rx.size()));
  if (busy < workers)
    plan.notes.push_back(std::to_string(workers - busy) + " worker(s) have no RX queue to poll");
  return plan;
}

}  // namespace sluice
