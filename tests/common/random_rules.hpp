// Random rule sets and random parsed frames for equivalence tests of the classifiers. Values
// are drawn from small pools so that rules overlap, nest and collide with the frames often:
// prefixes around a few base networks at every length, port ranges around a few boundaries,
// a handful of protocols, VLANs, DSCPs and ingress ports.
#pragma once

#include <array>
#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "frame.hpp"
#include "rules.hpp"

namespace sluice::testing {

class RandomRules {
 public:
  explicit RandomRules(uint64_t seed) : rng_(seed) {
    for (auto& b : bases4_) b = random_addr(4);
    for (auto& b : bases6_) b = random_addr(6);
  }

  // p_field: how likely each field is to carry a condition.
  std::vector<Rule> rules(size_t n, double p_field = 0.3) {
    std::vector<Rule> out(n);
    for (size_t i = 0; i < n; ++i) {
      Match& m = out[i].match;
      out[i].name = "r" + std::to_string(i);
      const uint8_t fam = chance(0.7) ? 4 : 6;
      if (chance(p_field)) m.src = prefix(chance(0.9) ? fam : uint8_t(10 - fam));
      if (chance(p_field)) m.dst = prefix(chance(0.9) ? fam : uint8_t(10 - fam));
      if (chance(p_field)) m.proto = pick(kProtos);
      if (chance(p_field)) m.src_port = range();
      if (chance(p_field)) m.dst_port = range();
      if (chance(p_field / 2)) m.vlan = pick(kVlans);
      if (chance(p_field / 2)) m.dscp = pick(kDscps);
      if (chance(p_field / 2)) m.port = pick(kIngress);
    }
    return out;
  }

  // A frame as the parser leaves it: fields consistent with its match word, ports 0 without
  // ports, and (as in the hot path's reused burst entries) junk after an IPv4 address.
  ParsedFrame frame() {
    ParsedFrame pf;
    const unsigned kind = unsigned(rng_() % 10);
    pf.ip_version = kind == 0 ? 0 : kind <= 6 ? 4 : 6;
    pf.vlan_count = uint8_t(rng_() % 3 == 0 ? 1 + rng_() % 2 : 0);
    if (pf.vlan_count) pf.outer_vlan = uint16_t(chance(0.7) ? pick(kVlans) : rng_() % 4096);
    if (pf.ip_version != 0) {
      pf.proto = uint8_t(chance(0.8) ? pick(kProtos) : rng_() % 256);
      pf.dscp = uint8_t(chance(0.6) ? pick(kDscps) : rng_() % 64);
      pf.is_fragment = chance(0.1);
      pf.is_first_fragment = pf.is_fragment && chance(0.5);
      const bool l4 = pf.proto == 6 || pf.proto == 17 || pf.proto == 132;
      pf.has_ports = l4 && (!pf.is_fragment || pf.is_first_fragment) && chance(0.95);
      if (pf.has_ports) {
        pf.src_port = port_value();
        pf.dst_port = port_value();
      }
      pf.src = address(pf.ip_version);
      pf.dst = address(pf.ip_version);
    }
    pf.match_word = match_word::of(pf);
    return pf;
  }

  uint16_t ingress() { return uint16_t(chance(0.8) ? pick(kIngress) : rng_() % 65536); }

  std::mt19937_64& rng() { return rng_; }

 private:
  static constexpr std::array<uint8_t, 7> kProtos = {6, 17, 1, 132, 58, 0, 47};
  static constexpr std::array<uint16_t, 5> kVlans = {1, 7, 100, 4095, 0};
  static constexpr std::array<uint8_t, 5> kDscps = {0, 10, 46, 63, 26};
  static constexpr std::array<uint16_t, 4> kIngress = {0, 1, 3, 65535};
  static constexpr std::array<uint16_t, 10> kPortEdges = {0,    1,    53,   80,    443,
                                                          1000, 1024, 2000, 65534, 65535};

  bool chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }
  template <class A>
  typename A::value_type pick(const A& a) {
    return a[rng_() % a.size()];
  }
  std::array<uint8_t, 16> random_addr(uint8_t family) {
    std::array<uint8_t, 16> a{};
    for (unsigned i = 0; i < (family == 4 ? 4u : 16u); ++i) a[i] = uint8_t(rng_());
    return a;
  }
  // Near a base network: flips of a few random bits, mostly far down the address.
  std::array<uint8_t, 16> near(uint8_t family) {
    std::array<uint8_t, 16> a = family == 4 ? pick(bases4_) : pick(bases6_);
    const unsigned bits = family == 4 ? 32 : 128;
    const unsigned flips = unsigned(rng_() % 3);
    for (unsigned f = 0; f < flips; ++f) {
      const unsigned b = unsigned(rng_() % bits);
      a[b / 8] ^= uint8_t(0x80u >> (b % 8));
    }
    return a;
  }
  Cidr prefix(uint8_t family) {
    Cidr c;
    c.family = family;
    const unsigned bits = family == 4 ? 32 : 128;
    c.prefix_len = uint8_t(chance(0.05) ? 0 : chance(0.2) ? bits : rng_() % (bits + 1));
    const std::array<uint8_t, 16> a = near(family);
    for (unsigned b = 0; b < c.prefix_len; ++b) c.addr[b / 8] |= a[b / 8] & (0x80u >> (b % 8));
    return c;
  }
  std::array<uint8_t, 16> address(uint8_t family) {
    std::array<uint8_t, 16> a = chance(0.9) ? near(family) : random_addr(family);
    if (family == 4 && chance(0.3))
      for (unsigned i = 4; i < 16; ++i) a[i] = uint8_t(rng_());  // stale bytes
    return a;
  }
  uint16_t port_value() {
    if (chance(0.5)) return uint16_t(rng_() % 65536);
    const int v = int(pick(kPortEdges)) + int(rng_() % 3) - 1;
    return uint16_t(v < 0 ? 0 : v > 65535 ? 65535 : v);
  }
  PortRange range() {
    uint16_t a = chance(0.7) ? pick(kPortEdges) : uint16_t(rng_() % 65536);
    uint16_t b = chance(0.3) ? a : chance(0.5) ? pick(kPortEdges) : uint16_t(rng_() % 65536);
    if (a > b) std::swap(a, b);
    return {a, b};
  }

  std::mt19937_64 rng_;
  std::array<std::array<uint8_t, 16>, 4> bases4_{}, bases6_{};
};

}  // namespace sluice::testing
