/*
 * sluice's XDP backend: the rules of a rules file enforced inside the kernel with the core's
 * semantics (pipeline.cpp's finish/charge_chain), the core's bucket arithmetic (bucket_math.h)
 * and the shared classification scheme (match_tables.hpp), over maps laid out in
 * dataplane/abi/sluice_abi.h. The loader is ebpf/xdp_program.cpp.
 *
 * Verdicts: a forwarded packet gets XDP_PASS (the kernel stack delivers it, rewritten if it
 * was marked), a dropped one XDP_DROP. Leaky-bucket (shaping) rules never reach the program:
 * XDP cannot hold a packet, so the loader refuses them and names the DPDK backend.
 */
#include <linux/bpf.h>
#include <linux/types.h>
#include <bpf/bpf_helpers.h>

#include "sluice_abi.h"
#include "sluice_parse.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* Load-time switch (see sluice_abi.h "Test clock"). */
const volatile __u8 sl_test_clock = 0;

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

struct {
  __uint(type, BPF_MAP_TYPE_LRU_HASH);
  __uint(max_entries, SL_XDP_DEFAULT_FLOWS); /* the loader sizes it before load */
  __type(key, struct sl_flow_key);
  __type(value, struct sl_bucket);
} sl_flows SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, SL_XDP_COUNTER_SLOTS);
  __type(key, __u32);
  __type(value, struct sl_counter);
} sl_counters SEC(".maps");

/* Bounded retries of a lost compare-and-swap race; the last loss refuses the packet
 * (conservative: contention can never over-admit). */
#define SL_CAS_TRIES 4
/* The meters' claims are contended longer (a CAS and two stores), so they retry more. */
#define SL_METER_TRIES 8

static __always_inline void sl_count(__u32 slot, __u32 outcome, __u32 len) {
  __u32 idx = sl_counter_index(slot, outcome);
  struct sl_counter *c = bpf_map_lookup_elem(&sl_counters, &idx);
  if (c) {
    c->packets += 1;
    c->bytes += len;
  }
}

/* ------------------------------------------------------------------------ classification */

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

/* ------------------------------------------------------------------ flow keys (flow_key.hpp) */

/* The first `bits` (< 64) bits of 8 wire-order bytes loaded little-endian. */
static __always_inline __u64 sl_keep_prefix64(__u64 word, __u32 bits) {
  __u32 full, rem;
  __u64 mask;
  if (bits >= 64) return word;
  if (bits == 0) return 0;
  full = bits / 8;
  rem = bits % 8;
  mask = full ? (((__u64)1) << (8 * full)) - 1 : 0;
  if (rem) mask |= (__u64)((0xff00u >> rem) & 0xff) << (8 * full);
  return word & mask;
}

struct sl_addr {
  __u64 a, b;
};

static __always_inline struct sl_addr sl_load_addr(const __u8 *addr, __u8 version) {
  struct sl_addr x = {0, 0};
  if (version == 6) {
    __builtin_memcpy(&x.a, addr, 8);
    __builtin_memcpy(&x.b, addr + 8, 8);
  } else {
    __u32 v;
    __builtin_memcpy(&v, addr, 4);
    x.a = v;
  }
  return x;
}

static __always_inline struct sl_addr sl_keep_prefix(struct sl_addr x, __u32 bits) {
  struct sl_addr r;
  r.a = sl_keep_prefix64(x.a, bits);
  r.b = bits > 64 ? sl_keep_prefix64(x.b, bits - 64) : 0;
  return r;
}

