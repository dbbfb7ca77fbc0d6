/*
 * Every map of the XDP program (layouts and key schemes in dataplane/abi/sluice_abi.h). The
 * loader reaches them through the skeleton by these names, and pins them under
 * SL_XDP_PIN_ROOT/IFACE/<name>. Included once, by sluice.bpf.c.
 */
#ifndef SLUICE_EBPF_SLUICE_MAPS_BPF_H
#define SLUICE_EBPF_SLUICE_MAPS_BPF_H

#include <linux/bpf.h>
#include <linux/types.h>
#include <bpf/bpf_helpers.h>

#include "sluice_abi.h"

#define SL_ARRAY(name, entries, value_type)  \
  struct {                                   \
    __uint(type, BPF_MAP_TYPE_ARRAY);        \
    __uint(max_entries, entries);            \
    __type(key, __u32);                      \
    __type(value, value_type);               \
  } name SEC(".maps")

#define SL_LPM(name, key_type)                               \
  struct {                                                   \
    __uint(type, BPF_MAP_TYPE_LPM_TRIE);                     \
    __uint(max_entries, SL_XDP_BANKS * SL_XDP_MAX_PREFIXES); \
    __uint(map_flags, BPF_F_NO_PREALLOC);      \
    __type(key, key_type);                     \
    __type(value, struct sl_rule_bits);        \
  } name SEC(".maps")

/* Every rules-derived map holds SL_XDP_BANKS banks (sluice_abi.h "Rule changes"). */
SL_ARRAY(sl_config, 1, struct sl_xdp_config);
SL_ARRAY(sl_banks, SL_XDP_BANKS, struct sl_xdp_bank);
SL_ARRAY(sl_rules, SL_XDP_BANKS * SL_XDP_MAX_RULES, struct sl_xdp_rule);
SL_LPM(sl_src_v4, struct sl_lpm_v4_key);
SL_LPM(sl_dst_v4, struct sl_lpm_v4_key);
SL_LPM(sl_src_v6, struct sl_lpm_v6_key);
SL_LPM(sl_dst_v6, struct sl_lpm_v6_key);
SL_ARRAY(sl_proto_bits, SL_XDP_BANKS * 256, struct sl_rule_bits);
SL_ARRAY(sl_dscp_bits, SL_XDP_BANKS * 64, struct sl_rule_bits);
/* port -> index of its range in sl_*port_bits (of the same bank): 64 K small entries instead
 * of 64 K bitmaps */
SL_ARRAY(sl_sport_range, SL_XDP_BANKS * 65536, __u32);
SL_ARRAY(sl_dport_range, SL_XDP_BANKS * 65536, __u32);
SL_ARRAY(sl_sport_bits, SL_XDP_BANKS * SL_XDP_MAX_PORT_RANGES, struct sl_rule_bits);
SL_ARRAY(sl_dport_bits, SL_XDP_BANKS * SL_XDP_MAX_PORT_RANGES, struct sl_rule_bits);
/* every id: its entry of MatchTables::vlan, or vlan_other */
SL_ARRAY(sl_vlan_bits, SL_XDP_BANKS * SL_XDP_VLAN_IDS, struct sl_rule_bits);
SL_ARRAY(sl_misc_bits, SL_XDP_BANKS * SL_BITS_COUNT, struct sl_rule_bits);
SL_ARRAY(sl_rules_text, 1, struct sl_rules_text); /* user space only (sluice_abi.h) */
/* by state slot, not by bank: a kept rule's aggregate carries over */
SL_ARRAY(sl_aggregates, SL_XDP_STATE_SLOTS, struct sl_bucket);

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, SL_XDP_BANKS * SL_XDP_MAX_INGRESS_PORTS);
  __type(key, __u64); /* sl_ingress_key(bank, port) */
  __type(value, struct sl_rule_bits);
} sl_ingress_bits SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, SL_XDP_MAX_IFACES);
  __type(key, __u32);   /* ifindex */
  __type(value, __u32); /* ingress port id of the rules' `port` field */
} sl_ifport SEC(".maps");

/* One flow table per keyed rule, by state slot (sluice_abi.h "Flow tables"): an array of
 * sets the loader creates with the rule's max-flows (FlowTable::geometry's set count), and
 * its numbers and counts in sl_flow_meta at the same slot; an empty slot has none. The
 * template's max_entries does not bind the tables (BPF_F_INNER_MAP: inner arrays of any size).
 * Sizes, not types: clang gives a struct met only through this pointer a forward BTF
 * declaration, whose size libbpf cannot know. */
struct sl_flow_table {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 1);
  __uint(map_flags, BPF_F_INNER_MAP | BPF_F_MMAPABLE);
  __uint(key_size, sizeof(__u32));
  __uint(value_size, sizeof(struct sl_flow_set));
};
struct {
  __uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
  __uint(max_entries, SL_XDP_STATE_SLOTS);
  __type(key, __u32);
  __array(values, struct sl_flow_table);
} sl_flow_tables SEC(".maps");
SL_ARRAY(sl_flow_meta, SL_XDP_STATE_SLOTS, struct sl_flow_meta);

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, SL_XDP_COUNTER_SLOTS);
  __type(key, __u32);
  __type(value, struct sl_slot_counters);
} sl_counters SEC(".maps");

#endif /* SLUICE_EBPF_SLUICE_MAPS_BPF_H */
