#include "flow_key_text.hpp"

#include <arpa/inet.h>

#include <cstring>

namespace sluice {
namespace {

// The address bytes of one side, as the key holds them (detail::load_addr in reverse).
std::string address_text(uint8_t version, uint64_t a, uint64_t b) {
  char text[INET6_ADDRSTRLEN] = {};
  if (version == 6) {
    uint8_t bytes[16];
    std::memcpy(bytes, &a, 8);
    std::memcpy(bytes + 8, &b, 8);
    inet_ntop(AF_INET6, bytes, text, sizeof text);
  } else {
    const uint32_t v4 = uint32_t(a);
    uint8_t bytes[4];
    std::memcpy(bytes, &v4, 4);
    inet_ntop(AF_INET, bytes, text, sizeof text);
  }
  return text;
}

std::string endpoint(uint8_t version, const std::string& addr, uint16_t port) {
  return (version == 6 ? "[" + addr + "]" : addr) + ":" + std::to_string(port);
}

}  // namespace

std::string protocol_name(uint8_t proto) {
  switch (proto) {
    case 6: return "tcp";
    case 17: return "udp";
    case 1: return "icmp";
    case 58: return "icmpv6";
    case 132: return "sctp";
    default: return "proto " + std::to_string(proto);
  }
}

std::string flow_key_text(const FlowKey& key) {
  const uint64_t meta = key.w[0];
  const auto mode = KeyMode(meta & 0xff);
  const auto version = uint8_t(meta >> 8);
  const auto bits = unsigned(meta >> 16 & 0xff);
  const auto proto = uint8_t(meta >> 24);
  const auto src_port = uint16_t(meta >> 32), dst_port = uint16_t(meta >> 48);
  if (version != 4 && version != 6) return "non-IP";
  const std::string src = version == 6 ? address_text(6, key.w[1], key.w[2])
                                       : address_text(4, key.w[1] & 0xffffffffu, 0);
  const std::string dst = version == 6 ? address_text(6, key.w[3], key.w[4])
                                       : address_text(4, key.w[1] >> 32, 0);
  switch (mode) {
    case KeyMode::src_ip: return src;
    case KeyMode::dst_ip: return dst;
    case KeyMode::src_prefix: return src + "/" + std::to_string(bits);
    case KeyMode::dst_prefix: return dst + "/" + std::to_string(bits);
    case KeyMode::src_dst: return src + " > " + dst;
    case KeyMode::five_tuple:
      if (proto == 6 || proto == 17 || proto == 132)
        return protocol_name(proto) + " " + endpoint(version, src, src_port) + " > " +
               endpoint(version, dst, dst_port);
      return protocol_name(proto) + " " + src + " > " + dst;
    case KeyMode::none: break;
  }
  return "all";
}

FlowKey flow_key_for(KeyMode mode, const ParsedFrame& pf, uint8_t prefix_len) {
  switch (mode) {
    case KeyMode::none: return flow_key_of<KeyMode::none>(pf, prefix_len);
    case KeyMode::src_ip: return flow_key_of<KeyMode::src_ip>(pf, prefix_len);
    case KeyMode::dst_ip: return flow_key_of<KeyMode::dst_ip>(pf, prefix_len);
    case KeyMode::src_dst: return flow_key_of<KeyMode::src_dst>(pf, prefix_len);
    case KeyMode::five_tuple: return flow_key_of<KeyMode::five_tuple>(pf, prefix_len);
    case KeyMode::src_prefix: return flow_key_of<KeyMode::src_prefix>(pf, prefix_len);
    case KeyMode::dst_prefix: return flow_key_of<KeyMode::dst_prefix>(pf, prefix_len);
  }
  return FlowKey{};
}

}  // namespace sluice