static __always_inline void sl_flow_key_of(const struct sl_frame *f, const struct sl_xdp_rule *r,
                                           struct sl_flow_key *k) {
  const __u32 addr_bits = f->ip_version == 6 ? 128 : 32;
  __u64 meta = (__u64)r->key_mode | (__u64)f->ip_version << 8;
  struct sl_addr src = {0, 0}, dst = {0, 0};
  __u32 bits;
  switch (r->key_mode) {
    case SL_KEY_SRC_IP: src = sl_load_addr(f->src, f->ip_version); break;
    case SL_KEY_DST_IP: dst = sl_load_addr(f->dst, f->ip_version); break;
    case SL_KEY_SRC_PREFIX:
    case SL_KEY_DST_PREFIX:
      bits = r->key_prefix_len > addr_bits ? addr_bits : r->key_prefix_len;
      meta |= (__u64)bits << 16;
      if (r->key_mode == SL_KEY_SRC_PREFIX)
        src = sl_keep_prefix(sl_load_addr(f->src, f->ip_version), bits);
      else
        dst = sl_keep_prefix(sl_load_addr(f->dst, f->ip_version), bits);
      break;
    case SL_KEY_FIVE_TUPLE:
      meta |= (__u64)f->proto << 24 | (__u64)f->src_port << 32 | (__u64)f->dst_port << 48;
      /* fall through */
    case SL_KEY_SRC_DST:
      src = sl_load_addr(f->src, f->ip_version);
      dst = sl_load_addr(f->dst, f->ip_version);
      break;
    default: break;
  }
  k->state = r->state;
  k->reserved = 0;
  k->w[0] = meta;
  if (f->ip_version == 6) {
    k->w[1] = src.a, k->w[2] = src.b, k->w[3] = dst.a, k->w[4] = dst.b;
  } else {
    k->w[1] = src.a | dst.a << 32, k->w[2] = 0, k->w[3] = 0, k->w[4] = 0;
  }
}

/* -------------------------------------------------------------------------------- buckets */

/* A full bucket under the rule's current profiles. */
static __always_inline void sl_init_bucket(const struct sl_xdp_rule *r, struct sl_bucket *b,
                                           __u64 now_ns) {
  const struct sl_xdp_profiles *p = &r->cur;
  struct sl_meter_state st = {0, 0};
  b->w1 = 0;
  switch (r->algorithm) {
    case SL_ALG_TOKEN_BUCKET: b->w0 = sl_tb_init(&p->rate, now_ns); break;
    case SL_ALG_GCRA: b->w0 = sl_gcra_init(&p->rate, now_ns); break;
    case SL_ALG_SRTCM:
    case SL_ALG_TRTCM:
      if (r->algorithm == SL_ALG_SRTCM)
        sl_srtcm_init(&p->meter, now_ns, &st);
      else
        sl_trtcm_init(&p->meter, now_ns, &st);
      b->w0 = st.e0;
      b->w1 = st.e1;
      break;
    case SL_ALG_FIXED_WINDOW: b->w0 = sl_fixed_window_init(&p->window, now_ns); break;
    case SL_ALG_SLIDING_WINDOW: b->w0 = sl_sliding_window_init(&p->window, now_ns); break;
    default: b->w0 = 0; break;
  }
  b->last_seen_ns = now_ns;
  b->gen = r->gen;
}

/* The profiles bucket b was written under: the rule's current ones, or (a bucket the loader
 * has not converted yet after a rate change) the previous ones. */
static __always_inline const struct sl_xdp_profiles *sl_profiles(const struct sl_xdp_rule *r,
                                                                 const struct sl_bucket *b) {
  return *(volatile __u64 *)&b->gen == r->gen ? &r->cur : &r->prev;
}

/* Waits (boundedly) for a bucket's writer to leave: its even sequence (0: never initialised),
 * or an odd one if the writer is still inside after SL_SEQ_TRIES reads. A writer is inside
 * for a CAS and two stores. */
#define SL_SEQ_TRIES 64
static __always_inline __u64 sl_stable_seq(struct sl_bucket *b) {
  __u64 seq = 1;
  for (int i = 0; i < SL_SEQ_TRIES; ++i) {
    seq = *(volatile __u64 *)&b->seq;
    if (!(seq & 1)) break;
  }
  return seq;
}

/* Starts bucket b over at now_ns if its sequence is still `seen_seq` (0: never initialised;
 * else the sequence under which the caller judged the flow idle). */
static __always_inline void sl_restart(const struct sl_xdp_rule *r, struct sl_bucket *b,
                                       __u64 now_ns, __u64 seen_seq) {
  struct sl_bucket fresh = {};
  sl_init_bucket(r, &fresh, now_ns);
  if (__sync_val_compare_and_swap(&b->seq, seen_seq, seen_seq + 1) != seen_seq) return;
  b->w0 = fresh.w0;
  b->w1 = fresh.w1;
  b->gen = fresh.gen;
  b->last_seen_ns = now_ns;
  __sync_fetch_and_add(&b->seq, 1);
}

