// A net_af_packet port counts in `missed` the packets the kernel dropped on its RX ring
// (live/packet_ring_drops.hpp), which DPDK 22.11's driver leaves at 0: a ring of 64 frames
// that nobody polls while 256 frames arrive keeps 64 and drops 192, and rx + missed must be
// every frame sent. The port sits on one end of a veth pair in a network namespace this test
// creates (and removes); the frames come from a raw socket on the other end.
#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <rte_bus_vdev.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include "eal_env.hpp"
#include "live/mempool.hpp"
#include "live/port.hpp"

namespace sluice {
namespace {

auto* const kEalEnv = ::testing::AddGlobalTestEnvironment(new testing::EalEnvironment);

bool sh(const std::string& cmd) { return std::system(cmd.c_str()) == 0; }

// A network namespace holding both ends of a veth pair, IPv6 off (the kernel sends nothing of
// its own on them), removed with everything in it at the end. enter() moves the calling thread
// into it, leave() back.
class VethNetns {
 public:
  VethNetns() {
    const std::string id = std::to_string(getpid());
    ns_ = "sl-apd-" + id;
    a_ = "apda" + id;
    b_ = "apdb" + id;
    ok_ = sh("ip netns add " + ns_) &&
          sh("ip netns exec " + ns_ + " sysctl -qw net.ipv6.conf.all.disable_ipv6=1 "
             "net.ipv6.conf.default.disable_ipv6=1") &&
          sh("ip -n " + ns_ + " link add name " + a_ + " type veth peer name " + b_) &&
          sh("ip -n " + ns_ + " link set " + a_ + " up") &&
          sh("ip -n " + ns_ + " link set " + b_ + " up");
  }
  ~VethNetns() {
    leave();
    sh("ip netns del " + ns_ + " 2>/dev/null");
  }
  bool ok() const { return ok_; }
  const std::string& a() const { return a_; }
  const std::string& b() const { return b_; }

  bool enter() {
    home_ = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    const int fd = open(("/run/netns/" + ns_).c_str(), O_RDONLY | O_CLOEXEC);
    const bool in = home_ >= 0 && fd >= 0 && setns(fd, CLONE_NEWNET) == 0;
    if (fd >= 0) close(fd);
    return in;
  }
  void leave() {
    if (home_ < 0) return;
    (void)setns(home_, CLONE_NEWNET);
    close(home_);
    home_ = -1;
  }

 private:
  std::string ns_, a_, b_;
  bool ok_ = false;
  int home_ = -1;
};

// A raw socket sending Ethernet frames out of `iface` (in the current namespace).
class FrameSender {
 public:
  explicit FrameSender(const std::string& iface) {
    fd_ = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0);  // protocol 0: receives nothing
    to_.sll_family = AF_PACKET;
    to_.sll_ifindex = int(if_nametoindex(iface.c_str()));
    to_.sll_halen = ETH_ALEN;
  }
  ~FrameSender() {
    if (fd_ >= 0) close(fd_);
  }
  bool ok() const { return fd_ >= 0 && to_.sll_ifindex > 0; }
  // A 64-byte UDP/IPv4 frame numbered i.
  bool send(unsigned i) {
    unsigned char f[64] = {0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2, 0x08, 0x00,
                           0x45, 0, 0, 50, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2};
    f[19] = static_cast<unsigned char>(i);
    f[18] = static_cast<unsigned char>(i >> 8);
    return sendto(fd_, f, sizeof f, 0, reinterpret_cast<const sockaddr*>(&to_), sizeof to_) ==
           ssize_t(sizeof f);
  }

 private:
  int fd_ = -1;
  sockaddr_ll to_{};
};

TEST(AfPacketDrops, KernelRingDropsAreCountedAsMissed) {
  SLUICE_REQUIRE_EAL();
  VethNetns net;
  ASSERT_TRUE(net.ok()) << "cannot create the namespace and veth pair";
  auto pool = Mempool::create("apd_pool", 1023, RTE_MBUF_DEFAULT_BUF_SIZE, 32, SOCKET_ID_ANY);
  ASSERT_TRUE(pool) << pool.error().message;

  // The driver opens and binds its socket at probe, and sets the interface's flags by name, in
  // the calling thread's namespace: the whole life of the port runs inside it (the EAL's
  // other threads stay outside and do not matter).
  ASSERT_TRUE(net.enter());
  const std::string vdev = "net_af_packet_apd" + std::to_string(getpid());
  constexpr unsigned kRing = 64, kSent = 256;
  const int probed = rte_vdev_init(vdev.c_str(), ("iface=" + net.a() + ",framecnt=64").c_str());
  uint16_t id = 0;
  const bool found = probed == 0 && rte_eth_dev_get_port_by_name(vdev.c_str(), &id) == 0;
  FrameSender sender(net.b());
  ASSERT_TRUE(found) << "net_af_packet on " << net.a() << ": " << probed;
  ASSERT_TRUE(sender.ok());
  {
    auto port = Port::open(id, PortSetup{1, 1024, 1024, pool->get()});
    ASSERT_TRUE(port) << port.error().message;
    // Nobody polls: the ring keeps kRing frames, the kernel drops the rest.
    for (unsigned i = 0; i < kSent; ++i) ASSERT_TRUE(sender.send(i)) << i;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the veth's softirq delivers
    unsigned received = 0;
    rte_mbuf* burst[32];
    for (int idle = 0; idle < 20;) {
      const uint16_t n = rte_eth_rx_burst(id, 0, burst, 32);
      received += n;
      rte_pktmbuf_free_bulk(burst, n);
      if (n == 0) {
        ++idle;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
    }
    const Port::Reading r = port->read();
    EXPECT_EQ(r.counters.rx_packets, received);
    EXPECT_EQ(received, kRing) << "the ring holds its frames, no more";
    EXPECT_EQ(r.counters.missed_packets, kSent - received) << "every frame the ring refused";
    EXPECT_EQ(r.counters.rx_packets + r.counters.missed_packets, kSent);
    EXPECT_EQ(port->read().counters.missed_packets, kSent - received) << "reading again adds nothing";
    port->stop();
    EXPECT_EQ(port->read().counters.missed_packets, kSent - received) << "kept after stop";
  }
  rte_vdev_uninit(vdev.c_str());
  net.leave();
}

}  // namespace
}  // namespace sluice
