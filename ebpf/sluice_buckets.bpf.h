/*
 * Buckets and meters: a rule's state for a frame (its aggregate, or its flow's in the rule's
 * flow table), charged and refunded with the core's arithmetic (bucket_math.h) through BPF
 * compare-and-swap; the meters' two words through a sequence claim (sluice_abi.h "Buckets").
 */
#ifndef SLUICE_EBPF_SLUICE_BUCKETS_BPF_H
#define SLUICE_EBPF_SLUICE_BUCKETS_BPF_H

#include "sluice_counters.bpf.h"
#include "sluice_flow_key.bpf.h"
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

/* The rule's flow table and the frame's key in it (a rule keyed by one address has the
 * shorter key); NULL if the rule has no table. */
static __always_inline void *sl_flow_table_of(const struct sl_xdp_rule *r,
                                              const struct sl_frame *f,
                                              union sl_any_flow_key *k) {
  __u32 state = r->state;
  if (sl_addr_key_mode(r->key_mode)) {
    sl_addr_flow_key_of(f, r, &k->addr);
    return bpf_map_lookup_elem(&sl_addr_flow_tables, &state);
  }
  sl_flow_key_of(f, r, &k->full);
  return bpf_map_lookup_elem(&sl_flow_tables, &state);
}

/* The rule's bucket for this frame: its aggregate, or its flow's in the rule's own table
 * (created full on the flow's first packet). NULL if the rule has no table or it refuses an
 * insert, or (a race at an aggregate's very
 * first packet) another CPU's initialisation does not finish within SL_SEQ_TRIES reads. */
static __always_inline struct sl_bucket *sl_state_for(const struct sl_xdp_rule *r,
                                                      const struct sl_frame *f, __u64 now_ns) {
  union sl_any_flow_key key;
  struct sl_bucket *b;
  __u32 state = r->state;
  void *table;
  __u64 seen, seq;
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
  table = sl_flow_table_of(r, f, &key);
  if (!table) return 0;
  b = bpf_map_lookup_elem(table, &key);
  if (!b) {
    struct sl_bucket fresh = {};
    sl_init_bucket(r, &fresh, now_ns);
    fresh.seq = 2;
    fresh.packets = 1;
    fresh.bytes = f->len;
    /* BPF_NOEXIST: of two CPUs creating the flow at once, the first one's state stays, and
     * only its insert counts as a flow created (flows_evicted is derived from it). */
    if (bpf_map_update_elem(table, &key, &fresh, BPF_NOEXIST) == 0) {
      struct sl_slot_counters *c = sl_counters_of(state);
      if (c) c->flows_created += 1;
    }
    return bpf_map_lookup_elem(table, &key);
  }
  seq = *(volatile __u64 *)&b->seq;
  seen = b->last_seen_ns;
  /* The core frees a flow idle past its timeout; its next packet starts it again full (a
   * flow with a writer inside is not idle). */
  if (!(seq & 1) && (__s64)(now_ns - seen) > (__s64)r->idle_timeout_ns)
    sl_restart(r, b, now_ns, seq);
  else if (seen != now_ns)
    b->last_seen_ns = now_ns;
  b->packets += 1;
  b->bytes += f->len;
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

#endif /* SLUICE_EBPF_SLUICE_BUCKETS_BPF_H */
