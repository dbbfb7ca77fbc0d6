/*
 * sluice bucket arithmetic: the one source of truth for every limiter decision.
 *
 * Plain C, static inline, integer only, no loops: included by the C++ core and by the XDP
 * program, so both backends decide identically. Nothing here reads a clock or touches
 * memory other than its arguments; callers load a state word, call a decide function, and
 * publish the returned word with one compare-and-swap (retrying on failure).
 *
 * Time. Callers pass now_ns (uint64 nanoseconds, any epoch, allowed to wrap). Each profile
 * works in units u = 1/m ns, m = time_mult (t_u = now_ns * m, mod 2^64, so a wrap of now_ns
 * is a wrap of t_u), m <= SL_MAX_TIME_MULT. The profile builder (limiter_profile.cpp) picks
 * m so that one token's interval 1e9/r ns is a whole number of units wherever it can (m =
 * the rate's numerator over gcd(1e9 * denominator, numerator): 5 for 10 Gbit/s, whose byte
 * lasts 4/5 ns; 1 for 1 Gbit/s; 50 for 400 Gbit/s). Such an "exact" profile rounds
 * nothing: every decision is the exact real-number model's. Otherwise (rates with many
 * significant digits) m = 2^k, the interval has SL_INTERVAL_FRAC_BITS fraction bits and
 * costs round up to whole units: the smallest packet's interval is then at least 10^4 u
 * (rounding error < 1e-4 relative, 2^16 u where the burst allows).
 *
 * Bucket model (token-bucket, gcra, leaky-bucket, and each bucket of the meters). The
 * bucket is kept as its "empty time" E: the instant at which it would have held zero
 * tokens had it refilled at rate r ever since. Its content at t is min(B, r*(t - E)). In
 * time units: credit d = t - E (u), full at B_u = B/r, and a packet of cost c needs
 * I_c = c/r (u). GCRA's theoretical arrival time is TAT = E + B_u. Keeping E instead of a
 * token count is what makes refill exact: fractional tokens are never truncated away.
 *
 * Clock steps backwards. Forward time never yields d < 0 after a conforming charge, so
 * d < 0 means another CPU read an earlier clock (it was preempted between reading the
 * clock and charging), or the clock stepped back. Up to the fill time plus the profile's
 * stale-read tolerance (stale_u; SL_STEP_TOLERANCE_NS by default, 0 for a single-threaded
 * replay, which has no stale readers) this reads as fewer tokens: conservative, so stale or
 * skewed clock reads can never over-admit. A larger step re-bases the bucket as empty at
 * the new clock, so it refills within B/r instead of stalling until the clock catches up.
 *
 * Long idle. The policers' credit is a difference mod 2^63 (token-bucket keeps no more of
 * it; gcra reads its TAT the same way so that the two decide identically). Of that circle
 * only the SL_BACKWARD_WINDOW_U = 2^56 units behind the clock read as a backward step; the
 * rest reads as forward, so a bucket idle for up to 2^63 - 2^56 u (at least 12.9 days at
 * the finest unit, 2^-13 ns; decades for exact profiles of round rates, whose m is small)
 * is full when its next packet comes. A longer idle is misread only when it ends within a
 * backward window or a fill time after a multiple of 2^63 u (under 1% of such idles), and
 * then only ever as fewer tokens; a backward step longer than the window (at least 2.4
 * hours) reads as such an idle: the bucket is full.
 */
#ifndef SLUICE_CORE_BUCKET_MATH_H
#define SLUICE_CORE_BUCKET_MATH_H

#if defined(__bpf__)
#include <linux/types.h>
typedef __u64 sl_u64;
typedef __s64 sl_s64;
typedef __u32 sl_u32;
#else
#include <stdint.h>
typedef uint64_t sl_u64;
typedef int64_t sl_s64;
typedef uint32_t sl_u32;
#endif

/* Default for how stale a clock read may be (scheduling delay between reading the clock
 * and charging) before a bucket treats it as a backward step and re-bases. */
