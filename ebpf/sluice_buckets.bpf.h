/*
 * Buckets and meters: a rule's state for a frame (its aggregate, or its flow's in the rule's
 * flow table, sluice_flow_table.bpf.h), charged and refunded with the core's arithmetic (bucket_math.h) through BPF
 * compare-and-swap; the meters' two words through a sequence claim (sluice_abi.h "Buckets").
 */
#ifndef SLUICE_EBPF_SLUICE_BUCKETS_BPF_H
#define SLUICE_EBPF_SLUICE_BUCKETS_BPF_H

#include "sluice_flow_key.bpf.h"
#include "sluice_flow_table.bpf.h"
#include "sluice_maps.bpf.h"

/* Bounded retries of a lost compare-and-swap race; the last loss refuses the packet
 * (conservative: contention can never over-admit). */
#define SL_CAS_TRIES 4
/* The meters' claims are contended longer (a CAS and two stores), so they retry more. */
#define SL_METER_TRIES 8

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

/* Starts bucket b over at now_ns if its sequence is still `seen_seq` (0: never initialised). */
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

/* The rule's flow table and its numbers (sl_flow_meta); NULL if the rule has none. */
static __always_inline void *sl_flow_table_of(const struct sl_xdp_rule *r,
                                              struct sl_flow_meta **meta) {
  __u32 state = r->state;
  *meta = bpf_map_lookup_elem(&sl_flow_meta, &state);
  if (!*meta) return 0;
  return bpf_map_lookup_elem(&sl_flow_tables, &state);
}

/* Way `way` (0..15) of the candidate sets s1, s2. */
static __always_inline struct sl_flow_slot *sl_ft_slot(struct sl_flow_set *s1,
                                                       struct sl_flow_set *s2, __u32 way) {
  return way < SL_FT_WAYS ? &s1->slot[way & (SL_FT_WAYS - 1)]
                          : &s2->slot[way & (SL_FT_WAYS - 1)];
}

/* The sweep (sluice_abi.h "Flow tables"): one set per claim. */
static __always_inline void sl_ft_sweep_next(void *table, struct sl_flow_meta *m, __u32 tick) {
  const __u64 sets = m->sets;
  struct sl_flow_set *sw;
  __u32 at;
  if (!sets) return;
  at = (__u32)(__sync_fetch_and_add(&m->cursor, 1) % sets);
  sw = bpf_map_lookup_elem(table, &at);
  if (sw) sl_ft_sweep_set(sw, m, tick);
}

/* A claimed way (0..7) of set s made a flow: its bucket initialised full (the key beside it,
 * for user space), then published seen once; the locked CAS publishes the initialised words. */
static __always_inline struct sl_bucket *sl_ft_publish(const struct sl_xdp_rule *r,
                                                       struct sl_flow_set *s, __u32 way,
                                                       const struct sl_flow_key *key, __u64 fp,
                                                       __u32 tick, __u64 now_ns) {
  struct sl_flow_slot *slot = &s->slot[way & (SL_FT_WAYS - 1)];
  sl_init_bucket(r, &slot->b, now_ns);
  slot->b.seq = 2;
  slot->b.packets = 0;
  slot->b.bytes = 0;
  s->key[way & (SL_FT_WAYS - 1)] = *key;
  __sync_val_compare_and_swap(&s->tag[way & (SL_FT_WAYS - 1)], SL_FT_PENDING | fp,
                              fp | SL_FT_SEEN_ONCE | tick);
  return &slot->b;
}

/* The flow's bucket when it is not in its first set s1 (FlowTable::find_elsewhere_or_insert):
 * its second set, else a claim, after which a created or evicted slot is published. NULL: no
 * slot. */
static __always_inline struct sl_bucket *sl_flow_elsewhere(
    const struct sl_xdp_rule *r, void *table, struct sl_flow_meta *m,
    struct sl_flow_set *s1, const struct sl_flow_key *key, __u64 hash, __u64 fp, __u32 tick,
    __u32 first, __u64 now_ns) {
  struct sl_flow_set *s2 = s1;
  __u32 second = sl_ft_second_set(hash, m->sets), n = SL_FT_WAYS, way;
  int res;
  if (second != first) {
    s2 = bpf_map_lookup_elem(table, &second);
    if (!s2) return 0;
    n = 2 * SL_FT_WAYS;
    res = sl_ft_way(s2, fp, tick, 1);
    if (res >= 0) return &s2->slot[res & (SL_FT_WAYS - 1)].b;
  }
  sl_ft_sweep_next(table, m, tick);
  res = sl_ft_claim(s1, s2, m, fp, (__u64)tick | (__u64)n << SL_FT_TICK_BITS);
  if (!res) return 0;
  way = ((__u32)res >> 8) & (2 * SL_FT_WAYS - 1);
  if ((res & 0xff) == SL_FT_IS_FOUND) return &sl_ft_slot(s1, s2, way)->b;
  return sl_ft_publish(r, way < SL_FT_WAYS ? s1 : s2, way, key, fp, tick, now_ns);
}

/* The frame's flow in a hashed table (created full on its first packet); NULL: no slot. */
static __always_inline struct sl_bucket *sl_hashed_flow(const struct sl_xdp_rule *r,
                                                        const struct sl_frame *f, void *table,
                                                        struct sl_flow_meta *m, __u64 now_ns) {
  struct sl_flow_set *s1;
  struct sl_flow_key key;
  __u32 tick, first;
  __u64 hash, fp;
  int way;
  sl_flow_key_of(f, r, &key);
  hash = sl_flow_hash(&key, m);
  fp = sl_ft_fp(hash);
  tick = sl_ft_tick(m, now_ns);
  first = sl_ft_set(hash, m->sets);
  s1 = bpf_map_lookup_elem(table, &first);
  if (!s1) return 0;
  /* The first set holds nearly every flow: one tag line, then the bucket's line. */
  way = sl_ft_way(s1, fp, tick, 1);
  if (way >= 0) return &s1->slot[way & (SL_FT_WAYS - 1)].b;
  return sl_flow_elsewhere(r, table, m, s1, &key, hash, fp, tick, first, now_ns);
}

