/*
 * sluice bucket arithmetic, the two-rate meters: srTCM (RFC 2697) and trTCM (RFC 2698) on
 * two empty times in 16 bytes of state. Part of bucket_math.h (its types, word layouts and
 * conventions), which includes this file at its end; not included on its own.
 */
#ifndef SLUICE_CORE_BUCKET_METERS_H
#define SLUICE_CORE_BUCKET_METERS_H

#ifndef SLUICE_CORE_BUCKET_MATH_H
#error "include bucket_math.h, not bucket_meters.h"
#endif

/* ------------------------------------------------------------- meters (16-byte state) */

static inline void sl_srtcm_init(const struct sl_meter_profile *m, sl_u64 now_ns,
                                 struct sl_meter_state *st) {
  st->e0 = sl_time_u(&m->committed, now_ns) - m->committed.burst_u;
  st->e1 = m->excess_burst_u; /* both buckets full */
}

/*
 * srTCM, colour-blind, continuous refill (RFC 2697), on the two empty times: E_c of the
 * committed bucket and E_e of the excess one. Tokens fill the committed bucket first; once it
 * is full (at F = E_c + CBS_u) they overflow into the excess bucket, so
 * Te(t) = min(EBS_u, max(t, F) - E_e). Writes the new empty times to *next (== *ee on red,
 * unless re-based).
 */
static inline enum sl_colour sl_srtcm_decide_empty_times(const struct sl_meter_profile *m,
                                                         const struct sl_meter_state *ee,
                                                         sl_u64 now_ns, sl_u64 cost,
                                                         struct sl_meter_state *next) {
  const struct sl_rate_profile *c = &m->committed;
  sl_u64 t = sl_time_u(c, now_ns);
  sl_s64 dc = sl_credit(t, ee->e0);
  sl_s64 tc, te, fill_ahead;
  sl_u64 e0 = ee->e0, e1 = ee->e1, ic;
  if (dc < sl_step_limit(c, 0)) { /* clock stepped back: both buckets empty at t */
    e0 = t;
    e1 = t + c->burst_u;
    dc = 0;
  }
  next->e0 = e0;
  next->e1 = e1;
  tc = sl_min_s64(dc, (sl_s64)c->burst_u);
  fill_ahead = (sl_s64)(e0 + c->burst_u - t); /* F - t */
  te = sl_min_s64((sl_s64)m->excess_burst_u,
                  sl_credit(fill_ahead > 0 ? e0 + c->burst_u : t, e1));
  if (te < 0) te = 0;
  ic = sl_cost_u(c, cost);
  if (cost <= c->burst_tokens && tc >= sl_need(ic, c->burst_u)) {
    /* green: take from Tc; Te stays put until the new fill time, which is after t */
    next->e0 = t - (sl_u64)(tc - (sl_s64)ic);
    next->e1 = next->e0 + c->burst_u - (sl_u64)te;
    return SL_GREEN;
  }
  if (cost <= m->excess_burst_tokens && te >= sl_need(ic, m->excess_burst_u)) {
    sl_u64 fill;
    next->e0 = t - (sl_u64)tc;
    fill = next->e0 + c->burst_u;
    next->e1 = ((sl_s64)(fill - t) > 0 ? fill : t) - (sl_u64)(te - (sl_s64)ic);
    return SL_YELLOW;
  }
  return SL_RED;
}

/* srTCM on the stored state (E_c, X): every case, through the empty times. */
static inline enum sl_colour sl_srtcm_decide_general(const struct sl_meter_profile *m,
                                                     const struct sl_meter_state *st,
                                                     sl_u64 now_ns, sl_u64 cost,
                                                     struct sl_meter_state *next) {
  const sl_u64 cbs = m->committed.burst_u;
  struct sl_meter_state ee, out;
  enum sl_colour colour;
  ee.e0 = st->e0;
  ee.e1 = st->e0 + cbs - st->e1;
  colour = sl_srtcm_decide_empty_times(m, &ee, now_ns, cost, &out);
  next->e0 = out.e0;
  next->e1 = out.e0 + cbs - out.e1;
  return colour;
}