#define SL_STEP_TOLERANCE_NS 1000000000ull
/* Fraction bits of sl_rate_profile.interval_fp (u per token). */
#define SL_INTERVAL_FRAC_BITS 16
/* Largest time shift: u = 2^-13 ns; t_u wraps every 2^51 ns (26 days). */
#define SL_MAX_TIME_SHIFT 13
/* Largest time multiplier (u per ns), exact profiles included: the finest unit is 2^-13 ns. */
#define SL_MAX_TIME_MULT (((sl_u64)1) << SL_MAX_TIME_SHIFT)
/* How far behind the clock a policer's credit (mod 2^63) still reads as a backward step;
 * beyond it, as time gone forward (see "Long idle"). Far above any fill time (< 2^47 u) or
 * stale-read tolerance (<= 60 s, < 2^49 u): 2^56 u is at least 2.4 hours. */
#define SL_BACKWARD_WINDOW_U (((sl_u64)1) << 56)
/* Largest burst in time units; keeps cost*interval_fp < 2^63 and the TB layout below. */
#define SL_MAX_BURST_U ((((sl_u64)1) << 47) - 1)

/*
 * token-bucket word layout: [stamp:16][credit:48]. stamp is bits 47..62 of a time in u
 * (granule G = 2^47 u), credit = stamp*G - E (mod 2^63), so E = stamp*G - credit. After an
 * update credit = d' + (G - t mod G) <= B_u + G < 2^48. Arithmetic is mod 2^63 (the stamp
 * keeps 16 of the 17 granule bits), so the credit is exact while |d| < 2^62 u.
 */
#define SL_TB_CREDIT_BITS 48
#define SL_TB_GRANULE_SHIFT 47
#define SL_TB_CREDIT_MASK ((((sl_u64)1) << SL_TB_CREDIT_BITS) - 1)
#define SL_TB_STAMP_MASK 0xFFFFull

/* Fixed / sliding window layouts. */
#define SL_FW_COUNT_BITS 40
#define SL_FW_COUNT_MASK ((((sl_u64)1) << SL_FW_COUNT_BITS) - 1)
#define SL_FW_INDEX_MASK 0xFFFFFFull
#define SL_SW_COUNT_BITS 24
#define SL_SW_COUNT_MASK ((((sl_u64)1) << SL_SW_COUNT_BITS) - 1)
#define SL_SW_INDEX_MASK 0xFFFFull
/* Sliding windows compute ((W - e) << 16) / W, so W < 2^47 ns (39 hours). */
#define SL_MAX_WINDOW_NS ((((sl_u64)1) << 47) - 1)

#if !defined(__bpf__)
#if defined(__cplusplus)
static_assert(SL_TB_GRANULE_SHIFT + 16 == 63, "TB stamp must cover 63 bits of time");
static_assert(SL_MAX_BURST_U + (((sl_u64)1) << SL_TB_GRANULE_SHIFT) <= SL_TB_CREDIT_MASK,
              "TB credit must hold a full bucket plus one granule");
#else
_Static_assert(SL_TB_GRANULE_SHIFT + 16 == 63, "TB stamp must cover 63 bits of time");
#endif
#endif

/* One rate/burst pair in time units; built once per rule by the C++ profile builder. */
struct sl_rate_profile {
  sl_u64 interval_fp;   /* u per token, SL_INTERVAL_FRAC_BITS fraction bits */
  sl_u64 burst_u;       /* B/r in u, <= SL_MAX_BURST_U */
  sl_u64 burst_tokens;  /* B in tokens: a cost above this never conforms */
  sl_u64 stale_u;       /* stale-read tolerance in u (see "Clock steps backwards") */
  sl_u32 time_shift;    /* k where m = 2^k; 0 when m is not a power of two */
  sl_u32 time_mult;     /* m: u = 1/m ns */
};

/* Leaky-bucket shaper: a rate profile plus the longest delay it may impose. */
struct sl_shaper_profile {
  struct sl_rate_profile rate;
  sl_u64 max_delay_u;
  sl_u64 max_delay_ns;
};

/* Two-rate meters share one time shift; srtcm uses committed (CIR, CBS) and excess_burst_u
 * (EBS at CIR); trtcm uses committed (CIR, CBS) and peak (PIR, PBS). */
