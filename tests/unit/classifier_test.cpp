// First-match classification over every match field (SPEC §2).
#include <gtest/gtest.h>

#include "classifier.hpp"
#include "frame.hpp"
#include "packet_builder.hpp"
#include "rules_loader.hpp"

using namespace sluice;
using sluice::testing::PacketBuilder;

namespace {

RuleSet load(const std::string& yaml) {
  auto r = load_rules_text(yaml, "test.yaml");
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return r.ok() ? *r : RuleSet{};
}

int classify(const Classifier& c, const std::vector<uint8_t>& f, uint16_t port = 0) {
  ParsedFrame pf = parse_frame(f.data(), uint32_t(f.size()));
  return c.classify(pf, port);
}

const char* kRules = R"(
rules:
  - {name: dns, match: {proto: udp, dst-port: 53, dst: 192.0.2.0/24}, rate: 10pps, burst: 1}
  - {name: v6web, match: {dst: "2001:db8::/32", proto: tcp, dst-port: 80-443}, rate: 10pps, burst: 1}
  - {name: vlan7, match: {vlan: 7}, rate: 10pps, burst: 1}
  - {name: ef, match: {dscp: EF}, rate: 10pps, burst: 1}
  - {name: port3, match: {port: 3}, rate: 10pps, burst: 1}
  - {name: src-net, match: {src: 10.1.0.0/16, src-port: 1000-2000}, rate: 10pps, burst: 1}
  - {name: icmp, match: {proto: icmp}, rate: 10pps, burst: 1}
)";

}  // namespace

TEST(Classifier, FirstMatchOverEveryField) {
  RuleSet rs = load(kRules);
  ASSERT_EQ(rs.rules.size(), 7u);
  Classifier c(rs.rules);
  EXPECT_EQ(classify(c, PacketBuilder().ipv4("10.0.0.1", "192.0.2.9").udp(5, 53).build()), 0);
  EXPECT_EQ(classify(c, PacketBuilder().ipv4("10.0.0.1", "192.0.3.9").udp(5, 53).build()), -1);
  EXPECT_EQ(classify(c, PacketBuilder().ipv4("10.0.0.1", "192.0.2.9").tcp(5, 53).build()), -1);
  EXPECT_EQ(classify(c, PacketBuilder().ipv6("2001::1", "2001:db8::5").tcp(9, 443).build()), 1);
  EXPECT_EQ(classify(c, PacketBuilder().ipv6("2001::1", "2001:db8::5").tcp(9, 444).build()), -1);
  EXPECT_EQ(classify(c, PacketBuilder().ipv6("2001::1", "2001:db9::5").tcp(9, 80).build()), -1);
  EXPECT_EQ(classify(c, PacketBuilder().vlan(7).ipv4("1.1.1.1", "2.2.2.2").udp(1, 2).build()), 2);
  EXPECT_EQ(classify(c, PacketBuilder().vlan(8).ipv4("1.1.1.1", "2.2.2.2").udp(1, 2).build()), -1);
  // QinQ: the outer (service) tag is the one matched, inner headers are classified.
  EXPECT_EQ(classify(c, PacketBuilder().vlan(7).vlan(100).ipv4("1.1.1.1", "192.0.2.1").udp(1, 53).build()), 0);
  EXPECT_EQ(classify(c, PacketBuilder().vlan(7).vlan(100).ipv4("1.1.1.1", "2.2.2.2").udp(1, 2).build()), 2);
  EXPECT_EQ(classify(c, PacketBuilder().ipv4("1.1.1.1", "2.2.2.2", 46).udp(1, 2).build()), 3);
  EXPECT_EQ(classify(c, PacketBuilder().ipv4("1.1.1.1", "2.2.2.2", 10).udp(1, 2).build(), 3), 4);
  EXPECT_EQ(classify(c, PacketBuilder().ipv4("10.1.200.3", "2.2.2.2").tcp(1500, 2).build()), 5);
  EXPECT_EQ(classify(c, PacketBuilder().ipv4("10.1.200.3", "2.2.2.2").tcp(999, 2).build()), -1);
  EXPECT_EQ(classify(c, PacketBuilder().ipv4("10.2.0.3", "2.2.2.2").tcp(1500, 2).build()), -1);
  EXPECT_EQ(classify(c, PacketBuilder().ipv4("10.2.0.3", "2.2.2.2").icmp().build()), 6);
  // ICMPv6 is not "icmp".
  EXPECT_EQ(classify(c, PacketBuilder().ipv6("::1", "::2").icmp().build()), -1);
}

TEST(Classifier, NonIpFramesOnlyMatchRulesWithoutIpFields) {
  RuleSet rs = load(R"(
rules:
  - {name: ip, match: {proto: udp}, rate: 10pps, burst: 1}
  - {name: everything, rate: 10pps, burst: 1}
)");
  Classifier c(rs.rules);
  EXPECT_EQ(classify(c, PacketBuilder().ethertype(0x0806).payload(28).build()), 1);
  EXPECT_EQ(classify(c, PacketBuilder().ipv4("1.1.1.1", "2.2.2.2").udp(1, 2).build()), 0);
}

TEST(Classifier, CidrEdges) {
  Cidr c;
  c.family = 4;
  c.addr = {10, 1, 128, 0};
  c.prefix_len = 17;
  std::array<uint8_t, 16> a{10, 1, 200, 1}, b{10, 1, 127, 255}, z{};
  EXPECT_TRUE(cidr_contains(c, 4, a));
  EXPECT_FALSE(cidr_contains(c, 4, b));
  EXPECT_FALSE(cidr_contains(c, 6, a));
  c.prefix_len = 0;
  EXPECT_TRUE(cidr_contains(c, 4, z));
}