/* Whether sl_srtcm_decide's short path applies to state st at now_ns: the clock did not step
 * back, the committed bucket is not full at t (Tc = t - E_c), and X lies in [0, EBS_u]. */
static inline int sl_srtcm_short_path(const struct sl_meter_profile *m,
                                      const struct sl_meter_state *st, sl_u64 now_ns) {
  const struct sl_rate_profile *c = &m->committed;
  /* Two range checks as two unsigned compares: dc in [sl_step_limit, B_u) and X in
   * [0, EBS_u] (B_u + stale_u < 2^62, so nothing wraps). */
  sl_u64 dc_from_limit = sl_time_u(c, now_ns) - st->e0 + c->burst_u + c->stale_u;
  return dc_from_limit < 2 * c->burst_u + c->stale_u && st->e1 <= m->excess_burst_u;
}

/*
 * srTCM: sl_srtcm_decide_general with the common case of a loaded meter taken first (see
 * sl_srtcm_short_path). There Te = X both before a charge and after the fill time it moves,
 * so a green charge adds I_c to E_c and leaves X, and a yellow one takes I_c from X and
 * leaves E_c: each colour changes one word by one addition, so a single-writer decision
 * carries one addition from one packet to the next, and a shared green one publishes with an
 * 8-byte CAS. Both paths give the same words (a test checks).
 */
static inline enum sl_colour sl_srtcm_decide(const struct sl_meter_profile *m,
                                             const struct sl_meter_state *st, sl_u64 now_ns,
                                             sl_u64 cost, struct sl_meter_state *next) {
  const struct sl_rate_profile *c = &m->committed;
  if (sl_srtcm_short_path(m, st, now_ns)) {
    sl_s64 dc = sl_credit(sl_time_u(c, now_ns), st->e0);
    sl_u64 ic = sl_cost_u(c, cost);
    next->e0 = st->e0;
    next->e1 = st->e1;
    if (cost <= c->burst_tokens && dc >= sl_need(ic, c->burst_u)) {
      next->e0 = st->e0 + ic;
      return SL_GREEN;
    }
    if (cost <= m->excess_burst_tokens && (sl_s64)st->e1 >= sl_need(ic, m->excess_burst_u)) {
      next->e1 = st->e1 - ic;
      return SL_YELLOW;
    }
    return SL_RED;
  }
  return sl_srtcm_decide_general(m, st, now_ns, cost, next);
}

/*
 * sl_srtcm_decide's green outcomes with every part that does not depend on the state worked
 * out once for a burst read at one clock (sl_srtcm_at_time). sl_srtcm_green_at returns 1 and
 * the new state exactly when sl_srtcm_decide colours green, in its two common cases; else 0
 * and nothing, for the caller to call sl_srtcm_decide (bucket_math_test holds the two
 * together):
 *  - the committed bucket full (dc = t - E_c >= CBS_u, a meter under its rate, the usual
 *    case): sl_srtcm_decide_general's green for any cost <= CBS, E_c' = t - (CBS_u - I_c) and
 *    X' = Te = min(EBS_u, max(0, t - E_e)) with E_e = E_c + CBS_u - X (sl_srtcm_decide's short
 *    path never applies there: dc + CBS_u + stale_u >= 2 CBS_u + stale_u, with no wrap);
 *  - its short path (sl_srtcm_short_path), where dc < CBS_u makes "dc >= min(I_c, CBS_u)"
 *    "dc >= I_c": E_c' = E_c + I_c, X' = X.
 */
struct sl_srtcm_at {
  sl_u64 t_u;         /* sl_time_u(committed, now_ns) */
  sl_s64 cbs_u;       /* CBS_u */
  sl_u64 from_limit;  /* t_u + CBS_u + stale_u: sl_srtcm_short_path's dc_from_limit is this - E_c */
  sl_u64 range;       /* 2 CBS_u + stale_u: its bound */
  sl_u64 ebs_u;       /* EBS_u */
  sl_u64 cbs_tokens;  /* a cost above CBS is never green */
  sl_u64 interval_fp; /* sl_cost_u's */
  sl_u64 t_less_cbs;  /* t_u - CBS_u (mod 2^64): a full bucket's E_c' and E_e's share of Te */
};

