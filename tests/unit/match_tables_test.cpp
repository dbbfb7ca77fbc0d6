// compile_match_tables(): the tables' contract (MATCH_TABLES.md) and their answer, the lowest
// set bit of the intersection, against the linear first-match walk on random rule sets.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "frame.hpp"
#include "linear_classifier.hpp"
#include "match_tables.hpp"
#include "random_rules.hpp"

using namespace sluice;
using sluice::testing::LinearClassifier;
using sluice::testing::RandomRules;

namespace {

// Byte-wise, as the rules file states a prefix; IPv4 looks at its first 4 bytes only.
bool cidr_contains(const Cidr& c, const std::array<uint8_t, 16>& a) {
  const unsigned full = c.prefix_len / 8, rest = c.prefix_len % 8;
  for (unsigned i = 0; i < full; ++i)
    if (c.addr[i] != a[i]) return false;
  if (rest == 0) return true;
  const uint8_t mask = uint8_t(0xff00u >> rest);
  return (c.addr[full] & mask) == (a[full] & mask);
}

bool prefix_within(const Cidr& outer, const Cidr& inner) {
  return outer.family == inner.family && outer.prefix_len <= inner.prefix_len &&
         cidr_contains(outer, inner.addr);
}

// The longest entry containing the address, by a scan of every entry (the reference for
// whatever LPM a backend uses).
const RuleBits& lpm(const std::vector<PrefixBits>& table, const std::array<uint8_t, 16>& a) {
  const PrefixBits* best = nullptr;
  for (const PrefixBits& e : table)
    if (cidr_contains(e.prefix, a) && (!best || e.prefix.prefix_len > best->prefix.prefix_len))
      best = &e;
  EXPECT_NE(best, nullptr);
  return best->rules;
}

const RuleBits& range_of(const std::vector<PortRangeBits>& table, uint16_t port) {
  for (const PortRangeBits& r : table)
    if (r.lo <= port && port <= r.hi) return r.rules;
  ADD_FAILURE() << "no range holds port " << port;
  return table.front().rules;
}

const RuleBits& exact(const std::vector<ExactBits>& table, uint16_t v, const RuleBits& other) {
  for (const ExactBits& e : table)
    if (e.value == v) return e.rules;
  return other;
}

// The formula of match_tables.hpp, evaluated field by field.
int tables_first_match(const MatchTables& t, const ParsedFrame& pf, uint16_t ingress) {
  std::vector<const RuleBits*> maps;
  maps.push_back(pf.vlan_count ? &exact(t.vlan, pf.outer_vlan & 0xfff, t.vlan_other)
                               : &t.untagged);
  maps.push_back(&exact(t.ingress_port, ingress, t.ingress_port_other));
  if (pf.ip_version == 0) {
    maps.push_back(&t.non_ip);
  } else {
    const bool v4 = pf.ip_version == 4;
    maps.push_back(&lpm(v4 ? t.src_v4 : t.src_v6, pf.src));
    maps.push_back(&lpm(v4 ? t.dst_v4 : t.dst_v6, pf.dst));
    if (pf.has_ports) {
      maps.push_back(&range_of(t.src_port, pf.src_port));
      maps.push_back(&range_of(t.dst_port, pf.dst_port));
    } else {
      maps.push_back(&t.no_ports);
    }
    maps.push_back(&t.proto[pf.proto]);
    maps.push_back(&t.dscp[pf.dscp & 0x3f]);
  }
  return lowest_common_bit(maps);
}

void expect_agreement(const std::vector<Rule>& rules, RandomRules& gen, size_t frames,
                      size_t* matched = nullptr) {
  const LinearClassifier linear(rules);
  const MatchTables t = compile_match_tables(rules);
  for (size_t f = 0; f < frames; ++f) {
    const ParsedFrame pf = gen.frame();
    const uint16_t port = gen.ingress();
    const int want = linear.classify(pf, port);
    ASSERT_EQ(tables_first_match(t, pf, port), want)
        << "frame " << f << " of " << rules.size() << " rules: version " << int(pf.ip_version)
        << " proto " << int(pf.proto) << " ports " << pf.has_ports << " " << pf.src_port << ">"
        << pf.dst_port << " vlan " << int(pf.vlan_count) << "/" << pf.outer_vlan << " dscp "
        << int(pf.dscp) << " ingress " << port;
    if (matched && want >= 0) ++*matched;
  }
}

// Every bitmap has words_for(rule_count) words, and no bit past the last rule.
void expect_well_formed(const MatchTables& t) {
  const size_t words = words_for(t.rule_count);
  auto check = [&](const RuleBits& b) {
    ASSERT_EQ(b.size(), words);
    for (size_t i = t.rule_count; i < words * 64; ++i) ASSERT_FALSE(test_bit(b, i)) << i;
  };
  for (const auto* table : {&t.src_v4, &t.dst_v4, &t.src_v6, &t.dst_v6}) {
    ASSERT_FALSE(table->empty());
    EXPECT_EQ(table->front().prefix.prefix_len, 0);
    for (size_t i = 0; i < table->size(); ++i) {
      check((*table)[i].rules);
      if (i == 0) continue;
      const Cidr &a = (*table)[i - 1].prefix, &b = (*table)[i].prefix;
      EXPECT_TRUE(a.addr < b.addr || (a.addr == b.addr && a.prefix_len < b.prefix_len))
          << "entries sorted and distinct";
    }
  }
  for (const auto* table : {&t.src_port, &t.dst_port}) {
    ASSERT_FALSE(table->empty());
    EXPECT_EQ(table->front().lo, 0);
    EXPECT_EQ(table->back().hi, 0xffff);
    for (size_t i = 0; i < table->size(); ++i) {
      const PortRangeBits& r = (*table)[i];
      check(r.rules);
      EXPECT_LE(r.lo, r.hi);
      if (i > 0) {
        EXPECT_EQ(uint32_t((*table)[i - 1].hi) + 1, r.lo) << "disjoint and covering";
        EXPECT_NE((*table)[i - 1].rules, r.rules) << "equal neighbours are merged";
      }
    }
  }
  for (const auto* table : {&t.vlan, &t.ingress_port}) {
    for (size_t i = 0; i < table->size(); ++i) {
      check((*table)[i].rules);
      if (i > 0) {
        EXPECT_LT((*table)[i - 1].value, (*table)[i].value);
      }
    }
  }
  for (const RuleBits& b : t.proto) check(b);
  for (const RuleBits& b : t.dscp) check(b);
  for (const RuleBits* b : {&t.no_ports, &t.vlan_other, &t.untagged, &t.ingress_port_other,
                            &t.non_ip})
    check(*b);
}

Rule rule_with(Match m) {
  Rule r;
  r.match = m;
  return r;
}

Cidr cidr(uint8_t family, std::initializer_list<uint8_t> bytes, uint8_t len) {
  Cidr c;
  c.family = family;
  std::copy(bytes.begin(), bytes.end(), c.addr.begin());
  c.prefix_len = len;
  return c;
}

ParsedFrame v4_frame(std::array<uint8_t, 4> src, std::array<uint8_t, 4> dst, uint8_t proto = 17,
                     bool ports = true, uint16_t sport = 1, uint16_t dport = 2) {
  ParsedFrame pf;
  pf.ip_version = 4;
  std::copy(src.begin(), src.end(), pf.src.begin());
  std::copy(dst.begin(), dst.end(), pf.dst.begin());
  pf.proto = proto;
  pf.has_ports = ports;
  pf.src_port = ports ? sport : 0;
  pf.dst_port = ports ? dport : 0;
  pf.match_word = match_word::of(pf);
  return pf;
}

}  // namespace

