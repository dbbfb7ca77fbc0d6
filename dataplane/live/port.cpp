#include "port.hpp"

#include <rte_ethdev.h>

#include <cstring>

#include "log.hpp"

namespace sluice {

namespace {

std::string port_error(uint16_t port, const char* what, int ret) {
  return "port " + std::to_string(port) + ": " + what + ": " + std::strerror(ret < 0 ? -ret : ret);
}

// The device's name for logs ("net_null0", "0000:3b:00.0").
std::string port_name(uint16_t port) {
  char name[RTE_ETH_NAME_MAX_LEN] = {};
  if (rte_eth_dev_get_name_by_port(port, name) != 0) return "?";
  return name;
}

// Hash on addresses and ports so a flow stays on one queue; buckets are shared across lcores
// anyway, so the spread only balances load.
constexpr uint64_t kWantedRss = RTE_ETH_RSS_IP | RTE_ETH_RSS_TCP | RTE_ETH_RSS_UDP;

}  // namespace

Result<PortLimits> Port::limits(uint16_t port) {
  if (!rte_eth_dev_is_valid_port(port)) return make_error("port " + std::to_string(port) + ": no such port");
  rte_eth_dev_info info{};
  if (int ret = rte_eth_dev_info_get(port, &info); ret != 0)
    return make_error(port_error(port, "cannot read device info", ret));
  return PortLimits{port, info.max_rx_queues, info.max_tx_queues};
}

Result<Port> Port::open(uint16_t id, const PortSetup& setup) {
  Port port(id);
  port.queues_ = setup.queues;
  rte_eth_dev_info info{};
  if (int ret = rte_eth_dev_info_get(id, &info); ret != 0)
    return make_error(port_error(id, "cannot read device info", ret));
  port.name_ = port_name(id);
  port.driver_ = info.driver_name ? info.driver_name : "?";

  rte_eth_conf conf{};
  conf.rxmode.mq_mode = RTE_ETH_MQ_RX_NONE;
  conf.txmode.mq_mode = RTE_ETH_MQ_TX_NONE;
  const char* spread = "one queue";
  if (setup.queues > 1) {
    const uint64_t hf = kWantedRss & info.flow_type_rss_offloads;
    if (hf != 0) {
      conf.rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
      conf.rx_adv_conf.rss_conf.rss_hf = hf;  // default key
      spread = "RSS";
    } else {
      // Software devices (net_ring, net_null, net_pcap...) have no RSS: each RX queue gets what
      // the device itself puts on it.
      spread = "no RSS on this device: each queue receives what the device puts on it";
    }
  }
  if (info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_MBUF_FAST_FREE)
    conf.txmode.offloads |= RTE_ETH_TX_OFFLOAD_MBUF_FAST_FREE;  // one pool, refcnt 1: true here
  // Frames longer than one mbuf arrive as chains (net_pcap chains them itself; a NIC needs
  // scattered RX) and leave as chains: ask for both where the device has them.
  if (info.rx_offload_capa & RTE_ETH_RX_OFFLOAD_SCATTER)
    conf.rxmode.offloads |= RTE_ETH_RX_OFFLOAD_SCATTER;
  if (info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_MULTI_SEGS)
    conf.txmode.offloads |= RTE_ETH_TX_OFFLOAD_MULTI_SEGS;

  if (int ret = rte_eth_dev_configure(id, setup.queues, setup.queues, &conf); ret != 0)
    return make_error(port_error(id, "cannot configure device", ret));
  port.state_ = State::configured;

  uint16_t rx_desc = setup.rx_desc, tx_desc = setup.tx_desc;
  if (int ret = rte_eth_dev_adjust_nb_rx_tx_desc(id, &rx_desc, &tx_desc); ret != 0)
    return make_error(port_error(id, "cannot adjust the number of descriptors", ret));

  const int socket = rte_eth_dev_socket_id(id);
  const unsigned queue_socket = socket < 0 ? unsigned(SOCKET_ID_ANY) : unsigned(socket);
  rte_eth_rxconf rxconf = info.default_rxconf;
  rxconf.offloads = conf.rxmode.offloads;
  rte_eth_txconf txconf = info.default_txconf;
  txconf.offloads = conf.txmode.offloads;
  for (uint16_t q = 0; q < setup.queues; ++q) {
    if (int ret = rte_eth_rx_queue_setup(id, q, rx_desc, queue_socket, &rxconf, setup.pool); ret != 0)
      return make_error(port_error(id, ("cannot set up RX queue " + std::to_string(q)).c_str(), ret) +
                        " (the mbuf pool has " + std::to_string(setup.pool ? setup.pool->size : 0) +
                        " mbufs; a device that holds many, such as net_pcap with infinite_rx=1, "
                        "may need more: --mbufs N)");
    if (int ret = rte_eth_tx_queue_setup(id, q, tx_desc, queue_socket, &txconf); ret != 0)
      return make_error(port_error(id, ("cannot set up TX queue " + std::to_string(q)).c_str(), ret));
  }

  // Forwarding must see every frame, not only those addressed to the port's MAC.
  if (int ret = rte_eth_promiscuous_enable(id); ret != 0 && ret != -ENOTSUP)
    live_log("port %u: cannot enable promiscuous mode: %s", id, std::strerror(-ret));

  if (int ret = rte_eth_dev_start(id); ret != 0)
    return make_error(port_error(id, "cannot start device", ret));
  port.state_ = State::started;

  port.last_link_ = port.link_text();
  if (port.driver_ == "net_af_packet") {
    // The driver's queue sockets, for the ring drops it does not count (packet_ring_drops.hpp).
    port.ring_drops_ = PacketRingDrops::find(int(info.if_index));
    if (port.ring_drops_.sockets() != setup.queues)
      live_log("port %u: found %zu AF_PACKET socket(s) on ifindex %u for %u queue(s): packets the "
               "kernel drops on the RX rings are %s", id, port.ring_drops_.sockets(),
               info.if_index, setup.queues,
               port.ring_drops_.sockets() == 0 ? "not counted" : "counted where found");
  }
  live_log("port %u (%s, %s): %u RX/TX queue(s) of %u/%u descriptors, %s; %s", id,
           port.name_.c_str(), port.driver_.c_str(), setup.queues,
           rx_desc, tx_desc, spread, port.last_link_.c_str());
  return port;
}

Port::~Port() {
  if (state_ == State::none) return;
  stop();
  // Close releases the queues, and with them whatever mbufs the driver still holds.
  if (int ret = rte_eth_dev_close(id_); ret != 0)
    live_log("port %u: close failed: %s", id_, std::strerror(-ret));
}

void Port::stop() {
  if (state_ != State::started) return;
  (void)ring_drops_.total();  // the last reading: the driver closes its sockets at stop
  if (int ret = rte_eth_dev_stop(id_); ret != 0)
    live_log("port %u: stop failed: %s", id_, std::strerror(-ret));
  state_ = State::stopped;
}

bool Port::keeps_setup_mbufs() const { return driver_ == "net_af_xdp"; }

void Port::reclaim_tx() {
  if (state_ != State::started) return;
  rte_mbuf* none[1] = {nullptr};
  for (uint16_t q = 0; q < queues_; ++q) rte_eth_tx_burst(id_, q, none, 0);
}

Port::Reading Port::read() const {
  Reading r;
  r.counters.port = r.errors.port = id_;
  rte_eth_stats st{};
  if (rte_eth_stats_get(id_, &st) != 0) return r;
  r.counters.rx_packets = st.ipackets;
  r.counters.tx_packets = st.opackets;
  r.counters.missed_packets =
      st.imissed + (state_ == State::started ? ring_drops_.total() : ring_drops_.last_total());
  r.counters.rx_bytes = st.ibytes;
  r.counters.tx_bytes = st.obytes;
  r.errors.rx_nombuf = st.rx_nombuf;
  r.errors.rx_errors = st.ierrors;
  r.errors.tx_errors = st.oerrors;
  return r;
}

std::string Port::link_text() const {
  rte_eth_link link{};
  if (rte_eth_link_get_nowait(id_, &link) != 0) return "link state unknown";
  // rte_eth_link_to_str is still experimental in 22.11: spell it out ourselves.
  if (link.link_status == RTE_ETH_LINK_DOWN) return "link down";
  std::string text = "link up";
  if (link.link_speed == RTE_ETH_SPEED_NUM_UNKNOWN || link.link_speed == RTE_ETH_SPEED_NUM_NONE)
    text += ", speed unknown";
  else if (link.link_speed % 1000 == 0)
    text += ", " + std::to_string(link.link_speed / 1000) + " Gbps";
  else
    text += ", " + std::to_string(link.link_speed) + " Mbps";
  text += link.link_duplex == RTE_ETH_LINK_FULL_DUPLEX ? ", full duplex" : ", half duplex";
  return text;
}

void Port::log_link_change() {
  if (state_ != State::started) return;
  std::string now = link_text();
  if (now == last_link_) return;
  live_log("port %u: %s", id_, now.c_str());
  last_link_ = std::move(now);
}

}  // namespace sluice
