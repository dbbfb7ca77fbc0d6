// The classification scheme both backends share (DESIGN.md "One classification scheme for both
// backends"; the interface is fixed in helpers' MATCH_TABLES.md): per match field, a lookup of
// the frame's value gives a bitmap of the rules it does not rule out; the lowest set bit of
// the intersection is the first matching rule in file order.
//
//   first match = lowest set bit of
//     src_lpm & dst_lpm & (has ports ? src_port_range & dst_port_range : no_ports)
//     & proto & vlan & dscp & ingress_port                        (an IP frame)
//     non_ip & vlan & ingress_port                                (a frame that is not IP)
//
// The core Classifier (classifier.hpp) answers from these tables; the XDP backend loads them
// into BPF maps. Pure: no DPDK, no BPF.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "rules.hpp"

namespace sluice {

// Bit i set: rule i (file order) is a candidate. Always exactly words_for(rule_count) words.
using RuleBits = std::vector<uint64_t>;
inline size_t words_for(size_t rule_count) { return (rule_count + 63) / 64; }

// Longest-prefix match of a frame's address over these entries gives the candidates for that
// field. Each entry's bits already include the rules of every shorter entry that contains it
// and the rules with no condition on that field (wildcards), so ONE LPM lookup suffices (as a
// BPF_MAP_TYPE_LPM_TRIE lookup does). A /0 entry is always present for each family.
// Rules whose address condition is of the other family are in no entry of this family.
// compile_match_tables() emits the entries distinct, their addresses masked to their length
// (IPv4 in the first 4 bytes, the rest zero), sorted by address then length: the /0 first.
struct PrefixBits {
  Cidr prefix;
  RuleBits rules;
};

// Sorted, disjoint, together covering 0..65535. Neighbours never hold equal bits.
struct PortRangeBits {
  uint16_t lo, hi;
  RuleBits rules;
};

struct ExactBits {
  uint16_t value;
  RuleBits rules;
};  // sorted by value

struct MatchTables {
  size_t rule_count = 0;
  std::vector<PrefixBits> src_v4, dst_v4, src_v6, dst_v6;
  std::vector<PortRangeBits> src_port, dst_port;
  RuleBits no_ports;                 // frames without L4 ports (not tcp/udp/sctp, or a non-first
                                     // fragment): the rules with no port condition
  std::array<RuleBits, 256> proto;   // by IP protocol / IPv6 next header (after ext headers)
  std::vector<ExactBits> vlan;       // outer VLAN id -> rules with that vlan or no vlan condition
  RuleBits vlan_other;               // a tagged frame whose id is not listed
  RuleBits untagged;                 // untagged frame: the rules with no vlan condition
  std::array<RuleBits, 64> dscp;
  std::vector<ExactBits> ingress_port;
  RuleBits ingress_port_other;
  // Added beside the shared interface: a frame that is not IP (ARP, LLDP, ...) matches only the
  // rules with no L3/L4 condition at all (no src, dst, proto, dscp, src-port, dst-port); for
  // it, this replaces the src, dst, port, proto and dscp lookups.
  RuleBits non_ip;
};

// Pure. rules are in file order. Rule and Cidr as in rules.hpp. VLAN ids are compared on their
// 12 bits and DSCP on its 6, as the parser reports them; an IPv4 prefix longer than 32 counts
// as /32 (the loader refuses both anyway).
MatchTables compile_match_tables(const std::vector<Rule>& rules);

// Bit operations on RuleBits, for the tables' users and tests.
inline bool test_bit(const RuleBits& b, size_t i) { return (b[i / 64] >> (i % 64)) & 1; }
inline void set_bit(RuleBits& b, size_t i) { b[i / 64] |= uint64_t{1} << (i % 64); }
// The index of the lowest set bit of a & b & ..., or -1: the first matching rule.
int lowest_common_bit(const std::vector<const RuleBits*>& maps);

}  // namespace sluice
