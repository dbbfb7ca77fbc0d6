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
  uint32_t src = 0, dst = 0;  // as loaded from the wire (ParsedFrame::src's first 4 bytes)
  uint16_t src_port = 0, dst_port = 0;  // host byte order
  uint8_t proto = 0;                    // 6 or 17
  uint8_t dscp = 0;
};

namespace frame_fast_detail {
inline constexpr uint32_t kL3 = 14, kL4 = 14 + 20;
inline constexpr bool kLittle = std::endian::native == std::endian::little;
// Bytes as loaded: a word of the frame compared against wire-order constants, one load each.
using unaligned::load16;
using unaligned::load32;
inline uint16_t be16(uint16_t loaded) { return kLittle ? __builtin_bswap16(loaded) : loaded; }
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
  if (len < kL4 + 8) return false;
  // Only now: an empty frame may come with no buffer at all, and null + 14 is undefined.
  const uint8_t* ip = data + kL3;
  const uint32_t type_ihl_tos = load32(data + 12);
  if ((type_ihl_tos & kIpv4Ihl5Mask) != kIpv4Ihl5) return false;
  const uint32_t total_len = be16(load16(ip + 2));
  const uint8_t proto = ip[9];
  uint32_t l4_len;
  if (proto == 17) {
    l4_len = 8;
  } else if (proto == 6) {
    l4_len = 20;
  } else {
    return false;
  }
  if (total_len > wire - kL3 || total_len < 20 + l4_len || len < kL4 + l4_len) return false;
  if ((load16(ip + 6) & kFragmentBits) != 0) return false;  // a fragment
  f.proto = proto;
  f.dscp = uint8_t(ip[1] >> 2);
  std::memcpy(&f.src, ip + 12, 4);
  std::memcpy(&f.dst, ip + 16, 4);
  f.src_port = be16(load16(data + kL4));
  f.dst_port = be16(load16(data + kL4 + 2));
  return true;
}

// ParsedFrame::match_word of a common IPv4 frame.
inline uint64_t match_word_of(const Ipv4Fields& f) {
  return match_word::kIsIp | match_word::kHasPorts | uint64_t{4} << match_word::kVersionShift |
         uint64_t(f.proto) << match_word::kProtoShift |
         uint64_t(f.dscp) << match_word::kDscpShift;
}

}  // namespace sluice