/* The rule's bucket for this frame: its aggregate, or its flow's (created full on the flow's
 * first packet). NULL if the flow table refuses an insert, or (a race at an aggregate's very
 * first packet) another CPU's initialisation does not finish within SL_SEQ_TRIES reads. */
static __always_inline struct sl_bucket *sl_state_for(const struct sl_xdp_rule *r,
                                                      const struct sl_frame *f, __u64 now_ns) {
  struct sl_flow_key key;
  struct sl_bucket *b;
  __u64 seen, seq;
  if (r->key_mode == SL_KEY_NONE) {
    __u32 state = r->state;
    b = bpf_map_lookup_elem(&sl_aggregates, &state);
    if (!b) return 0;
    if (*(volatile __u64 *)&b->seq == 0) { /* its first packet, here or on another CPU */
      sl_restart(r, b, now_ns, 0);
      seq = sl_stable_seq(b);
      if (seq == 0 || (seq & 1)) return 0;
    }
    return b;
  }
  sl_flow_key_of(f, r, &key);
  b = bpf_map_lookup_elem(&sl_flows, &key);
  if (!b) {
    struct sl_bucket fresh = {};
    sl_init_bucket(r, &fresh, now_ns);
    fresh.seq = 2;
    /* BPF_NOEXIST: of two CPUs creating the flow at once, the first one's state stays */
    bpf_map_update_elem(&sl_flows, &key, &fresh, BPF_NOEXIST);
    return bpf_map_lookup_elem(&sl_flows, &key);
  }
  seq = *(volatile __u64 *)&b->seq;
  seen = b->last_seen_ns;
  /* The core frees a flow idle past its timeout; its next packet starts it again full (a
   * flow with a writer inside is not idle). */
  if (!(seq & 1) && (__s64)(now_ns - seen) > (__s64)r->idle_timeout_ns)
    sl_restart(r, b, now_ns, seq);
  else if (seen != now_ns)
    b->last_seen_ns = now_ns;
  return b;
}

static __always_inline int sl_police_word(const struct sl_xdp_rule *r,
                                          const struct sl_xdp_profiles *p, __u64 cur,
                                          __u64 now_ns, __u64 cost, __u64 *next) {
  switch (r->algorithm) {
    case SL_ALG_TOKEN_BUCKET: return sl_tb_decide(&p->rate, cur, now_ns, cost, next);
    case SL_ALG_GCRA: return sl_gcra_decide(&p->rate, cur, now_ns, cost, next);
    case SL_ALG_FIXED_WINDOW: return sl_fixed_window_decide(&p->window, cur, now_ns, cost, next);
    case SL_ALG_SLIDING_WINDOW:
      return sl_sliding_window_decide(&p->window, cur, now_ns, cost, next);
    default: *next = cur; return 0;
  }
}

static __always_inline __u64 sl_refund_word(const struct sl_xdp_rule *r,
                                            const struct sl_xdp_profiles *p, __u64 cur,
                                            __u64 now_ns, __u64 cost) {
  switch (r->algorithm) {
    case SL_ALG_TOKEN_BUCKET: return sl_tb_refund(&p->rate, cur, now_ns, cost);
    case SL_ALG_GCRA: return sl_gcra_refund(&p->rate, cur, now_ns, cost);
    case SL_ALG_FIXED_WINDOW: return sl_fixed_window_refund(&p->window, cur, now_ns, cost);
    case SL_ALG_SLIDING_WINDOW: return sl_sliding_window_refund(&p->window, cur, now_ns, cost);
    default: return cur;
  }
}

/* A policer or window: 1 if the packet conforms (and was charged). */
static __always_inline int sl_police(const struct sl_xdp_rule *r, struct sl_bucket *b,
                                     __u64 now_ns, __u64 cost) {
  for (int i = 0; i < SL_CAS_TRIES; ++i) {
    const struct sl_xdp_profiles *p = sl_profiles(r, b);
    __u64 cur = *(volatile __u64 *)&b->w0, next = cur;
    int ok = sl_police_word(r, p, cur, now_ns, cost, &next);
    if (next == cur || __sync_val_compare_and_swap(&b->w0, cur, next) == cur) return ok;
  }
  return 0;
}

