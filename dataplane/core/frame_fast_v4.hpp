// The frame most traffic is: untagged IPv4 without options, not a fragment, TCP or UDP with
// its whole header inside the packet. These checks and field reads are the parser's
// straight-line path (frame_parser.cpp builds its ParsedFrame from them) and the burst
// pipeline's, which keeps only the fields a rule can use instead of a whole ParsedFrame. Any
// frame they refuse goes to the general walk, which gives the same result for the frames they
// take (tests/unit/frame_parser_test.cpp checks both on the same inputs).
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>

#include "frame.hpp"
#include "unaligned_load.hpp"

namespace sluice {

// The fields of a common IPv4 frame; everything else about it is fixed: version 4, no VLAN,
// L3 at 14, L4 at 34, ports present, not a fragment.
struct Ipv4Fields {
  // The source and destination addresses as one load of their 8 bytes: on a little-endian
  // machine the flow key's address word as it is (flow_key.hpp).
  uint64_t addrs = 0;
  // Source port | destination port << 16, host byte order: as the flow key holds them
  // (flow_key.hpp), from one load and two instructions instead of two loads and two swaps.
  uint32_t ports = 0;
  uint8_t proto = 0;  // 6 or 17
  uint8_t tos = 0;    // DSCP and ECN, as on the wire
  uint8_t dscp() const { return uint8_t(tos >> 2); }
  // Each address as a 4-byte load from the wire gives it (ParsedFrame::src's first 4 bytes):
  // the first 4 of 8 loaded bytes are the low half of a little-endian word.
  static constexpr bool kLittle = std::endian::native == std::endian::little;
  uint32_t src() const { return uint32_t(kLittle ? addrs : addrs >> 32); }
  uint32_t dst() const { return uint32_t(kLittle ? addrs >> 32 : addrs); }
  uint16_t src_port() const { return uint16_t(ports); }
  uint16_t dst_port() const { return uint16_t(ports >> 16); }
};

namespace frame_fast_detail {
inline constexpr uint32_t kL3 = 14, kL4 = 14 + 20;
inline constexpr bool kLittle = std::endian::native == std::endian::little;
// Bytes as loaded: a word of the frame compared against wire-order constants, one load each.
using unaligned::load16;
using unaligned::load32;
inline uint16_t be16(uint16_t loaded) { return kLittle ? __builtin_bswap16(loaded) : loaded; }
// Two wire-order 16-bit fields loaded as one word -> first | second << 16, host order: on a
// little-endian load a byte swap gives second | first << 16, and the rotation puts them back.
inline uint32_t be16_pair(uint32_t loaded) {
  return std::rotl(kLittle ? __builtin_bswap32(loaded) : loaded, 16);
}
// Bytes 12-14: ethertype 0x0800 and version 4 / IHL 5 (0x45), as a load of bytes 12-15 shows
// them, and the mask that keeps those three.
inline constexpr uint32_t kIpv4Ihl5 = kLittle ? 0x00450008u : 0x08004500u;
inline constexpr uint32_t kIpv4Ihl5Mask = kLittle ? 0x00ffffffu : 0xffffff00u;
// The flags and fragment offset word's more-fragments flag and offset, as loaded.
inline constexpr uint16_t kFragmentBits = kLittle ? 0xff3fu : 0x3fffu;
}  // namespace frame_fast_detail

// Whether the frame of `wire` bytes (wire >= len), of which `len` are at `data`, is a common
// IPv4 frame; if so, its fields.
[[gnu::always_inline]] inline bool parse_common_ipv4_fields(const uint8_t* data, uint32_t len,
                                                            uint32_t wire, Ipv4Fields& f) {
  using namespace frame_fast_detail;
  if (len < kL4 + 8) return false;  // a UDP header's end
  // Only now: an empty frame may come with no buffer at all, and null + 14 is undefined.
  const uint8_t* ip = data + kL3;
  const uint32_t type_ihl_tos = load32(data + 12);
  if ((type_ihl_tos & kIpv4Ihl5Mask) != kIpv4Ihl5) return false;
  const uint32_t total_len = be16(load16(ip + 2));
  const uint8_t proto = ip[9];
  // The L4 header inside the IP packet and inside the bytes at hand (UDP's by the first check).
  if (proto == 17) {
    if (total_len < 20 + 8) return false;
  } else if (proto == 6) {
    if (total_len < 20 + 20 || len < kL4 + 20) return false;
  } else {
    return false;
  }
  if (total_len > wire - kL3) return false;
  if ((load16(ip + 6) & kFragmentBits) != 0) return false;  // a fragment
  f.proto = proto;
  f.tos = ip[1];
  f.addrs = unaligned::load64(ip + 12);
  f.ports = be16_pair(load32(data + kL4));
  return true;
}

// ParsedFrame::match_word of a common IPv4 frame, in two parts: what every such frame has
// (IP version 4, ports, no VLAN), and what varies between them (protocol and DSCP): the
// word's 16 bits from kVaryingShift, shifted down.
inline constexpr uint64_t kCommonIpv4MatchWord =
    match_word::kIsIp | match_word::kHasPorts | uint64_t{4} << match_word::kVersionShift;
inline constexpr unsigned kVaryingShift = match_word::kProtoShift;
static_assert(match_word::kDscpShift + 6 <= kVaryingShift + 16);
// The DSCP's place in those 16 bits: just above the protocol's byte, which tos_varying()
// relies on.
inline constexpr unsigned kVaryingDscp = match_word::kDscpShift - kVaryingShift;
static_assert(kVaryingDscp == 8);
inline uint32_t match_word_varying(const Ipv4Fields& f) {
  return uint32_t(f.proto) | uint32_t(f.dscp()) << kVaryingDscp;
}
// The same bits with the DSCP where the TOS byte has it (the ECN bits below it, which no
// mask from tos_varying_bits() covers): one shift less a frame.
inline uint32_t tos_varying(const Ipv4Fields& f) {
  return uint32_t(f.proto) | uint32_t(f.tos) << kVaryingDscp;
}
// Bits of match_word_varying() as bits of tos_varying(); the bits above the DSCP are 0 in
// both.
inline constexpr uint32_t tos_varying_bits(uint32_t varying) {
  return (varying & 0xff) | (varying >> kVaryingDscp & 0x3f) << (kVaryingDscp + 2);
}
inline uint64_t match_word_of(const Ipv4Fields& f) {
  return kCommonIpv4MatchWord | uint64_t(match_word_varying(f)) << kVaryingShift;
}

}  // namespace sluice
