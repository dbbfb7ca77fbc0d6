// Packets the kernel dropped because a net_af_packet RX ring was full: counted into the port's
// `missed` (SPEC §5), which the driver leaves at 0.
//
// Why here and not from rte_eth_stats: DPDK 22.11's net_af_packet (and later releases, as far
// as checked) fills ipackets/opackets/oerrors from its own counters and never reads the
// socket's PACKET_STATISTICS, so `imissed` is 0 whatever the kernel dropped
// (drivers/net/af_packet/rte_eth_af_packet.c, eth_stats_get); a mbuf shortage only ends its RX
// burst early (the frame stays in the ring, nothing is lost or counted). A worker descheduled
// for longer than its ring lasts loses packets that no counter saw (docs/SOAK.md).
//
// How: the driver opens one AF_PACKET socket per queue pair at probe, bound to the interface,
// in this process, and closes it at rte_eth_dev_stop. find() looks for exactly those among
// this process's descriptors (an AF_PACKET socket whose bound address names the port's
// ifindex) without touching the driver's private data, and total() asks each for
// PACKET_STATISTICS. Only kernel interfaces on our own descriptors; the driver reads none of
// these statistics itself, so reading them (which resets them) takes nothing from it.
// Control thread only, never the packet path.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

namespace sluice {

class PacketRingDrops {
 public:
  PacketRingDrops() = default;
  // The AF_PACKET sockets of this process bound to interface `ifindex` (in this network
  // namespace); none if there are none or /proc/self/fd cannot be read.
  static PacketRingDrops find(int ifindex);

  size_t sockets() const { return fds_.size(); }
  // Kernel drops on the sockets since find(): PACKET_STATISTICS returns and resets each
  // socket's count, so every call adds what it read to a running total. A descriptor that is
  // no longer such a socket (the driver closed it at stop, and its number may be reused) is
  // skipped. Any thread; concurrent calls each add their share.
  uint64_t total() const;
  // The running total without reading the sockets (after they are closed).
  uint64_t last_total() const { return total_ ? total_->load(std::memory_order_relaxed) : 0; }

 private:
  std::vector<int> fds_;
  int ifindex_ = 0;
  // Behind a pointer so that the owner (Port) stays movable.
  std::unique_ptr<std::atomic<uint64_t>> total_;
};

}  // namespace sluice