static __always_inline void sl_refund(const struct sl_xdp_rule *r, struct sl_bucket *b,
                                      __u64 now_ns, __u64 cost) {
  for (int i = 0; i < SL_CAS_TRIES; ++i) {
    const struct sl_xdp_profiles *p = sl_profiles(r, b);
    __u64 cur = *(volatile __u64 *)&b->w0;
    __u64 next = sl_refund_word(r, p, cur, now_ns, cost);
    if (next == cur || __sync_val_compare_and_swap(&b->w0, cur, next) == cur) return;
  }
}

/* srtcm / trtcm: decide on both words read under an even sequence, publish both through the
 * sequence claim (sluice_abi.h "Buckets"); a lost race decides again on the new words. */
static __always_inline enum sl_colour sl_meter(const struct sl_xdp_rule *r, struct sl_bucket *b,
                                               __u64 now_ns, __u64 cost) {
  for (int i = 0; i < SL_METER_TRIES; ++i) {
    struct sl_meter_state st, next;
    const struct sl_xdp_profiles *p;
    enum sl_colour colour;
    __u64 seq = sl_stable_seq(b);
    if (seq & 1) continue;
    p = sl_profiles(r, b);
    st.e0 = *(volatile __u64 *)&b->w0;
    st.e1 = *(volatile __u64 *)&b->w1;
    colour = r->algorithm == SL_ALG_SRTCM ? sl_srtcm_decide(&p->meter, &st, now_ns, cost, &next)
                                          : sl_trtcm_decide(&p->meter, &st, now_ns, cost, &next);
    if (next.e0 == st.e0 && next.e1 == st.e1) {
      if (*(volatile __u64 *)&b->seq == seq) return colour;
      continue;
    }
    if (__sync_val_compare_and_swap(&b->seq, seq, seq + 1) != seq) continue;
    b->w0 = next.e0;
    b->w1 = next.e1;
    __sync_fetch_and_add(&b->seq, 1);
    return colour;
  }
  return SL_RED;
}

/* -------------------------------------------------------------------------------- actions */

/* RFC 1624 eqn. 3, as frame_rewrite.cpp. */
static __always_inline __u16 sl_csum_update16(__u16 check, __u16 old_word, __u16 new_word) {
  __u32 sum = (__u32)(__u16)~check + (__u16)~old_word + new_word;
  sum = (sum & 0xffff) + (sum >> 16);
  sum = (sum & 0xffff) + (sum >> 16);
  return (__u16)~sum;
}

/* DSCP marking (frame_rewrite.cpp's mark_dscp): 1 if the frame is IP and was (re)marked. */
static __always_inline int sl_mark_dscp(struct xdp_md *ctx, const struct sl_frame *f, __u8 dscp) {
  __u8 h[12];
  if (dscp > 63) return 0;
  if (f->ip_version == 4) {
    __u8 tos;
    __u16 old_word, check;
    if (bpf_xdp_load_bytes(ctx, f->l3_offset, h, 12)) return 0;
    tos = (__u8)(dscp << 2 | (h[1] & 0x03));
    if (tos == h[1]) return 1; /* leave even a -0/+0 checksum spelling as it was */
    old_word = sl_be16(h);
    h[1] = tos;
    check = sl_csum_update16(sl_be16(h + 10), old_word, sl_be16(h));
    h[10] = (__u8)(check >> 8);
    h[11] = (__u8)check;
    if (bpf_xdp_store_bytes(ctx, f->l3_offset, h, 2)) return 0;
    if (bpf_xdp_store_bytes(ctx, f->l3_offset + 10, h + 10, 2)) return 0;
    return 1;
  }
  if (f->ip_version == 6) {
    if (bpf_xdp_load_bytes(ctx, f->l3_offset, h, 2)) return 0;
    h[0] = (__u8)((h[0] & 0xf0) | dscp >> 2);
    h[1] = (__u8)((h[1] & 0x3f) | (dscp & 0x03) << 6);
    return bpf_xdp_store_bytes(ctx, f->l3_offset, h, 2) ? 0 : 1;
  }
  return 0;
}