struct sl_meter_profile {
  struct sl_rate_profile committed;
  struct sl_rate_profile peak;
  sl_u64 excess_burst_u;
  sl_u64 excess_burst_tokens;
};

/* Sixteen bytes of meter state, published with one 128-bit CAS (or, for an srtcm green
 * charge that leaves e1 as it is, an 8-byte CAS of e0: see limiters.hpp). */
struct sl_meter_state {
  sl_u64 e0; /* committed bucket E_c */
  sl_u64 e1; /* srtcm: X = E_c + CBS_u - E_e, the excess credit at the committed bucket's
              * fill time (a signed difference); trtcm: peak bucket E */
};

struct sl_window_profile {
  sl_u64 window_ns;
  sl_u64 limit_units; /* limit in count units */
  sl_u64 unit_cost;   /* cost per count unit (1 unless the limit had to be scaled) */
};

enum sl_colour { SL_GREEN = 0, SL_YELLOW = 1, SL_RED = 2 };

static inline sl_u64 sl_time_u(const struct sl_rate_profile *p, sl_u64 now_ns) {
  return now_ns * p->time_mult;
}

/*
 * I_c, rounded up. Only for cost <= burst_tokens (then the product cannot overflow).
 *
 * Rounding is one-sided on purpose: costs round up and B_u rounds down (in the profile
 * builder), so a bucket is never looser than the exact real-number model over time: a
 * conforming packet always takes at least its exact cost, admitted cost stays within
 * B + r*T and a shaped stream conforms. A packet is admitted when the credit reaches
 * min(I_c, B_u) (sl_need), so a packet of cost exactly B still passes a full bucket; the
 * credit may then dip below zero by the sub-unit rounding, which is carried, not lost.
 */
static inline sl_u64 sl_cost_u(const struct sl_rate_profile *p, sl_u64 cost) {
  return (cost * p->interval_fp + ((((sl_u64)1) << SL_INTERVAL_FRAC_BITS) - 1)) >>
         SL_INTERVAL_FRAC_BITS;
}

static inline sl_s64 sl_need(sl_u64 ic, sl_u64 burst_u) {
  return (sl_s64)(ic < burst_u ? ic : burst_u);
}

/* Credit d = t - E, as a signed difference mod 2^64. */
static inline sl_s64 sl_credit(sl_u64 t_u, sl_u64 empty_u) { return (sl_s64)(t_u - empty_u); }

/* Deficit beyond which a credit means the clock stepped back: the fill time, plus what
 * a legitimately queued shaper may add, plus the stale-read tolerance. */
static inline sl_s64 sl_step_limit(const struct sl_rate_profile *p, sl_u64 extra_u) {
  return -(sl_s64)(p->burst_u + extra_u + p->stale_u);
}

/* Sign-extend a mod-2^63 difference. */
static inline sl_s64 sl_s63(sl_u64 x) { return ((sl_s64)(x << 1)) >> 1; }

/* A policer's credit d = t - E, mod 2^63 (see "Long idle"). */
static inline sl_s64 sl_credit63(sl_u64 t_u, sl_u64 empty_u) { return sl_s63(t_u - empty_u); }

/* A policer's credit after the backward-step rule (d mod 2^63): beyond the step limit, a
 * re-base to an empty bucket; beyond the backward window, time gone forward: full. */
static inline sl_s64 sl_rebase_at(sl_s64 step_limit, sl_s64 burst_u, sl_s64 d) {
  /* The rare case as a branch: the common one then adds no select to the word's chain. */
  if (__builtin_expect(d < step_limit, 0)) return d < -(sl_s64)SL_BACKWARD_WINDOW_U ? burst_u : 0;
  return d;
}
static inline sl_s64 sl_rebase(const struct sl_rate_profile *p, sl_s64 d) {
  return sl_rebase_at(sl_step_limit(p, 0), (sl_s64)p->burst_u, d);
}

static inline sl_s64 sl_min_s64(sl_s64 a, sl_s64 b) { return a < b ? a : b; }

/* ------------------------------------- policing on a credit (shared by gcra and token-bucket) */

