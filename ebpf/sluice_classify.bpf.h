/*
 * Classification with the shared scheme of dataplane/core/match_tables.hpp: one lookup per
 * field a rule constrains, each giving a bitmap of candidate rules; the intersection's lowest
 * set bit is the first matching rule in file order.
 */
#ifndef SLUICE_EBPF_SLUICE_CLASSIFY_BPF_H
#define SLUICE_EBPF_SLUICE_CLASSIFY_BPF_H

#include "sluice_maps.bpf.h"
#include "sluice_parse.bpf.h"

static __always_inline int sl_and(struct sl_rule_bits *acc, const struct sl_rule_bits *b) {
  if (!b) return -1;
  for (int i = 0; i < SL_XDP_RULE_WORDS; ++i) acc->w[i] &= b->w[i];
  return 0;
}

static __always_inline struct sl_rule_bits *sl_misc(__u32 bank, __u32 key) {
  key += bank * SL_BITS_COUNT;
  return bpf_map_lookup_elem(&sl_misc_bits, &key);
}

/* Index of the lowest set bit of a nonzero word (BPF has no count-trailing-zeros). */
static __always_inline __u32 sl_ctz(__u64 w) {
  __u32 n = 0;
  if (!(w & 0xffffffffull)) n += 32, w >>= 32;
  if (!(w & 0xffffull)) n += 16, w >>= 16;
  if (!(w & 0xffull)) n += 8, w >>= 8;
  if (!(w & 0xfull)) n += 4, w >>= 4;
  if (!(w & 0x3ull)) n += 2, w >>= 2;
  if (!(w & 0x1ull)) n += 1;
  return n;
}

static __always_inline int sl_port_bits(void *range_map, void *bits_map, __u32 bank,
                                        __u16 port, struct sl_rule_bits *acc) {
  __u32 key = bank * 65536 + port;
  __u32 *range = bpf_map_lookup_elem(range_map, &key);
  if (!range) return -1;
  key = bank * SL_XDP_MAX_PORT_RANGES + *range;
  return sl_and(acc, bpf_map_lookup_elem(bits_map, &key));
}

/* The first rule (file order) of bank `bank` the frame matches, or -1. A field no rule of
 * the bank constrains (not in field_mask) would give every rule: its lookup is skipped. */
static __always_inline int sl_classify(const struct sl_frame *f, __u32 port, __u32 bank,
                                       __u32 mask) {
  struct sl_rule_bits acc;
  __u32 key;
  for (int i = 0; i < SL_XDP_RULE_WORDS; ++i) acc.w[i] = ~0ull;
  if (mask & SL_FIELD_VLAN) {
    if (f->vlan_count) {
      key = bank * SL_XDP_VLAN_IDS + (f->outer_vlan & (SL_XDP_VLAN_IDS - 1));
      if (sl_and(&acc, bpf_map_lookup_elem(&sl_vlan_bits, &key))) return -1;
    } else if (sl_and(&acc, sl_misc(bank, SL_BITS_UNTAGGED))) {
      return -1;
    }
  }
  if (mask & SL_FIELD_INGRESS) {
    __u64 ikey = sl_ingress_key(bank, port);
    struct sl_rule_bits *b = bpf_map_lookup_elem(&sl_ingress_bits, &ikey);
    if (sl_and(&acc, b ? b : sl_misc(bank, SL_BITS_INGRESS_OTHER))) return -1;
  }
  if (f->ip_version == 0) {
    if ((mask & SL_FIELD_IP) && sl_and(&acc, sl_misc(bank, SL_BITS_NON_IP))) return -1;
  } else {
    if (f->ip_version == 4) {
      struct sl_lpm_v4_key k = {.prefixlen = SL_LPM_BANK_BITS + 32, .bank = (__u8)bank};
      if (mask & SL_FIELD_SRC) {
        __builtin_memcpy(k.addr, f->src, 4);
        if (sl_and(&acc, bpf_map_lookup_elem(&sl_src_v4, &k))) return -1;
      }
      if (mask & SL_FIELD_DST) {
        __builtin_memcpy(k.addr, f->dst, 4);
        if (sl_and(&acc, bpf_map_lookup_elem(&sl_dst_v4, &k))) return -1;
      }
    } else if (mask & (SL_FIELD_SRC | SL_FIELD_DST)) {
      struct sl_lpm_v6_key k = {.prefixlen = SL_LPM_BANK_BITS + 128, .bank = (__u8)bank};
      if (mask & SL_FIELD_SRC) {
        __builtin_memcpy(k.addr, f->src, 16);
        if (sl_and(&acc, bpf_map_lookup_elem(&sl_src_v6, &k))) return -1;
      }
      if (mask & SL_FIELD_DST) {
        __builtin_memcpy(k.addr, f->dst, 16);
        if (sl_and(&acc, bpf_map_lookup_elem(&sl_dst_v6, &k))) return -1;
      }
    }
    if (mask & SL_FIELD_PROTO) {
      key = bank * 256 + f->proto;
      if (sl_and(&acc, bpf_map_lookup_elem(&sl_proto_bits, &key))) return -1;
    }
    if (mask & SL_FIELD_DSCP) {
      key = bank * 64 + (f->dscp & 0x3f);
      if (sl_and(&acc, bpf_map_lookup_elem(&sl_dscp_bits, &key))) return -1;
    }
    if (f->has_ports) {
      if ((mask & SL_FIELD_SPORT) &&
          sl_port_bits(&sl_sport_range, &sl_sport_bits, bank, f->src_port, &acc))
        return -1;
      if ((mask & SL_FIELD_DPORT) &&
          sl_port_bits(&sl_dport_range, &sl_dport_bits, bank, f->dst_port, &acc))
        return -1;
    } else if ((mask & (SL_FIELD_SPORT | SL_FIELD_DPORT)) &&
               sl_and(&acc, sl_misc(bank, SL_BITS_NO_PORTS))) {
      return -1;
    }
  }
  for (int i = 0; i < SL_XDP_RULE_WORDS; ++i)
    if (acc.w[i]) return i * 64 + (int)sl_ctz(acc.w[i]);
  return -1;
}

#endif /* SLUICE_EBPF_SLUICE_CLASSIFY_BPF_H */
