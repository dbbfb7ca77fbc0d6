// What the parser extracts from one Ethernet frame. Offsets are from the frame start; the
// parser never reads past `len` bytes, so every field here is either valid or absent.
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
  uint32_t frame_len = 0;
  const char* malformed_reason = nullptr;  // static string, set when malformed
};

// Parses an Ethernet frame: Ethernet II, 802.1Q / 802.1ad (QinQ, at most two tags), IPv4
// (IHL and total-length checks, fragments), IPv6 with a bounded walk over extension
// headers, TCP/UDP/SCTP ports, ICMP/ICMPv6. Never reads outside [data, data+len).
ParsedFrame parse_frame(const uint8_t* data, uint32_t len);
// The same, into the caller's ParsedFrame: the hot path parses straight into its burst array
// instead of copying a returned 72-byte struct (a store-forwarding stall per packet).
void parse_frame_into(const uint8_t* data, uint32_t len, ParsedFrame& pf);
// The general walk alone, without the straight-line path parse_frame_into() takes for plain
// IPv4 TCP/UDP frames: tests hold the two to the same results.
void parse_frame_general(const uint8_t* data, uint32_t len, ParsedFrame& pf);

}  // namespace sluice