static inline void sl_srtcm_at_time(const struct sl_meter_profile *m, sl_u64 now_ns,
                                    struct sl_srtcm_at *a) {
  const struct sl_rate_profile *c = &m->committed;
  a->t_u = sl_time_u(c, now_ns);
  a->cbs_u = (sl_s64)c->burst_u;
  a->from_limit = a->t_u + c->burst_u + c->stale_u;
  a->range = 2 * c->burst_u + c->stale_u;
  a->ebs_u = m->excess_burst_u;
  a->cbs_tokens = c->burst_tokens;
  a->interval_fp = c->interval_fp;
  a->t_less_cbs = a->t_u - c->burst_u;
}

static inline int sl_srtcm_green_at(const struct sl_srtcm_at *a, const struct sl_meter_state *st,
                                    sl_u64 cost, struct sl_meter_state *next) {
  sl_s64 dc = sl_credit(a->t_u, st->e0), te;
  sl_u64 ic;
  if (cost > a->cbs_tokens) return 0;
  ic = (cost * a->interval_fp + ((((sl_u64)1) << SL_INTERVAL_FRAC_BITS) - 1)) >>
       SL_INTERVAL_FRAC_BITS;
  if (dc >= a->cbs_u) { /* committed bucket full */
    /* t - E_e and t - (CBS_u - I_c), with t - CBS_u from the burst (the same sums mod 2^64) */
    te = sl_min_s64((sl_s64)a->ebs_u, (sl_s64)(a->t_less_cbs - st->e0 + st->e1));
    next->e0 = a->t_less_cbs + ic;
    next->e1 = te < 0 ? 0 : (sl_u64)te;
    return 1;
  }
  if (a->from_limit - st->e0 >= a->range || st->e1 > a->ebs_u || dc < (sl_s64)ic) return 0;
  next->e0 = st->e0 + ic;
  next->e1 = st->e1;
  return 1;
}

static inline void sl_trtcm_init(const struct sl_meter_profile *m, sl_u64 now_ns,
                                 struct sl_meter_state *st) {
  sl_u64 t = sl_time_u(&m->committed, now_ns);
  st->e0 = t - m->committed.burst_u;
  st->e1 = t - m->peak.burst_u;
}

/* trTCM, colour-blind (RFC 2698): two independent buckets, peak checked first. Both
 * profiles share one time shift. */
static inline enum sl_colour sl_trtcm_decide(const struct sl_meter_profile *m,
                                             const struct sl_meter_state *st, sl_u64 now_ns,
                                             sl_u64 cost, struct sl_meter_state *next) {
  const struct sl_rate_profile *c = &m->committed, *p = &m->peak;
  sl_u64 t = sl_time_u(c, now_ns);
  sl_s64 dc = sl_credit(t, st->e0), dp = sl_credit(t, st->e1);
  sl_s64 dc0 = sl_rebase(c, dc), dp0 = sl_rebase(p, dp);
  sl_u64 ip, icc;
  next->e0 = dc0 == dc ? st->e0 : t;
  next->e1 = dp0 == dp ? st->e1 : t;
  if (cost > p->burst_tokens) return SL_RED;
  ip = sl_cost_u(p, cost);
  if (dp0 < sl_need(ip, p->burst_u)) return SL_RED;
  next->e1 = t - (sl_u64)(sl_min_s64(dp0, (sl_s64)p->burst_u) - (sl_s64)ip);
  if (cost > c->burst_tokens) return SL_YELLOW;
  icc = sl_cost_u(c, cost);
  if (dc0 < sl_need(icc, c->burst_u)) return SL_YELLOW;
  next->e0 = t - (sl_u64)(sl_min_s64(dc0, (sl_s64)c->burst_u) - (sl_s64)icc);
  return SL_GREEN;
}

#endif /* SLUICE_CORE_BUCKET_METERS_H */
