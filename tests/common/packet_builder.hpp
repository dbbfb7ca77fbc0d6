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

  std::vector<uint8_t> build() const {
    std::vector<uint8_t> f;
    const uint8_t dmac[6] = {0x02, 0, 0, 0, 0, 0x02}, smac[6] = {0x02, 0, 0, 0, 0, 0x01};
    f.insert(f.end(), dmac, dmac + 6);
    f.insert(f.end(), smac, smac + 6);
    for (size_t i = 0; i < vlans_.size(); ++i) {
      put16(f, vlans_.size() == 2 && i == 0 ? 0x88a8 : 0x8100);
      put16(f, vlans_[i] & 0x0fff);
    }
    uint16_t et = l3_ == 4 ? 0x0800 : l3_ == 6 ? 0x86dd : ethertype_;
    put16(f, et);
    size_t l3 = f.size();
    size_t ip_hdr = l3_ == 4 ? 20 : l3_ == 6 ? 40 : 0;
    size_t pad = 0;
    size_t unpadded = l3 + ip_hdr + l4_header(0).size() + payload_.size();
    if (frame_size_ > unpadded) pad = frame_size_ - unpadded;
    std::vector<uint8_t> l4 = l4_header(payload_.size() + pad);
    size_t l4_len = l4.size() + payload_.size() + pad;
    if (l3_ == 4) {
      uint8_t h[20] = {};
      h[0] = 0x45;
      h[1] = uint8_t(dscp_ << 2);
      uint16_t tot = uint16_t(20 + l4_len);
      h[2] = uint8_t(tot >> 8);
      h[3] = uint8_t(tot);
      h[8] = ttl_;
      h[9] = proto_;
      std::memcpy(h + 12, src_, 4);
      std::memcpy(h + 16, dst_, 4);
      uint16_t ck = ipv4_checksum(h, 20);
      h[10] = uint8_t(ck >> 8);
      h[11] = uint8_t(ck);
      f.insert(f.end(), h, h + 20);
    } else if (l3_ == 6) {
      uint8_t h[40] = {};
      uint32_t vtf = (6u << 28) | (uint32_t(dscp_) << 22);
      h[0] = uint8_t(vtf >> 24);
      h[1] = uint8_t(vtf >> 16);
      h[4] = uint8_t(l4_len >> 8);
      h[5] = uint8_t(l4_len);
      h[6] = proto_;
      h[7] = ttl_;
      std::memcpy(h + 8, src_, 16);
      std::memcpy(h + 24, dst_, 16);
      f.insert(f.end(), h, h + 40);
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
  int l3_ = 0;
  uint16_t ethertype_ = 0x0806;
  uint8_t src_[16] = {}, dst_[16] = {};
  uint8_t dscp_ = 0, ttl_ = 64, proto_ = 0, l4_kind_ = 0;
  uint16_t sport_ = 0, dport_ = 0;
  std::vector<uint8_t> payload_;
  size_t frame_size_ = 0;
};

}  // namespace sluice::testing
