// Dense flow tables (flow_table.hpp): which keyed rules get one, and a packet's slot in it.
//
// A rule keyed by one IPv4 address field (src-ip, dst-ip, or their prefix modes) whose match
// holds that field to an IPv4 prefix has at most 2^(K - L) keys, K the key's bits of the
// address (32, or the key's prefix length) and L the match's prefix length: `dst:
// 192.0.2.0/24` with `key: dst-ip` has 256. When that many fit the rule's flow capacity, the
// key's offset in the range is its slot, and its bucket is found without a hash or a tag scan
// (DPDK's qos_meter indexes its meters by the destination's last byte the same way). Every key
// then has a bucket of its own, as a hashed table gives it too while it has room: the
// decisions are the same, only cheaper.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <optional>

#include "rules.hpp"

namespace sluice {

struct DenseKey {
  uint64_t slots = 0;  // keys in the range; 0: the rule's table is hashed
  uint32_t mask = 0;   // slots - 1
  uint8_t shift = 0;   // 32 - K: the key's bits of the address, in host order, are addr >> shift
  bool src = false;    // keyed by the source address (else the destination)
  // The match's prefix in host order: an address is in it when addr - base <= span_m1, and
  // then its slot is (addr - base) >> shift as well (dense_slot_in()).
  uint32_t base = 0, span_m1 = 0;
};

// The dense key of rule r for a table of `capacity` flows (slots 0: hashed).
inline DenseKey dense_key_of(const Rule& r, uint64_t capacity) {
  DenseKey d;
  const bool src = r.key == KeyMode::src_ip || r.key == KeyMode::src_prefix;
  const bool dst = r.key == KeyMode::dst_ip || r.key == KeyMode::dst_prefix;
  if (!src && !dst) return d;
  const std::optional<Cidr>& pin = src ? r.match.src : r.match.dst;
  // A v4 prefix never matches a v6 packet (classifier.cpp), so every packet of the rule has
  // an IPv4 address there.
  if (!pin || pin->family != 4) return d;
  const unsigned k = r.key == KeyMode::src_ip || r.key == KeyMode::dst_ip
                         ? 32u
                         : std::min<unsigned>(r.key_prefix_len, 32);
  // A key of no bits (a prefix key of length 0) is one key for every packet: nothing to index.
  if (k == 0) return d;
  const unsigned l = std::min<unsigned>(pin->prefix_len, 32);
  const unsigned free_bits = k > l ? k - l : 0;
  const uint64_t slots = uint64_t{1} << free_bits;
  if (slots > capacity) return d;
  d.slots = slots;
  d.mask = uint32_t(slots - 1);
  d.shift = uint8_t(32 - k);  // at most 31
  d.src = src;
  const uint32_t prefix_mask = l == 0 ? 0 : ~uint32_t{0} << (32 - l);
  d.base = (uint32_t(pin->addr[0]) << 24 | uint32_t(pin->addr[1]) << 16 |
            uint32_t(pin->addr[2]) << 8 | pin->addr[3]) & prefix_mask;
  d.span_m1 = ~prefix_mask;
  return d;
}

// An address's 4 bytes in network order loaded as they lie (flow_key.hpp's address words,
// Ipv4Fields::src()/dst()), in host order.
inline uint32_t dense_host_order(uint32_t addr_as_loaded) {
  return std::endian::native == std::endian::little ? __builtin_bswap32(addr_as_loaded)
                                                    : addr_as_loaded;
}

// The slot of an address the rule matched (so in the range).
inline uint64_t dense_slot(uint32_t addr_as_loaded, const DenseKey& d) {
  return (dense_host_order(addr_as_loaded) >> d.shift) & d.mask;
}

// Whether a host-order address is in the match's prefix, and if so its slot: the prefix test
// and the slot in one subtraction, for a caller that leaves the test out of the match
// (Classifier::common_ipv4_rule_but_address). The same slot as dense_slot(): the prefix's
// base has no bits below 32 - L, and the slot's bits are the key's below it.
inline bool dense_slot_in(uint32_t host, const DenseKey& d, uint64_t& slot) {
  const uint32_t off = host - d.base;
  slot = off >> d.shift;
  return off <= d.span_m1;
}

}  // namespace sluice