TEST(MatchTables, EntryBitsAreTheirDefinition) {
  RandomRules gen(7);
  const std::vector<Rule> rules = gen.rules(300);
  const MatchTables t = compile_match_tables(rules);
  expect_well_formed(t);
  struct Field {
    const std::vector<PrefixBits>* table;
    std::optional<Cidr> Match::*cond;
  };
  for (Field f : {Field{&t.src_v4, &Match::src}, Field{&t.dst_v4, &Match::dst},
                  Field{&t.src_v6, &Match::src}, Field{&t.dst_v6, &Match::dst}}) {
    for (const PrefixBits& e : *f.table) {
      for (size_t i = 0; i < rules.size(); ++i) {
        const std::optional<Cidr>& c = rules[i].match.*f.cond;
        const bool want = !c || prefix_within(*c, e.prefix);
        ASSERT_EQ(test_bit(e.rules, i), want) << "rule " << i << " entry /" << int(e.prefix.prefix_len);
      }
    }
  }
  for (size_t i = 0; i < rules.size(); ++i) {
    const Match& m = rules[i].match;
    for (unsigned p = 0; p < 256; ++p) EXPECT_EQ(test_bit(t.proto[p], i), !m.proto || *m.proto == p);
    for (unsigned d = 0; d < 64; ++d) EXPECT_EQ(test_bit(t.dscp[d], i), !m.dscp || *m.dscp == d);
    EXPECT_EQ(test_bit(t.no_ports, i), !m.src_port && !m.dst_port);
    EXPECT_EQ(test_bit(t.untagged, i), !m.vlan);
    EXPECT_EQ(test_bit(t.vlan_other, i), !m.vlan);
    EXPECT_EQ(test_bit(t.ingress_port_other, i), !m.port);
    for (const PortRangeBits& r : t.src_port)
      for (uint16_t port : {r.lo, r.hi})
        EXPECT_EQ(test_bit(r.rules, i), !m.src_port || (m.src_port->lo <= port && port <= m.src_port->hi));
    for (const ExactBits& v : t.vlan) EXPECT_EQ(test_bit(v.rules, i), !m.vlan || *m.vlan == v.value);
  }
}

