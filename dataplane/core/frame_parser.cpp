// Ethernet frame parser (SPEC §6). This runs once per packet on the dataplane's hot path, so it
// allocates nothing, throws nothing and keeps to straight-line bounds checks. Every read is
// preceded by a check against the bytes at hand (`len`, a prefix of the frame when an mbuf
// chain holds the rest); lengths the headers claim (IPv4 total length, IPv6 payload length)
// are checked against the frame's wire length. So hostile input can only ever turn into
// FrameStatus::malformed, and a header that lies in the frame but past the bytes at hand says
// so (kHeadersPastBytesAtHand) for the caller to hand over more.
#include <algorithm>
#include <cstring>

#include "frame.hpp"
#include "frame_fast_v4.hpp"

namespace sluice {
namespace {

constexpr uint32_t kEthHeaderLen = 14;
constexpr uint32_t kEtherTypeOffset = 12;
constexpr uint32_t kVlanTagLen = 4;
constexpr uint8_t kMaxVlanTags = 2;
constexpr uint32_t kIPv4MinHeaderLen = 20;
constexpr uint32_t kIPv6HeaderLen = 40;
// Every IPv6 extension header we walk is at least 8 bytes long (RFC 8200 §4; AH: RFC 4302).
constexpr uint32_t kIPv6MinExtLen = 8;
// Bounds the walk so a chain of tiny headers cannot make one packet cost more than a few
// cache lines; real traffic rarely carries more than two or three.
constexpr int kMaxIPv6ExtHeaders = 8;

constexpr uint16_t kEtherTypeIPv4 = 0x0800;
constexpr uint16_t kEtherTypeIPv6 = 0x86dd;
constexpr uint16_t kTpid8021Q = 0x8100;
constexpr uint16_t kTpid8021ad = 0x88a8;

constexpr uint16_t kIPv4MoreFragments = 0x2000;
constexpr uint16_t kIPv4FragOffsetMask = 0x1fff;

namespace proto {
constexpr uint8_t hop_by_hop = 0;
constexpr uint8_t icmp = 1;
constexpr uint8_t tcp = 6;
constexpr uint8_t udp = 17;
constexpr uint8_t routing = 43;
constexpr uint8_t fragment = 44;
constexpr uint8_t ah = 51;
constexpr uint8_t icmpv6 = 58;
constexpr uint8_t dest_opts = 60;
constexpr uint8_t sctp = 132;
}  // namespace proto

inline uint16_t load_be16(const uint8_t* p) { return uint16_t(p[0] << 8 | p[1]); }

// The frame as the parser sees it: `len` contiguous bytes at `data` of a frame `wire` bytes
// long (len <= wire).
struct Bytes {
  const uint8_t* data;
  uint32_t len;
  uint32_t wire;

