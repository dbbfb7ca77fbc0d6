// Frame parser (SPEC §6), bad input: malformed frames, IPv6 extension chains, fragments,
// every truncation and random garbage. Nothing may read past the frame or crash.
#include "frame_parser_fixtures.hpp"

namespace sluice {
namespace {

using namespace parser_test;

// ---- malformed: SPEC §6 ---------------------------------------------------------------------

TEST(FrameParser, ShortEthernetIsMalformed) {
  Bytes f = PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").udp(1, 2).build();
  for (size_t n = 0; n < 14; ++n) {
    ParsedFrame pf = parse_exact(f, n);
    EXPECT_EQ(pf.status, FrameStatus::malformed) << n;
    expect_consistent(pf, n);
  }
}

// An empty frame may come with no buffer at all (the fuzzers' empty input; a zero-length
// mbuf): malformed, and no pointer arithmetic on null (UBSan in the ASan+UBSan suite).
TEST(FrameParser, AnEmptyFrameWithoutABufferIsMalformed) {
  ParsedFrame pf;
  parse_frame_into(nullptr, 0, 0, pf);
  EXPECT_EQ(pf.status, FrameStatus::malformed);
  EXPECT_EQ(pf.frame_len, 0u);
  EXPECT_FALSE(frame_is_well_formed(nullptr, 0, 0));
}

TEST(FrameParser, TruncatedVlanTagIsMalformed) {
  Bytes one = PacketBuilder().vlan(10).ipv4("10.0.0.1", "10.0.0.2").udp(1, 2).build();
  for (size_t n = 14; n < 18; ++n) EXPECT_EQ(parse_exact(one, n).status, FrameStatus::malformed) << n;
  Bytes two = PacketBuilder().vlan(10).vlan(20).ipv4("10.0.0.1", "10.0.0.2").udp(1, 2).build();
  for (size_t n = 18; n < 22; ++n) EXPECT_EQ(parse_exact(two, n).status, FrameStatus::malformed) << n;
  // Exactly the tags and the inner ethertype, nothing after: a valid (empty) non-IP frame.
  Bytes arp = PacketBuilder().vlan(10).vlan(20).ethertype(0x0806).build();
  ASSERT_EQ(arp.size(), 22u);
  EXPECT_EQ(parse_exact(arp).status, FrameStatus::ok);
}

TEST(FrameParser, BadIhlIsMalformed) {
  Bytes good = PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").udp(1, 2).build();
  for (uint8_t ihl = 0; ihl < 5; ++ihl) {
    Bytes f = good;
    f[14] = uint8_t(0x40 | ihl);
    fix_ipv4_checksum(f, 14);
    expect_malformed(f, ("IHL " + std::to_string(ihl)).c_str());
  }
  // IHL 15 (60 bytes) in a frame that holds a 20-byte header and 8 bytes of UDP.
  Bytes f = good;
  f[14] = 0x4f;
  expect_malformed(f, "IHL past frame");
}

TEST(FrameParser, WrongIPVersionIsMalformed) {
  Bytes v4 = PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").udp(1, 2).build();
  v4[14] = 0x65;
  expect_malformed(v4, "version 6 under ethertype 0x0800");
  Bytes v6 = PacketBuilder().ipv6("::1", "::2").udp(1, 2).build();
  v6[14] = uint8_t(0x40 | (v6[14] & 0x0f));
  expect_malformed(v6, "version 4 under ethertype 0x86dd");
}

TEST(FrameParser, TruncatedIPHeaderIsMalformed) {
  Bytes v4 = PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").build();
  for (size_t n = 14; n < 34; ++n) EXPECT_EQ(parse_exact(v4, n).status, FrameStatus::malformed) << n;
  Bytes v6 = PacketBuilder().ipv6("::1", "::2").build();
  for (size_t n = 14; n < 54; ++n) EXPECT_EQ(parse_exact(v6, n).status, FrameStatus::malformed) << n;
}

TEST(FrameParser, IPv4TotalLengthPastFrameIsMalformed) {
  Bytes f = PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").udp(1, 2).payload(10).build();
  put16(f, 16, uint16_t(f.size() - 14 + 1));
  fix_ipv4_checksum(f, 14);
  expect_malformed(f, "one byte past");
  put16(f, 16, 0xffff);
  fix_ipv4_checksum(f, 14);
  expect_malformed(f, "0xffff");
}

TEST(FrameParser, IPv4TotalLengthBelowHeaderIsMalformed) {
  Bytes f = PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").ipv4_options(8).udp(1, 2).build();
  put16(f, 16, 24);  // IHL says 28
  fix_ipv4_checksum(f, 14);
  expect_malformed(f, "total length 24 < IHL*4 28");
}

TEST(FrameParser, IPv6PayloadLengthPastFrameIsMalformed) {
  Bytes f = PacketBuilder().ipv6("::1", "::2").udp(1, 2).payload(10).build();
  put16(f, 18, uint16_t(f.size() - 54 + 1));
  expect_malformed(f, "one byte past");
}

TEST(FrameParser, TruncatedL4HeaderIsMalformed) {
  // The IP packet itself is consistent; only the L4 header inside it is short.
  const std::pair<uint8_t, size_t> cut[] = {{6, 19}, {17, 7}, {132, 11}, {6, 0}, {17, 3}};
  for (auto [proto, have] : cut) {
    SCOPED_TRACE(::testing::Message() << "proto " << int(proto) << " with " << have << " bytes");
    expect_malformed(PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").proto(proto).payload(have).build(), "v4");
    expect_malformed(PacketBuilder().ipv6("::1", "::2").proto(proto).payload(have).build(), "v6");
    expect_malformed(PacketBuilder().vlan(3).ipv6("::1", "::2").proto(proto).payload(have).build(), "vlan v6");
  }
  // One byte more than required is fine.
  EXPECT_EQ(parse_exact(PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").proto(17).payload(8).build()).status,
            FrameStatus::ok);
}

TEST(FrameParser, TruncatedIcmpHeaderIsMalformed) {
  expect_malformed(PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").proto(1).payload(3).build(), "icmp");
  expect_malformed(PacketBuilder().ipv6("::1", "::2").proto(58).payload(3).build(), "icmpv6");
  EXPECT_EQ(parse_exact(PacketBuilder().ipv6("::1", "::2").proto(58).payload(4).build()).status,
            FrameStatus::ok);
}

TEST(FrameParser, EmptyPayloadOfUnknownProtocolIsFine) {
  Bytes f = PacketBuilder().ipv6("::1", "::2").proto(59).build();  // No Next Header
  ParsedFrame pf = parse_exact(f);
  ASSERT_EQ(pf.status, FrameStatus::ok);
  EXPECT_EQ(pf.proto, 59);
  EXPECT_FALSE(pf.has_ports);
}

// ---- IPv6 extension headers -----------------------------------------------------------------

TEST(FrameParser, IPv6ExtensionHeadersAreWalked) {
  Bytes f = PacketBuilder()
                .ipv6("2001:db8::1", "2001:db8::2")
                .ipv6_ext(0, 8)      // hop-by-hop
                .ipv6_ext(60, 16)    // destination options
                .ipv6_ext(43, 24)    // routing
                .ipv6_ext(51, 12)    // AH: length in 4-byte units
                .ipv6_ext(60, 8)
                .tcp(1111, 2222)
                .build();
  ParsedFrame pf = parse_exact(f);
  ASSERT_EQ(pf.status, FrameStatus::ok);
  expect_consistent(pf, f.size());
  EXPECT_EQ(pf.proto, 6);
  EXPECT_EQ(pf.l4_offset, 54 + 8 + 16 + 24 + 12 + 8);
  EXPECT_EQ(pf.src_port, 1111);
  EXPECT_EQ(pf.dst_port, 2222);
  EXPECT_FALSE(pf.is_fragment);
}

TEST(FrameParser, LargestExtensionHeaderFits) {
  Bytes f = PacketBuilder().ipv6("::1", "::2").ipv6_ext(60, 2048).udp(3, 4).build();
  ParsedFrame pf = parse_exact(f);
  ASSERT_EQ(pf.status, FrameStatus::ok);
  EXPECT_EQ(pf.l4_offset, 54 + 2048);
  EXPECT_EQ(pf.dst_port, 4);
}

TEST(FrameParser, EightExtensionHeadersOkNineMalformed) {
  PacketBuilder b;
  b.ipv6("::1", "::2").udp(1, 2);
  for (int i = 0; i < 8; ++i) b.ipv6_ext(60, 8);
  Bytes eight = b.build();
  ParsedFrame pf = parse_exact(eight);
  ASSERT_EQ(pf.status, FrameStatus::ok);
  EXPECT_EQ(pf.l4_offset, 54 + 64);
  EXPECT_EQ(pf.dst_port, 2);

  b.ipv6_ext(60, 8);
  expect_malformed(b.build(), "nine destination options headers");
}

TEST(FrameParser, ExtensionChainOffTheEndIsMalformed) {
  Bytes base = PacketBuilder().ipv6("::1", "::2").ipv6_ext(0, 8).ipv6_ext(43, 16).udp(1, 2).build();
  {
    Bytes f = base;
    f[54 + 8 + 1] = 200;  // routing header claims 1608 bytes
    expect_malformed(f, "length field past the payload");
  }
  {
    // Payload length ends in the middle of the routing header (the frame is cut to match).
    Bytes f(base.begin(), base.begin() + 54 + 8 + 12);
    put16(f, 18, 8 + 12);
    expect_malformed(f, "payload ends inside a header");
  }
  {
    // Payload length ends right after hop-by-hop, which still announces a routing header.
    Bytes f(base.begin(), base.begin() + 54 + 8);
    put16(f, 18, 8);
    expect_malformed(f, "chain announces a header with no bytes left");
  }
  {
    // The frame holds the whole chain, but the payload length stops short of it.
    Bytes f = base;
    put16(f, 18, 8 + 4);
    expect_malformed(f, "payload length shorter than the chain");
  }
}

TEST(FrameParser, EspEndsTheWalk) {
  Bytes f = PacketBuilder().ipv6("::1", "::2").ipv6_ext(0, 8).proto(50).payload(40).build();
  ParsedFrame pf = parse_exact(f);
  ASSERT_EQ(pf.status, FrameStatus::ok);
  EXPECT_EQ(pf.proto, 50);
  EXPECT_TRUE(pf.has_l4);
  EXPECT_EQ(pf.l4_offset, 62);
  EXPECT_FALSE(pf.has_ports);
  // The encrypted payload may look like anything, including more extension headers.
  Bytes g = PacketBuilder().ipv6("::1", "::2").proto(50).payload(16, 0x00).build();
  EXPECT_EQ(parse_exact(g).status, FrameStatus::ok);
}

// ---- fragments ------------------------------------------------------------------------------

TEST(FrameParser, IPv4FirstFragmentHasPorts) {
  Bytes f = PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").ipv4_fragment(0, true).udp(4000, 53).payload(100).build();
  ParsedFrame pf = parse_exact(f);
  ASSERT_EQ(pf.status, FrameStatus::ok);
  expect_consistent(pf, f.size());
  EXPECT_TRUE(pf.is_fragment);
  EXPECT_TRUE(pf.is_first_fragment);
  EXPECT_TRUE(pf.has_ports);
  EXPECT_EQ(pf.src_port, 4000);
  EXPECT_EQ(pf.dst_port, 53);
}

TEST(FrameParser, IPv4NonFirstFragmentsHaveAddressesOnly) {
  for (bool more : {true, false}) {
    SCOPED_TRACE(more ? "middle fragment" : "last fragment");
    // Its payload happens to start with bytes that look like a UDP header: not ports.
    Bytes f = PacketBuilder().ipv4("10.9.8.7", "10.6.5.4").ipv4_fragment(185, more).udp(4000, 53).payload(20).build();
    ParsedFrame pf = parse_exact(f);
    ASSERT_EQ(pf.status, FrameStatus::ok);
    expect_consistent(pf, f.size());
    EXPECT_TRUE(pf.is_fragment);
    EXPECT_FALSE(pf.is_first_fragment);
    EXPECT_FALSE(pf.has_ports);
    EXPECT_FALSE(pf.has_l4);
    EXPECT_EQ(pf.src_port, 0);
    EXPECT_EQ(pf.dst_port, 0);
    EXPECT_EQ(pf.proto, 17);
    EXPECT_EQ(pf.src, ip4(10, 9, 8, 7));
    EXPECT_EQ(pf.dst, ip4(10, 6, 5, 4));
  }
}

TEST(FrameParser, TinyNonFirstFragmentIsNotMalformed) {
  Bytes f = PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").ipv4_fragment(1, false).proto(6).payload(2).build();
  ParsedFrame pf = parse_exact(f);
  EXPECT_EQ(pf.status, FrameStatus::ok);
  EXPECT_FALSE(pf.has_ports);
}

TEST(FrameParser, IPv4FirstFragmentWithCutL4HeaderIsMalformed) {
  expect_malformed(
      PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").ipv4_fragment(0, true).proto(6).payload(16).build(),
      "first fragment with 16 bytes of TCP");
}

TEST(FrameParser, DontFragmentIsNotAFragment) {
  Bytes f = PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").ipv4_dont_fragment().udp(1, 2).build();
  ParsedFrame pf = parse_exact(f);
  ASSERT_EQ(pf.status, FrameStatus::ok);
  EXPECT_FALSE(pf.is_fragment);
  EXPECT_TRUE(pf.has_ports);
}

TEST(FrameParser, IPv6FirstFragmentHasPorts) {
  Bytes f = PacketBuilder().ipv6("2001:db8::1", "2001:db8::2").ipv6_ext(0, 8).ipv6_fragment(0, true, 77).tcp(8080, 22).build();
  ParsedFrame pf = parse_exact(f);
  ASSERT_EQ(pf.status, FrameStatus::ok);
  expect_consistent(pf, f.size());
  EXPECT_TRUE(pf.is_fragment);
  EXPECT_TRUE(pf.is_first_fragment);
  EXPECT_EQ(pf.proto, 6);
  EXPECT_EQ(pf.l4_offset, 54 + 8 + 8);
  EXPECT_EQ(pf.src_port, 8080);
  EXPECT_EQ(pf.dst_port, 22);
}

TEST(FrameParser, IPv6NonFirstFragmentHasAddressesOnly) {
  Bytes f = PacketBuilder().ipv6("2001:db8::1", "2001:db8::2").ipv6_fragment(100, false).udp(5, 6).payload(8).build();
  ParsedFrame pf = parse_exact(f);
  ASSERT_EQ(pf.status, FrameStatus::ok);
  expect_consistent(pf, f.size());
  EXPECT_TRUE(pf.is_fragment);
  EXPECT_FALSE(pf.is_first_fragment);
  EXPECT_FALSE(pf.has_ports);
  EXPECT_FALSE(pf.has_l4);
  EXPECT_EQ(pf.proto, 17);
  EXPECT_EQ(pf.src, ip6("2001:db8::1"));
  EXPECT_EQ(pf.dst, ip6("2001:db8::2"));

  // Nothing after the fragment header at all: still a fragment, not malformed.
  Bytes bare = PacketBuilder().ipv6("::1", "::2").ipv6_fragment(1, true).proto(6).build();
  EXPECT_EQ(parse_exact(bare).status, FrameStatus::ok);
}

TEST(FrameParser, IPv6AtomicFragmentIsAFirstFragment) {
  Bytes f = PacketBuilder().ipv6("::1", "::2").ipv6_fragment(0, false).udp(1, 2).build();
  ParsedFrame pf = parse_exact(f);
  ASSERT_EQ(pf.status, FrameStatus::ok);
  EXPECT_TRUE(pf.is_fragment);
  EXPECT_TRUE(pf.is_first_fragment);
  EXPECT_TRUE(pf.has_ports);
}

TEST(FrameParser, IPv6FirstFragmentWithCutL4HeaderIsMalformed) {
  expect_malformed(PacketBuilder().ipv6("::1", "::2").ipv6_fragment(0, true).proto(17).payload(5).build(),
                   "first fragment with 5 bytes of UDP");
}

// ---- truncation and garbage -----------------------------------------------------------------

struct TruncCase {
  const char* name;
  Bytes frame;
  size_t ip_end;  // bytes the frame needs to be whole: beyond this is padding
};

std::vector<TruncCase> truncation_cases() {
  std::vector<TruncCase> cases;
  auto add = [&](const char* name, Bytes f, size_t padding) {
    size_t n = f.size();
    f.resize(n + padding, 0);
    cases.push_back({name, std::move(f), n});
  };
  add("ipv4 udp", PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").udp(1, 2).payload(5).build(), 13);
  add("qinq ipv4 tcp options", PacketBuilder().vlan(1).vlan(2).ipv4("10.0.0.1", "10.0.0.2").ipv4_options(12).tcp(1, 2).build(), 0);
  add("ipv6 ext chain sctp", PacketBuilder().vlan(9).ipv6("::1", "::2").ipv6_ext(0, 8).ipv6_ext(51, 16).ipv6_fragment(0, true).sctp(1, 2).build(), 4);
  add("ipv6 non-first fragment", PacketBuilder().ipv6("::1", "::2").ipv6_ext(60, 8).ipv6_fragment(3, true).udp(1, 2).build(), 0);
  add("ipv6 icmpv6", PacketBuilder().ipv6("::1", "::2").icmp().build(), 0);
  return cases;
}

TEST(FrameParser, EveryTruncationOfValidFrames) {
  for (const TruncCase& c : truncation_cases()) {
    SCOPED_TRACE(c.name);
    const ParsedFrame whole = parse_exact(c.frame);
    ASSERT_EQ(whole.status, FrameStatus::ok);
    for (size_t n = 0; n <= c.frame.size(); ++n) {
      SCOPED_TRACE(n);
      ParsedFrame pf = parse_exact(c.frame, n);
      expect_consistent(pf, n);
      if (n < c.ip_end) {
        EXPECT_EQ(pf.status, FrameStatus::malformed);
      } else {
        // Cutting only padding changes nothing but the frame length.
        ASSERT_EQ(pf.status, FrameStatus::ok);
        EXPECT_EQ(pf.l4_offset, whole.l4_offset);
        EXPECT_EQ(pf.src_port, whole.src_port);
        EXPECT_EQ(pf.src, whole.src);
      }
    }
  }
}

TEST(FrameParser, EveryTruncationOfNonIPFrameIsConsistent) {
  Bytes f = PacketBuilder().vlan(4).ethertype(0x0806).payload(28).build();
  for (size_t n = 0; n <= f.size(); ++n) {
    ParsedFrame pf = parse_exact(f, n);
    expect_consistent(pf, n);
    // Non-IP payload is never inspected: only the headers up to the inner ethertype matter.
    EXPECT_EQ(pf.status, n < 18 ? FrameStatus::malformed : FrameStatus::ok) << n;
  }
}

// Random bytes rarely get past the ethertype, so half the inputs get a plausible L2/L3 start.
Bytes random_frame(std::mt19937& rng) {
  std::uniform_int_distribution<int> byte(0, 255);
  Bytes f(std::uniform_int_distribution<size_t>(0, 160)(rng));
  for (uint8_t& b : f) b = uint8_t(byte(rng));
  if (f.size() >= 15 && byte(rng) & 1) {
    static const uint16_t types[] = {0x0800, 0x86dd, 0x8100, 0x88a8};
    size_t at = 12;
    for (int tags = byte(rng) % 4; tags > 0 && at + 6 <= f.size(); --tags, at += 4)
      put16(f, at, types[2 + (byte(rng) & 1)]);
    if (at + 3 <= f.size()) {
      bool v6 = byte(rng) & 1;
      put16(f, at, types[v6]);
      f[at + 2] = uint8_t((v6 ? 0x60 : 0x40) | (f[at + 2] & 0x0f));
    }
  }
  return f;
}

TEST(FrameParser, RandomBytesNeverCrash) {
  std::mt19937 rng(20240611);
  size_t ok = 0, ip = 0;
  for (int i = 0; i < 5000; ++i) {
    Bytes f = random_frame(rng);
    ParsedFrame pf = parse_exact(f);
    expect_consistent(pf, f.size());
    ok += pf.status == FrameStatus::ok;
    ip += pf.ip_version != 0;
    if (HasFailure()) FAIL() << "input #" << i;
  }
  // The generator must reach both outcomes, or this test proves little.
  EXPECT_GT(ok, 100u);
  EXPECT_LT(ok, 5000u);
  EXPECT_GT(ip, 0u);
}

TEST(FrameParser, MutatedValidFramesNeverCrash) {
  std::mt19937 rng(7);
  std::vector<Bytes> seeds;
  for (const TruncCase& c : truncation_cases()) seeds.push_back(c.frame);
  seeds.push_back(PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").ipv4_fragment(0, true).tcp(1, 2).build());
  seeds.push_back(PacketBuilder().vlan(1).ipv6("::1", "::2").ipv6_ext(43, 8).ipv6_ext(60, 8).udp(1, 2).build());
  size_t ok = 0, malformed = 0;
  for (int i = 0; i < 5000; ++i) {
    Bytes f = seeds[rng() % seeds.size()];
    for (int flips = 1 + int(rng() % 4); flips > 0; --flips) f[rng() % f.size()] = uint8_t(rng());
    if (rng() % 3 == 0) f.resize(rng() % (f.size() + 1));
    ParsedFrame pf = parse_exact(f);
    expect_consistent(pf, f.size());
    ok += pf.status == FrameStatus::ok;
    malformed += pf.status == FrameStatus::malformed;
    if (HasFailure()) FAIL() << "input #" << i;
  }
  EXPECT_GT(ok, 500u);
  EXPECT_GT(malformed, 500u);
}

}  // namespace
}  // namespace sluice