/* The conformance decision on a credit d0 (after the backward-step rule). Both policers
 * call it, so their results cannot drift apart: returns 1 and the credit after the charge,
 * min(d0, B_u) - I_c, if the packet conforms. */
static inline int sl_police_credit(const struct sl_rate_profile *p, sl_s64 d0, sl_u64 cost,
                                   sl_s64 *after) {
  sl_u64 ic;
  if (cost > p->burst_tokens) return 0;
  ic = sl_cost_u(p, cost);
  if (d0 < sl_need(ic, p->burst_u)) return 0;
  *after = sl_min_s64(d0, (sl_s64)p->burst_u) - (sl_s64)ic;
  return 1;
}

/* The credit after giving back a charge of cost (hierarchy refund), never above full. */
static inline sl_s64 sl_refund_credit(const struct sl_rate_profile *p, sl_s64 d, sl_u64 cost) {
  sl_s64 full = (sl_s64)p->burst_u;
  return sl_min_s64(sl_min_s64(sl_rebase(p, d), full) + (sl_s64)sl_cost_u(p, cost), full);
}

/* ---------------------------------------------------------------- gcra (word = TAT) */

static inline sl_u64 sl_gcra_init(const struct sl_rate_profile *p, sl_u64 now_ns) {
  return sl_time_u(p, now_ns); /* TAT = t: a full bucket */
}

/* Returns 1 if the packet conforms. *next is the word to publish (may differ from tat
 * even on a refusal, when a backward step re-based the bucket). TAT' = max(TAT, t) + I_c;
 * in credit terms d' = min(d, B_u) - I_c, and TAT = t - d + B_u. */
static inline sl_u64 sl_gcra_pack(const struct sl_rate_profile *p, sl_u64 t_u, sl_s64 credit) {
  return t_u - (sl_u64)credit + p->burst_u;
}

/* gcra's credit, mod 2^63 as token-bucket's (see "Long idle"). The mod-2^64 difference is
 * the same number whenever it lies in [-2^62, 2^62), which is all but idles of days: testing
 * that with a branch keeps the sign extension off the TAT's dependency chain. */
static inline sl_s64 sl_gcra_credit(const struct sl_rate_profile *p, sl_u64 tat, sl_u64 t_u) {
  sl_u64 d = t_u - (tat - p->burst_u);
  if (__builtin_expect(d + (((sl_u64)1) << 62) >= (((sl_u64)1) << 63), 0)) return sl_s63(d);
  return (sl_s64)d;
}

static inline int sl_gcra_decide(const struct sl_rate_profile *p, sl_u64 tat, sl_u64 now_ns,
                                 sl_u64 cost, sl_u64 *next) {
  sl_u64 t = sl_time_u(p, now_ns);
  sl_s64 d = sl_gcra_credit(p, tat, t);
  sl_s64 d0 = sl_rebase(p, d), after;
  *next = d0 == d ? tat : sl_gcra_pack(p, t, d0);
  if (!sl_police_credit(p, d0, cost, &after)) return 0;
  *next = sl_gcra_pack(p, t, after);
  return 1;
}

static inline sl_u64 sl_gcra_refund(const struct sl_rate_profile *p, sl_u64 tat, sl_u64 now_ns,
                                    sl_u64 cost) {
  sl_u64 t = sl_time_u(p, now_ns);
  return sl_gcra_pack(p, t, sl_refund_credit(p, sl_gcra_credit(p, tat, t), cost));
}

/* ------------------------------------------- token-bucket (word = [stamp:16][credit:48]) */

/* sl_tb_pack's time-only part: the stamp of the granule after t_u, and the time to it. */
static inline sl_u64 sl_tb_stamp(sl_u64 t_u) { return (t_u >> SL_TB_GRANULE_SHIFT) + 1; }
static inline sl_u64 sl_tb_to_granule(sl_u64 t_u, sl_u64 stamp) {
  return ((stamp << SL_TB_GRANULE_SHIFT) - t_u) & ((((sl_u64)1) << 63) - 1);
}