static __always_inline int sl_act(struct xdp_md *ctx, struct sl_action_entry a, __u32 slot,
                                  const struct sl_frame *f, int parsed_ok) {
  if (a.kind == SL_ACT_DROP) {
    sl_count(slot, SL_OUTCOME_DROPPED, f->len);
    return XDP_DROP;
  }
  if (a.kind == SL_ACT_MARK_DSCP && parsed_ok && sl_mark_dscp(ctx, f, a.dscp)) {
    sl_count(slot, SL_OUTCOME_MARKED, f->len);
    return XDP_PASS;
  }
  sl_count(slot, SL_OUTCOME_PASSED, f->len);
  return XDP_PASS;
}

static __always_inline __u64 sl_cost(const struct sl_xdp_rule *r, __u32 len) {
  return r->cost_unit == SL_COST_PACKETS ? 1 : (__u64)len + r->overhead_bytes;
}

/*
 * One level of a packet's rule chain, and its refund, as global functions: the verifier checks
 * each once, on its own, instead of once per level and path of the chain walk below (inlined,
 * the walk passed the verifier's million-instruction budget).
 */
enum sl_charge_result {
  SL_CHARGE_CONFORMED = 0,
  SL_CHARGE_REFUSED = 1,
  SL_CHARGE_NO_SLOT = 2,
  SL_CHARGE_GREEN = 3, /* meters: SL_CHARGE_GREEN + colour */
};

/* `at`: the key of the rule in sl_rules (bank * SL_XDP_MAX_RULES + index). */
__attribute__((noinline)) int sl_charge(const struct sl_frame *f, __u32 at, __u64 now_ns) {
  struct sl_xdp_rule *r;
  struct sl_bucket *b;
  if (!f) return SL_CHARGE_NO_SLOT;
  r = bpf_map_lookup_elem(&sl_rules, &at);
  if (!r) return SL_CHARGE_NO_SLOT;
  b = sl_state_for(r, f, now_ns);
  if (!b) return SL_CHARGE_NO_SLOT;
  if (r->algorithm == SL_ALG_SRTCM || r->algorithm == SL_ALG_TRTCM)
    return SL_CHARGE_GREEN + (int)sl_meter(r, b, now_ns, sl_cost(r, f->len));
  return sl_police(r, b, now_ns, sl_cost(r, f->len)) ? SL_CHARGE_CONFORMED : SL_CHARGE_REFUSED;
}

/* Gives back what sl_charge(f, at, now_ns) took (SPEC §3 Hierarchy). */
__attribute__((noinline)) int sl_refund_at(const struct sl_frame *f, __u32 at, __u64 now_ns) {
  struct sl_xdp_rule *r;
  struct sl_bucket *b;
  struct sl_flow_key key;
  if (!f) return 0;
  r = bpf_map_lookup_elem(&sl_rules, &at);
  if (!r) return 0;
  if (r->key_mode == SL_KEY_NONE) {
    __u32 state = r->state;
    b = bpf_map_lookup_elem(&sl_aggregates, &state);
  } else {
    sl_flow_key_of(f, r, &key);
    b = bpf_map_lookup_elem(&sl_flows, &key);
  }
  if (b) sl_refund(r, b, now_ns, sl_cost(r, f->len));
  return 0;
}

__attribute__((noinline)) int sl_parse(struct xdp_md *ctx, struct sl_frame *f) {
  if (!f) return -1;
  return sl_parse_frame(ctx, f);
}

__attribute__((noinline)) int sl_classify_frame(const struct sl_frame *f, __u32 port,
                                                __u32 bank, __u32 mask) {
  if (!f) return -1;
  return sl_classify(f, port, bank, mask);
}

static __always_inline void sl_refund_below(const struct sl_xdp_rule *top, __u32 base,
                                            const struct sl_frame *f, int levels, __u64 now_ns) {
  for (int l = 0; l < SL_XDP_MAX_CHAIN; ++l) {
    if (l >= levels) break;
    sl_refund_at(f, base + ((__u32)top->chain[l] & (SL_XDP_MAX_RULES - 1)), now_ns);
  }
}