TEST(MatchTables, RandomRuleSetsAgreeWithTheLinearWalk) {
  size_t matched = 0, frames = 0;
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    RandomRules gen(seed);
    const size_t n = std::array<size_t, 8>{1, 2, 5, 30, 63, 64, 65, 200}[seed % 8];
    const double p = 0.1 + 0.1 * double(seed % 5);
    std::vector<Rule> rules = gen.rules(n, p);
    expect_well_formed(compile_match_tables(rules));
    expect_agreement(rules, gen, 2000, &matched);
    frames += 2000;
    if (HasFatalFailure()) return;
  }
  // The pools are small enough that rules do match: the comparison is not all -1s.
  EXPECT_GT(matched, frames / 10);
  EXPECT_LT(matched, frames);
}

TEST(MatchTables, TenThousandRulesAgreeWithTheLinearWalk) {
  RandomRules gen(10'000);
  std::vector<Rule> rules = gen.rules(10'000, 0.5);
  const MatchTables t = compile_match_tables(rules);
  expect_well_formed(t);
  size_t matched = 0;
  expect_agreement(rules, gen, 1000, &matched);
  EXPECT_GT(matched, 0u);
}

TEST(MatchTables, NestedPrefixesInAnyOrder) {
  // A /24 inside a /16 inside a /8, listed broadest first: the broadest wins everything.
  std::vector<Rule> rules;
  Match m8, m16, m24, other;
  m8.src = cidr(4, {10}, 8);
  m16.src = cidr(4, {10, 1}, 16);
  m24.src = cidr(4, {10, 1, 2}, 24);
  other.src = cidr(4, {11}, 8);
  rules = {rule_with(m16), rule_with(m24), rule_with(other), rule_with(m8)};
  const MatchTables t = compile_match_tables(rules);
  ASSERT_EQ(t.src_v4.size(), 5u);  // /0 and the four
  auto first = [&](std::array<uint8_t, 4> src) {
    return tables_first_match(t, v4_frame(src, {1, 1, 1, 1}), 0);
  };
  EXPECT_EQ(first({10, 1, 2, 3}), 0);  // in all three; /16 is first in the file
  EXPECT_EQ(first({10, 1, 9, 3}), 0);
  EXPECT_EQ(first({10, 9, 2, 3}), 3);  // only the /8
  EXPECT_EQ(first({11, 1, 2, 3}), 2);
  EXPECT_EQ(first({12, 1, 2, 3}), -1);
  // The /24's entry holds the rules of every enclosing prefix.
  const PrefixBits& e24 = *std::find_if(t.src_v4.begin(), t.src_v4.end(),
                                        [](const PrefixBits& e) { return e.prefix.prefix_len == 24; });
  EXPECT_EQ(e24.rules[0], 0b1011u);
}

TEST(MatchTables, FamiliesDoNotMix) {
  Match v4, v6, any, mixed;
  v4.src = cidr(4, {}, 0);
  v6.dst = cidr(6, {0x20, 0x01}, 16);
  mixed.src = cidr(4, {}, 0);
  mixed.dst = cidr(6, {}, 0);
  any.proto = 17;
  const std::vector<Rule> rules = {rule_with(mixed), rule_with(v6), rule_with(v4), rule_with(any)};
  const MatchTables t = compile_match_tables(rules);
  EXPECT_EQ(tables_first_match(t, v4_frame({1, 2, 3, 4}, {5, 6, 7, 8}), 0), 2);
  ParsedFrame pf6;
  pf6.ip_version = 6;
  pf6.proto = 17;
  pf6.has_ports = true;
  pf6.dst[0] = 0x20, pf6.dst[1] = 0x01;
  pf6.match_word = match_word::of(pf6);
  EXPECT_EQ(tables_first_match(t, pf6, 0), 1);
  pf6.dst[1] = 0x02;
  pf6.match_word = match_word::of(pf6);
  EXPECT_EQ(tables_first_match(t, pf6, 0), 3);
  // The mixed rule is in no entry of src_v6 nor of dst_v4.
  for (const PrefixBits& e : t.src_v6) EXPECT_FALSE(test_bit(e.rules, 0));
  for (const PrefixBits& e : t.dst_v4) EXPECT_FALSE(test_bit(e.rules, 0));
}

TEST(MatchTables, OverlappingPortRangesAndPortlessFrames) {
  Match web, high, dns, none;
  web.dst_port = PortRange{80, 443};
  high.dst_port = PortRange{400, 65535};
  dns.src_port = PortRange{53, 53};
  dns.proto = 17;
  none.proto = 17;
  const std::vector<Rule> rules = {rule_with(web), rule_with(high), rule_with(dns), rule_with(none)};
  const MatchTables t = compile_match_tables(rules);
  expect_well_formed(t);
  auto first = [&](bool ports, uint16_t s, uint16_t d) {
    return tables_first_match(t, v4_frame({1, 1, 1, 1}, {2, 2, 2, 2}, 17, ports, s, d), 0);
  };
  EXPECT_EQ(first(true, 1, 80), 0);
  EXPECT_EQ(first(true, 1, 443), 0);
  EXPECT_EQ(first(true, 1, 444), 1);
  EXPECT_EQ(first(true, 1, 399), 0);
  EXPECT_EQ(first(true, 1, 79), 3);
  EXPECT_EQ(first(true, 53, 79), 2);
  EXPECT_EQ(first(true, 53, 400), 0);
  // A non-first fragment (no ports) matches no rule with a port condition.
  EXPECT_EQ(first(false, 0, 0), 3);
  EXPECT_EQ(t.no_ports[0], 0b1000u);
}

TEST(MatchTables, VlanDscpIngressAndNonIpFrames) {
  Match vlan7, ef, port3, l2;
  vlan7.vlan = 7;
  ef.dscp = 46;
  port3.port = 3;
  const std::vector<Rule> rules = {rule_with(vlan7), rule_with(ef), rule_with(port3), rule_with(l2)};
  const MatchTables t = compile_match_tables(rules);
  ParsedFrame pf = v4_frame({1, 1, 1, 1}, {2, 2, 2, 2});
  EXPECT_EQ(tables_first_match(t, pf, 0), 3);
  EXPECT_EQ(tables_first_match(t, pf, 3), 2);
  pf.dscp = 46;
  pf.match_word = match_word::of(pf);
  EXPECT_EQ(tables_first_match(t, pf, 3), 1);
  pf.vlan_count = 2, pf.outer_vlan = 7, pf.inner_vlan = 9;
  pf.match_word = match_word::of(pf);
  EXPECT_EQ(tables_first_match(t, pf, 3), 0);
  pf.outer_vlan = 8;
  pf.match_word = match_word::of(pf);
  EXPECT_EQ(tables_first_match(t, pf, 3), 1);
  // Not IP: the DSCP rule cannot hold, the VLAN and port rules can.
  ParsedFrame arp;
  arp.match_word = match_word::of(arp);
  EXPECT_EQ(tables_first_match(t, arp, 3), 2);
  EXPECT_EQ(tables_first_match(t, arp, 0), 3);
  EXPECT_EQ(t.non_ip[0], 0b1101u);
}

TEST(MatchTables, NoRules) {
  const MatchTables t = compile_match_tables({});
  EXPECT_EQ(t.rule_count, 0u);
  expect_well_formed(t);
  EXPECT_EQ(tables_first_match(t, v4_frame({1, 1, 1, 1}, {2, 2, 2, 2}), 0), -1);
}
