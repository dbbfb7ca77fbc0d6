#include "match_tables.hpp"

#include <algorithm>
#include <map>
#include <optional>
#include <utility>

namespace sluice {
namespace {

using Addr = std::array<uint8_t, 16>;

unsigned max_len(uint8_t family) { return family == 4 ? 32 : 128; }

Addr masked(const Addr& a, unsigned len) {
  Addr m{};
  for (unsigned i = 0; i < 16 && 8 * i < len; ++i) {
    const unsigned keep = len >= 8 * (i + 1) ? 8 : len - 8 * i;
    m[i] = uint8_t(a[i] & (0xff00u >> keep));
  }
  return m;
}

// p contains q (both masked, same family).
bool contains(const Cidr& p, const Cidr& q) {
  return p.prefix_len <= q.prefix_len && masked(q.addr, p.prefix_len) == p.addr;
}

void or_into(RuleBits& dst, const RuleBits& src) {
  for (size_t w = 0; w < dst.size(); ++w) dst[w] |= src[w];
}

// The rules with no condition on a field: the bits every entry of that field's table holds.
template <class Has>
RuleBits without(const std::vector<Rule>& rules, Has has) {
  RuleBits b(words_for(rules.size()), 0);
  for (size_t i = 0; i < rules.size(); ++i)
    if (!has(rules[i].match)) set_bit(b, i);
  return b;
}

// One address field of one family. Entries are sorted so that a prefix comes after every
// prefix containing it (address, then length); a stack of the open enclosing entries then
// gives each entry its parent, whose bits (final by then: a parent's rules all come before
// its first child) it inherits: O(entries * words), not O(entries^2).
std::vector<PrefixBits> prefix_table(const std::vector<Rule>& rules, uint8_t family,
                                     std::optional<Cidr> Match::*field) {
  std::vector<std::pair<Cidr, size_t>> conds;  // (masked prefix, rule)
  for (size_t i = 0; i < rules.size(); ++i) {
    const std::optional<Cidr>& c = rules[i].match.*field;
    if (!c || c->family != family) continue;
    Cidr p;
    p.family = family;
    p.prefix_len = uint8_t(std::min<unsigned>(c->prefix_len, max_len(family)));
    p.addr = masked(c->addr, p.prefix_len);
    conds.emplace_back(p, i);
  }
  auto before = [](const Cidr& a, const Cidr& b) {
    return a.addr != b.addr ? a.addr < b.addr : a.prefix_len < b.prefix_len;
  };
  std::sort(conds.begin(), conds.end(), [&](const auto& a, const auto& b) {
    return before(a.first, b.first) || (a.first == b.first && a.second < b.second);
  });

  std::vector<PrefixBits> out;
  Cidr root;
  root.family = family;
  out.push_back({root, without(rules, [&](const Match& m) { return (m.*field).has_value(); })});
  std::vector<size_t> open{0};  // indexes into out: the chain of entries enclosing the next
  for (size_t k = 0; k < conds.size();) {
    const Cidr& p = conds[k].first;
    if (!(p == out.back().prefix)) {
      while (!contains(out[open.back()].prefix, p)) open.pop_back();  // the /0 always holds
      out.push_back({p, out[open.back()].rules});
      open.push_back(out.size() - 1);
    }
    for (; k < conds.size() && conds[k].first == p; ++k) set_bit(out.back().rules, conds[k].second);
  }
  return out;
}

// One port field: a sweep over the range boundaries, each elementary range getting the rules
// open over it.
std::vector<PortRangeBits> port_table(const std::vector<Rule>& rules,
                                      std::optional<PortRange> Match::*field) {
  const RuleBits wild = without(rules, [&](const Match& m) { return (m.*field).has_value(); });
  // (point, rule + 1) opens the rule at point, (point, -(rule + 1)) closes it there.
  std::vector<std::pair<uint32_t, long>> events;
  for (size_t i = 0; i < rules.size(); ++i) {
    const std::optional<PortRange>& r = rules[i].match.*field;
    if (!r || r->lo > r->hi) continue;  // an empty range holds no port
    events.emplace_back(r->lo, long(i) + 1);
    events.emplace_back(uint32_t(r->hi) + 1, -(long(i) + 1));
  }
  std::sort(events.begin(), events.end());
  std::vector<PortRangeBits> out;
  RuleBits open(wild.size(), 0);
  size_t e = 0;
  uint32_t point = 0;
  while (point <= 0xffff) {
    for (; e < events.size() && events[e].first == point; ++e) {
      const long r = events[e].second;
      const size_t rule = size_t(r > 0 ? r : -r) - 1;
      if (r > 0) open[rule / 64] |= uint64_t{1} << (rule % 64);
      else open[rule / 64] &= ~(uint64_t{1} << (rule % 64));
    }
    const uint32_t next = e < events.size() ? std::min<uint32_t>(events[e].first, 0x10000) : 0x10000;
    RuleBits bits = open;
    or_into(bits, wild);
    if (!out.empty() && out.back().rules == bits) {
      out.back().hi = uint16_t(next - 1);
    } else {
      out.push_back({uint16_t(point), uint16_t(next - 1), std::move(bits)});
    }
    point = next;
  }
  return out;
}

// One exact-valued field: the listed values, each with the wildcards.
template <class Value>
std::vector<ExactBits> exact_table(const std::vector<Rule>& rules, const RuleBits& wild,
                                   Value value_of) {
  std::map<uint16_t, RuleBits> by_value;
  for (size_t i = 0; i < rules.size(); ++i) {
    const std::optional<uint16_t> v = value_of(rules[i].match);
    if (!v) continue;
    auto [it, fresh] = by_value.try_emplace(*v, wild);
    set_bit(it->second, i);
  }
  std::vector<ExactBits> out;
  out.reserve(by_value.size());
  for (auto& [v, bits] : by_value) out.push_back({v, std::move(bits)});
  return out;
}

}  // namespace

MatchTables compile_match_tables(const std::vector<Rule>& rules) {
  MatchTables t;
  t.rule_count = rules.size();
  t.src_v4 = prefix_table(rules, 4, &Match::src);
  t.dst_v4 = prefix_table(rules, 4, &Match::dst);
  t.src_v6 = prefix_table(rules, 6, &Match::src);
  t.dst_v6 = prefix_table(rules, 6, &Match::dst);

  t.src_port = port_table(rules, &Match::src_port);
  t.dst_port = port_table(rules, &Match::dst_port);
  t.no_ports = without(rules, [](const Match& m) { return m.src_port || m.dst_port; });

  const RuleBits any_proto = without(rules, [](const Match& m) { return m.proto.has_value(); });
  t.proto.fill(any_proto);
  for (size_t i = 0; i < rules.size(); ++i)
    if (rules[i].match.proto) set_bit(t.proto[*rules[i].match.proto], i);

  const RuleBits any_vlan = without(rules, [](const Match& m) { return m.vlan.has_value(); });
  t.vlan = exact_table(rules, any_vlan, [](const Match& m) -> std::optional<uint16_t> {
    if (!m.vlan) return std::nullopt;
    return uint16_t(*m.vlan & 0xfff);
  });
  t.vlan_other = any_vlan;
  t.untagged = any_vlan;

  const RuleBits any_dscp = without(rules, [](const Match& m) { return m.dscp.has_value(); });
  t.dscp.fill(any_dscp);
  for (size_t i = 0; i < rules.size(); ++i)
    if (rules[i].match.dscp) set_bit(t.dscp[*rules[i].match.dscp & 0x3f], i);

  const RuleBits any_port = without(rules, [](const Match& m) { return m.port.has_value(); });
  t.ingress_port = exact_table(rules, any_port, [](const Match& m) { return m.port; });
  t.ingress_port_other = any_port;

  t.non_ip = without(rules, [](const Match& m) {
    return m.src || m.dst || m.proto || m.dscp || m.src_port || m.dst_port;
  });
  return t;
}

int lowest_common_bit(const std::vector<const RuleBits*>& maps) {
  if (maps.empty()) return -1;
  const size_t words = maps[0]->size();
  for (size_t w = 0; w < words; ++w) {
    uint64_t x = ~uint64_t{0};
    for (const RuleBits* m : maps) x &= (*m)[w];
    if (x != 0) return int(w * 64 + unsigned(__builtin_ctzll(x)));
  }
  return -1;
}

}  // namespace sluice
