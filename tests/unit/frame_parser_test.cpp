// Frame parser (SPEC §6), well-formed frames: Ethernet, VLAN/QinQ, IPv4, IPv6, L4 ports.
// Every frame is parsed from an exactly-sized heap copy (see frame_parser_fixtures.hpp).
#include "frame_parser_fixtures.hpp"

namespace sluice {
namespace {

using namespace parser_test;

// ---- well-formed frames --------------------------------------------------------------------

TEST(FrameParser, IPv4Udp) {
  Bytes f = PacketBuilder().ipv4("10.0.0.1", "192.0.2.7", 10).udp(5353, 53).payload(30).build();
  ParsedFrame pf = parse_exact(f);
  ASSERT_EQ(pf.status, FrameStatus::ok);
  EXPECT_EQ(pf.ip_version, 4);
  EXPECT_EQ(pf.vlan_count, 0);
  EXPECT_EQ(pf.l3_offset, 14);
  EXPECT_EQ(pf.l4_offset, 34);
  EXPECT_EQ(pf.proto, 17);
  EXPECT_EQ(pf.dscp, 10);
  EXPECT_TRUE(pf.has_l4);
  EXPECT_TRUE(pf.has_ports);
  EXPECT_EQ(pf.src_port, 5353);
  EXPECT_EQ(pf.dst_port, 53);
  EXPECT_FALSE(pf.is_fragment);
  EXPECT_FALSE(pf.is_first_fragment);
  EXPECT_EQ(pf.src, ip4(10, 0, 0, 1));
  EXPECT_EQ(pf.dst, ip4(192, 0, 2, 7));
  EXPECT_EQ(pf.frame_len, f.size());
  EXPECT_EQ(pf.malformed_reason, nullptr);
}

TEST(FrameParser, PortsAreHostByteOrder) {
  Bytes f = PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").tcp(0x1234, 0xfedc).build();
  ParsedFrame pf = parse_exact(f);
  ASSERT_EQ(pf.status, FrameStatus::ok);
  EXPECT_EQ(pf.src_port, 0x1234);
  EXPECT_EQ(pf.dst_port, 0xfedc);
}

struct L4Case {
  const char* name;
  uint8_t proto;
  bool ports;
};

void PrintTo(const L4Case& c, std::ostream* os) { *os << c.name; }

class FrameParserL4 : public ::testing::TestWithParam<L4Case> {};

PacketBuilder& add_l4(PacketBuilder& b, const L4Case& c) {
  switch (c.proto) {
    case 6: return b.tcp(40000, 443);
    case 17: return b.udp(40000, 443);
    case 132: return b.sctp(40000, 443);
    default: return b.icmp();
  }
}

TEST_P(FrameParserL4, IPv4) {
  const L4Case& c = GetParam();
  PacketBuilder b;
  b.ipv4("198.51.100.1", "203.0.113.9", 46);
  Bytes f = add_l4(b, c).payload(12).build();
  ParsedFrame pf = parse_exact(f);
  ASSERT_EQ(pf.status, FrameStatus::ok);
  expect_consistent(pf, f.size());
  EXPECT_EQ(pf.ip_version, 4);
  EXPECT_EQ(pf.proto, c.proto == 58 ? 1 : c.proto);
  EXPECT_EQ(pf.dscp, 46);
  EXPECT_TRUE(pf.has_l4);
  EXPECT_EQ(pf.l4_offset, 34);
  EXPECT_EQ(pf.has_ports, c.ports);
  EXPECT_EQ(pf.src_port, c.ports ? 40000 : 0);
  EXPECT_EQ(pf.dst_port, c.ports ? 443 : 0);
  EXPECT_EQ(pf.src, ip4(198, 51, 100, 1));
  EXPECT_EQ(pf.dst, ip4(203, 0, 113, 9));
}

TEST_P(FrameParserL4, IPv6) {
  const L4Case& c = GetParam();
  PacketBuilder b;
  b.ipv6("2001:db8::1", "2001:db8:ffff::2", 34);
  Bytes f = add_l4(b, c).payload(12).build();
  ParsedFrame pf = parse_exact(f);
  ASSERT_EQ(pf.status, FrameStatus::ok);
  expect_consistent(pf, f.size());
  EXPECT_EQ(pf.ip_version, 6);
  EXPECT_EQ(pf.proto, c.proto);
  EXPECT_EQ(pf.dscp, 34);
  EXPECT_TRUE(pf.has_l4);
  EXPECT_EQ(pf.l4_offset, 54);
  EXPECT_EQ(pf.has_ports, c.ports);
  EXPECT_EQ(pf.src_port, c.ports ? 40000 : 0);
  EXPECT_EQ(pf.dst_port, c.ports ? 443 : 0);
  EXPECT_EQ(pf.src, ip6("2001:db8::1"));
  EXPECT_EQ(pf.dst, ip6("2001:db8:ffff::2"));
}

INSTANTIATE_TEST_SUITE_P(Protocols, FrameParserL4,
                         ::testing::Values(L4Case{"tcp", 6, true}, L4Case{"udp", 17, true},
                                           L4Case{"sctp", 132, true}, L4Case{"icmp", 58, false}),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(FrameParser, OtherIPProtocolHasL4OffsetButNoPorts) {
  Bytes f = PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").proto(47).payload(4).build();  // GRE
  ParsedFrame pf = parse_exact(f);
  ASSERT_EQ(pf.status, FrameStatus::ok);
  EXPECT_EQ(pf.proto, 47);
  EXPECT_TRUE(pf.has_l4);
  EXPECT_EQ(pf.l4_offset, 34);
  EXPECT_FALSE(pf.has_ports);
}

TEST(FrameParser, NonIPEthertypeIsOkWithoutIP) {
  Bytes f = PacketBuilder().ethertype(0x0806).payload(28).build();  // ARP
  ParsedFrame pf = parse_exact(f);
  ASSERT_EQ(pf.status, FrameStatus::ok);
  expect_consistent(pf, f.size());
  EXPECT_EQ(pf.ip_version, 0);
  EXPECT_EQ(pf.l3_offset, 14);
  EXPECT_FALSE(pf.has_l4);

  Bytes bare = PacketBuilder().ethertype(0x88cc).build();  // LLDP, header only
  ASSERT_EQ(bare.size(), 14u);
  EXPECT_EQ(parse_exact(bare).status, FrameStatus::ok);
}

TEST(FrameParser, DscpFromTosAndTrafficClassIgnoresEcn) {
  Bytes v4 = PacketBuilder().ipv4("10.0.0.1", "10.0.0.2", 46).udp(1, 2).build();
  v4[14 + 1] |= 0x03;  // ECN CE
  fix_ipv4_checksum(v4, 14);
  EXPECT_EQ(parse_exact(v4).dscp, 46);

  Bytes v6 = PacketBuilder().ipv6("::1", "::2", 0x2b).udp(1, 2).build();
  v6[14 + 1] |= 0x30;  // ECN bits of the traffic class
  EXPECT_EQ(parse_exact(v6).dscp, 0x2b);
  v6[14 + 1] |= 0x0f;  // flow label bits must not leak into the DSCP either
  EXPECT_EQ(parse_exact(v6).dscp, 0x2b);
}

TEST(FrameParser, TrailingEthernetPaddingIsAllowed) {
  // A 42-byte IPv4/UDP packet padded to the 60-byte Ethernet minimum.
  Bytes f = PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").udp(7, 9).build();
  ASSERT_EQ(f.size(), 42u);
  f.resize(60, 0);
  ParsedFrame pf = parse_exact(f);
  ASSERT_EQ(pf.status, FrameStatus::ok);
  EXPECT_EQ(pf.frame_len, 60u);
  EXPECT_EQ(pf.dst_port, 9);

  Bytes g = PacketBuilder().ipv6("::1", "::2").udp(7, 9).build();
  g.resize(g.size() + 6, 0xee);
  pf = parse_exact(g);
  ASSERT_EQ(pf.status, FrameStatus::ok);
  EXPECT_EQ(pf.frame_len, g.size());
}

TEST(FrameParser, PortsMustLieInsideTotalLengthNotPadding) {
  // UDP header present only in the Ethernet padding: total length says it is not there.
  Bytes f = PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").udp(7, 9).build();
  put16(f, 14 + 2, 20 + 4);  // total length covers only half the UDP header
  fix_ipv4_checksum(f, 14);
  ParsedFrame pf = parse_exact(f);
  EXPECT_EQ(pf.status, FrameStatus::malformed);
}

TEST(FrameParser, IPv4OptionsShiftL4) {
  for (size_t opts = 4; opts <= 40; opts += 4) {
    Bytes f = PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").ipv4_options(opts).udp(11, 22).build();
    ParsedFrame pf = parse_exact(f);
    ASSERT_EQ(pf.status, FrameStatus::ok) << opts;
    EXPECT_EQ(pf.l4_offset, 34 + opts);
    EXPECT_EQ(pf.src_port, 11);
    EXPECT_EQ(pf.dst_port, 22);
  }
}

// ---- VLAN -----------------------------------------------------------------------------------

TEST(FrameParser, SingleVlanUsesInnerHeaders) {
  Bytes f = PacketBuilder().vlan(100).ipv4("10.1.2.3", "10.4.5.6", 8).tcp(1000, 80).build();
  ParsedFrame pf = parse_exact(f);
  ASSERT_EQ(pf.status, FrameStatus::ok);
  expect_consistent(pf, f.size());
  EXPECT_EQ(pf.vlan_count, 1);
  EXPECT_EQ(pf.outer_vlan, 100);
  EXPECT_EQ(pf.inner_vlan, 0);
  EXPECT_EQ(pf.l3_offset, 18);
  EXPECT_EQ(pf.l4_offset, 38);
  EXPECT_EQ(pf.ip_version, 4);
  EXPECT_EQ(pf.dscp, 8);
  EXPECT_EQ(pf.src, ip4(10, 1, 2, 3));
  EXPECT_EQ(pf.dst_port, 80);
}

TEST(FrameParser, VlanIdIgnoresPriorityBits) {
  Bytes f = PacketBuilder().vlan(0xabc).ipv4("10.0.0.1", "10.0.0.2").udp(1, 2).build();
  f[14] |= 0xf0;  // PCP 7, DEI 1
  ParsedFrame pf = parse_exact(f);
  ASSERT_EQ(pf.status, FrameStatus::ok);
  EXPECT_EQ(pf.outer_vlan, 0xabc);
}

TEST(FrameParser, QinQ8021adOuter) {
  Bytes f = PacketBuilder().vlan(200).vlan(300).ipv6("2001:db8::a", "2001:db8::b").udp(5, 6).build();
  ASSERT_EQ(f[12], 0x88);  // the builder's default QinQ outer TPID
  ParsedFrame pf = parse_exact(f);
  ASSERT_EQ(pf.status, FrameStatus::ok);
  expect_consistent(pf, f.size());
  EXPECT_EQ(pf.vlan_count, 2);
  EXPECT_EQ(pf.outer_vlan, 200);
  EXPECT_EQ(pf.inner_vlan, 300);
  EXPECT_EQ(pf.l3_offset, 22);
  EXPECT_EQ(pf.ip_version, 6);
  EXPECT_EQ(pf.src, ip6("2001:db8::a"));
  EXPECT_EQ(pf.src_port, 5);
  EXPECT_EQ(pf.dst_port, 6);
}

TEST(FrameParser, QinQ8021QOuter) {
  Bytes f = PacketBuilder()
                .vlan_tpid(7, 0x8100)
                .vlan_tpid(4094, 0x8100)
                .ipv4("10.0.0.1", "10.0.0.2")
                .sctp(9, 10)
                .build();
  ParsedFrame pf = parse_exact(f);
  ASSERT_EQ(pf.status, FrameStatus::ok);
  EXPECT_EQ(pf.vlan_count, 2);
  EXPECT_EQ(pf.outer_vlan, 7);
  EXPECT_EQ(pf.inner_vlan, 4094);
  EXPECT_EQ(pf.proto, 132);
  EXPECT_EQ(pf.dst_port, 10);
}

TEST(FrameParser, VlanWithNonIPInside) {
  Bytes f = PacketBuilder().vlan(5).ethertype(0x0806).payload(28).build();
  ParsedFrame pf = parse_exact(f);
  ASSERT_EQ(pf.status, FrameStatus::ok);
  EXPECT_EQ(pf.vlan_count, 1);
  EXPECT_EQ(pf.outer_vlan, 5);
  EXPECT_EQ(pf.ip_version, 0);
  EXPECT_EQ(pf.l3_offset, 18);
}

TEST(FrameParser, ThreeVlanTagsAreMalformed) {
  expect_malformed(PacketBuilder().vlan(1).vlan(2).vlan(3).ipv4("10.0.0.1", "10.0.0.2").udp(1, 2).build(),
                   "8100/8100/8100");
  expect_malformed(PacketBuilder()
                       .vlan_tpid(1, 0x88a8)
                       .vlan_tpid(2, 0x8100)
                       .vlan_tpid(3, 0x8100)
                       .ipv4("10.0.0.1", "10.0.0.2")
                       .build(),
                   "88a8/8100/8100");
}

}  // namespace
}  // namespace sluice

namespace sluice {
namespace {

using namespace parser_test;

void expect_same_parse(const ParsedFrame& a, const ParsedFrame& b, const std::string& what) {
  EXPECT_EQ(a.status, b.status) << what;
  EXPECT_EQ(a.ip_version, b.ip_version) << what;
  EXPECT_EQ(a.vlan_count, b.vlan_count) << what;
  EXPECT_EQ(a.outer_vlan, b.outer_vlan) << what;
  EXPECT_EQ(a.inner_vlan, b.inner_vlan) << what;
  EXPECT_EQ(a.l3_offset, b.l3_offset) << what;
  EXPECT_EQ(a.l4_offset, b.l4_offset) << what;
  EXPECT_EQ(a.proto, b.proto) << what;
  EXPECT_EQ(a.dscp, b.dscp) << what;
  EXPECT_EQ(a.has_ports, b.has_ports) << what;
  EXPECT_EQ(a.has_l4, b.has_l4) << what;
  EXPECT_EQ(a.is_fragment, b.is_fragment) << what;
  EXPECT_EQ(a.is_first_fragment, b.is_first_fragment) << what;
  EXPECT_EQ(a.src_port, b.src_port) << what;
  EXPECT_EQ(a.dst_port, b.dst_port) << what;
  EXPECT_EQ(a.src, b.src) << what;
  EXPECT_EQ(a.dst, b.dst) << what;
  EXPECT_EQ(a.frame_len, b.frame_len) << what;
  EXPECT_EQ(a.malformed_reason == nullptr, b.malformed_reason == nullptr) << what;
  EXPECT_EQ(a.match_word, b.match_word) << what;
  EXPECT_EQ(a.match_word, match_word::of(a)) << what << ": match word of the fields";
}

// parse_frame_into() takes a straight-line path for plain IPv4 TCP/UDP frames; it must agree
// with the general walk on those frames and on every near miss (mutated headers, lengths,
// fragments, truncations), which is where a shortcut would go wrong.
TEST(FrameParser, FastPathAgreesWithTheGeneralWalk) {
  std::mt19937_64 rng(20261130);
  const Bytes seeds[] = {
      PacketBuilder().ipv4("10.0.0.1", "192.0.2.7", 10).udp(5353, 53).payload(30).build(),
      PacketBuilder().ipv4("10.1.2.3", "10.3.2.1").tcp(443, 40000).payload(6).build(),
      PacketBuilder().ipv4("1.1.1.1", "2.2.2.2").udp(1, 2).build(),
  };
  // Offsets the shortcut reads: ethertype, version/IHL, TOS, total length, fragment field,
  // protocol, addresses, ports.
  const size_t hot[] = {12, 13, 14, 15, 16, 17, 20, 21, 23, 26, 29, 30, 33, 34, 35, 36, 37};
  size_t fast_taken = 0;
  for (int round = 0; round < 20000; ++round) {
    Bytes f = seeds[rng() % std::size(seeds)];
    const int edits = int(rng() % 3);
    for (int e = 0; e < edits; ++e) {
      const size_t at = hot[rng() % std::size(hot)];
      f[at] = rng() % 4 == 0 ? uint8_t(rng()) : uint8_t(f[at] ^ (1u << (rng() % 8)));
    }
    const size_t n = rng() % 8 == 0 ? rng() % (f.size() + 1) : f.size();
    auto buf = std::make_unique<uint8_t[]>(n + 1);
    std::copy_n(f.data(), n, buf.get());
    // The hot path parses into reused burst entries that still hold an earlier frame: start
    // from garbage, so a field the parser forgets to write shows.
    ParsedFrame fast, general;
    std::memset(static_cast<void*>(&fast), 0xa5, sizeof fast);
    parse_frame_into(buf.get(), uint32_t(n), uint32_t(n), fast);
    parse_frame_general(buf.get(), uint32_t(n), uint32_t(n), general);
    expect_same_parse(fast, general, "round " + std::to_string(round));
    fast_taken += edits == 0 && n == f.size();
    if (HasFailure()) break;
  }
  EXPECT_GT(fast_taken, 1000u);
}

}  // namespace
}  // namespace sluice
