// XdpBackend on a veth pair in a namespace the test creates: attached in native and in skb mode,
// its maps pinned under /sys/fs/bpf/sluice/IFACE, frames sent into the other end counted by
// the rule (per-CPU counters summed) and limited by it on the kernel clock; a second attach is
// refused, and detach leaves nothing attached and nothing pinned.
#include <arpa/inet.h>
#include <dirent.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/if_ether.h>
#include <linux/if_link.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "packet_builder.hpp"
#include "veth_namespace.hpp"
#include "xdp_backend.hpp"
#include "xdp_harness.hpp"

namespace sluice {
namespace {

using testing::PacketBuilder;
using namespace xdp_test;

bool exists(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0;
}

// Detach leaves no empty /sys/fs/bpf/sluice behind: the root is gone, or still holds another
// interface's pins (another sluice on this machine).
bool root_gone_or_in_use() {
  DIR* d = opendir("/sys/fs/bpf/sluice");
  if (!d) return errno == ENOENT;
  bool in_use = false;
  while (dirent* e = readdir(d))
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) in_use = true;
  closedir(d);
  return in_use;
}

// Sends `n` copies of the frame out of interface `iface` (an AF_PACKET socket).
bool send_frames(const std::string& iface, const Bytes& frame, int n) {
  const int fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_ll addr{};
  addr.sll_family = AF_PACKET;
  addr.sll_ifindex = int(if_nametoindex(iface.c_str()));
  addr.sll_halen = ETH_ALEN;
  bool ok = addr.sll_ifindex > 0;
  for (int i = 0; ok && i < n; ++i)
    ok = sendto(fd, frame.data(), frame.size(), 0, reinterpret_cast<sockaddr*>(&addr),
                sizeof(addr)) == ssize_t(frame.size());
  close(fd);
  return ok;
}

void attach_count_detach(xdp::AttachMode mode, uint32_t mode_flag) {
  VethNamespace ns;
  ASSERT_TRUE(ns.ok());
  const RuleSet rules = rules_from(
      "default: {action: pass}\nrules:\n  - {name: udp, match: {proto: udp, dst-port: 9}, "
      "key: src-ip, rate: 1pps, burst: 3, algorithm: token-bucket, action: drop}\n");
  auto backend = xdp::XdpBackend::attach(ns.a(), mode, rules);
  ASSERT_TRUE(backend.ok()) << backend.error().message;
  const std::string dir = (*backend)->pin_dir();
  EXPECT_EQ(dir, "/sys/fs/bpf/sluice/" + ns.a());
  EXPECT_TRUE(exists(dir + "/sl_counters"));
  EXPECT_TRUE(exists(dir + "/sl_flow_tables"));

  auto second = xdp::XdpBackend::attach(ns.a(), mode, rules);
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.error().message.find("already attached"), std::string::npos)
      << second.error().message;

  const Bytes f = PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").udp(1234, 9).payload(20).build();
  constexpr int kSent = 40;
  ASSERT_TRUE(send_frames(ns.b(), f, kSent));
  auto c = (*backend)->counters();
  ASSERT_TRUE(c.ok()) << c.error().message;
  const TrafficCounters& t = c->per_rule[0];
  EXPECT_EQ(t.pkts(Outcome::matched), uint64_t(kSent));  // every frame, whichever CPU ran it
  EXPECT_EQ(t.byts(Outcome::matched), uint64_t(kSent) * f.size());
  // A burst of 3 at 1 pps: a fourth only if sending took over a second.
  EXPECT_GE(t.pkts(Outcome::conformed), 3u);
  EXPECT_LE(t.pkts(Outcome::conformed), 4u);
  EXPECT_EQ(t.pkts(Outcome::dropped), kSent - t.pkts(Outcome::conformed));

  const int ifindex = int(if_nametoindex(ns.a().c_str()));
  ASSERT_TRUE((*backend)->detach().ok());
  uint32_t id = 1;
  EXPECT_EQ(bpf_xdp_query_id(ifindex, int(mode_flag), &id), 0);
  EXPECT_EQ(id, 0u);
  EXPECT_FALSE(exists(dir));
  EXPECT_TRUE(root_gone_or_in_use());
}

