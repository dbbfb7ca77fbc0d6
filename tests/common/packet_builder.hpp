// Builds Ethernet frames for tests, the trace generator and benchmarks: a layer at a time,
// then build() fills in lengths and the IPv4 header checksum. Header-only, no dependencies.
#pragma once

#include <arpa/inet.h>

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace sluice::testing {

class PacketBuilder {
 public:
  // 802.1Q tag; a second call makes QinQ (the first tag becomes 802.1ad, TPID 0x88a8).
  PacketBuilder& vlan(uint16_t id) {
    vlans_.push_back(id);
    tpids_.push_back(0);
    return *this;
  }
  // A tag with an explicit TPID, e.g. 0x8100 as the outer tag of QinQ, as some switches send.
  PacketBuilder& vlan_tpid(uint16_t id, uint16_t tpid) {
    vlans_.push_back(id);
    tpids_.push_back(tpid);
    return *this;
  }
  PacketBuilder& ipv4(const std::string& src, const std::string& dst, uint8_t dscp = 0) {
    l3_ = 4;
    if (inet_pton(AF_INET, src.c_str(), src_) != 1 || inet_pton(AF_INET, dst.c_str(), dst_) != 1)
      throw std::invalid_argument("bad IPv4 address");
    dscp_ = dscp;
    return *this;
  }
  PacketBuilder& ipv6(const std::string& src, const std::string& dst, uint8_t dscp = 0) {
    l3_ = 6;
    if (inet_pton(AF_INET6, src.c_str(), src_) != 1 || inet_pton(AF_INET6, dst.c_str(), dst_) != 1)
      throw std::invalid_argument("bad IPv6 address");
    dscp_ = dscp;
    return *this;
  }
  PacketBuilder& ttl(uint8_t v) {
    ttl_ = v;
    return *this;
  }
  PacketBuilder& udp(uint16_t sport, uint16_t dport) { return l4(17, sport, dport); }
  PacketBuilder& tcp(uint16_t sport, uint16_t dport) { return l4(6, sport, dport); }
  PacketBuilder& sctp(uint16_t sport, uint16_t dport) { return l4(132, sport, dport); }
  PacketBuilder& icmp() { return l4(l3_ == 6 ? 58 : 1, 0, 0); }
  // Any protocol number, with no L4 header of ours (payload follows the IP header).
  PacketBuilder& proto(uint8_t p) {
    proto_ = p;
    l4_kind_ = 0;
    return *this;
  }
  PacketBuilder& payload(size_t n, uint8_t fill = 0xab) {
    payload_.assign(n, fill);
    return *this;
  }
  // Pads with payload so that the whole frame is `n` bytes (if it is not already longer).
  PacketBuilder& frame_size(size_t n) {
    frame_size_ = n;
    return *this;
  }
  PacketBuilder& ethertype(uint16_t t) {
    ethertype_ = t;
    l3_ = 0;
    return *this;
  }
  // IPv4 fragment fields: offset in 8-byte units, and the More Fragments flag.
  PacketBuilder& ipv4_fragment(uint16_t offset_units, bool more_fragments) {
    if (offset_units > 0x1fff) throw std::invalid_argument("IPv4 fragment offset > 0x1fff");
    frag_field_ = uint16_t((frag_field_ & 0x4000) | (more_fragments ? 0x2000 : 0) | offset_units);
    return *this;
  }
  // The IPv4 Don't Fragment flag (which does not make a packet a fragment).
  PacketBuilder& ipv4_dont_fragment() {
    frag_field_ |= 0x4000;
    return *this;
  }
  // `n` bytes of IPv4 options (NOPs), raising the IHL: a multiple of 4, at most 40.
  PacketBuilder& ipv4_options(size_t n) {
    if (n % 4 != 0 || n > 40) throw std::invalid_argument("IPv4 options: multiple of 4, <= 40");
    ipv4_options_ = n;
    return *this;
  }
  // Appends an IPv6 extension header of `type` (0 hop-by-hop, 43 routing, 60 destination
  // options: `n` a multiple of 8; 51 AH: a multiple of 4) and `n` bytes in all, zero-filled
  // apart from its next-header and length fields. Headers chain in call order.
  PacketBuilder& ipv6_ext(uint8_t type, size_t n) {
    const size_t unit = type == 51 ? 4 : 8;
    if (type == 44 || n < 8 || n % unit != 0 || n / unit - (type == 51 ? 2 : 1) > 255)
      throw std::invalid_argument("bad IPv6 extension header length");
    ipv6_exts_.push_back(Ext{type, n, 0});
    return *this;
  }
  // Appends an IPv6 fragment header (offset in 8-byte units, M flag) to the extension chain.
  PacketBuilder& ipv6_fragment(uint16_t offset_units, bool more_fragments, uint32_t id = 0) {
    if (offset_units > 0x1fff) throw std::invalid_argument("IPv6 fragment offset > 0x1fff");
    ipv6_exts_.push_back(Ext{44, 8, uint16_t(offset_units << 3 | (more_fragments ? 1 : 0)), id});
    return *this;
  }
  // Offset of the IP header (or whatever follows the ethertype) in the built frame.
  size_t l3_offset() const { return 14 + 4 * vlans_.size(); }
  // Offset of the L4 header (or payload) in the built frame.
  size_t l4_offset() const { return l3_offset() + ip_header_len(); }

  std::vector<uint8_t> build() const {
    std::vector<uint8_t> f;
    const uint8_t dmac[6] = {0x02, 0, 0, 0, 0, 0x02}, smac[6] = {0x02, 0, 0, 0, 0, 0x01};
    f.insert(f.end(), dmac, dmac + 6);
    f.insert(f.end(), smac, smac + 6);
    for (size_t i = 0; i < vlans_.size(); ++i) {
      put16(f, tpids_[i] ? tpids_[i] : vlans_.size() == 2 && i == 0 ? 0x88a8 : 0x8100);
      put16(f, vlans_[i] & 0x0fff);
    }
    uint16_t et = l3_ == 4 ? 0x0800 : l3_ == 6 ? 0x86dd : ethertype_;
    put16(f, et);
    size_t l3 = f.size();
    size_t ip_hdr = ip_header_len();
    size_t pad = 0;
    size_t unpadded = l3 + ip_hdr + l4_header(0).size() + payload_.size();
    if (frame_size_ > unpadded) pad = frame_size_ - unpadded;
    std::vector<uint8_t> l4 = l4_header(payload_.size() + pad);
    size_t l4_len = l4.size() + payload_.size() + pad;
    if (l3_ == 4) {
      uint8_t h[60] = {};
      h[0] = uint8_t(0x40 | ip_hdr / 4);
      h[1] = uint8_t(dscp_ << 2);
      uint16_t tot = uint16_t(ip_hdr + l4_len);
      h[2] = uint8_t(tot >> 8);
      h[3] = uint8_t(tot);
      h[6] = uint8_t(frag_field_ >> 8);
      h[7] = uint8_t(frag_field_);
      h[8] = ttl_;
      h[9] = proto_;
      std::memcpy(h + 12, src_, 4);
      std::memcpy(h + 16, dst_, 4);
      std::memset(h + 20, 1, ip_hdr - 20);  // NOP options
      uint16_t ck = ipv4_checksum(h, ip_hdr);
      h[10] = uint8_t(ck >> 8);
      h[11] = uint8_t(ck);
      f.insert(f.end(), h, h + ip_hdr);
    } else if (l3_ == 6) {
      uint8_t h[40] = {};
      uint32_t vtf = (6u << 28) | (uint32_t(dscp_) << 22);
      h[0] = uint8_t(vtf >> 24);
      h[1] = uint8_t(vtf >> 16);
      size_t payload_len = ip_hdr - 40 + l4_len;
      h[4] = uint8_t(payload_len >> 8);
      h[5] = uint8_t(payload_len);
      h[6] = ipv6_exts_.empty() ? proto_ : ipv6_exts_[0].type;
      h[7] = ttl_;
      std::memcpy(h + 8, src_, 16);
      std::memcpy(h + 24, dst_, 16);
      f.insert(f.end(), h, h + 40);
      for (size_t i = 0; i < ipv6_exts_.size(); ++i) {
        const Ext& e = ipv6_exts_[i];
        size_t at = f.size();
        f.insert(f.end(), e.len, 0);
        f[at] = i + 1 < ipv6_exts_.size() ? ipv6_exts_[i + 1].type : proto_;
        if (e.type == 44) {
          f[at + 2] = uint8_t(e.frag >> 8);
          f[at + 3] = uint8_t(e.frag);
          for (int b = 0; b < 4; ++b) f[at + 4 + b] = uint8_t(e.id >> (24 - 8 * b));
        } else {
          f[at + 1] = uint8_t(e.type == 51 ? e.len / 4 - 2 : e.len / 8 - 1);
        }
      }
    }
    f.insert(f.end(), l4.begin(), l4.end());
    f.insert(f.end(), payload_.begin(), payload_.end());
    f.insert(f.end(), pad, 0);
    return f;
  }

  static uint16_t ipv4_checksum(const uint8_t* h, size_t n) {
    uint32_t sum = 0;
    for (size_t i = 0; i + 1 < n; i += 2) sum += uint32_t(h[i] << 8 | h[i + 1]);
    while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
    return uint16_t(~sum);
  }

 private:
  struct Ext {
    uint8_t type;
    size_t len;        // bytes, whole header
    uint16_t frag;     // fragment header: offset << 3 | M
    uint32_t id = 0;   // fragment header: identification
  };
  size_t ip_header_len() const {
    if (l3_ == 4) return 20 + ipv4_options_;
    if (l3_ != 6) return 0;
    size_t n = 40;
    for (const Ext& e : ipv6_exts_) n += e.len;
    return n;
  }
  PacketBuilder& l4(uint8_t p, uint16_t sport, uint16_t dport) {
    proto_ = p;
    l4_kind_ = p;
    sport_ = sport;
    dport_ = dport;
    return *this;
  }
  std::vector<uint8_t> l4_header(size_t payload_len) const {
    std::vector<uint8_t> h;
    switch (l4_kind_) {
      case 17:  // UDP
        put16(h, sport_), put16(h, dport_), put16(h, uint16_t(8 + payload_len)), put16(h, 0);
        break;
      case 6:  // TCP, 20 bytes, data offset 5
        put16(h, sport_), put16(h, dport_);
        h.insert(h.end(), 8, 0);
        h.push_back(0x50), h.push_back(0x10);
        h.insert(h.end(), 6, 0);
        break;
      case 132:  // SCTP common header
        put16(h, sport_), put16(h, dport_);
        h.insert(h.end(), 8, 0);
        break;
      case 1:
      case 58:  // ICMP echo request
        h.push_back(l4_kind_ == 1 ? 8 : 128);
        h.insert(h.end(), 7, 0);
        break;
      default:
        break;
    }
    return h;
  }
  static void put16(std::vector<uint8_t>& v, uint16_t x) {
    v.push_back(uint8_t(x >> 8));
    v.push_back(uint8_t(x));
  }

  std::vector<uint16_t> vlans_;
  std::vector<uint16_t> tpids_;  // per tag; 0: the default choice
  int l3_ = 0;
  uint16_t ethertype_ = 0x0806;
  uint8_t src_[16] = {}, dst_[16] = {};
  uint8_t dscp_ = 0, ttl_ = 64, proto_ = 0, l4_kind_ = 0;
  uint16_t sport_ = 0, dport_ = 0;
  std::vector<uint8_t> payload_;
  size_t frame_size_ = 0;
  uint16_t frag_field_ = 0;  // IPv4 flags + fragment offset
  size_t ipv4_options_ = 0;
  std::vector<Ext> ipv6_exts_;
};

}  // namespace sluice::testing
