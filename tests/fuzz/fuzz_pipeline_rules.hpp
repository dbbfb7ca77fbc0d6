// fuzz_pipeline's rule sets and the addresses its frames use, read from the fuzz input.
//
// Two modes, chosen by the rule-count byte. Below 192: 1-4 rules, each fuzzed field by field
// (the classifier's linear walk, every algorithm and key, parents). From 192: 5-20 or 60-70 rules,
// replicas of 1-3 fuzzed templates, so that a few dozen input bytes reach the many-rule paths
// (match tables, IntervalIndex's crowded buckets, the common-IPv4 burst's per-rule shares, the
// uniform-token-bucket loops): replica i has the template's fields, but its prefixes are
// base + (i << shift) (siblings, or clustered when the shift is small, so that buckets of
// the index crowd), its prefix lengths shortened by a fuzzed step (nested prefixes) and its
// destination ports shifted by a fuzzed step; a shape byte makes the replicas keyed token
// buckets all keyed alike (the uniform loops), keyed token buckets each keyed by its
// template's key, keyed by their template's algorithm, or as the templates are (parents
// included). Frames of that mode take their addresses from base + (j << shift), j < 80, so
// they land in replica j's prefixes, and are common IPv4 frames more often.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include <arpa/inet.h>

#include "fuzz_input.hpp"
#include "rules.hpp"

namespace sluice::fuzz {

inline void pipeline_check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "fuzz_pipeline: %s\n", what);
    std::abort();
  }
}

inline const char* const kV4[] = {"10.0.0.1", "10.0.0.2", "10.1.2.3", "192.0.2.1", "198.51.100.7"};
inline const char* const kV6[] = {"2001:db8::1", "2001:db8::2", "fe80::1", "2001:db8:1::5"};

// The addresses frames are built from: kV4 and kV6 (1-4 rules), or those the replicas'
// prefixes are made of (many rules).
struct AddressPool {
  static constexpr unsigned kMax = 80;
  uint8_t v4[kMax][4];
  uint8_t v6[kMax][16];
  unsigned n4 = 0, n6 = 0;
};

// kV4 and kV6 as bytes, parsed once.
inline const AddressPool& fixed_addresses() {
  static const AddressPool a = [] {
    AddressPool x{};
    for (const char* s : kV4) pipeline_check(inet_pton(AF_INET, s, x.v4[x.n4++]) == 1, "bad kV4");
    for (const char* s : kV6) pipeline_check(inet_pton(AF_INET6, s, x.v6[x.n6++]) == 1, "bad kV6");
    return x;
  }();
  return a;
}

inline void clear_host_bits(Cidr& c) {
  const unsigned max_len = c.family == 4 ? 32 : 128;
  for (unsigned bit = c.prefix_len; bit < max_len; ++bit)
    c.addr[bit / 8] &= uint8_t(~(0x80u >> (bit % 8)));
}

inline Cidr fuzzed_cidr(FuzzInput& in) {
  Cidr c;
  c.family = in.flag() ? 6 : 4;
  const unsigned max_len = c.family == 4 ? 32 : 128;
  c.prefix_len = uint8_t(in.range(0, max_len));
  // Mostly the addresses the frames use, so rules do match.
  if (in.flag()) {
    const AddressPool& a = fixed_addresses();
    const uint8_t* bytes = c.family == 4 ? a.v4[in.range(0, 4)] : a.v6[in.range(0, 3)];
    for (unsigned i = 0; i < max_len / 8; ++i) c.addr[i] = bytes[i];
  } else {
    in.take(c.addr.data(), max_len / 8);
  }
  clear_host_bits(c);  // the loader keeps host bits zero; so do we
  return c;
}

