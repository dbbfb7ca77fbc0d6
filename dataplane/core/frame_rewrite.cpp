// DSCP marking. Called per marked packet on the dataplane's hot path: no allocation, and it
// touches only the bytes it must (two in the IPv6 header, three in the IPv4 one).
#include "frame_rewrite.hpp"

namespace sluice {
namespace {

constexpr uint8_t kMaxDscp = 63;
constexpr uint8_t kEcnMask = 0x03;
constexpr uint32_t kIPv4MinHeaderLen = 20;
constexpr uint32_t kIPv6HeaderLen = 40;

inline uint16_t load_be16(const uint8_t* p) { return uint16_t(p[0] << 8 | p[1]); }

inline void store_be16(uint8_t* p, uint16_t v) {
  p[0] = uint8_t(v >> 8);
  p[1] = uint8_t(v);
}

// RFC 1624 eqn. 3: HC' = ~(~HC + ~m + m'). Unlike eqn. 2 it never produces 0xffff for a
// header whose full recomputation would give 0x0000.
inline uint16_t checksum_update16(uint16_t check, uint16_t old_word, uint16_t new_word) {
  uint32_t sum = uint32_t(uint16_t(~check)) + uint16_t(~old_word) + new_word;
  sum = (sum & 0xffff) + (sum >> 16);  // at most 0x2fffd before, 0xffff + carry after
  sum = (sum & 0xffff) + (sum >> 16);
  return uint16_t(~sum);
}

void mark_ipv4(uint8_t* ip, uint8_t dscp) {
  const uint8_t tos = uint8_t(dscp << 2 | (ip[1] & kEcnMask));
  if (tos == ip[1]) return;  // leave even a -0/+0 checksum spelling as it was
  // TOS shares its checksum word with version/IHL (byte 0).
  const uint16_t old_word = load_be16(ip);
  ip[1] = tos;
  store_be16(ip + 10, checksum_update16(load_be16(ip + 10), old_word, load_be16(ip)));
}

// Version (4 bits), traffic class (8), flow label (20): DSCP is the low nibble of byte 0 and
// the top two bits of byte 1; ECN and the flow label's top nibble share byte 1.
void mark_ipv6(uint8_t* ip, uint8_t dscp) {
  ip[0] = uint8_t((ip[0] & 0xf0) | dscp >> 2);
  ip[1] = uint8_t((ip[1] & 0x3f) | (dscp & 0x03) << 6);
}

}  // namespace

bool mark_dscp(uint8_t* frame, uint32_t len, const ParsedFrame& pf, uint8_t dscp) {
  // Re-check what the parser established, cheaply: a stale or foreign `pf` must not let us
  // write outside the frame or into something that is not an IP header.
  // `frame` may hold only a prefix of the frame (pf.parsed_len bytes): the IP header is in it.
  if (pf.status != FrameStatus::ok || dscp > kMaxDscp || len != pf.frame_len ||
      pf.parsed_len > len || pf.l3_offset > pf.parsed_len)
    return false;
  uint8_t* ip = frame + pf.l3_offset;
  const uint32_t room = pf.parsed_len - pf.l3_offset;
  if (pf.ip_version == 4 && room >= kIPv4MinHeaderLen && ip[0] >> 4 == 4) {
    mark_ipv4(ip, dscp);
    return true;
  }
  if (pf.ip_version == 6 && room >= kIPv6HeaderLen && ip[0] >> 4 == 6) {
    mark_ipv6(ip, dscp);
    return true;
  }
  return false;
}

}  // namespace sluice
