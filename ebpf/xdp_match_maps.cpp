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

// Every entry of a hash or LPM map, deleted.
template <class K>
Status clear(bpf_map* map) {
  K key{};
  while (bpf_map__get_next_key(map, nullptr, &key, sizeof(K)) == 0)
    if (int err = bpf_map__delete_elem(map, &key, sizeof(K), 0)) return map_error(map, err);
  return Ok{};
}

// All of an array map's entries in one system call.
template <class V>
Status put_all(bpf_map* map, const std::vector<V>& values) {
  std::vector<uint32_t> keys(values.size());
  for (uint32_t i = 0; i < keys.size(); ++i) keys[i] = i;
  uint32_t count = uint32_t(values.size());
  LIBBPF_OPTS(bpf_map_batch_opts, opts);
  if (bpf_map_update_batch(bpf_map__fd(map), keys.data(), values.data(), &count, &opts))
    return map_error(map, errno);
  return Ok{};
}

template <class Key, size_t AddrBytes>
Status fill_prefixes(bpf_map* map, const std::vector<PrefixBits>& entries) {
  if (Status s = clear<Key>(map); !s) return s;
  for (const PrefixBits& e : entries) {
    Key key{};
    key.prefixlen = e.prefix.prefix_len;
    std::memcpy(key.addr, e.prefix.addr.data(), AddrBytes);
    if (Status s = put(map, key, to_abi(e.rules)); !s) return s;
  }
  return Ok{};
}

Status fill_ports(bpf_map* range_map, bpf_map* bits_map, const std::vector<PortRangeBits>& ranges) {
  if (ranges.size() > SL_XDP_MAX_PORT_RANGES)
    return make_error("too many distinct port ranges for the XDP backend");
  std::vector<uint32_t> range_of(65536, 0);
  std::vector<sl_rule_bits> bits(SL_XDP_MAX_PORT_RANGES, sl_rule_bits{});
  for (uint32_t i = 0; i < ranges.size(); ++i) {
    for (uint32_t p = ranges[i].lo; p <= ranges[i].hi; ++p) range_of[p] = i;
    bits[i] = to_abi(ranges[i].rules);
  }
  if (Status s = put_all(bits_map, bits); !s) return s;
  return put_all(range_map, range_of);
}

template <size_t N>
Status fill_exact_array(bpf_map* map, const std::array<RuleBits, N>& table) {
  std::vector<sl_rule_bits> bits;
  for (const RuleBits& b : table) bits.push_back(to_abi(b));
  return put_all(map, bits);
}

}  // namespace

Status fill_match_maps(sluice_bpf* skel, const std::vector<Rule>& rules) {
  const MatchTables mt = compile_match_tables(rules);
  auto& m = skel->maps;
  if (Status s = fill_prefixes<sl_lpm_v4_key, 4>(m.sl_src_v4, mt.src_v4); !s) return s;
  if (Status s = fill_prefixes<sl_lpm_v4_key, 4>(m.sl_dst_v4, mt.dst_v4); !s) return s;
  if (Status s = fill_prefixes<sl_lpm_v6_key, 16>(m.sl_src_v6, mt.src_v6); !s) return s;
  if (Status s = fill_prefixes<sl_lpm_v6_key, 16>(m.sl_dst_v6, mt.dst_v6); !s) return s;
  if (Status s = fill_ports(m.sl_sport_range, m.sl_sport_bits, mt.src_port); !s) return s;
  if (Status s = fill_ports(m.sl_dport_range, m.sl_dport_bits, mt.dst_port); !s) return s;
  if (Status s = fill_exact_array(m.sl_proto_bits, mt.proto); !s) return s;
  if (Status s = fill_exact_array(m.sl_dscp_bits, mt.dscp); !s) return s;

  std::vector<sl_rule_bits> vlan(SL_XDP_VLAN_IDS, to_abi(mt.vlan_other));
  for (const ExactBits& e : mt.vlan) vlan[e.value & 0xfff] = to_abi(e.rules);
  if (Status s = put_all(m.sl_vlan_bits, vlan); !s) return s;

  if (mt.ingress_port.size() > SL_XDP_MAX_INGRESS_PORTS)
    return make_error("too many distinct ingress ports for the XDP backend");
  if (Status s = clear<uint32_t>(m.sl_ingress_bits); !s) return s;
  for (const ExactBits& e : mt.ingress_port)
    if (Status s = put(m.sl_ingress_bits, uint32_t(e.value), to_abi(e.rules)); !s) return s;

  std::vector<sl_rule_bits> misc(SL_BITS_COUNT);
  misc[SL_BITS_NO_PORTS] = to_abi(mt.no_ports);
  misc[SL_BITS_UNTAGGED] = to_abi(mt.untagged);
  misc[SL_BITS_INGRESS_OTHER] = to_abi(mt.ingress_port_other);
  misc[SL_BITS_NON_IP] = to_abi(mt.non_ip);
  return put_all(m.sl_misc_bits, misc);
}

}  // namespace sluice::xdp
