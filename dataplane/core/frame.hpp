// What the parser extracts from one Ethernet frame. Offsets are from the frame start; the
// parser never reads past the `len` bytes it is given, so every field here is either valid or
// absent. Those bytes may be only a prefix of the frame (the first segment of an mbuf chain,
// or the first bytes of one gathered into a buffer): lengths the headers claim are checked
// against the frame's wire length, and costs and counters use the wire length.
#pragma once

#include <array>
#include <cstdint>

namespace sluice {

enum class FrameStatus : uint8_t {
  ok,         // parsed (IP or not)
  malformed,  // SPEC §6: counted as malformed, follows the default action
};

struct ParsedFrame {
  FrameStatus status = FrameStatus::ok;
  uint8_t ip_version = 0;  // 0: not IP (ARP, LLDP, ...), 4 or 6
  uint8_t vlan_count = 0;  // 0, 1 (802.1Q) or 2 (QinQ)
  uint16_t outer_vlan = 0; // VLAN id of the outermost tag
  uint16_t inner_vlan = 0;
  uint16_t l3_offset = 0;
  uint16_t l4_offset = 0;  // valid when has_l4
  uint8_t proto = 0;       // IPv4 protocol / IPv6 final next header
  uint8_t dscp = 0;
  bool has_ports = false;  // TCP/UDP/SCTP with the ports inside the frame
  bool has_l4 = false;
  bool is_fragment = false;
  bool is_first_fragment = false;
  uint16_t src_port = 0;   // host byte order; 0 when !has_ports (e.g. non-first fragments)
  uint16_t dst_port = 0;
  std::array<uint8_t, 16> src{};  // IPv4 in the first 4 bytes
  std::array<uint8_t, 16> dst{};
  uint32_t frame_len = 0;   // wire length: what byte rates charge and counters count
  uint32_t parsed_len = 0;  // bytes the parser had (a prefix of the frame): every header above ends within them
  const char* malformed_reason = nullptr;  // static string, set when malformed
  // The exact-match fields above packed into one word (layout: namespace match_word), which
  // the classifier compares against each rule with one mask: set by the parser, so the
  // straight-line IPv4 path builds it from constants.
  uint64_t match_word = 0;
};

// ParsedFrame::match_word. Bits 0-15 are left 0 for the classifier's ingress port.
namespace match_word {
inline constexpr unsigned kPortShift = 0;      // 16 bits: ingress port (classifier)
inline constexpr unsigned kVlanShift = 16;     // 12 bits: outer VLAN id
inline constexpr uint64_t kHasVlan = uint64_t{1} << 28;
inline constexpr uint64_t kIsIp = uint64_t{1} << 29;
inline constexpr uint64_t kHasPorts = uint64_t{1} << 30;
inline constexpr unsigned kProtoShift = 32;    // 8 bits
inline constexpr unsigned kDscpShift = 40;     // 6 bits
inline constexpr unsigned kVersionShift = 48;  // 8 bits: 4 or 6
// The word of a parsed frame's fields.
inline uint64_t of(const ParsedFrame& pf) {
  return uint64_t(pf.outer_vlan & 0xfff) << kVlanShift | (pf.vlan_count != 0 ? kHasVlan : 0) |
         (pf.ip_version != 0 ? kIsIp : 0) | (pf.has_ports ? kHasPorts : 0) |
         uint64_t(pf.proto) << kProtoShift | uint64_t(pf.dscp & 0x3f) << kDscpShift |
         uint64_t(pf.ip_version) << kVersionShift;
}
}  // namespace match_word

// The deepest the parser reads into a frame: Ethernet and two VLAN tags, IPv6 and eight
// extension headers of the largest size (2048 bytes), a TCP header. IPv4 needs at most
// 14 + 8 + 60 + 20 bytes. A caller holding only a prefix of a frame never needs to hand over
// more than this.
inline constexpr uint32_t kMaxHeaderBytes = 14 + 2 * 4 + 40 + 8 * 2048 + 20;

// The malformed_reason of a frame whose headers run past the bytes the parser was given but
// not past its wire length: with more of the frame at hand it may parse (see
// headers_past_bytes_at_hand). Compared by address.
extern const char kHeadersPastBytesAtHand[];
inline bool headers_past_bytes_at_hand(const ParsedFrame& pf) {
  return pf.malformed_reason == kHeadersPastBytesAtHand;
}

// Parses an Ethernet frame of `wire_len` bytes from its first `len` bytes at `data` (a
// `wire_len` below `len` counts as `len`): Ethernet II, 802.1Q / 802.1ad (QinQ, at most two
// tags), IPv4 (IHL and total-length checks, fragments), IPv6 with a bounded walk over
// extension headers, TCP/UDP/SCTP ports, ICMP/ICMPv6. Never reads outside [data, data+len).
ParsedFrame parse_frame(const uint8_t* data, uint32_t len, uint32_t wire_len);
inline ParsedFrame parse_frame(const uint8_t* data, uint32_t len) { return parse_frame(data, len, len); }
// The same, into the caller's ParsedFrame: the hot path parses straight into its burst array
// instead of copying a returned 80-byte struct (a store-forwarding stall per packet).
void parse_frame_into(const uint8_t* data, uint32_t len, uint32_t wire_len, ParsedFrame& pf);
// Whether parse_frame_into() would find the frame well formed (FrameStatus::ok), without
// keeping any field: for callers that need no field (no rule to classify by). Plain IPv4
// TCP/UDP frames take the straight-line checks only.
bool frame_is_well_formed(const uint8_t* data, uint32_t len, uint32_t wire_len);
// The general walk alone, without the straight-line path parse_frame_into() takes for plain
// IPv4 TCP/UDP frames: tests hold the two to the same results.
void parse_frame_general(const uint8_t* data, uint32_t len, uint32_t wire_len, ParsedFrame& pf);

}  // namespace sluice
