#include "xdp_match_maps.hpp"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "../dataplane/abi/sluice_abi.h"
#include "../dataplane/core/match_tables.hpp"
#include "sluice.skel.h"

namespace sluice::xdp {
namespace {

Error map_error(const bpf_map* map, int err) {
  return make_error(std::string("XDP map ") + bpf_map__name(map) + ": " +
                    std::strerror(err < 0 ? -err : err));
}

sl_rule_bits to_abi(const RuleBits& bits) {
  sl_rule_bits out{};
  for (size_t i = 0; i < bits.size() && i < SL_XDP_RULE_WORDS; ++i) out.w[i] = bits[i];
  return out;
}

template <class K, class V>
Status put(bpf_map* map, const K& key, const V& value) {
  if (int err = bpf_map__update_elem(map, &key, sizeof(K), &value, sizeof(V), BPF_ANY))
    return map_error(map, err);
  return Ok{};
}

// Every entry of a hash or LPM map that belongs to `bank`, deleted (the keys are collected
// first: deleting while walking would restart the walk).
template <class K, class BankOf>
Status clear_bank(bpf_map* map, uint32_t bank, BankOf bank_of) {
  std::vector<K> doomed;
  K key{}, next{};
  const K* at = nullptr;
  while (bpf_map__get_next_key(map, at, &next, sizeof(K)) == 0) {
    if (bank_of(next) == bank) doomed.push_back(next);
    key = next;
    at = &key;
  }
  for (const K& k : doomed)
    if (int err = bpf_map__delete_elem(map, &k, sizeof(K), 0)) return map_error(map, err);
  return Ok{};
}

// Entries first..first+values.size()-1 of an array map in one system call.
template <class V>
Status put_all(bpf_map* map, const std::vector<V>& values, uint32_t first) {
  std::vector<uint32_t> keys(values.size());
  for (uint32_t i = 0; i < keys.size(); ++i) keys[i] = first + i;
  uint32_t count = uint32_t(values.size());
  LIBBPF_OPTS(bpf_map_batch_opts, opts);
  if (bpf_map_update_batch(bpf_map__fd(map), keys.data(), values.data(), &count, &opts))
    return map_error(map, errno);
  return Ok{};
}

template <class Key, size_t AddrBytes>
Status fill_prefixes(bpf_map* map, const std::vector<PrefixBits>& entries, uint32_t bank) {
  if (Status s = clear_bank<Key>(map, bank, [](const Key& k) { return uint32_t(k.bank); }); !s)
    return s;
  for (const PrefixBits& e : entries) {
    Key key{};
    key.prefixlen = SL_LPM_BANK_BITS + e.prefix.prefix_len;
    key.bank = uint8_t(bank);
    std::memcpy(key.addr, e.prefix.addr.data(), AddrBytes);
    if (Status s = put(map, key, to_abi(e.rules)); !s) return s;
  }
  return Ok{};
}

Status fill_ports(bpf_map* range_map, bpf_map* bits_map, const std::vector<PortRangeBits>& ranges,
                  uint32_t bank) {
  if (ranges.size() > SL_XDP_MAX_PORT_RANGES)
    return make_error("too many distinct port ranges for the XDP backend");
  std::vector<uint32_t> range_of(65536, 0);
  std::vector<sl_rule_bits> bits(SL_XDP_MAX_PORT_RANGES, sl_rule_bits{});
  for (uint32_t i = 0; i < ranges.size(); ++i) {
    for (uint32_t p = ranges[i].lo; p <= ranges[i].hi; ++p) range_of[p] = i;
    bits[i] = to_abi(ranges[i].rules);
  }
  if (Status s = put_all(bits_map, bits, bank * SL_XDP_MAX_PORT_RANGES); !s) return s;
  return put_all(range_map, range_of, bank * 65536);
}

template <size_t N>
Status fill_exact_array(bpf_map* map, const std::array<RuleBits, N>& table, uint32_t bank) {
  std::vector<sl_rule_bits> bits;
  for (const RuleBits& b : table) bits.push_back(to_abi(b));
  return put_all(map, bits, bank * uint32_t(N));
}

// Every rule of the set: what a table entry holds for a field no rule constrains.
bool all_rules(const RuleBits& b, size_t rule_count) {
  for (size_t i = 0; i < rule_count; ++i)
    if (!test_bit(b, i)) return false;
  return true;
}

}  // namespace

uint16_t used_fields(const MatchTables& mt) {
  const size_t n = mt.rule_count;
  auto all = [n](const RuleBits& b) { return all_rules(b, n); };
  auto prefixes_all = [&](const std::vector<PrefixBits>& v) {
    for (const PrefixBits& e : v)
      if (!all(e.rules)) return false;
    return true;
  };
  auto ports_all = [&](const std::vector<PortRangeBits>& v) {
    for (const PortRangeBits& e : v)
      if (!all(e.rules)) return false;
    return true;
  };
  auto exact_all = [&](const std::vector<ExactBits>& v) {
    for (const ExactBits& e : v)
      if (!all(e.rules)) return false;
    return true;
  };
  auto array_all = [&](const auto& a) {
    for (const RuleBits& b : a)
      if (!all(b)) return false;
    return true;
  };
  uint16_t mask = 0;
  if (!exact_all(mt.vlan) || !all(mt.vlan_other) || !all(mt.untagged)) mask |= SL_FIELD_VLAN;
  if (!exact_all(mt.ingress_port) || !all(mt.ingress_port_other)) mask |= SL_FIELD_INGRESS;
  if (!prefixes_all(mt.src_v4) || !prefixes_all(mt.src_v6)) mask |= SL_FIELD_SRC;
  if (!prefixes_all(mt.dst_v4) || !prefixes_all(mt.dst_v6)) mask |= SL_FIELD_DST;
  if (!array_all(mt.proto)) mask |= SL_FIELD_PROTO;
  if (!array_all(mt.dscp)) mask |= SL_FIELD_DSCP;
  // A frame without ports looks up no_ports instead; it holds every rule exactly when no rule
  // has a port condition, so it is skipped with the two port fields.
  if (!ports_all(mt.src_port) || !all(mt.no_ports)) mask |= SL_FIELD_SPORT;
  if (!ports_all(mt.dst_port) || !all(mt.no_ports)) mask |= SL_FIELD_DPORT;
  if (!all(mt.non_ip)) mask |= SL_FIELD_IP;
  return mask;
}

Result<uint16_t> fill_match_maps(sluice_bpf* skel, const std::vector<Rule>& rules, uint32_t bank) {
  const MatchTables mt = compile_match_tables(rules);
  auto& m = skel->maps;
  if (Status s = fill_prefixes<sl_lpm_v4_key, 4>(m.sl_src_v4, mt.src_v4, bank); !s) return s.error();
  if (Status s = fill_prefixes<sl_lpm_v4_key, 4>(m.sl_dst_v4, mt.dst_v4, bank); !s) return s.error();
  if (Status s = fill_prefixes<sl_lpm_v6_key, 16>(m.sl_src_v6, mt.src_v6, bank); !s) return s.error();
  if (Status s = fill_prefixes<sl_lpm_v6_key, 16>(m.sl_dst_v6, mt.dst_v6, bank); !s) return s.error();
  if (Status s = fill_ports(m.sl_sport_range, m.sl_sport_bits, mt.src_port, bank); !s)
    return s.error();
  if (Status s = fill_ports(m.sl_dport_range, m.sl_dport_bits, mt.dst_port, bank); !s)
    return s.error();
  if (Status s = fill_exact_array(m.sl_proto_bits, mt.proto, bank); !s) return s.error();
  if (Status s = fill_exact_array(m.sl_dscp_bits, mt.dscp, bank); !s) return s.error();

  std::vector<sl_rule_bits> vlan(SL_XDP_VLAN_IDS, to_abi(mt.vlan_other));
  for (const ExactBits& e : mt.vlan) vlan[e.value & 0xfff] = to_abi(e.rules);
  if (Status s = put_all(m.sl_vlan_bits, vlan, bank * SL_XDP_VLAN_IDS); !s) return s.error();

  if (mt.ingress_port.size() > SL_XDP_MAX_INGRESS_PORTS)
    return make_error("too many distinct ingress ports for the XDP backend");
  if (Status s = clear_bank<uint64_t>(m.sl_ingress_bits, bank,
                                      [](uint64_t k) { return uint32_t(k >> 32); });
      !s)
    return s.error();
  for (const ExactBits& e : mt.ingress_port)
    if (Status s = put(m.sl_ingress_bits, sl_ingress_key(bank, e.value), to_abi(e.rules)); !s)
      return s.error();

  std::vector<sl_rule_bits> misc(SL_BITS_COUNT);
  misc[SL_BITS_NO_PORTS] = to_abi(mt.no_ports);
  misc[SL_BITS_UNTAGGED] = to_abi(mt.untagged);
  misc[SL_BITS_INGRESS_OTHER] = to_abi(mt.ingress_port_other);
  misc[SL_BITS_NON_IP] = to_abi(mt.non_ip);
  if (Status s = put_all(m.sl_misc_bits, misc, bank * SL_BITS_COUNT); !s) return s.error();
  return used_fields(mt);
}

}  // namespace sluice::xdp
