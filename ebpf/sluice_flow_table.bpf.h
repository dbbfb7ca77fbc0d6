/*
 * A rule's flow table: the core's set-associative FlowTable (dataplane/core/flow_table.hpp,
 * flow_table.cpp, flow_eviction.hpp) over a BPF array of sets (sluice_abi.h "Flow tables").
 * The same hash, sets, tag words, ticks and claim, so that a trace replayed on one CPU leaves
 * both tables alike; the claim is lock-free across CPUs as the core's is across threads (a
 * CAS on the tag word, the other candidates re-read after it), with bounded waits that end in
 * "no slot" (the rule's overflow action) where the core would spin longer.
 */
#ifndef SLUICE_EBPF_SLUICE_FLOW_TABLE_BPF_H
#define SLUICE_EBPF_SLUICE_FLOW_TABLE_BPF_H

#include "sluice_maps.bpf.h"

/* The high 64 bits of a * b (BPF has no 128-bit multiply). */
static __always_inline __u64 sl_mul_hi(__u64 a, __u64 b) {
  const __u64 al = (__u32)a, ah = a >> 32, bl = (__u32)b, bh = b >> 32;
  const __u64 p0 = al * bl, p1 = al * bh, p2 = ah * bl, p3 = ah * bh;
  const __u64 mid = (p0 >> 32) + (__u32)p1 + (__u32)p2;
  return p3 + (p1 >> 32) + (p2 >> 32) + (mid >> 32);
}

/* flow_key.hpp detail::mix */
static __always_inline __u64 sl_mix(__u64 a, __u64 b) { return (a * b) ^ sl_mul_hi(a, b); }

/* flow_key.hpp hash_flow_key */
static __always_inline __u64 sl_flow_hash(const struct sl_flow_key *k,
                                          const struct sl_flow_meta *m) {
  __u64 h = sl_mix(k->w[0] ^ m->k0, k->w[1] ^ m->k1);
  if (((k->w[0] >> 8) & 0xff) == 6) {
    h = sl_mix(h ^ k->w[2] ^ SL_HASH_S2, k->w[3] ^ m->k1);
    h = sl_mix(h ^ k->w[4] ^ SL_HASH_S0, m->k2);
  }
  return sl_mix(h ^ SL_HASH_S2, m->k0);
}

/* FlowTable::set_of: fastrange on the hash. */
static __always_inline __u32 sl_ft_set(__u64 hash, __u64 sets) {
  return (__u32)sl_mul_hi(hash, sets);
}

/* FlowTable::second_set_of: fastrange on a multiplicative re-mix. */
static __always_inline __u32 sl_ft_second_set(__u64 hash, __u64 sets) {
  return (__u32)sl_mul_hi(hash * SL_FT_SET_MUL2, sets);
}

/* FlowTable::fp_bits: the hash's low 38 bits (0 remapped to 1), in place. */
static __always_inline __u64 sl_ft_fp(__u64 hash) {
  __u64 f = hash & ((1ull << SL_FT_FP_BITS) - 1);
  return (f ? f : 1) << SL_FT_FP_SHIFT;
}

static __always_inline __u32 sl_ft_tick(const struct sl_flow_meta *m, __u64 now_ns) {
  return (__u32)((now_ns >> (m->tick_shift & 63)) & SL_FT_TICK_MASK);
}

/* flow_table.cpp idle_ticks: a tick ahead of now counts as not idle. */
static __always_inline __u32 sl_ft_idle(__u64 tag, __u32 tick) {
  __u32 d = (tick - (__u32)(tag & SL_FT_TICK_MASK)) & (__u32)SL_FT_TICK_MASK;
  return d > SL_FT_MAX_IDLE_TICKS ? 0 : d;
}

/* FlowTable::touch: the tick moved forward and the seen-once mark cleared, unless both are
 * as they are (most packets of a busy flow) or the slot was recycled meanwhile. */
static __always_inline void sl_ft_touch(__u64 *tag, __u64 fp, __u32 tick) {
  __u64 seen = *(volatile __u64 *)tag;
  if ((seen & SL_FT_LIFE_MASK) == tick || (seen & ~SL_FT_LIFE_MASK) != fp) return;
  __sync_val_compare_and_swap(tag, seen, fp | tick);
}

/* The first way of set s whose tag holds fingerprint fp (pending clear), touched if `touch`;
 * -1 if none. A global function, so that the verifier follows its caller on one path with
 * the way unknown, instead of one path per way through all the charging after it. */