/* sl_tb_pack with its time-only part worked out (a burst read at one clock shares it). */
static inline sl_u64 sl_tb_pack_at(sl_u64 stamp, sl_u64 to_granule, sl_s64 credit) {
  sl_s64 stored = credit + (sl_s64)to_granule; /* in [1 - rounding, B_u + G] */
  if (stored < 0) {
    stamp += 1;
    stored += (sl_s64)(((sl_u64)1) << SL_TB_GRANULE_SHIFT);
  }
  return ((stamp & SL_TB_STAMP_MASK) << SL_TB_CREDIT_BITS) | (sl_u64)stored;
}

/* credit >= -(rounding of one cost) > -G: a sub-unit deficit borrows one more granule. */
static inline sl_u64 sl_tb_pack(sl_u64 t_u, sl_s64 credit) {
  sl_u64 stamp = sl_tb_stamp(t_u);
  return sl_tb_pack_at(stamp, sl_tb_to_granule(t_u, stamp), credit);
}

static inline sl_s64 sl_tb_credit(sl_u64 word, sl_u64 t_u) {
  sl_u64 stamp = word >> SL_TB_CREDIT_BITS;
  sl_u64 empty = (stamp << SL_TB_GRANULE_SHIFT) - (word & SL_TB_CREDIT_MASK);
  return sl_credit63(t_u, empty);
}

static inline sl_u64 sl_tb_init(const struct sl_rate_profile *p, sl_u64 now_ns) {
  return sl_tb_pack(sl_time_u(p, now_ns), (sl_s64)p->burst_u);
}

static inline int sl_tb_decide(const struct sl_rate_profile *p, sl_u64 word, sl_u64 now_ns,
                               sl_u64 cost, sl_u64 *next) {
  sl_u64 t = sl_time_u(p, now_ns);
  sl_s64 d = sl_tb_credit(word, t);
  sl_s64 d0 = sl_rebase(p, d), after;
  *next = d0 == d ? word : sl_tb_pack(t, d0);
  if (!sl_police_credit(p, d0, cost, &after)) return 0;
  *next = sl_tb_pack(t, after);
  return 1;
}

/* sl_tb_decide with every part that does not depend on the word worked out beforehand: for
 * a burst of packets read at one clock (sl_tb_at_time) and, for a pps rate, of one cost
 * (sl_tb_at_cost). The same result and the same *next as sl_tb_decide (bucket_math_test
 * holds the two together). */
struct sl_tb_at {
  sl_u64 t_u, stamp, to_granule; /* sl_time_u(now_ns), sl_tb_stamp, sl_tb_to_granule */
  sl_u64 stamp_bits;             /* the stamp where sl_tb_pack_at puts it */
  sl_s64 step_limit, burst_u;    /* sl_rebase's */
  sl_u64 ic;                     /* sl_police_credit's I_c and the credit needed; a cost */
  sl_s64 need;                   /* above the burst needs more than any credit can be */
};

static inline void sl_tb_at_time(const struct sl_rate_profile *p, sl_u64 now_ns,
                                 struct sl_tb_at *a) {
  a->t_u = sl_time_u(p, now_ns);
  a->stamp = sl_tb_stamp(a->t_u);
  a->to_granule = sl_tb_to_granule(a->t_u, a->stamp);
  a->stamp_bits = (a->stamp & SL_TB_STAMP_MASK) << SL_TB_CREDIT_BITS;
  a->step_limit = sl_step_limit(p, 0);
  a->burst_u = (sl_s64)p->burst_u;
}

static inline void sl_tb_at_cost(const struct sl_rate_profile *p, sl_u64 cost,
                                 struct sl_tb_at *a) {
  /* Never conforms: sl_police_credit refuses it first. A credit after sl_rebase is below
   * 2^62 (sl_s63; B_u is far below), so no credit reaches this need. */
  if (cost > p->burst_tokens) {
    a->ic = 0;
    a->need = (sl_s64)(~(sl_u64)0 >> 1);
    return;
  }
  a->ic = sl_cost_u(p, cost);
  a->need = sl_need(a->ic, p->burst_u);
}

