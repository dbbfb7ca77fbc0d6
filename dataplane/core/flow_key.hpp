// Flow keys (SPEC §2 `key`) and their seeded hash. The hash is the flow's identity in the
// flow table, so it is keyed with a random per-start seed: no packet stream can aim for
// collisions without knowing it.
#pragma once

#include <cstdint>
#include <cstring>

#include "frame.hpp"
#include "rules.hpp"
#include "unaligned_load.hpp"

namespace sluice {

// The fields a key mode selects from a frame, as five 64-bit words (unused ones zero), built
// with word stores so the hash reads them back without store-forwarding stalls:
//   w[0]  mode | IP version << 8 | prefix bits << 16 | proto << 24 | src port << 32 | dst port << 48
//   IPv4: w[1] = source address | destination address << 32 (each as read from the wire)
//   IPv6: w[1], w[2] = source address; w[3], w[4] = destination address
struct FlowKey {
  uint64_t w[5] = {};
  friend bool operator==(const FlowKey&, const FlowKey&) = default;
};

// Random seed from the OS.
uint64_t random_hash_seed();

namespace detail {

using unaligned::load32;
using unaligned::load64;

// An address of `bytes` bytes cut to its first `bits` bits, in wire order: `bits` is a
// count from the first byte on the wire, which on a little-endian load is the low byte.
inline uint64_t keep_prefix64(uint64_t word, unsigned bits) {
  if (bits >= 64) return word;
  if (bits == 0) return 0;
  uint8_t mask[8] = {};
  for (unsigned i = 0; i < 8; ++i) {
    const unsigned keep = bits >= 8 * (i + 1) ? 8 : bits > 8 * i ? bits - 8 * i : 0;
    mask[i] = uint8_t(0xff00u >> keep);
  }
  return word & load64(mask);
}

// The address words of one side: IPv4 in the low 32 bits of a, IPv6 in a and b.
struct Addr {
  uint64_t a = 0, b = 0;
};

inline Addr load_addr(const std::array<uint8_t, 16>& addr, uint8_t version) {
  if (version == 6) return {load64(addr.data()), load64(addr.data() + 8)};
  return {load32(addr.data()), 0};
}

inline Addr keep_prefix(Addr x, unsigned bits) {
  return {keep_prefix64(x.a, bits), bits > 64 ? keep_prefix64(x.b, bits - 64) : 0};
}

inline uint64_t mix(uint64_t a, uint64_t b) {
  unsigned __int128 r = (unsigned __int128)a * b;
  return uint64_t(r) ^ uint64_t(r >> 64);
}

}  // namespace detail

// The key of one mode for a frame that is not IPv6 (IPv4, or not IP: version 0, addresses
// zero), from its fields: flow_key_of() below for such frames, and the burst pipeline's key
// for a common IPv4 frame (frame_fast_v4.hpp), which has no ParsedFrame. `src`, `dst` as
// loaded from the wire; `ports` = source port | destination port << 16, host order (the
// common IPv4 parse has them so, frame_fast_v4.hpp).
template <KeyMode mode>
[[gnu::always_inline]] inline FlowKey flow_key_v4(uint8_t version, uint32_t src, uint32_t dst,
                                                  uint8_t proto, uint32_t ports,
                                                  uint8_t prefix_len) {
  FlowKey k;
  uint64_t meta = uint64_t(mode) | uint64_t(version) << 8;
  uint64_t s = 0, d = 0;
  if constexpr (mode == KeyMode::src_ip) {
    s = src;
  } else if constexpr (mode == KeyMode::dst_ip) {
    d = dst;
  } else if constexpr (mode == KeyMode::src_prefix || mode == KeyMode::dst_prefix) {
    const unsigned bits = prefix_len > 32 ? 32 : prefix_len;
    meta |= uint64_t(bits) << 16;
    if constexpr (mode == KeyMode::src_prefix)
      s = detail::keep_prefix64(src, bits);
    else
      d = detail::keep_prefix64(dst, bits);
  } else if constexpr (mode == KeyMode::src_dst || mode == KeyMode::five_tuple) {
    s = src;
    d = dst;
    // Non-first fragments carry no ports (0 here): they are keyed by addresses and protocol.
    if constexpr (mode == KeyMode::five_tuple)
      meta |= uint64_t(proto) << 24 | uint64_t(ports) << 32;
  }
  (void)src, (void)dst, (void)proto, (void)ports, (void)prefix_len;
  k.w[0] = meta;
  k.w[1] = s | d << 32;
  return k;
}

// The key of one mode (a template: each rule calls the instance for its mode, through
// flow_hash_fn below, so no per-packet switch on the mode). Inline, as is the hash: both run
// once per packet, and inlined the key stays in registers.
template <KeyMode mode>
inline FlowKey flow_key_of(const ParsedFrame& pf, uint8_t prefix_len) {
  if (pf.ip_version != 6)
    return flow_key_v4<mode>(pf.ip_version, detail::load32(pf.src.data()),
                             detail::load32(pf.dst.data()), pf.proto,
                             uint32_t(pf.src_port) | uint32_t(pf.dst_port) << 16, prefix_len);
  FlowKey k;
  constexpr unsigned addr_bits = 128;
  uint64_t meta = uint64_t(mode) | uint64_t(6) << 8;
  detail::Addr src, dst;
  if constexpr (mode == KeyMode::src_ip) {
    src = detail::load_addr(pf.src, 6);
  } else if constexpr (mode == KeyMode::dst_ip) {
    dst = detail::load_addr(pf.dst, 6);
  } else if constexpr (mode == KeyMode::src_prefix || mode == KeyMode::dst_prefix) {
    const unsigned bits = prefix_len > addr_bits ? addr_bits : prefix_len;
    meta |= uint64_t(bits) << 16;
    if constexpr (mode == KeyMode::src_prefix)
      src = detail::keep_prefix(detail::load_addr(pf.src, 6), bits);
    else
      dst = detail::keep_prefix(detail::load_addr(pf.dst, 6), bits);
  } else if constexpr (mode == KeyMode::src_dst || mode == KeyMode::five_tuple) {
    src = detail::load_addr(pf.src, 6);
    dst = detail::load_addr(pf.dst, 6);
    if constexpr (mode == KeyMode::five_tuple)
      meta |= uint64_t(pf.proto) << 24 | uint64_t(pf.src_port) << 32 |
              uint64_t(pf.dst_port) << 48;
  }
  (void)prefix_len;
  k.w[0] = meta;
  k.w[1] = src.a, k.w[2] = src.b, k.w[3] = dst.a, k.w[4] = dst.b;
  return k;
}

// The seed's share of the hash below, worked out once per seed (a rule's flow table keeps
// its own): the per-packet hash then starts from these words instead of the seed.
struct FlowHashKeys {
  uint64_t k0 = 0, k1 = 0, k2 = 0;
};
namespace detail {
// Odd constants from wyhash; the seed enters every round.
inline constexpr uint64_t kHashS0 = 0xa0761d6478bd642full, kHashS1 = 0xe7037ed1a0b428dbull,
                          kHashS2 = 0x8ebc6af09c88c6e3ull;
}  // namespace detail
inline FlowHashKeys flow_hash_keys(uint64_t seed) {
  // Both factors of every multiply carry the seed, so a sender who controls the key words
  // still cannot predict either operand.
  const uint64_t seed_b = seed << 29 | seed >> 35;
  return {seed ^ detail::kHashS0, seed_b ^ detail::kHashS1, seed_b ^ detail::kHashS2};
}

// 64-bit keyed hash of a flow key (a wyhash-style multiply-fold mix): two multiplies for an
// IPv4 key, four for IPv6.
// Always inlined: the burst loops' instantiations over one file can exhaust GCC's inlining
// budget, which then calls it (~20 instructions a packet more, seen in the live worker).
[[gnu::always_inline]] inline uint64_t hash_flow_key(const FlowKey& key, const FlowHashKeys& k) {
  uint64_t h = detail::mix(key.w[0] ^ k.k0, key.w[1] ^ k.k1);
  // IPv6 keys (version byte 6) carry three more words; IPv4 keys have them zero.
  if (((key.w[0] >> 8) & 0xff) == 6) {
    h = detail::mix(h ^ key.w[2] ^ detail::kHashS2, key.w[3] ^ k.k1);
    h = detail::mix(h ^ key.w[4] ^ detail::kHashS0, k.k2);
  }
  return detail::mix(h ^ detail::kHashS2, k.k0);
}
inline uint64_t hash_flow_key(const FlowKey& key, uint64_t seed) {
  return hash_flow_key(key, flow_hash_keys(seed));
}

// A rule's flow hash in one call: FlowHashFn<mode> for the rule's mode (see flow_hash_fn).
using FlowHashFn = uint64_t (*)(const ParsedFrame&, uint8_t prefix_len, uint64_t seed);
template <KeyMode mode>
[[gnu::always_inline]] inline uint64_t flow_hash_of(const ParsedFrame& pf, uint8_t prefix_len, uint64_t seed) {
  return hash_flow_key(flow_key_of<mode>(pf, prefix_len), seed);
}
template <KeyMode mode>
[[gnu::always_inline]] inline uint64_t flow_hash_keyed_of(const ParsedFrame& pf, uint8_t prefix_len,
                                                          const FlowHashKeys& keys) {
  return hash_flow_key(flow_key_of<mode>(pf, prefix_len), keys);
}
inline FlowHashFn flow_hash_fn(KeyMode mode) {
  switch (mode) {
    case KeyMode::none: return flow_hash_of<KeyMode::none>;
    case KeyMode::src_ip: return flow_hash_of<KeyMode::src_ip>;
    case KeyMode::dst_ip: return flow_hash_of<KeyMode::dst_ip>;
    case KeyMode::src_dst: return flow_hash_of<KeyMode::src_dst>;
    case KeyMode::five_tuple: return flow_hash_of<KeyMode::five_tuple>;
    case KeyMode::src_prefix: return flow_hash_of<KeyMode::src_prefix>;
    case KeyMode::dst_prefix: return flow_hash_of<KeyMode::dst_prefix>;
  }
  return flow_hash_of<KeyMode::none>;
}

}  // namespace sluice