TEST(XdpBackend, NativeModeCountsAndLimits) {
  attach_count_detach(xdp::AttachMode::native, XDP_FLAGS_DRV_MODE);
}

TEST(XdpBackend, SkbModeCountsAndLimits) {
  attach_count_detach(xdp::AttachMode::skb, XDP_FLAGS_SKB_MODE);
}

// What sluicectl --xdp does from a later process: the pinned maps opened without loading a
// program; its rules read back, a rate change applied to the running program (the bucket
// kept), the counters read, then detach from there leaves nothing attached or pinned.
TEST(XdpBackend, ASecondOpenerChangesRulesAndDetaches) {
  VethNamespace ns;
  ASSERT_TRUE(ns.ok());
  auto yaml = [](int burst) {
    return "default: {action: pass}\nrules:\n  - {name: udp, match: {proto: udp, dst-port: 9}, "
           "key: src-ip, rate: 1pps, burst: " + std::to_string(burst) +
           ", algorithm: token-bucket, action: drop}\n";
  };
  auto owner = xdp::XdpBackend::attach(ns.a(), xdp::AttachMode::native, rules_from(yaml(3)));
  ASSERT_TRUE(owner.ok()) << owner.error().message;
  const std::string dir = (*owner)->pin_dir();
  const Bytes f = PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").udp(1234, 9).payload(20).build();
  ASSERT_TRUE(send_frames(ns.b(), f, 2));  // 1 token left

  auto other = xdp::XdpBackend::open(ns.a());
  ASSERT_TRUE(other.ok()) << other.error().message;
  ASSERT_EQ((*other)->rules().rules.size(), 1u);
  EXPECT_EQ((*other)->rules().rules[0].name, "udp");
  EXPECT_EQ((*other)->rules().rules[0].burst, 3u);
  // A burst raise keeps the one token left (never refilled to 20).
  Status s = (*other)->set_rules(rules_from(yaml(20)));
  ASSERT_TRUE(s.ok()) << s.error().message;
  ASSERT_TRUE(send_frames(ns.b(), f, 10));
  auto c = (*other)->counters();
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->per_rule[0].pkts(Outcome::matched), 12u);
  EXPECT_GE(c->per_rule[0].pkts(Outcome::conformed), 3u);
  EXPECT_LE(c->per_rule[0].pkts(Outcome::conformed), 4u);  // a second may have passed
  // A third opener sees the new rules.
  auto third = xdp::XdpBackend::open(ns.a());
  ASSERT_TRUE(third.ok()) << third.error().message;
  EXPECT_EQ((*third)->rules().rules[0].burst, 20u);
  third->reset();

  const int ifindex = int(if_nametoindex(ns.a().c_str()));
  ASSERT_TRUE((*other)->detach().ok());
  uint32_t id = 1;
  EXPECT_EQ(bpf_xdp_query_id(ifindex, XDP_FLAGS_DRV_MODE, &id), 0);
  EXPECT_EQ(id, 0u);
  EXPECT_FALSE(exists(dir));
  EXPECT_TRUE(root_gone_or_in_use());
  EXPECT_FALSE(xdp::XdpBackend::open(ns.a()).ok());
}

TEST(XdpBackend, MissingInterfaceIsRefused) {
  auto b = xdp::XdpBackend::attach("sluice-none0", xdp::AttachMode::skb, RuleSet{});
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.error().message.find("no such interface"), std::string::npos);
}

TEST(XdpBackend, RefusedRulesLeaveNothingBehind) {
  VethNamespace ns;
  ASSERT_TRUE(ns.ok());
  auto b = xdp::XdpBackend::attach(
      ns.a(), xdp::AttachMode::skb,
      rules_from("rules:\n  - {name: s, match: {}, key: none, rate: 1Mbit, burst: 16KiB, "
                 "algorithm: leaky-bucket, max-delay: 5ms}\n"));
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.error().message.find("DPDK backend"), std::string::npos);
  EXPECT_FALSE(exists("/sys/fs/bpf/sluice/" + ns.a()));
  EXPECT_TRUE(root_gone_or_in_use());
  uint32_t id = 1;
  EXPECT_EQ(bpf_xdp_query_id(int(if_nametoindex(ns.a().c_str())), 0, &id), 0);
  EXPECT_EQ(id, 0u);
}

}  // namespace
}  // namespace sluice