/* A dense table's set holding the frame's key (sl_ft_dense_slot), its way in *way and its
 * fingerprint in *fp; NULL if the frame has no key in the table's range. */
static __always_inline struct sl_flow_set *sl_dense_set_of(void *table,
                                                           const struct sl_flow_meta *m,
                                                           const struct sl_frame *f, __u32 *way,
                                                           __u64 *fp) {
  const __s64 slot = sl_ft_dense_slot(m, f->src, f->dst, f->ip_version);
  __u32 set;
  if (slot < 0) return 0;
  set = (__u32)((__u64)slot / SL_FT_WAYS);
  *way = (__u32)slot & (SL_FT_WAYS - 1);
  *fp = sl_ft_dense_fp((__u64)slot);
  return bpf_map_lookup_elem(table, &set);
}

/* The frame's flow in a dense table (FlowTable::find_or_insert_dense): its key's slot, no
 * hash, no tag scan, no second set; NULL: no slot. */
static __always_inline struct sl_bucket *sl_dense_flow(const struct sl_xdp_rule *r,
                                                       const struct sl_frame *f, void *table,
                                                       struct sl_flow_meta *m, __u64 now_ns) {
  struct sl_flow_key key;
  __u32 way = 0, tick;
  __u64 fp = 0, *tag;
  int res;
  struct sl_flow_set *s = sl_dense_set_of(table, m, f, &way, &fp);
  if (!s) return 0;
  tick = sl_ft_tick(m, now_ns);
  tag = &s->tag[way];
  if ((*(volatile __u64 *)tag & ~SL_FT_LIFE_MASK) == fp) {
    sl_ft_touch(tag, fp, tick);
    return &s->slot[way].b;
  }
  sl_ft_sweep_next(table, m, tick);
  res = sl_ft_claim_dense(s, m, way, fp, tick);
  if (!res) return 0;
  if (res == SL_FT_IS_FOUND) return &s->slot[way].b;
  sl_flow_key_of(f, r, &key);
  return sl_ft_publish(r, s, way, &key, fp, tick, now_ns);
}

/* The rule's bucket for this frame: its aggregate, or its flow's in the rule's own table
 * (created full on the flow's first packet). NULL if the rule has no table or no slot for a
 * new flow, or (a race at an aggregate's very first packet) another CPU's initialisation
 * does not finish within SL_SEQ_TRIES reads. */
static __always_inline struct sl_bucket *sl_state_for(const struct sl_xdp_rule *r,
                                                      const struct sl_frame *f, __u64 now_ns) {
  struct sl_flow_meta *m = 0;
  struct sl_bucket *b;
  __u32 state = r->state;
  __u64 seq;
  void *table;
  if (r->key_mode == SL_KEY_NONE) {
    b = bpf_map_lookup_elem(&sl_aggregates, &state);
    if (!b) return 0;
    if (*(volatile __u64 *)&b->seq == 0) { /* its first packet, here or on another CPU */
      sl_restart(r, b, now_ns, 0);
      seq = sl_stable_seq(b);
      if (seq == 0 || (seq & 1)) return 0;
    }
    return b;
  }
  table = sl_flow_table_of(r, &m);
  if (!table || !m) return 0;
  b = m->dense ? sl_dense_flow(r, f, table, m, now_ns) : sl_hashed_flow(r, f, table, m, now_ns);
  if (!b) return 0;
  if (b->last_seen_ns != now_ns) b->last_seen_ns = now_ns;
  b->packets += 1;
  b->bytes += f->len;
  return b;
}

/* The bucket of the frame's flow in the rule's table, without creating or touching it (the
 * refund of a charge this packet made: FlowTable::find). */
static __always_inline struct sl_bucket *sl_flow_find(const struct sl_xdp_rule *r,
                                                      const struct sl_frame *f) {
  struct sl_flow_meta *m = 0;
  struct sl_flow_set *s;
  struct sl_flow_key key;
  __u32 first, second;
  __u64 hash, fp;
  void *table = sl_flow_table_of(r, &m);
  int way;
  if (!table || !m) return 0;
  if (m->dense) {
    __u32 w = 0;
    s = sl_dense_set_of(table, m, f, &w, &fp);
    if (!s) return 0;
    return (*(volatile __u64 *)&s->tag[w] & ~SL_FT_LIFE_MASK) == fp ? &s->slot[w].b : 0;
  }
  sl_flow_key_of(f, r, &key);
  hash = sl_flow_hash(&key, m);
  fp = sl_ft_fp(hash);
  first = sl_ft_set(hash, m->sets);
  s = bpf_map_lookup_elem(table, &first);
  if (!s) return 0;
  way = sl_ft_way(s, fp, 0, 0);
  if (way >= 0) return &s->slot[way & (SL_FT_WAYS - 1)].b;
  second = sl_ft_second_set(hash, m->sets);
  if (second == first) return 0;
  s = bpf_map_lookup_elem(table, &second);
  if (!s) return 0;
  way = sl_ft_way(s, fp, 0, 0);
  return way >= 0 ? &s->slot[way & (SL_FT_WAYS - 1)].b : 0;
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

#endif /* SLUICE_EBPF_SLUICE_BUCKETS_BPF_H */
