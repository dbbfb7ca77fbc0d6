// Frame parser on a prefix of a frame (the first segment of an mbuf chain, or its first bytes
// gathered): headers come from the bytes at hand, lengths are checked against the wire length,
// and a header past the bytes at hand says so (kHeadersPastBytesAtHand) rather than counting
// the frame as malformed for good. DSCP marking writes only inside the prefix.
#include "frame_parser_fixtures.hpp"
#include "frame_rewrite.hpp"

namespace sluice {
namespace {

using namespace parser_test;

// Parses the first `n` bytes of `f` from a heap buffer of exactly `n` bytes (so ASan sees any
// read past them), as a frame of `wire` bytes.
ParsedFrame parse_prefix(const Bytes& f, size_t n, size_t wire) {
  auto buf = std::make_unique<uint8_t[]>(n);
  std::copy_n(f.data(), n, buf.get());
  return parse_frame(buf.get(), uint32_t(n), uint32_t(wire));
}

std::vector<Bytes> valid_frames() {
  return {
      PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").udp(1, 2).payload(900).build(),
      PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").tcp(1, 2).payload(900).build(),
      PacketBuilder().vlan(1).vlan(2).ipv4("10.0.0.1", "10.0.0.2").ipv4_options(12).tcp(1, 2).payload(300).build(),
      PacketBuilder().vlan(9).ipv6("::1", "::2").ipv6_ext(0, 8).ipv6_ext(51, 16).ipv6_fragment(0, true).sctp(1, 2).payload(500).build(),
      PacketBuilder().ipv6("::1", "::2").ipv6_ext(60, 2048).udp(3, 4).payload(100).build(),
      PacketBuilder().ipv6("::1", "::2").ipv6_ext(60, 8).ipv6_fragment(3, true).udp(1, 2).payload(200).build(),
      PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").ipv4_fragment(10, false).payload(300).build(),
      PacketBuilder().vlan(4).ethertype(0x0806).payload(400).build(),
  };
}

TEST(FrameParserPrefix, EveryPrefixParsesLikeTheWholeFrameOrAsksForMore) {
  for (const Bytes& f : valid_frames()) {
    const ParsedFrame whole = parse_exact(f);
    ASSERT_EQ(whole.status, FrameStatus::ok);
    bool parsed = false;
    for (size_t n = 0; n <= f.size(); ++n) {
      SCOPED_TRACE(n);
      const ParsedFrame pf = parse_prefix(f, n, f.size());
      EXPECT_EQ(pf.frame_len, f.size());  // always the wire length
      EXPECT_EQ(pf.parsed_len, n);
      if (pf.status == FrameStatus::ok) {
        parsed = true;
        EXPECT_EQ(pf.match_word, whole.match_word);
        EXPECT_EQ(pf.l4_offset, whole.l4_offset);
        EXPECT_EQ(pf.src_port, whole.src_port);
        EXPECT_EQ(pf.dst_port, whole.dst_port);
        EXPECT_EQ(pf.src, whole.src);
        EXPECT_EQ(pf.dst, whole.dst);
        EXPECT_EQ(pf.is_fragment, whole.is_fragment);
        if (pf.has_l4) {
          EXPECT_LE(pf.l4_offset + 4u, n);
        }
      } else {
        // Never "malformed" for good: a longer prefix would parse.
        EXPECT_FALSE(parsed) << "a longer prefix parsed, a shorter one did not";
        EXPECT_TRUE(headers_past_bytes_at_hand(pf)) << pf.malformed_reason;
      }
    }
    EXPECT_TRUE(parsed);
  }
}

TEST(FrameParserPrefix, FastPathAgreesWithTheGeneralWalkOnPrefixes) {
  for (const Bytes& f : {valid_frames()[0], valid_frames()[1]}) {
    for (size_t n = 0; n <= 80; ++n) {
      SCOPED_TRACE(n);
      ParsedFrame fast, general;
      parse_frame_into(f.data(), uint32_t(n), uint32_t(f.size()), fast);
      parse_frame_general(f.data(), uint32_t(n), uint32_t(f.size()), general);
      EXPECT_EQ(fast.status, general.status);
      EXPECT_EQ(fast.match_word, general.match_word);
      EXPECT_EQ(fast.malformed_reason, general.malformed_reason);
      EXPECT_EQ(fast.dst_port, general.dst_port);
    }
  }
}

TEST(FrameParserPrefix, IpLengthsAreCheckedAgainstTheWireLength) {
  const Bytes v4 = valid_frames()[0];  // total length 14 + 20 + 8 + 900
  ASSERT_EQ(v4.size(), 942u);
  EXPECT_EQ(parse_prefix(v4, 64, 942).status, FrameStatus::ok);
  EXPECT_EQ(parse_prefix(v4, 64, 5000).status, FrameStatus::ok);  // padding on the wire: fine
  const ParsedFrame short_v4 = parse_prefix(v4, 64, 941);
  EXPECT_EQ(short_v4.status, FrameStatus::malformed);
  EXPECT_STREQ(short_v4.malformed_reason, "IPv4 total length past frame");
  EXPECT_EQ(short_v4.frame_len, 941u);

  const Bytes v6 = PacketBuilder().ipv6("::1", "::2").udp(1, 2).payload(1000).build();
  EXPECT_EQ(parse_prefix(v6, 100, v6.size()).status, FrameStatus::ok);
  const ParsedFrame short_v6 = parse_prefix(v6, 100, v6.size() - 1);
  EXPECT_STREQ(short_v6.malformed_reason, "IPv6 payload length past frame");

  // A header past the wire length is the frame's own fault, not the prefix's.
  const ParsedFrame cut = parse_prefix(v4, 30, 30);
  EXPECT_STREQ(cut.malformed_reason, "truncated IPv4 header");
  EXPECT_TRUE(headers_past_bytes_at_hand(parse_prefix(v4, 30, 942)));
  // A wire length below the bytes at hand counts as the bytes at hand.
  EXPECT_EQ(parse_prefix(v4, 942, 0).frame_len, 942u);
}

TEST(FrameParserPrefix, DscpMarkWritesInsideThePrefix) {
  const Bytes v4 = valid_frames()[0];
  Bytes prefix(v4.begin(), v4.begin() + 42);  // Ethernet, IPv4, UDP headers
  const ParsedFrame pf = parse_frame(prefix.data(), 42, uint32_t(v4.size()));
  ASSERT_EQ(pf.status, FrameStatus::ok);
  ASSERT_TRUE(mark_dscp(prefix.data(), pf.frame_len, pf, 46));
  EXPECT_EQ(prefix[15] >> 2, 46);
  EXPECT_EQ(PacketBuilder::ipv4_checksum(prefix.data() + 14, 20), 0);
  // A description claiming more bytes at hand than the wire length is refused.
  ParsedFrame lying = pf;
  lying.parsed_len = pf.frame_len + 1;
  EXPECT_FALSE(mark_dscp(prefix.data(), pf.frame_len, lying, 10));
  lying = pf;
  lying.parsed_len = 20;  // the IP header would not be in it
  EXPECT_FALSE(mark_dscp(prefix.data(), pf.frame_len, lying, 10));
  EXPECT_EQ(prefix[15] >> 2, 46);
}

}  // namespace
}  // namespace sluice