__attribute__((noinline)) int sl_ft_way(struct sl_flow_set *s, __u64 fp, __u32 tick, int touch) {
  if (!s) return -1;
  for (int w = 0; w < SL_FT_WAYS; ++w)
    if ((*(volatile const __u64 *)&s->tag[w] & ~SL_FT_LIFE_MASK) == fp) {
      if (touch) sl_ft_touch(&s->tag[w], fp, tick);
      return w;
    }
  return -1;
}

static __always_inline __u64 *sl_ft_tag(struct sl_flow_set *s1, struct sl_flow_set *s2,
                                        __u32 way) {
  return way < SL_FT_WAYS ? &s1->tag[way & (SL_FT_WAYS - 1)] : &s2->tag[way & (SL_FT_WAYS - 1)];
}

/* A claim's scan of the candidate ways (FlowTable::claim step 1): what it looks for, and what
 * it saw. */
struct sl_ft_scan {
  __u64 fp;         /* in: the fingerprint bits */
  __u32 tick, n;    /* in: now's tick; candidate ways, 8 or 16 */
  __s32 found;      /* the way holding the flow, or -1 */
  __s32 stale;      /* the first expired flow's way, or -1 */
  __s32 empty[2];   /* each set's first empty way, or -1 */
  __u32 empties[2]; /* each set's empty ways */
  __s32 victim;     /* the least recently used flow on probation, or -1 */
  __u32 victim_idle;
  __u64 stale_tag, victim_tag; /* the tag words they were judged by */
  __u32 ours_pending, others_pending;
};

/* One tag word of the scan: way `at` (0..15) of the candidates. */
static __always_inline int sl_ft_scan_tag(struct sl_ft_scan *out, const struct sl_flow_meta *m,
                                          __u64 t, __s32 at, __u32 which) {
  const __u64 fp = out->fp;
  if ((t & ~SL_FT_LIFE_MASK) == fp) {
    out->found = at;
    return 1;
  }
  if (t == (SL_FT_PENDING | fp)) {
    out->ours_pending = 1;
  } else if (t == 0) {
    if (which == 0) {
      if (out->empty[0] < 0) out->empty[0] = at;
      out->empties[0] += 1;
    } else {
      if (out->empty[1] < 0) out->empty[1] = at;
      out->empties[1] += 1;
    }
  } else if (t & SL_FT_PENDING) {
    out->others_pending = 1;
  } else {
    const __u32 idle = sl_ft_idle(t, out->tick);
    if (idle >= m->expire_ticks) {
      if (out->stale < 0) {
        out->stale = at;
        out->stale_tag = t;
      }
    } else if ((t & SL_FT_SEEN_ONCE) || idle >= m->protect_ticks) {
      /* EvictionChoice::consider: on probation; the least recently used goes */
      if (out->victim < 0 || idle > out->victim_idle) {
        out->victim = at;
        out->victim_idle = idle;
        out->victim_tag = t;
      }
    }
  }
  return 0;
}

/* Scans the 8 ways of one candidate set (which = 0: the first, ways 0-7; 1: the second, ways
 * 8-15) for out->fp, adding what it sees to *out; 1 if the flow is there (out->found). A
 * global function (verified once, on its own), each way spelled out at a constant offset: a
 * loop index used as an offset is a value the verifier must keep exact, and with it every
 * path through the ways' cases would be followed apart. */
__attribute__((noinline)) int sl_ft_scan_set(struct sl_flow_set *s, const struct sl_flow_meta *m,
                                             struct sl_ft_scan *out, __u32 which) {
  const __s32 base = which ? SL_FT_WAYS : 0;
  if (!s || !m || !out) return 0;
#define SL_FT_SCAN_WAY(w) \
  if (sl_ft_scan_tag(out, m, *(volatile __u64 *)&s->tag[w], base + (w), which)) return 1
  SL_FT_SCAN_WAY(0);
  SL_FT_SCAN_WAY(1);
  SL_FT_SCAN_WAY(2);
  SL_FT_SCAN_WAY(3);
  SL_FT_SCAN_WAY(4);
  SL_FT_SCAN_WAY(5);
  SL_FT_SCAN_WAY(6);
  SL_FT_SCAN_WAY(7);
#undef SL_FT_SCAN_WAY
  return 0;
}

