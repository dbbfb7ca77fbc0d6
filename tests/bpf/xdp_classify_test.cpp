// The XDP program's classification (the shared match tables in BPF maps: LPM tries, port-range
// arrays, exact tables, intersected, lowest bit wins) against the core Classifier, on random
// rule sets up to the XDP limit of 256 rules and random frames that hit them: every rule's
// matched count and the default's must agree.
#include <arpa/inet.h>

#include "classifier.hpp"
#include "frame.hpp"
#include "packet_builder.hpp"
#include "random_rules.hpp"
#include "xdp_harness.hpp"

namespace sluice {
namespace {

using testing::PacketBuilder;
using namespace xdp_test;

std::string addr_text(const std::array<uint8_t, 16>& a, uint8_t version) {
  char buf[INET6_ADDRSTRLEN];
  inet_ntop(version == 6 ? AF_INET6 : AF_INET, a.data(), buf, sizeof(buf));
  return buf;
}

bool is_ipv6_ext(uint8_t p) { return p == 0 || p == 43 || p == 44 || p == 51 || p == 60; }

// A frame with the fields of a random ParsedFrame.
Bytes frame_of(const ParsedFrame& pf) {
  PacketBuilder b;
  if (pf.vlan_count >= 1) b.vlan(pf.outer_vlan);
  if (pf.vlan_count == 2) b.vlan(uint16_t(pf.outer_vlan ^ 0x5a));
  if (pf.ip_version == 0) return b.ethertype(0x0806).payload(28).build();
  if (pf.ip_version == 4) b.ipv4(addr_text(pf.src, 4), addr_text(pf.dst, 4), pf.dscp);
  else b.ipv6(addr_text(pf.src, 6), addr_text(pf.dst, 6), pf.dscp);
  const bool l4 = pf.proto == 6 || pf.proto == 17 || pf.proto == 132;
  if (l4 && pf.has_ports) {
    if (pf.proto == 6) b.tcp(pf.src_port, pf.dst_port);
    else if (pf.proto == 17) b.udp(pf.src_port, pf.dst_port);
    else b.sctp(pf.src_port, pf.dst_port);
    return b.build();
  }
  if (l4) {  // a port-less TCP/UDP/SCTP packet is a non-first fragment
    if (pf.ip_version == 4) b.ipv4_fragment(100, false);
    else b.ipv6_fragment(100, false);
    return b.proto(pf.proto).payload(16).build();
  }
  const uint8_t proto = pf.ip_version == 6 && is_ipv6_ext(pf.proto) ? 59 : pf.proto;
  return b.proto(proto).payload(24).build();
}

void compare(uint64_t seed, size_t rule_count, size_t frames) {
  SCOPED_TRACE("seed " + std::to_string(seed) + ", " + std::to_string(rule_count) + " rules");
  testing::RandomRules gen(seed);
  RuleSet rs;
  // Rules with no condition at all would take every frame; only the last one may be one.
  while (rs.rules.size() < rule_count) {
    for (Rule& r : gen.rules(rule_count, 0.4))
      if (!(r.match == Match{}) && rs.rules.size() < rule_count) rs.rules.push_back(r);
  }
  rs.rules.back().match = Match{};
  for (size_t i = 0; i < rs.rules.size(); ++i) rs.rules[i].name = "r" + std::to_string(i);
  for (Rule& r : rs.rules) {  // a dry-run policer that never refuses: only matching counts
    r.rate = Rate{CostUnit::packets, 1000000, 1};
    r.burst = 1000000;
    r.action = Action{ActionKind::pass, 0};
  }
  const Classifier core(rs.rules);
  auto prog = load_test_program();
  ASSERT_NE(prog, nullptr);
  Status s = prog->set_rules(rs);
  ASSERT_TRUE(s.ok()) << s.error().message;
  std::vector<uint64_t> want(rule_count + 1, 0);
  uint16_t port = 0;
  for (size_t i = 0; i < frames; ++i) {
    if (i % 50 == 0) {  // the ingress port id, through the interface BPF_PROG_TEST_RUN uses (lo)
      port = gen.ingress();
      ASSERT_TRUE(prog->set_ingress_port(1, port).ok());
    }
    const Bytes f = frame_of(gen.frame());
    const ParsedFrame parsed = parse_frame(f.data(), uint32_t(f.size()));
    ASSERT_EQ(parsed.status, FrameStatus::ok);
    const int rule = core.classify(parsed, port);
    want[rule < 0 ? rule_count : size_t(rule)] += 1;
    run_at(*prog, f, 1'000'000 + i);
  }
  auto got = prog->counters();
  ASSERT_TRUE(got.ok());
  size_t hit = 0;
  for (size_t i = 0; i <= rule_count; ++i) {
    EXPECT_EQ(got->per_rule[i].pkts(Outcome::matched), want[i]) << "rule " << i;
    hit += want[i] != 0;
  }
  EXPECT_GE(hit, rule_count < 50 ? 3u : 6u);  // the frames reach many rules
}

TEST(XdpClassify, SmallRuleSets) {
  for (uint64_t seed = 1; seed <= 4; ++seed) compare(seed, 1 + seed * 7, 1500);
}

TEST(XdpClassify, TwoWordRuleSets) { compare(11, 100, 3000); }

TEST(XdpClassify, TheMostRules) { compare(12, SL_XDP_MAX_RULES, 4000); }

}  // namespace
}  // namespace sluice
