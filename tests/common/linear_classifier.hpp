// The classifier sluice had before match tables: an ordered walk over every rule. Kept as the
// reference the match-table classifier must agree with on every frame (tests and benchmarks
// only; the dataplane uses classifier.hpp).
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <vector>

#include "frame.hpp"
#include "rules.hpp"

namespace sluice::testing {

class LinearClassifier {
 public:
  explicit inline LinearClassifier(const std::vector<Rule>& rules);
  // Index of the first rule whose every match field holds, or -1.
  inline int classify(const ParsedFrame& pf, uint16_t ingress_port) const;

 private:
  // A match compiled for the per-packet walk. A rule tests all of its exact fields (ingress
  // port, VLAN, "is IP", IP version, protocol, DSCP, "has ports") with one mask-and-compare
  // of the frame's match word (frame.hpp); only prefixes and port ranges need more, and only
  // rules that have them test them.
  struct Prefix {
    uint64_t addr[2] = {};  // masked, as loaded from the wire
    uint64_t mask[2] = {};
  };
  struct Compiled {
    uint64_t mask = 0;
    uint64_t value = 0;
    bool src = false, dst = false, ports = false;
    uint16_t src_lo = 0, src_hi = 0xffff, dst_lo = 0, dst_hi = 0xffff;
    Prefix src_prefix, dst_prefix;
  };
  static inline Compiled compile(const Match& m);
  std::vector<Compiled> rules_;
};


namespace linear_detail {

inline uint64_t load64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

// The first `bits` bits of 8 wire-order bytes, as a mask over their little- or big-endian
// load alike: byte i keeps its top min(8, bits - 8i) bits.
inline uint64_t prefix_mask(unsigned bits) {
  uint8_t m[8] = {};
  for (unsigned i = 0; i < 8; ++i) {
    const unsigned keep = bits >= 8 * (i + 1) ? 8 : bits > 8 * i ? bits - 8 * i : 0;
    m[i] = uint8_t(0xff00u >> keep);
  }
  return load64(m);
}

inline bool prefix_holds(const uint64_t addr[2], const uint64_t mask[2],
                  const std::array<uint8_t, 16>& a) {
  // IPv4 addresses sit in the first 4 bytes and the rest of the array is zero, so one
  // masked compare of the first word covers them; IPv6 needs both.
  return ((load64(a.data()) & mask[0]) == addr[0]) &&
         ((load64(a.data() + 8) & mask[1]) == addr[1]);
}

}  // namespace linear_detail

inline constexpr uint64_t kNever = uint64_t{1} << 63;  // never in a match word nor in a mask

inline LinearClassifier::Compiled LinearClassifier::compile(const Match& m) {
  using namespace match_word;
  using namespace linear_detail;
  Compiled r;
  auto exact = [&](uint64_t field_mask, unsigned shift, uint64_t v) {
    r.mask |= field_mask << shift;
    r.value |= (v & field_mask) << shift;
  };
  auto prefix = [&](const Cidr& c) {
    exact(0xff, kVersionShift, c.family);  // a v4 prefix never matches a v6 packet
    Prefix p;
    const unsigned bits = c.prefix_len;
    p.mask[0] = prefix_mask(bits > 64 ? 64 : bits);
    p.mask[1] = prefix_mask(bits > 64 ? bits - 64 : 0);
    p.addr[0] = load64(c.addr.data()) & p.mask[0];
    p.addr[1] = load64(c.addr.data() + 8) & p.mask[1];
    return p;
  };
  if (m.port) exact(0xffff, kPortShift, *m.port);
  if (m.vlan) {
    exact(0xfff, kVlanShift, *m.vlan);
    r.mask |= kHasVlan, r.value |= kHasVlan;
  }
  if (m.src || m.dst || m.proto || m.dscp || m.src_port || m.dst_port)
    r.mask |= kIsIp, r.value |= kIsIp;  // any L3/L4 field: never matches non-IP frames
  if (m.proto) exact(0xff, kProtoShift, *m.proto);
  if (m.dscp) exact(0x3f, kDscpShift, *m.dscp);
  if (m.src_port || m.dst_port) {
    // Port rules need ports: non-first fragments and port-less protocols never match them.
    r.mask |= kHasPorts, r.value |= kHasPorts;
    r.ports = true;
    if (m.src_port) r.src_lo = m.src_port->lo, r.src_hi = m.src_port->hi;
    if (m.dst_port) r.dst_lo = m.dst_port->lo, r.dst_hi = m.dst_port->hi;
  }
  // Prefixes of two families can never both hold: a value bit outside every mask makes
  // (word & mask) == value false for every packet.
  if (m.src && m.dst && m.src->family != m.dst->family) r.value |= kNever;
  if (m.src) r.src = true, r.src_prefix = prefix(*m.src);
  if (m.dst) r.dst = true, r.dst_prefix = prefix(*m.dst);
  return r;
}

inline LinearClassifier::LinearClassifier(const std::vector<Rule>& rules) {
  rules_.reserve(rules.size());
  for (const Rule& r : rules) rules_.push_back(compile(r.match));
}

inline int LinearClassifier::classify(const ParsedFrame& pf, uint16_t ingress_port) const {
  using namespace match_word;
  using namespace linear_detail;
  const uint64_t word = pf.match_word | uint64_t(ingress_port) << kPortShift;
  const Compiled* r = rules_.data();
  const size_t n = rules_.size();
  for (size_t i = 0; i < n; ++i, ++r) {
    if ((word & r->mask) != r->value) continue;
    if (r->src && !prefix_holds(r->src_prefix.addr, r->src_prefix.mask, pf.src)) continue;
    if (r->dst && !prefix_holds(r->dst_prefix.addr, r->dst_prefix.mask, pf.dst)) continue;
    if (r->ports && (pf.src_port < r->src_lo || pf.src_port > r->src_hi ||
                     pf.dst_port < r->dst_lo || pf.dst_port > r->dst_hi))
      continue;
    return int(i);
  }
  return -1;
}

}  // namespace sluice::testing