inline Rate fuzzed_rate(FuzzInput& in, CostUnit unit) {
  // Round rates (exact profiles) and arbitrary ones, from 1/s up to the documented top.
  static const uint64_t kRound[] = {1, 10, 1000, 64'000, 1'000'000, 10'000'000, 125'000'000,
                                    1'250'000'000, 50'000'000'000};
  Rate r;
  r.unit = unit;
  r.per_sec_num = in.flag() ? kRound[in.range(0, 8)] : in.range(1, 50'000'000'000ull);
  r.per_sec_den = in.flag() ? 1 : in.range(1, 1000);
  return r;
}

inline Action fuzzed_action(FuzzInput& in) {
  switch (in.range(0, 2)) {
    case 0: return Action{ActionKind::pass, 0};
    case 1: return Action{ActionKind::drop, 0};
    default: return Action{ActionKind::mark_dscp, uint8_t(in.range(0, 63))};
  }
}

inline Rule fuzzed_rule(FuzzInput& in, size_t index) {
  Rule r;
  r.name = "r" + std::to_string(index);
  if (in.flag()) r.match.src = fuzzed_cidr(in);
  if (in.flag()) r.match.dst = fuzzed_cidr(in);
  if (in.flag()) r.match.proto = uint8_t(in.flag() ? 17 : in.range(0, 255));
  if (in.flag()) {
    uint16_t lo = uint16_t(in.range(0, 2000)), hi = uint16_t(lo + in.range(0, 2000));
    r.match.dst_port = PortRange{lo, hi};
  }
  if (in.flag()) r.match.vlan = uint16_t(in.range(0, 4095));
  if (in.flag()) r.match.dscp = uint8_t(in.range(0, 63));
  if (in.flag()) r.match.port = uint16_t(in.range(0, 3));
  r.key = KeyMode(in.range(0, 6));
  if (r.key == KeyMode::src_prefix || r.key == KeyMode::dst_prefix)
    r.key_prefix_len = uint8_t(in.range(0, 128));
  r.algorithm = Algorithm(in.range(0, 6));
  const CostUnit unit = in.flag() ? CostUnit::bytes : CostUnit::packets;
  r.rate = fuzzed_rate(in, unit);
  r.burst = unit == CostUnit::bytes ? in.range(64, 2'000'000) : in.range(1, 100'000);
  r.excess_burst = in.range(0, r.burst * 2);
  r.peak_rate = r.rate;
  r.peak_rate.per_sec_num = r.rate.per_sec_num * in.range(1, 4);
  r.peak_burst = r.burst + in.range(0, r.burst);
  r.window_ns = in.range(1000, 10'000'000'000ull);
  r.limit = in.range(1, 1'000'000);
  r.limit_unit = in.flag() ? CostUnit::bytes : CostUnit::packets;
  r.max_delay_ns = in.range(1, 60'000'000'000ull);
  r.overhead_bytes = uint32_t(in.flag() ? 0 : in.range(0, 64));
  r.action = fuzzed_action(in);
  r.colour_actions = ColourActions{fuzzed_action(in), fuzzed_action(in), fuzzed_action(in)};
  if (in.flag()) r.overflow = fuzzed_action(in);
  r.max_flows = in.range(0, 64);
  r.idle_timeout_ns = in.range(1, 120'000'000'000ull);
  return r;
}

// 1-4 fuzzed rules; parents of any other rule, cycles included on purpose (the caller
// refuses them as the loader does).
inline void few_rules(FuzzInput& in, size_t n_rules, RuleSet& out) {
  out.rules.reserve(n_rules);
  for (size_t i = 0; i < n_rules; ++i) {
    out.rules.push_back(fuzzed_rule(in, i));
    if (in.range(0, 3) == 0) {
      size_t parent = in.range(0, n_rules - 1);
      if (parent != i) {
        out.rules.back().parent = "r" + std::to_string(parent);
        out.rules.back().parent_index = int(parent);
      }
    }
  }
}

using U128 = unsigned __int128;

// base + (j << shift), of `bytes` wire-order bytes (4 or 16), into out.
inline void address_at(const uint8_t* base, unsigned bytes, unsigned shift, unsigned j,
                       uint8_t* out) {
  U128 v = 0;
  for (unsigned i = 0; i < bytes; ++i) v = v << 8 | base[i];
  v += U128(j) << shift;
  for (unsigned i = bytes; i-- > 0; v >>= 8) out[i] = uint8_t(v);
}

// The many-rule mode (see the top of the file): `pool` gets the frames' addresses.
inline void many_rules(FuzzInput& in, RuleSet& out, AddressPool& pool) {
  const size_t n_templates = in.range(1, 3);
  // 5-20 rules, or 60-70 for one value in 6 (21-59 fold onto 5-20): an execution costs about
  // its rule count (two pipelines are built per input), and 5-20 reach every many-rule path
  // but the candidate bitmaps' second 64-bit word, which the 60-70 sets cross.
  size_t n_rules = in.range(5, 70);
  if (n_rules > 20 && n_rules < 60) n_rules = 5 + (n_rules - 21) % 16;
  const unsigned shape = unsigned(in.range(0, 3));
  const KeyMode shared_key = KeyMode(in.range(1, 6));
  uint8_t base4[4], base6[16];
  const AddressPool& fixed = fixed_addresses();
  if (in.flag()) std::memcpy(base4, fixed.v4[in.range(0, 4)], 4);
  else if (in.take(base4, 4) < 4) std::memset(base4, 0, 4);
  if (in.flag()) std::memcpy(base6, fixed.v6[in.range(0, 3)], 16);
  else if (in.take(base6, 16) < 16) std::memset(base6, 0, 16);
  // Replicas 2^shift apart. Mostly a shift of 20-31 (v6: 116-127): 70 replicas' starts then
  // crowd the index's first buckets for shifts up to 23, which split to at most 2^12; one
  // value in 8 any shift, down to clusters that even 2^16 buckets do not split. The index
  // builds 2^bits buckets per prefix field, so 2^16 makes an input ~10x the cost of the rest.
  const unsigned s4 = unsigned(in.u8()), s6 = unsigned(in.u8());
  const unsigned shift4 = s4 < 32 ? s4 : 20 + s4 % 12;
  const unsigned shift6 = s6 < 32 ? s6 * 4 : 116 + s6 % 12;
  pool.n4 = pool.n6 = AddressPool::kMax;
  for (unsigned j = 0; j < AddressPool::kMax; ++j) {
    address_at(base4, 4, shift4, j, pool.v4[j]);
    address_at(base6, 16, shift6, j, pool.v6[j]);
  }

  struct Template {
    Rule rule;
    unsigned len_step, port_step;
    bool parent;
  };
  std::vector<Template> templates;
  templates.reserve(n_templates);
  for (size_t t = 0; t < n_templates; ++t) {
    Template tp{fuzzed_rule(in, t), unsigned(in.range(0, 3)), unsigned(in.range(0, 63)),
                in.range(0, 3) == 0};
    if (shape != 0) tp.parent = false;
    if (shape == 1 || shape == 2) tp.rule.algorithm = Algorithm::token_bucket;
    if (shape == 1 || (shape != 0 && tp.rule.key == KeyMode::none)) tp.rule.key = shared_key;
    templates.push_back(std::move(tp));
  }

  out.rules.reserve(n_rules);
  for (size_t i = 0; i < n_rules; ++i) {
    const Template& tp = templates[i % n_templates];
    Rule r = tp.rule;
    r.name = "r" + std::to_string(i);
    for (std::optional<Cidr>* c : {&r.match.src, &r.match.dst}) {
      if (!*c) continue;
      Cidr& x = **c;
      const bool v4 = x.family == 4;
      address_at(v4 ? base4 : base6, v4 ? 4 : 16, v4 ? shift4 : shift6, unsigned(i),
                 x.addr.data());
      const unsigned shorter = unsigned(i * tp.len_step) % 9;
      x.prefix_len = uint8_t(x.prefix_len > shorter ? x.prefix_len - shorter : 0);
      clear_host_bits(x);
    }
    if (r.match.dst_port) {
      const unsigned width = unsigned(r.match.dst_port->hi - r.match.dst_port->lo);
      const uint16_t lo = uint16_t((r.match.dst_port->lo + i * tp.port_step) % 4001);
      r.match.dst_port = PortRange{lo, uint16_t(std::min(65535u, lo + width))};
    }
    if (tp.parent && i >= n_templates) {  // a template's replica under the template
      r.parent = "r" + std::to_string(i % n_templates);
      r.parent_index = int(i % n_templates);
    }
    out.rules.push_back(std::move(r));
  }
}

}  // namespace sluice::fuzz