/* The claim's scan: both candidate sets (only s1 when n is 8). */
static __always_inline void sl_ft_scan_ways(struct sl_flow_set *s1, struct sl_flow_set *s2,
                                            const struct sl_flow_meta *m, struct sl_ft_scan *out) {
  out->found = out->stale = out->victim = -1;
  out->empty[0] = out->empty[1] = -1;
  out->empties[0] = out->empties[1] = 0;
  out->victim_idle = 0;
  out->stale_tag = out->victim_tag = 0;
  out->ours_pending = out->others_pending = 0;
  if (sl_ft_scan_set(s1, m, out, 0)) return;
  if (out->n > SL_FT_WAYS) sl_ft_scan_set(s2, m, out, 1);
}

/* Reads of a peer's pending claim of the same flow before giving up (the core spins up to
 * 2^14 times; here the peer is another CPU's program, which runs to its end unpreempted in
 * the driver path, so a few reads are enough but for a preempted test run). */
#define SL_FT_WAIT_READS 64
/* Whole claims tried (a lost CAS, a peer's claim of this flow) before no slot. */
#define SL_FT_ATTEMPTS 8

enum sl_ft_recheck {
  SL_FT_OURS = 0,    /* nobody else claims this flow: publish */
  SL_FT_RESTART = 1, /* a peer in a lower way claims it: we stepped aside */
  SL_FT_GAVE_UP = 2, /* a peer in a higher way did not step aside in time */
  SL_FT_FOUND = 3,   /* published by a peer meanwhile: at way >> 8 */
};

/* FlowTable::claim step 4: after our CAS parked `pending` in `way`, the other candidates read
 * again (x86's locked CAS orders these loads after it: of two racing claimers of one flow at
 * least one sees the other); the lower way wins. Our claim is given up (by the caller) on
 * anything but SL_FT_OURS. One set's ways (which: 0 first, 1 second), spelled out as in
 * sl_ft_scan_set. */
__attribute__((noinline)) int sl_ft_recheck_set(struct sl_flow_set *s, __u64 fp, __u32 which,
                                                __u32 way) {
  const __u64 pending = SL_FT_PENDING | fp;
  const __u32 base = which ? SL_FT_WAYS : 0;
  int k;
  if (!s) return SL_FT_GAVE_UP;
#define SL_FT_RECHECK_WAY(w)                                                     \
  if (base + (w) != way) {                                                       \
    for (k = 0; k < SL_FT_WAIT_READS; ++k) {                                     \
      const __u64 t = *(volatile __u64 *)&s->tag[w];                             \
      if ((t & ~SL_FT_LIFE_MASK) == fp) return SL_FT_FOUND | (int)((base + (w)) << 8); \
      if (t != pending) break;                                                   \
      if (base + (w) < way) return SL_FT_RESTART;                                \
      /* we win: wait for the peer to step aside or publish */                   \
    }                                                                            \
    if (k == SL_FT_WAIT_READS) return SL_FT_GAVE_UP;                             \
  }
  SL_FT_RECHECK_WAY(0)
  SL_FT_RECHECK_WAY(1)
  SL_FT_RECHECK_WAY(2)
  SL_FT_RECHECK_WAY(3)
  SL_FT_RECHECK_WAY(4)
  SL_FT_RECHECK_WAY(5)
  SL_FT_RECHECK_WAY(6)
  SL_FT_RECHECK_WAY(7)
#undef SL_FT_RECHECK_WAY
  return SL_FT_OURS;
}

static __always_inline int sl_ft_recheck_ways(struct sl_flow_set *s1, struct sl_flow_set *s2,
                                              __u64 fp, __u32 n, __u32 way) {
  const int r = sl_ft_recheck_set(s1, fp, 0, way);
  if (r != SL_FT_OURS || n <= SL_FT_WAYS) return r;
  return sl_ft_recheck_set(s2, fp, 1, way);
}

/* FlowTable::reserve: one unit of capacity, if the table is below capacity. */
static __always_inline int sl_ft_reserve(struct sl_flow_meta *m) {
  for (int i = 0; i < SL_FT_ATTEMPTS; ++i) {
    const __u64 n = *(volatile __u64 *)&m->active;
    if (n >= m->capacity) return 0;
    if (__sync_val_compare_and_swap(&m->active, n, n + 1) == n) return 1;
  }
  return 0;
}

/* FlowTable::abandon: a held claim given up, the slot empty. */
static __always_inline void sl_ft_abandon(__u64 *tag, struct sl_flow_meta *m) {
  *(volatile __u64 *)tag = 0;
  __sync_fetch_and_add(&m->active, (__u64)-1);
}

