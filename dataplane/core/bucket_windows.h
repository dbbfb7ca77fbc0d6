/*
 * sluice bucket arithmetic, the window limiters: fixed-window and sliding-window counters in
 * one 64-bit word each. Part of bucket_math.h (its types, word layouts and conventions), which
 * includes this file at its end; not included on its own.
 */
#ifndef SLUICE_CORE_BUCKET_WINDOWS_H
#define SLUICE_CORE_BUCKET_WINDOWS_H

#ifndef SLUICE_CORE_BUCKET_MATH_H
#error "include bucket_math.h, not bucket_windows.h"
#endif

/* -------------------------------------------------- fixed window ([index:24][count:40]) */

static inline sl_u64 sl_units(const struct sl_window_profile *w, sl_u64 cost) {
  return (cost + w->unit_cost - 1) / w->unit_cost;
}

/* Window index distance as a signed 24-bit (fixed) or 16-bit (sliding) number: a negative
 * distance is a backward clock step, which counts as no time passing. */
static inline sl_s64 sl_index_ahead(sl_u64 now_idx, sl_u64 old_idx, int bits) {
  return ((sl_s64)((now_idx - old_idx) << (64 - bits))) >> (64 - bits);
}

/* A fresh window word: the current window, nothing counted. (A zero word would be window 0,
 * which may read as "the future" and freeze the count.) */
static inline sl_u64 sl_fixed_window_init(const struct sl_window_profile *w, sl_u64 now_ns) {
  return ((now_ns / w->window_ns) & SL_FW_INDEX_MASK) << SL_FW_COUNT_BITS;
}

static inline int sl_fixed_window_decide(const struct sl_window_profile *w, sl_u64 word,
                                         sl_u64 now_ns, sl_u64 cost, sl_u64 *next) {
  sl_u64 idx = (now_ns / w->window_ns) & SL_FW_INDEX_MASK;
  sl_u64 old_idx = word >> SL_FW_COUNT_BITS;
  sl_u64 count = word & SL_FW_COUNT_MASK;
  sl_u64 units = sl_units(w, cost);
  if (sl_index_ahead(idx, old_idx, 24) > 0) {
    count = 0;
    old_idx = idx;
  }
  *next = word;
  if (units > w->limit_units || count + units > w->limit_units) return 0;
  *next = (old_idx << SL_FW_COUNT_BITS) | (count + units);
  return 1;
}

static inline sl_u64 sl_fixed_window_refund(const struct sl_window_profile *w, sl_u64 word,
                                            sl_u64 now_ns, sl_u64 cost) {
  sl_u64 idx = (now_ns / w->window_ns) & SL_FW_INDEX_MASK;
  sl_u64 count = word & SL_FW_COUNT_MASK, units = sl_units(w, cost);
  if ((word >> SL_FW_COUNT_BITS) != idx) return word; /* charged in an earlier window */
  return (word & ~SL_FW_COUNT_MASK) | (count > units ? count - units : 0);
}

/* ----------------------------------------- sliding window ([index:16][prev:24][cur:24]) */

static inline sl_u64 sl_sliding_window_init(const struct sl_window_profile *w, sl_u64 now_ns) {
  return ((now_ns / w->window_ns) & SL_SW_INDEX_MASK) << (2 * SL_SW_COUNT_BITS);
}

static inline int sl_sliding_window_decide(const struct sl_window_profile *w, sl_u64 word,
                                           sl_u64 now_ns, sl_u64 cost, sl_u64 *next) {
  sl_u64 idx = (now_ns / w->window_ns) & SL_SW_INDEX_MASK;
  sl_u64 elapsed = now_ns % w->window_ns;
  sl_u64 old_idx = word >> (2 * SL_SW_COUNT_BITS);
  sl_u64 prev = (word >> SL_SW_COUNT_BITS) & SL_SW_COUNT_MASK;
  sl_u64 cur = word & SL_SW_COUNT_MASK;
  sl_u64 units = sl_units(w, cost), weight16, estimate;
  sl_s64 ahead = sl_index_ahead(idx, old_idx, 16);
  if (ahead == 1) {
    prev = cur;
    cur = 0;
  } else if (ahead > 1) {
    prev = 0;
    cur = 0;
  }
  if (ahead > 0) old_idx = idx;
  else if (ahead < 0) elapsed = 0; /* clock stepped back: weigh the previous window fully */
  /* The previous window still counts for the part of it that lies inside the last W. */
  weight16 = ((w->window_ns - elapsed) << 16) / w->window_ns;
  estimate = cur + ((prev * weight16 + 0xFFFF) >> 16);
  *next = word;
  if (units > w->limit_units || estimate + units > w->limit_units) return 0;
  *next = (old_idx << (2 * SL_SW_COUNT_BITS)) | (prev << SL_SW_COUNT_BITS) | (cur + units);
  return 1;
}

static inline sl_u64 sl_sliding_window_refund(const struct sl_window_profile *w, sl_u64 word,
                                              sl_u64 now_ns, sl_u64 cost) {
  sl_u64 idx = (now_ns / w->window_ns) & SL_SW_INDEX_MASK;
  sl_u64 cur = word & SL_SW_COUNT_MASK, units = sl_units(w, cost);
  if ((word >> (2 * SL_SW_COUNT_BITS)) != idx) return word;
  return (word & ~SL_SW_COUNT_MASK) | (cur > units ? cur - units : 0);
}

#endif /* SLUICE_CORE_BUCKET_WINDOWS_H */