  // Why a header ending at frame offset `end` cannot be read: `reason` if the frame itself
  // is too short, else because only a prefix of it is at hand.
  const char* short_of(uint32_t end, const char* reason) const {
    return end > wire ? reason : kHeadersPastBytesAtHand;
  }
};

inline bool is_vlan_tpid(uint16_t type) { return type == kTpid8021Q || type == kTpid8021ad; }

// ESP (50) is deliberately absent: its payload is encrypted, so it ends the walk as the L4
// protocol. No Next Header (59) likewise ends it.
inline bool is_ipv6_ext(uint8_t nh) {
  return nh == proto::hop_by_hop || nh == proto::routing || nh == proto::fragment ||
         nh == proto::dest_opts || nh == proto::ah;
}

inline bool carries_ports(uint8_t p) { return p == proto::tcp || p == proto::udp || p == proto::sctp; }

// Bytes of L4 header that must be present for the packet to count as well formed; 0 for
// protocols whose header we never look into.
inline uint32_t min_l4_header_len(uint8_t p) {
  switch (p) {
    case proto::tcp: return 20;
    case proto::udp: return 8;
    case proto::sctp: return 12;   // common header: ports, verification tag, checksum
    case proto::icmp:
    case proto::icmpv6: return 4;  // type, code, checksum
    default: return 0;
  }
}

// The helpers below return nullptr on success or a static reason for SPEC §6 "malformed".

// `l4` and `ip_end` are frame offsets with l4 <= ip_end <= wire length. Only called for
// packets that start with their L4 header: unfragmented ones and first fragments.
const char* parse_l4(const Bytes& b, uint32_t l4, uint32_t ip_end, ParsedFrame& pf) {
  const uint32_t l4_len = min_l4_header_len(pf.proto);
  if (ip_end - l4 < l4_len) return "truncated L4 header";
  if (l4 + l4_len > b.len) return kHeadersPastBytesAtHand;
  const uint8_t* data = b.data;
  pf.has_l4 = true;
  pf.l4_offset = uint16_t(l4);  // at most 22 + 40 + 8 * 2048 (IPv6 walk bound): fits
  if (carries_ports(pf.proto)) {
    pf.has_ports = true;
    pf.src_port = load_be16(data + l4);
    pf.dst_port = load_be16(data + l4 + 2);
  }
  return nullptr;
}

const char* parse_ipv4(const Bytes& b, uint32_t l3, ParsedFrame& pf) {
  if (b.len - l3 < kIPv4MinHeaderLen) return b.short_of(l3 + kIPv4MinHeaderLen, "truncated IPv4 header");
  const uint8_t* ip = b.data + l3;
  if ((ip[0] >> 4) != 4) return "IPv4 ethertype with bad IP version";
  const uint32_t header_len = (ip[0] & 0x0fu) * 4;
  if (header_len < kIPv4MinHeaderLen) return "IPv4 IHL below 5";
  if (header_len > b.len - l3) return b.short_of(l3 + header_len, "IPv4 header past frame");
  const uint32_t total_len = load_be16(ip + 2);
  if (total_len < header_len) return "IPv4 total length below header length";
  // Bytes past total_len are Ethernet padding (minimum frame size): allowed, and ignored.
  if (total_len > b.wire - l3) return "IPv4 total length past frame";

  pf.ip_version = 4;
  pf.dscp = uint8_t(ip[1] >> 2);
  pf.proto = ip[9];
  std::memcpy(pf.src.data(), ip + 12, 4);
  std::memcpy(pf.dst.data(), ip + 16, 4);

  const uint16_t frag = load_be16(ip + 6);
  const uint16_t frag_offset = frag & kIPv4FragOffsetMask;
  pf.is_fragment = (frag & (kIPv4MoreFragments | kIPv4FragOffsetMask)) != 0;
  pf.is_first_fragment = pf.is_fragment && frag_offset == 0;
  // A non-first fragment carries no L4 header; SPEC §6 keys it by addresses only.
  if (frag_offset != 0) return nullptr;
  return parse_l4(b, l3 + header_len, l3 + total_len, pf);
}

const char* parse_ipv6(const Bytes& b, uint32_t l3, ParsedFrame& pf) {
  if (b.len - l3 < kIPv6HeaderLen) return b.short_of(l3 + kIPv6HeaderLen, "truncated IPv6 header");
  const uint8_t* ip = b.data + l3;
  if ((ip[0] >> 4) != 6) return "IPv6 ethertype with bad IP version";
  // Jumbograms (payload length 0 + hop-by-hop option) cannot occur on Ethernet; a zero length
  // simply means an empty payload here.
  const uint32_t ip_end = l3 + kIPv6HeaderLen + load_be16(ip + 4);
  if (ip_end > b.wire) return "IPv6 payload length past frame";

  pf.ip_version = 6;
  // Traffic class straddles bytes 0 and 1; DSCP is its top six bits.
  pf.dscp = uint8_t((ip[0] & 0x0fu) << 2 | ip[1] >> 6);
  std::memcpy(pf.src.data(), ip + 8, 16);
  std::memcpy(pf.dst.data(), ip + 24, 16);

  uint8_t nh = ip[6];
  uint32_t off = l3 + kIPv6HeaderLen;
  for (int i = 0; i < kMaxIPv6ExtHeaders && is_ipv6_ext(nh); ++i) {
    if (ip_end - off < kIPv6MinExtLen) return "IPv6 extension header past packet";
    if (off + kIPv6MinExtLen > b.len) return kHeadersPastBytesAtHand;
    const uint8_t* ext = b.data + off;
    uint32_t ext_len = nh == proto::ah ? (ext[1] + 2u) * 4 : (ext[1] + 1u) * 8;
    if (nh == proto::fragment) {
      const uint16_t frag_offset = load_be16(ext + 2) >> 3;
      pf.is_fragment = true;  // even an "atomic" fragment (offset 0, M clear) was fragmented
      pf.is_first_fragment = frag_offset == 0;
      if (frag_offset != 0) {  // the rest of the chain and the L4 header are in fragment 0
        pf.proto = ext[0];
        return nullptr;
      }
      ext_len = kIPv6MinExtLen;  // its second byte is reserved, not a length
    }
    if (ext_len > ip_end - off) return "IPv6 extension header past packet";
    nh = ext[0];
    off += ext_len;
  }
  if (is_ipv6_ext(nh)) return "too many IPv6 extension headers";
  pf.proto = nh;
  return parse_l4(b, off, ip_end, pf);
}

// Walks the Ethernet header and up to two VLAN tags (802.1Q, or QinQ with an 802.1ad or
// 802.1Q outer tag), then dispatches on the inner ethertype.
const char* parse_ethernet(const Bytes& b, ParsedFrame& pf) {
  if (b.len < kEthHeaderLen) return b.short_of(kEthHeaderLen, "short Ethernet frame");
  const uint8_t* data = b.data;
  uint32_t type_off = kEtherTypeOffset;  // offset of the current TPID / ethertype field
  uint16_t type = load_be16(data + type_off);
  while (is_vlan_tpid(type)) {
    if (pf.vlan_count == kMaxVlanTags) return "more than two VLAN tags";
    // The tag's TCI and the following ethertype must both be in the frame.
    if (b.len - type_off < 2 + kVlanTagLen)
      return b.short_of(type_off + 2 + kVlanTagLen, "truncated VLAN tag");
    const uint16_t vid = load_be16(data + type_off + 2) & 0x0fff;
    if (pf.vlan_count == 0) {
      pf.outer_vlan = vid;
    } else {
      pf.inner_vlan = vid;
    }
    ++pf.vlan_count;
    type_off += kVlanTagLen;
    type = load_be16(data + type_off);
  }
  const uint32_t l3 = type_off + 2;
  pf.l3_offset = uint16_t(l3);
  switch (type) {
    case kEtherTypeIPv4: return parse_ipv4(b, l3, pf);
    case kEtherTypeIPv6: return parse_ipv6(b, l3, pf);
    default: return nullptr;  // ARP, LLDP, ...: fine, just not IP
  }
}


// The frame most traffic is (frame_fast_v4.hpp), parsed in straight-line code into a
// ParsedFrame; anything else (and any length that does not add up) goes to the general walk.
bool parse_common_ipv4(const Bytes& b, ParsedFrame& pf) {
  Ipv4Fields f;
  if (!parse_common_ipv4_fields(b.data, b.len, b.wire, f)) return false;
  pf.ip_version = 4;
  pf.l3_offset = uint16_t(kEthHeaderLen);
  pf.l4_offset = uint16_t(kEthHeaderLen + kIPv4MinHeaderLen);
  pf.proto = f.proto;
  pf.dscp = f.dscp();
  pf.has_ports = true;
  pf.has_l4 = true;
  pf.src_port = f.src_port();
  pf.dst_port = f.dst_port();
  const uint32_t src = f.src(), dst = f.dst();
  std::memcpy(pf.src.data(), &src, 4);
  std::memcpy(pf.dst.data(), &dst, 4);
  pf.match_word = match_word_of(f);
  return true;
}

}  // namespace

const char kHeadersPastBytesAtHand[] = "headers past the bytes at hand";

void parse_frame_general(const uint8_t* data, uint32_t len, uint32_t wire_len, ParsedFrame& pf) {
  const Bytes b{data, len, std::max(len, wire_len)};
  pf = ParsedFrame{};
  pf.frame_len = b.wire;
  pf.parsed_len = b.len;
  if (const char* reason = parse_ethernet(b, pf)) [[unlikely]] {
    // Start from a clean frame so nobody can classify on half-parsed fields.
    pf = ParsedFrame{};
    pf.status = FrameStatus::malformed;
    pf.frame_len = b.wire;
    pf.parsed_len = b.len;
    pf.malformed_reason = reason;
  }
  pf.match_word = match_word::of(pf);
}

void parse_frame_into(const uint8_t* data, uint32_t len, uint32_t wire_len, ParsedFrame& pf) {
  const Bytes b{data, len, std::max(len, wire_len)};
  pf = ParsedFrame{};
  pf.frame_len = b.wire;
  pf.parsed_len = b.len;
  if (!parse_common_ipv4(b, pf)) parse_frame_general(data, len, wire_len, pf);
}

bool frame_is_well_formed(const uint8_t* data, uint32_t len, uint32_t wire_len) {
  Ipv4Fields f;
  if (parse_common_ipv4_fields(data, len, std::max(len, wire_len), f)) [[likely]] return true;
  ParsedFrame pf;
  parse_frame_general(data, len, wire_len, pf);
  return pf.status == FrameStatus::ok;
}

ParsedFrame parse_frame(const uint8_t* data, uint32_t len, uint32_t wire_len) {
  ParsedFrame pf;
  parse_frame_into(data, len, wire_len, pf);
  return pf;
}

}  // namespace sluice
