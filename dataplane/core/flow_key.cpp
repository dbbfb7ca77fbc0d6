#include "flow_key.hpp"

#include <cstring>
#include <random>

namespace sluice {
namespace {

// Keeps the first `bits` bits of an address.
void mask_prefix(uint8_t* addr, unsigned addr_bytes, unsigned bits) {
  for (unsigned i = 0; i < addr_bytes; ++i) {
    unsigned keep = bits >= 8 * (i + 1) ? 8 : bits > 8 * i ? bits - 8 * i : 0;
    addr[i] &= uint8_t(0xff00u >> keep);
  }
}

uint64_t mix(uint64_t a, uint64_t b) {
  unsigned __int128 r = (unsigned __int128)a * b;
  return uint64_t(r) ^ uint64_t(r >> 64);
}

uint64_t load64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

}  // namespace

FlowKey make_flow_key(const ParsedFrame& pf, KeyMode mode, uint8_t prefix_len) {
  FlowKey k;
  unsigned addr_bytes = pf.ip_version == 6 ? 16 : 4;
  uint8_t* b = k.bytes;
  b[0] = uint8_t(mode);
  b[1] = pf.ip_version;
  switch (mode) {
    case KeyMode::none:
      break;
    case KeyMode::src_ip:
      std::memcpy(b + 8, pf.src.data(), addr_bytes);
      break;
    case KeyMode::dst_ip:
      std::memcpy(b + 8, pf.dst.data(), addr_bytes);
      break;
    case KeyMode::src_prefix:
    case KeyMode::dst_prefix: {
      std::memcpy(b + 8, (mode == KeyMode::src_prefix ? pf.src : pf.dst).data(), addr_bytes);
      unsigned bits = prefix_len > 8 * addr_bytes ? 8 * addr_bytes : prefix_len;
      mask_prefix(b + 8, addr_bytes, bits);
      b[2] = uint8_t(bits);
      break;
    }
    case KeyMode::src_dst:
    case KeyMode::five_tuple:
      std::memcpy(b + 8, pf.src.data(), addr_bytes);
      std::memcpy(b + 24, pf.dst.data(), addr_bytes);
      if (mode == KeyMode::five_tuple) {
        // Non-first fragments carry no ports: they are keyed by addresses (and protocol).
        b[3] = pf.proto;
        b[4] = uint8_t(pf.src_port >> 8), b[5] = uint8_t(pf.src_port);
        b[6] = uint8_t(pf.dst_port >> 8), b[7] = uint8_t(pf.dst_port);
      }
      break;
  }
  return k;
}

uint64_t hash_flow_key(const FlowKey& key, uint64_t seed) {
  // Odd constants from wyhash; the seed enters every round.
  constexpr uint64_t s0 = 0xa0761d6478bd642full, s1 = 0xe7037ed1a0b428dbull,
                     s2 = 0x8ebc6af09c88c6e3ull;
  uint64_t h = seed ^ s0;
  for (unsigned i = 0; i < sizeof key.bytes; i += 16)
    h = mix(load64(key.bytes + i) ^ s1 ^ h,
            (i + 8 < sizeof key.bytes ? load64(key.bytes + i + 8) : 0) ^ s2 ^ seed);
  return mix(h ^ s0, sizeof key.bytes ^ s1);
}

uint64_t random_hash_seed() {
  std::random_device rd;
  return (uint64_t(rd()) << 32) ^ rd() ^ (uint64_t(rd()) << 16);
}

}  // namespace sluice