/* sl_tb_pack_at at the prepared time. */
static inline sl_u64 sl_tb_pack_prepared(const struct sl_tb_at *a, sl_s64 credit) {
  sl_s64 stored = credit + (sl_s64)a->to_granule;
  if (__builtin_expect(stored < 0, 0)) return sl_tb_pack_at(a->stamp, a->to_granule, credit);
  return a->stamp_bits | (sl_u64)stored;
}

static inline int sl_tb_decide_at(const struct sl_tb_at *a, sl_u64 word, sl_u64 *next) {
  sl_s64 d = sl_tb_credit(word, a->t_u);
  /* need >= 0 >= step_limit, so a credit that meets the need is never re-based: the common
   * packet takes this one test. */
  if (__builtin_expect(d < a->need, 0)) {
    sl_s64 d0 = sl_rebase_at(a->step_limit, a->burst_u, d);
    *next = d0 == d ? word : sl_tb_pack_prepared(a, d0);
    if (d0 < a->need) return 0;
    d = d0;
  }
  *next = sl_tb_pack_prepared(a, sl_min_s64(d, a->burst_u) - (sl_s64)a->ic);
  return 1;
}

static inline sl_u64 sl_tb_refund(const struct sl_rate_profile *p, sl_u64 word, sl_u64 now_ns,
                                  sl_u64 cost) {
  sl_u64 t = sl_time_u(p, now_ns);
  return sl_tb_pack(t, sl_refund_credit(p, sl_tb_credit(word, t), cost));
}

/* ----------------------------------------------------- leaky-bucket shaper (word = TAT) */

/* Returns 1 if the packet may leave, with *delay_ns its wait (0 = now); 0 if it would wait
 * longer than max-delay (it charges nothing then). Departures of one bucket are in arrival
 * order and their stream conforms to (r, B): each leaves at the earliest conforming time. */
static inline int sl_shaper_decide(const struct sl_shaper_profile *s, sl_u64 tat, sl_u64 now_ns,
                                   sl_u64 cost, sl_u64 *next, sl_u64 *delay_ns) {
  const struct sl_rate_profile *p = &s->rate;
  sl_u64 t = sl_time_u(p, now_ns);
  sl_s64 d = sl_credit(t, tat - p->burst_u);
  sl_u64 ic, wait_u, delay;
  sl_s64 need;
  /* Queued packets legitimately push TAT up to B_u + max_delay ahead; beyond that the
   * clock stepped back. */
  if (d < sl_step_limit(p, s->max_delay_u)) {
    tat = t + p->burst_u;
    d = 0;
  }
  *next = tat;
  *delay_ns = 0;
  if (cost > p->burst_tokens) return 0;
  ic = sl_cost_u(p, cost);
  need = sl_need(ic, p->burst_u);
  wait_u = d >= need ? 0 : (sl_u64)(need - d);
  /* Departures are whole nanoseconds; the bucket is charged at the departure instant
   * itself, so the stream measured in ns timestamps conforms exactly. */
  delay = wait_u + p->time_mult - 1;
  /* A power-of-two unit (every fallback profile, and exact ones such as 1 Gbit/s) shifts;
   * only an exact unit such as 1/5 ns divides. */
  delay = (p->time_mult & (p->time_mult - 1)) == 0 ? delay >> p->time_shift
                                                    : delay / p->time_mult;
  if (delay > s->max_delay_ns) return 0;
  wait_u = delay * p->time_mult;
  /* Departs at tau = t + wait; TAT' = max(TAT, tau) + I_c, i.e. credit at tau minus I_c. */
  *next = t + wait_u - (sl_u64)(sl_min_s64(d + (sl_s64)wait_u, (sl_s64)p->burst_u) - (sl_s64)ic) +
          p->burst_u;
  *delay_ns = delay;
  return 1;
}

static inline sl_u64 sl_shaper_refund(const struct sl_shaper_profile *s, sl_u64 tat, sl_u64 cost) {
  return tat - sl_cost_u(&s->rate, cost);
}

/* The two-rate meters (srtcm, trtcm): bucket_meters.h. */
#include "bucket_meters.h"

/* The window limiters (fixed and sliding window): bucket_windows.h. */
#include "bucket_windows.h"

#endif /* SLUICE_CORE_BUCKET_MATH_H */