/* Outcomes of sl_ft_claim (with the way, 0..15, in bits 8..): the flow was found, or a slot
 * is held for it as pending (created in an empty or expired slot, or an evicted flow's). */
enum sl_ft_outcome { SL_FT_IS_FOUND = 1, SL_FT_IS_CREATED = 2, SL_FT_IS_EVICTED = 3 };

/* FlowTable::find_elsewhere_or_insert past the second set's scan: the claim, for fingerprint
 * fp at tick `tick_n & SL_FT_TICK_MASK` over `tick_n >> 24` (8 or 16) candidate ways. Returns
 * outcome | way << 8, or 0 for no slot. A created or evicted slot holds `SL_FT_PENDING | fp`
 * for the caller to initialise and publish. */
__attribute__((noinline)) int sl_ft_claim(struct sl_flow_set *s1, struct sl_flow_set *s2,
                                          struct sl_flow_meta *m, __u64 fp, __u64 tick_n) {
  const __u64 pending = SL_FT_PENDING | fp;
  const __u32 tick = (__u32)(tick_n & SL_FT_TICK_MASK), n = (__u32)(tick_n >> SL_FT_TICK_BITS);
  if (!s1 || !s2 || !m) return 0;
  for (int attempt = 0; attempt < SL_FT_ATTEMPTS; ++attempt) {
    struct sl_ft_scan sc = {};
    __u64 expected, *tag;
    __u32 way;
    int best_empty, reserved = 0, outcome = SL_FT_IS_CREATED, r;
    sc.fp = fp, sc.tick = tick, sc.n = n;
    sl_ft_scan_ways(s1, s2, m, &sc);
    if (sc.found >= 0) {
      way = (__u32)sc.found & (2 * SL_FT_WAYS - 1);
      sl_ft_touch(sl_ft_tag(s1, s2, way), fp, tick);
      return SL_FT_IS_FOUND | (int)(way << 8);
    }
    if (sc.ours_pending) continue; /* another CPU is creating this very flow */
    best_empty = sc.empties[0] >= SL_FT_KEEP_FIRST_EMPTIES || sc.empties[0] >= sc.empties[1]
                     ? sc.empty[0]
                     : sc.empty[1];
    /* a stale slot replaces a dead flow (no capacity needed), an empty one takes a unit of
     * capacity, else a victim on probation idle long enough (EvictionChoice::pick) */
    if (sc.stale >= 0) {
      way = (__u32)sc.stale;
      expected = sc.stale_tag;
    } else if (best_empty >= 0 && (reserved = sl_ft_reserve(m))) {
      way = (__u32)best_empty;
      expected = 0;
    } else if (sc.victim >= 0 && sc.victim_idle >= m->evict_ticks) {
      way = (__u32)sc.victim;
      expected = sc.victim_tag;
      outcome = SL_FT_IS_EVICTED;
    } else {
      if (sc.others_pending) continue; /* a pending claim may still publish or abandon */
      return 0;
    }
    way &= 2 * SL_FT_WAYS - 1;
    tag = sl_ft_tag(s1, s2, way);
    if (__sync_val_compare_and_swap(tag, expected, pending) != expected) {
      if (reserved) __sync_fetch_and_add(&m->active, (__u64)-1);
      continue;
    }
    if (outcome == SL_FT_IS_EVICTED) __sync_fetch_and_add(&m->evicted, 1);
    r = sl_ft_recheck_ways(s1, s2, fp, n, way);
    if (r == SL_FT_OURS) return outcome | (int)(way << 8);
    sl_ft_abandon(tag, m);
    if ((r & 0xff) == SL_FT_FOUND) {
      const __u32 at = ((__u32)r >> 8) & (2 * SL_FT_WAYS - 1);
      sl_ft_touch(sl_ft_tag(s1, s2, at), fp, tick);
      return SL_FT_IS_FOUND | (int)(at << 8);
    }
    if (r == SL_FT_GAVE_UP) return 0;
  }
  return 0;
}

/* A dense table's slot for a frame (sl_flow_meta "dense"): its keyed IPv4 address's offset in
 * the match's prefix, as the core's dense_slot_in() works it out; -1 for a frame without one in
 * range (the classifier lets only the prefix's IPv4 frames through, so that is a mixed-up
 * table, which gets no slot as on the core). An address below the base wraps to an offset
 * past the range, so one comparison is the prefix test too. */