SEC("xdp")
int sluice_xdp(struct xdp_md *ctx) {
  __u32 zero = 0, port = 0, slot, bank, base;
  struct sl_xdp_config *cfg = bpf_map_lookup_elem(&sl_config, &zero);
  struct sl_xdp_bank *bk;
  struct sl_frame f = {};
  struct sl_xdp_rule *top;
  __u32 *ifport;
  __u64 now_ns;
  int rule = -1, ok;
  if (!cfg) return XDP_PASS;
  /* The bank first, then the clock: a packet that sees a new rule set reads a time no earlier
   * than the loader's switch (bucket conversions are stamped with that time). */
  bank = *(volatile __u32 *)&cfg->active_bank & (SL_XDP_BANKS - 1);
  bk = bpf_map_lookup_elem(&sl_banks, &bank);
  if (!bk) return XDP_PASS;
  base = bank * SL_XDP_MAX_RULES;
  now_ns = sl_test_clock ? cfg->test_now_ns : bpf_ktime_get_ns();
  f.len = (__u32)(ctx->data_end - ctx->data);
  ok = sl_parse(ctx, &f) == 0;
  if (!ok) { /* start from a clean frame so nothing classifies on half-parsed fields */
    __u32 len = f.len;
    __builtin_memset(&f, 0, sizeof(f));
    f.len = len;
  } else if (bk->rule_count) {
    if (bk->field_mask & SL_FIELD_INGRESS) {
      __u32 ifindex = ctx->ingress_ifindex;
      ifport = bpf_map_lookup_elem(&sl_ifport, &ifindex);
      if (ifport) port = *ifport;
    }
    rule = sl_classify_frame(&f, port, bank, bk->field_mask);
  }
  if (rule < 0 || (__u32)rule >= bk->rule_count || (__u32)rule >= SL_XDP_MAX_RULES) {
    sl_count(SL_XDP_DEFAULT_SLOT, SL_OUTCOME_MATCHED, f.len);
    if (!ok) sl_count(SL_XDP_DEFAULT_SLOT, SL_OUTCOME_MALFORMED, f.len);
    return sl_act(ctx, bk->default_action, SL_XDP_DEFAULT_SLOT, &f, ok);
  }
  slot = base + (__u32)rule;
  top = bpf_map_lookup_elem(&sl_rules, &slot);
  if (!top) return XDP_PASS;
  slot = top->state; /* counters belong to the rule's state slot */
  sl_count(slot, SL_OUTCOME_MATCHED, f.len);
  /* Charge the rule, then each parent; a refusal anywhere gives back what was taken below
   * it, so a refused packet charges nothing. A meter decides and acts where it stands. */
  for (int level = 0; level < SL_XDP_MAX_CHAIN; ++level) {
    __u32 at;
    struct sl_xdp_rule *r;
    int res;
    if (level >= top->chain_len) break;
    at = base + ((__u32)top->chain[level] & (SL_XDP_MAX_RULES - 1));
    r = bpf_map_lookup_elem(&sl_rules, &at);
    if (!r) break;
    res = sl_charge(&f, at, now_ns);
    if (res == SL_CHARGE_CONFORMED) continue;
    if (res >= SL_CHARGE_GREEN) {
      int colour = res - SL_CHARGE_GREEN;
      sl_count(slot, colour == SL_GREEN    ? SL_OUTCOME_GREEN
                     : colour == SL_YELLOW ? SL_OUTCOME_YELLOW
                                           : SL_OUTCOME_RED,
               f.len);
      sl_count(slot, colour == SL_GREEN ? SL_OUTCOME_CONFORMED : SL_OUTCOME_EXCEEDED, f.len);
      return sl_act(ctx, colour == SL_GREEN ? r->green : colour == SL_YELLOW ? r->yellow : r->red,
                    slot, &f, 1);
    }
    sl_refund_below(top, base, &f, level, now_ns);
    sl_count(slot, SL_OUTCOME_EXCEEDED, f.len);
    return sl_act(ctx, res == SL_CHARGE_NO_SLOT ? r->overflow : r->action, slot, &f, 1);
  }
  sl_count(slot, SL_OUTCOME_CONFORMED, f.len);
  sl_count(slot, SL_OUTCOME_PASSED, f.len);
  return XDP_PASS;
}
