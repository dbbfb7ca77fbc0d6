// DSCP marking (SPEC §2 `mark-dscp`). Frames are rewritten in exactly-sized heap buffers so
// that ASan catches a write past the frame.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "frame.hpp"
#include "frame_rewrite.hpp"
#include "packet_builder.hpp"

namespace sluice {
namespace {

using testing::PacketBuilder;
using Bytes = std::vector<uint8_t>;

struct Marked {
  bool ok;
  Bytes frame;
};

// Parses `f`, marks it with `dscp` and returns the result and the bytes afterwards.
Marked parse_and_mark(const Bytes& f, uint8_t dscp) {
  auto buf = std::make_unique<uint8_t[]>(f.size());
  std::copy_n(f.data(), f.size(), buf.get());
  const uint32_t len = uint32_t(f.size());
  const ParsedFrame pf = parse_frame(buf.get(), len);
  const bool ok = mark_dscp(buf.get(), len, pf, dscp);
  return {ok, Bytes(buf.get(), buf.get() + len)};
}

uint16_t get16(const Bytes& f, size_t at) { return uint16_t(f[at] << 8 | f[at + 1]); }

void put16(Bytes& f, size_t at, uint16_t v) {
  f[at] = uint8_t(v >> 8);
  f[at + 1] = uint8_t(v);
}

size_t ihl_bytes(const Bytes& f, size_t l3) { return (f[l3] & 0x0fu) * 4; }

// The checksum a sender would compute from scratch for the header as it now stands.
uint16_t recomputed_checksum(Bytes f, size_t l3) {
  put16(f, l3 + 10, 0);
  return PacketBuilder::ipv4_checksum(f.data() + l3, ihl_bytes(f, l3));
}

void set_tos(Bytes& f, size_t l3, uint8_t tos) {
  f[l3 + 1] = tos;
  put16(f, l3 + 10, recomputed_checksum(f, l3));
}

// Asserts that `after` is `before` with a new DSCP, the same ECN bits and a valid checksum.
void expect_ipv4_marked(const Bytes& before, const Marked& m, size_t l3, uint8_t dscp) {
  ASSERT_TRUE(m.ok);
  ASSERT_EQ(m.frame.size(), before.size());
  EXPECT_EQ(m.frame[l3 + 1] >> 2, dscp);
  EXPECT_EQ(m.frame[l3 + 1] & 0x03, before[l3 + 1] & 0x03) << "ECN bits changed";
  EXPECT_EQ(get16(m.frame, l3 + 10), recomputed_checksum(m.frame, l3));
  // A receiver's check: the sum over the whole header, checksum included, is all ones.
  EXPECT_EQ(PacketBuilder::ipv4_checksum(m.frame.data() + l3, ihl_bytes(m.frame, l3)), 0);
  for (size_t i = 0; i < before.size(); ++i) {
    if (i == l3 + 1 || i == l3 + 10 || i == l3 + 11) continue;
    ASSERT_EQ(m.frame[i], before[i]) << "byte " << i << " changed";
  }
}

TEST(MarkDscp, IPv4SetsDscpAndKeepsChecksumValid) {
  Bytes f = PacketBuilder().ipv4("192.0.2.1", "198.51.100.2").udp(1000, 53).payload(20).build();
  Marked m = parse_and_mark(f, 46);
  expect_ipv4_marked(f, m, 14, 46);
  EXPECT_EQ(m.frame[15], 46 << 2);
  EXPECT_NE(get16(m.frame, 24), get16(f, 24));

  // The parser sees the new DSCP and nothing else different.
  ParsedFrame before = parse_frame(f.data(), uint32_t(f.size()));
  ParsedFrame after = parse_frame(m.frame.data(), uint32_t(m.frame.size()));
  ASSERT_EQ(after.status, FrameStatus::ok);
  EXPECT_EQ(after.dscp, 46);
  EXPECT_EQ(after.src, before.src);
  EXPECT_EQ(after.dst_port, before.dst_port);
}

TEST(MarkDscp, IPv4KeepsEcnBits) {
  for (uint8_t ecn = 0; ecn < 4; ++ecn) {
    for (uint8_t dscp : {0, 10, 46, 63}) {
      SCOPED_TRACE(::testing::Message() << "ecn " << int(ecn) << " dscp " << int(dscp));
      Bytes f = PacketBuilder().ipv4("10.0.0.1", "10.0.0.2", 18).tcp(1, 2).build();
      set_tos(f, 14, uint8_t(18 << 2 | ecn));
      Marked m = parse_and_mark(f, dscp);
      expect_ipv4_marked(f, m, 14, dscp);
      EXPECT_EQ(m.frame[15], dscp << 2 | ecn);
    }
  }
}

TEST(MarkDscp, IPv4ChecksumMatchesRecomputationForEveryTosAndDscp) {
  Bytes f = PacketBuilder().ipv4("172.16.5.4", "10.200.0.9").udp(9, 9).build();
  for (int tos = 0; tos < 256; ++tos) {
    set_tos(f, 14, uint8_t(tos));
    for (uint8_t dscp = 0; dscp < 64; ++dscp) {
      Marked m = parse_and_mark(f, dscp);
      ASSERT_TRUE(m.ok);
      ASSERT_EQ(get16(m.frame, 24), recomputed_checksum(m.frame, 14)) << "tos " << tos << " dscp " << int(dscp);
    }
  }
}

// Sweeping the identification field walks the checksum through (nearly) all 65536 values,
// including 0x0000, where a careless incremental update (RFC 1141, RFC 1624 eqn. 2) yields
// 0xffff instead.
TEST(MarkDscp, IPv4ChecksumCorrectAcrossAllChecksumValues) {
  Bytes f = PacketBuilder().ipv4("10.1.1.1", "10.2.2.2").ipv4_options(8).proto(47).payload(4).build();
  const std::pair<uint8_t, uint8_t> tos_then_dscp[] = {{0xb9, 46}, {0x03, 0}, {0x00, 63}};
  for (auto [tos, dscp] : tos_then_dscp) {
    bool saw_zero_before = false, saw_zero_after = false;
    for (uint32_t id = 0; id < 65536; ++id) {
      put16(f, 14 + 4, uint16_t(id));
      set_tos(f, 14, tos);
      saw_zero_before |= get16(f, 24) == 0;
      Marked m = parse_and_mark(f, dscp);
      ASSERT_TRUE(m.ok);
      ASSERT_EQ(get16(m.frame, 24), recomputed_checksum(m.frame, 14)) << "id " << id;
      saw_zero_after |= get16(m.frame, 24) == 0;
    }
    EXPECT_TRUE(saw_zero_before) << int(tos);
    EXPECT_TRUE(saw_zero_after) << int(tos);
  }
}

TEST(MarkDscp, IPv4WithOptions) {
  Bytes f = PacketBuilder().ipv4("10.0.0.1", "10.0.0.2", 1).ipv4_options(40).udp(1, 2).build();
  expect_ipv4_marked(f, parse_and_mark(f, 34), 14, 34);
}

TEST(MarkDscp, IPv4BadChecksumIsNotRepaired) {
  Bytes f = PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").udp(1, 2).build();
  put16(f, 24, uint16_t(get16(f, 24) ^ 0x0101));
  Marked m = parse_and_mark(f, 40);
  ASSERT_TRUE(m.ok);
  EXPECT_EQ(m.frame[15], 40 << 2);
  EXPECT_NE(PacketBuilder::ipv4_checksum(m.frame.data() + 14, 20), 0) << "checksum silently fixed";
}

TEST(MarkDscp, SameDscpChangesNothing) {
  Bytes f = PacketBuilder().ipv4("10.0.0.1", "10.0.0.2", 12).udp(1, 2).build();
  Marked m = parse_and_mark(f, 12);
  EXPECT_TRUE(m.ok);
  EXPECT_EQ(m.frame, f);
}

TEST(MarkDscp, IPv6TrafficClass) {
  Bytes f = PacketBuilder().ipv6("2001:db8::1", "2001:db8::2", 0).udp(1, 2).payload(8).build();
  // Flow label all ones and ECN 0b10: both must survive.
  f[15] = uint8_t(0x2f);
  f[16] = 0xff;
  f[17] = 0xff;
  for (uint8_t dscp : {0, 1, 2, 3, 4, 46, 63}) {
    SCOPED_TRACE(int(dscp));
    Marked m = parse_and_mark(f, dscp);
    ASSERT_TRUE(m.ok);
    const uint32_t word = uint32_t(m.frame[14]) << 24 | uint32_t(m.frame[15]) << 16 | get16(m.frame, 16);
    EXPECT_EQ(word >> 28, 6u) << "version";
    EXPECT_EQ((word >> 22) & 0x3f, dscp);
    EXPECT_EQ((word >> 20) & 0x3, 0x2u) << "ECN";
    EXPECT_EQ(word & 0xfffff, 0xfffffu) << "flow label";
    for (size_t i = 16; i < f.size(); ++i) ASSERT_EQ(m.frame[i], f[i]) << "byte " << i;
    EXPECT_EQ(parse_frame(m.frame.data(), uint32_t(m.frame.size())).dscp, dscp);
  }
}

TEST(MarkDscp, VlanTaggedFrames) {
  Bytes v4 = PacketBuilder().vlan(10).ipv4("10.0.0.1", "10.0.0.2", 3).tcp(1, 2).build();
  expect_ipv4_marked(v4, parse_and_mark(v4, 26), 18, 26);

  Bytes q4 = PacketBuilder().vlan(10).vlan(20).ipv4("10.0.0.1", "10.0.0.2").udp(1, 2).build();
  expect_ipv4_marked(q4, parse_and_mark(q4, 48), 22, 48);

  Bytes q6 = PacketBuilder().vlan(10).vlan(20).ipv6("::1", "::2", 5).udp(1, 2).build();
  Marked m = parse_and_mark(q6, 40);
  ASSERT_TRUE(m.ok);
  ParsedFrame pf = parse_frame(m.frame.data(), uint32_t(m.frame.size()));
  EXPECT_EQ(pf.dscp, 40);
  EXPECT_EQ(pf.inner_vlan, 20);
  for (size_t i = 0; i < 22; ++i) EXPECT_EQ(m.frame[i], q6[i]) << "tag byte " << i;
}

TEST(MarkDscp, FragmentsAreMarkedToo) {
  Bytes f = PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").ipv4_fragment(50, false).proto(17).payload(3).build();
  expect_ipv4_marked(f, parse_and_mark(f, 10), 14, 10);
}

TEST(MarkDscp, RefusesNonIPAndMalformedFrames) {
  Bytes arp = PacketBuilder().ethertype(0x0806).payload(28).build();
  Marked m = parse_and_mark(arp, 46);
  EXPECT_FALSE(m.ok);
  EXPECT_EQ(m.frame, arp);

  Bytes bad = PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").udp(1, 2).build();
  bad[14] = 0x44;  // IHL 4
  m = parse_and_mark(bad, 46);
  EXPECT_FALSE(m.ok);
  EXPECT_EQ(m.frame, bad);

  Bytes cut = PacketBuilder().ipv6("::1", "::2").udp(1, 2).build();
  cut.resize(cut.size() - 1);
  m = parse_and_mark(cut, 46);
  EXPECT_FALSE(m.ok);
  EXPECT_EQ(m.frame, cut);
}

TEST(MarkDscp, RefusesDscpAbove63) {
  Bytes f = PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").udp(1, 2).build();
  Marked m = parse_and_mark(f, 64);
  EXPECT_FALSE(m.ok);
  EXPECT_EQ(m.frame, f);
}

TEST(MarkDscp, RefusesAParseOfAnotherFrame) {
  Bytes v4 = PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").udp(1, 2).build();
  Bytes v6 = PacketBuilder().ipv6("::1", "::2").udp(1, 2).build();
  const ParsedFrame pf4 = parse_frame(v4.data(), uint32_t(v4.size()));
  ASSERT_EQ(pf4.ip_version, 4);

  // Same length, wrong IP version in the bytes.
  Bytes six = v6;
  six.resize(v4.size());
  EXPECT_FALSE(mark_dscp(six.data(), uint32_t(six.size()), pf4, 46));
  EXPECT_EQ(six, Bytes(v6.begin(), v6.begin() + long(v4.size())));

  // Different length.
  Bytes longer = v4;
  longer.push_back(0);
  EXPECT_FALSE(mark_dscp(longer.data(), uint32_t(longer.size()), pf4, 46));

}

// A `pf` whose IP header would run past the frame end, at a byte that looks like an IP
// version nibble, must not be written through (ASan catches the write if it is).
TEST(MarkDscp, RefusesAnIPHeaderThatWouldEndPastTheFrame) {
  for (uint8_t version_byte : {0x45, 0x60}) {
    SCOPED_TRACE(int(version_byte));
    const Bytes f = PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").udp(1, 2).payload(60, version_byte).build();
    const size_t n = f.size();
    auto buf = std::make_unique<uint8_t[]>(n);
    std::copy_n(f.data(), n, buf.get());
    ParsedFrame lying = parse_frame(buf.get(), uint32_t(n));
    ASSERT_EQ(lying.status, FrameStatus::ok);
    lying.ip_version = version_byte >> 4;
    const size_t header_len = lying.ip_version == 4 ? 20 : 40;
    for (size_t room : {size_t(1), header_len / 2, header_len - 1}) {
      lying.l3_offset = uint16_t(n - room);
      EXPECT_FALSE(mark_dscp(buf.get(), uint32_t(n), lying, 46)) << room;
    }
    lying.l3_offset = uint16_t(n + 1);
    EXPECT_FALSE(mark_dscp(buf.get(), uint32_t(n), lying, 46));
    EXPECT_EQ(Bytes(buf.get(), buf.get() + n), f);
  }
}

TEST(MarkDscp, RandomValidFramesStayValid) {
  std::mt19937 rng(99);
  for (int i = 0; i < 2000; ++i) {
    PacketBuilder b;
    for (uint32_t tags = rng() % 3; tags > 0; --tags) b.vlan(uint16_t(rng() % 4096));
    const bool v6 = rng() & 1;
    const uint8_t old_dscp = uint8_t(rng() % 64), dscp = uint8_t(rng() % 64);
    if (v6) {
      b.ipv6("2001:db8::" + std::to_string(rng() % 10000), "2001:db8::1", old_dscp);
    } else {
      b.ipv4("10.0." + std::to_string(rng() % 256) + "." + std::to_string(rng() % 256), "10.0.0.1", old_dscp);
      b.ipv4_options(4 * (rng() % 11));
    }
    Bytes f = b.udp(uint16_t(rng()), uint16_t(rng())).payload(rng() % 64).build();
    Marked m = parse_and_mark(f, dscp);
    ASSERT_TRUE(m.ok) << i;
    const ParsedFrame before = parse_frame(f.data(), uint32_t(f.size()));
    const ParsedFrame after = parse_frame(m.frame.data(), uint32_t(m.frame.size()));
    ASSERT_EQ(after.status, FrameStatus::ok) << i;
    EXPECT_EQ(after.dscp, dscp) << i;
    EXPECT_EQ(after.src, before.src) << i;
    EXPECT_EQ(after.src_port, before.src_port) << i;
    if (!v6) {
      const size_t l3 = before.l3_offset;
      ASSERT_EQ(PacketBuilder::ipv4_checksum(m.frame.data() + l3, ihl_bytes(m.frame, l3)), 0) << i;
    }
  }
}

}  // namespace
}  // namespace sluice