static __always_inline __s64 sl_ft_dense_slot(const struct sl_flow_meta *m, const __u8 *src,
                                              const __u8 *dst, __u8 ip_version) {
  __u32 addr;
  __u64 slot;
  if (ip_version != 4) return -1;
  __builtin_memcpy(&addr, m->dense_src ? src : dst, 4);
  slot = (__u32)(__builtin_bswap32(addr) - m->dense_base) >> (m->dense_shift & 31);
  return slot >> (m->dense_bits & 63) ? -1 : (__s64)slot;
}

/* FlowTable::dense_fp: a dense table's flow of key offset `slot` is stored under slot + 1. */
static __always_inline __u64 sl_ft_dense_fp(__u64 slot) { return (slot + 1) << SL_FT_FP_SHIFT; }

/* FlowTable::claim_dense: the flow of a dense slot's key, found (published meanwhile) or claimed
 * (its tag word from empty to pending: the caller initialises and publishes it). The slot is
 * this key's alone, so there is nothing to scan, evict or race for but a peer claiming the same
 * key, which is waited for boundedly. Returns SL_FT_IS_FOUND, SL_FT_IS_CREATED or 0 (no slot). */
__attribute__((noinline)) int sl_ft_claim_dense(struct sl_flow_set *s, struct sl_flow_meta *m,
                                                __u32 way, __u64 fp, __u32 tick) {
  const __u64 pending = SL_FT_PENDING | fp;
  __u64 *tag;
  if (!s || !m) return 0;
  tag = &s->tag[way & (SL_FT_WAYS - 1)];
  for (int i = 0; i < SL_FT_WAIT_READS; ++i) {
    const __u64 t = *(volatile __u64 *)tag;
    if ((t & ~SL_FT_LIFE_MASK) == fp) {
      sl_ft_touch(tag, fp, tick);
      return SL_FT_IS_FOUND;
    }
    if (t == pending) continue; /* another CPU is creating it */
    if (t != 0) return 0;
    /* A range within capacity always has a unit for each of its keys. */
    if (!sl_ft_reserve(m)) return 0;
    if (__sync_val_compare_and_swap(tag, 0, pending) == 0) return SL_FT_IS_CREATED;
    __sync_fetch_and_add(&m->active, (__u64)-1);
  }
  return 0;
}

static __always_inline int sl_ft_sweep_tag(__u64 *tag, struct sl_flow_meta *m, __u32 tick) {
  const __u64 t = *(volatile __u64 *)tag;
  __u32 idle;
  if (t == 0 || (t & SL_FT_PENDING)) return 0;
  idle = sl_ft_idle(t, tick);
  if (idle >= m->expire_ticks) {
    if (__sync_val_compare_and_swap(tag, t, 0) != t) return 0;
    __sync_fetch_and_add(&m->active, (__u64)-1);
    return 1;
  }
  if (idle > SL_FT_MAX_TIMEOUT_TICKS) {
    const __u64 aged = (t & ~SL_FT_TICK_MASK) | ((tick - SL_FT_MAX_TIMEOUT_TICKS) & SL_FT_TICK_MASK);
    __sync_val_compare_and_swap(tag, t, aged);
  }
  return 0;
}

/* FlowTable::expire over one set: frees its expired flows (the CAS from the exact word judged
 * frees a flow only if nobody touched it since) and, in a table without expiry, clamps the age
 * of flows idle past 2^22 ticks so that their distance never wraps. */
__attribute__((noinline)) int sl_ft_sweep_set(struct sl_flow_set *s, struct sl_flow_meta *m,
                                              __u32 tick) {
  int freed = 0;
  if (!s || !m) return 0;
#define SL_FT_SWEEP_WAY(w) freed += sl_ft_sweep_tag(&s->tag[w], m, tick)
  SL_FT_SWEEP_WAY(0);
  SL_FT_SWEEP_WAY(1);
  SL_FT_SWEEP_WAY(2);
  SL_FT_SWEEP_WAY(3);
  SL_FT_SWEEP_WAY(4);
  SL_FT_SWEEP_WAY(5);
  SL_FT_SWEEP_WAY(6);
  SL_FT_SWEEP_WAY(7);
#undef SL_FT_SWEEP_WAY
  return freed;
}

#endif /* SLUICE_EBPF_SLUICE_FLOW_TABLE_BPF_H */
