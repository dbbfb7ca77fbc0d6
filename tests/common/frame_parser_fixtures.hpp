// Helpers for the frame parser suites: exact-size parsing (so ASan sees any over-read),
// address literals and checks every parse result must satisfy.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "frame.hpp"
#include "packet_builder.hpp"

namespace sluice {
namespace parser_test {


using testing::PacketBuilder;
using Bytes = std::vector<uint8_t>;

// Parses the first `n` bytes of `frame` from a heap buffer of exactly `n` bytes.
inline ParsedFrame parse_exact(const Bytes& frame, size_t n) {
  auto buf = std::make_unique<uint8_t[]>(n);
  std::copy_n(frame.data(), n, buf.get());  // memcpy would get nullptr for an empty vector
  return parse_frame(buf.get(), uint32_t(n));
}
inline ParsedFrame parse_exact(const Bytes& frame) { return parse_exact(frame, frame.size()); }

inline std::array<uint8_t, 16> ip4(uint8_t a, uint8_t b, uint8_t c, uint8_t d) {
  return {a, b, c, d};
}

inline std::array<uint8_t, 16> ip6(const char* text) {
  std::array<uint8_t, 16> a{};
  EXPECT_EQ(inet_pton(AF_INET6, text, a.data()), 1) << text;
  return a;
}

inline void put16(Bytes& f, size_t at, uint16_t v) {
  f[at] = uint8_t(v >> 8);
  f[at + 1] = uint8_t(v);
}

// After editing an IPv4 header in a test, so the frame stays valid apart from the edit.
inline void fix_ipv4_checksum(Bytes& f, size_t l3) {
  const size_t ihl = (f[l3] & 0x0f) * 4u;
  put16(f, l3 + 10, 0);
  put16(f, l3 + 10, PacketBuilder::ipv4_checksum(f.data() + l3, std::min(ihl, f.size() - l3)));
}

// Invariants that hold for every parse result, whatever the input.
inline void expect_consistent(const ParsedFrame& pf, size_t len) {
  EXPECT_EQ(pf.frame_len, len);
  if (pf.status == FrameStatus::malformed) {
    EXPECT_NE(pf.malformed_reason, nullptr);
    // A malformed result carries nothing a classifier could mistake for parsed fields.
    EXPECT_EQ(pf.ip_version, 0);
    EXPECT_EQ(pf.vlan_count, 0);
    EXPECT_FALSE(pf.has_l4);
    EXPECT_FALSE(pf.has_ports);
    return;
  }
  EXPECT_EQ(pf.malformed_reason, nullptr);
  EXPECT_LE(pf.vlan_count, 2);
  EXPECT_EQ(pf.l3_offset, 14u + 4u * pf.vlan_count);
  EXPECT_LE(pf.l3_offset, len);
  EXPECT_TRUE(pf.ip_version == 0 || pf.ip_version == 4 || pf.ip_version == 6);
  EXPECT_LE(pf.dscp, 63);
  if (pf.ip_version == 0) {
    EXPECT_FALSE(pf.has_l4);
    EXPECT_FALSE(pf.is_fragment);
    EXPECT_EQ(pf.proto, 0);
  }
  if (pf.is_first_fragment) {
    EXPECT_TRUE(pf.is_fragment);
  }
  if (pf.is_fragment && !pf.is_first_fragment) {
    EXPECT_FALSE(pf.has_l4);
  }
  if (pf.has_l4) {
    EXPECT_GE(pf.l4_offset, pf.l3_offset + (pf.ip_version == 4 ? 20u : 40u));
    EXPECT_LE(pf.l4_offset, len);
  }
  if (pf.has_ports) {
    EXPECT_TRUE(pf.has_l4);
    EXPECT_TRUE(pf.proto == 6 || pf.proto == 17 || pf.proto == 132);
    EXPECT_LE(pf.l4_offset + 4u, len);
  } else {
    EXPECT_EQ(pf.src_port, 0);
    EXPECT_EQ(pf.dst_port, 0);
  }
}

inline void expect_malformed(const Bytes& f, const char* why) {
  SCOPED_TRACE(why);
  ParsedFrame pf = parse_exact(f);
  EXPECT_EQ(pf.status, FrameStatus::malformed);
  expect_consistent(pf, f.size());
}

}  // namespace parser_test
}  // namespace sluice
