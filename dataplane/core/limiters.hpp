// Limiter operations over state words: load, decide with bucket_math.h, publish. Inline:
// they sit on the per-packet path.
//
// Sharing::shared (the default): publish with one compare-and-swap, retrying on contention.
// Any number of threads may charge the same word; a word is never locked and an update is
// never lost. Sharing::single_writer: the caller guarantees one thread only touches the word
// (a replay, a dataplane with one worker), so the new word is a plain store and the decision
// costs no locked instruction. Mixing the two on one word is a bug.
#pragma once

#include <atomic>
#include <cassert>
#include <cstdint>

#include "bucket_math.h"
#include "sanitizers.hpp"

namespace sluice {

static_assert(std::atomic<uint64_t>::is_always_lock_free, "bucket words must be lock-free");

enum class Sharing : uint8_t { shared, single_writer };

// 16-byte meter state, aligned for cmpxchg16b.
struct alignas(16) MeterWord {
  uint64_t e0;
  uint64_t e1;
};
static_assert(sizeof(MeterWord) == sizeof(sl_meter_state));

namespace detail {

// After a lost compare-and-swap race, wait a little before reading the word again. Without
// it two threads hammering one word alternate strictly and the word's cache line crosses
// between cores on nearly every decision; a short pause lets the winner go on deciding with
// the line in its own cache while the loser waits. 8 PAUSEs (~240 ns on the AMD EPYC the
// benchmarks ran on, less on CPUs with a shorter PAUSE) took 2 threads on one token bucket
// from 43-51 to 99-165 Mdecisions/s there; 4 helped less, 16 or growing the wait
// exponentially no more (docs/BENCHMARKS.md). A losing thread waits this once per lost race:
// with a dataplane's one charge per bucket per burst, races are rare and cost ~0.24 us.
// Out of line and cold: inlined into every charge's loop it made trtcm's single-writer
// decision (which never calls it) ~1.2 ns slower, by the registers the loop gave up for it.
inline constexpr unsigned kBackoffPauses = 8;

[[gnu::cold, gnu::noinline]] inline void contention_backoff() {
  for (unsigned i = 0; i < kBackoffPauses; ++i) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield" ::: "memory");
#else
    std::atomic_signal_fence(std::memory_order_seq_cst);
#endif
  }
}

// Load, decide, publish. A decision that leaves the word as it is (a refusal) writes
// nothing, so a saturated bucket costs its readers no cache-line ownership. (For the same
// reason the line is not prefetched for writing, PREFETCHW: that made 2 threads on a
// saturated bucket ~40% slower, and gained nothing measurable on a half-conforming one.)
// Returns what decide returns (a bool, a colour, a burst's mask).
template <class Decide>
inline auto update_word(std::atomic<uint64_t>& word, Sharing sharing, Decide&& decide) {
  uint64_t cur = word.load(std::memory_order_relaxed);
  for (;;) {
    uint64_t next = cur;
    auto result = decide(cur, &next);
    if (next == cur) return result;
    if (sharing == Sharing::single_writer) {
      word.store(next, std::memory_order_relaxed);
      return result;
    }
    if (word.compare_exchange_weak(cur, next, std::memory_order_relaxed,
                                   std::memory_order_relaxed))
      return result;
    // Lost a race: the word the CAS handed back would be stale again after the wait, so
    // the decision is taken again on a fresh read.
    contention_backoff();
    cur = word.load(std::memory_order_relaxed);
  }
}

using u128 = unsigned __int128;

inline MeterWord meter_read(const MeterWord& w) {
  return MeterWord{__atomic_load_n(&w.e0, __ATOMIC_RELAXED),
                   __atomic_load_n(&w.e1, __ATOMIC_RELAXED)};
}

inline bool meter_cas(MeterWord& word, MeterWord& expected, MeterWord desired) {
  auto* p = reinterpret_cast<u128*>(&word);
  u128 exp = u128{expected.e0} | (u128{expected.e1} << 64);
  u128 prev = __sync_val_compare_and_swap(p, exp, u128{desired.e0} | (u128{desired.e1} << 64));
  if (prev == exp) return true;
  expected = MeterWord{uint64_t(prev), uint64_t(prev >> 64)};
  return false;
}

// Never publishes e0 alone (the default of update_meter's e0_alone).
struct BothWords {
  template <class Result>
  bool operator()(const sl_meter_state&, const Result&) const {
    return false;
  }
};

// Whether an 8-byte CAS of e0 may race the 16-byte CAS of the pair. On x86 it may: both are
// locked instructions on one cache line, atomic with respect to each other. ThreadSanitizer
// instead emulates 16-byte atomics as a load, compare and store under a lock of its own, which
// a native 8-byte CAS does not take: an e0 update landing inside that window is lost (one
// extra green in LimiterConcurrency.SrtcmUnderContentionStaysWithinItsBounds, about once in 8
// TSan runs; a two-thread probe lost 5,186 of 2,000,000 e0 updates under TSan, none natively).
// So under TSan every meter update takes the 16-byte CAS.
#if defined(SLUICE_TSAN)
inline constexpr bool kMixedWidthCas = false;
#else
inline constexpr bool kMixedWidthCas = true;
#endif

// e0_alone(st, result): true when the decision on st depended on e0 alone and left e1 as
// it was, so that, shared, an 8-byte CAS of e0 validates all it read (see srtcm_charge).
template <class Decide, class E0Alone = BothWords>
inline auto update_meter(MeterWord& word, Sharing sharing, Decide&& decide,
                         E0Alone&& e0_alone = {}) {
  // Two 64-bit loads may tear; the 128-bit CAS then fails, so a torn read costs a retry
  // (after the backoff), never a wrong decision.
  MeterWord cur = meter_read(word);
  for (;;) {
    sl_meter_state st{cur.e0, cur.e1}, next{};
    auto result = decide(st, &next);
    if (next.e0 == cur.e0 && next.e1 == cur.e1) return result;
    if (sharing == Sharing::single_writer) {
      __atomic_store_n(&word.e0, next.e0, __ATOMIC_RELAXED);
      __atomic_store_n(&word.e1, next.e1, __ATOMIC_RELAXED);
      return result;
    }
    if (kMixedWidthCas && e0_alone(st, result)) {
      uint64_t e0 = cur.e0;
      if (__atomic_compare_exchange_n(&word.e0, &e0, next.e0, /*weak=*/true, __ATOMIC_RELAXED,
                                      __ATOMIC_RELAXED))
        return result;
    } else if (meter_cas(word, cur, MeterWord{next.e0, next.e1})) {
      return result;
    }
    contention_backoff();  // as update_word does
    cur = meter_read(word);
  }
}

template <class Refund>
inline void refund_word(std::atomic<uint64_t>& word, Sharing sharing, Refund&& refund) {
  update_word(word, sharing, [&](uint64_t cur, uint64_t* next) {
    *next = refund(cur);
    return true;
  });
}

// Mask bit of packet i of a burst (n <= kMaxBurst).
inline uint64_t burst_bit(uint32_t i) {
  assert(i < 64);
  return uint64_t{1} << i;
}

inline bool all_equal(const uint64_t* costs, uint32_t n) {
  bool same = true;
  for (uint32_t i = 1; i < n; ++i) same &= costs[i] == costs[0];  // no early exit: vectorises
  return same;
}

// n (>= 1) packets of one cost on credit d0, in closed form: what the per-packet loop of
// police_burst computes. The first conforms iff d0 >= need; each one taken leaves
// min(d, B_u) - I_c, which is below B_u, so packet j conforms iff min(d0, B_u) - j*I_c >= need,
// and the ones that conform are a prefix of the burst. Sets *mask, returns the credit left.
// A pps rule's bursts are all of this kind (every cost is 1), and so are floods of one size.
inline sl_s64 police_uniform(const sl_rate_profile& p, sl_s64 d0, uint64_t cost, uint32_t n,
                             uint64_t* mask) {
  *mask = 0;
  if (cost > p.burst_tokens) return d0;
  const sl_u64 ic = sl_cost_u(&p, cost);
  const sl_s64 need = sl_need(ic, p.burst_u);
  if (d0 < need) return d0;
  const sl_s64 full = sl_min_s64(d0, sl_s64(p.burst_u));
  const uint64_t spare = uint64_t(full - need);  // what the first packet leaves above need
  uint64_t k = n;                                  // how many conform
  if (ic != 0 && spare < uint64_t(n - 1) * ic) k = 1 + spare / ic;
  *mask = k == 64 ? ~uint64_t{0} : (uint64_t{1} << k) - 1;
  return full - sl_s64(k * ic);
}

// A policing burst at one time t (token-bucket and gcra): the word read at t is one credit
// d, each packet is sl_police_credit on the credit left by the one before, and the word is
// packed once at the end. This is exactly what n single decisions at t compute (each of them
// unpacks to the credit the previous one packed), without the n-1 round trips through the
// word. pack(d) packs credit d at t.
template <class Pack>
inline uint64_t police_burst(const sl_rate_profile& p, uint64_t cur, sl_s64 d,
                             const uint64_t* costs, uint32_t n, uint64_t* next, Pack&& pack) {
  if (n == 0) {  // no packet, no charge: not even a re-base
    *next = cur;
    return 0;
  }
  sl_s64 credit = sl_rebase(&p, d), after = 0;
  uint64_t mask = 0;
  if (all_equal(costs, n)) {
    credit = police_uniform(p, credit, costs[0], n, &mask);
  } else {
    for (uint32_t i = 0; i < n; ++i) {
      if (sl_police_credit(&p, credit, costs[i], &after)) {
        credit = after;
        mask |= burst_bit(i);
      }
    }
  }
  // Unchanged only if nothing conformed and no backward step re-based the bucket.
  *next = mask != 0 || credit != d ? pack(credit) : cur;
  return mask;
}

}  // namespace detail

// Policers: true if the packet conforms (and was charged).
inline bool gcra_charge(const sl_rate_profile& p, std::atomic<uint64_t>& word, uint64_t now_ns,
                        uint64_t cost, Sharing s = Sharing::shared) {
  return detail::update_word(word, s, [&](uint64_t cur, uint64_t* next) {
    return sl_gcra_decide(&p, cur, now_ns, cost, next) != 0;
  });
}

inline bool token_bucket_charge(const sl_rate_profile& p, std::atomic<uint64_t>& word,
                                uint64_t now_ns, uint64_t cost, Sharing s = Sharing::shared) {
  return detail::update_word(word, s, [&](uint64_t cur, uint64_t* next) {
    return sl_tb_decide(&p, cur, now_ns, cost, next) != 0;
  });
}

inline void gcra_refund(const sl_rate_profile& p, std::atomic<uint64_t>& word, uint64_t now_ns,
                        uint64_t cost, Sharing s = Sharing::shared) {
  detail::refund_word(word, s, [&](uint64_t cur) { return sl_gcra_refund(&p, cur, now_ns, cost); });
}

inline void token_bucket_refund(const sl_rate_profile& p, std::atomic<uint64_t>& word,
                                uint64_t now_ns, uint64_t cost, Sharing s = Sharing::shared) {
  detail::refund_word(word, s, [&](uint64_t cur) { return sl_tb_refund(&p, cur, now_ns, cost); });
}

// Shaper: true if the packet may leave, after *delay_ns.
inline bool shaper_charge(const sl_shaper_profile& sp, std::atomic<uint64_t>& word,
                          uint64_t now_ns, uint64_t cost, uint64_t* delay_ns,
                          Sharing s = Sharing::shared) {
  return detail::update_word(word, s, [&](uint64_t cur, uint64_t* next) {
    return sl_shaper_decide(&sp, cur, now_ns, cost, next, delay_ns) != 0;
  });
}

inline void shaper_refund(const sl_shaper_profile& sp, std::atomic<uint64_t>& word, uint64_t cost,
                          Sharing s = Sharing::shared) {
  detail::refund_word(word, s, [&](uint64_t cur) { return sl_shaper_refund(&sp, cur, cost); });
}

// Windows.
inline bool fixed_window_charge(const sl_window_profile& w, std::atomic<uint64_t>& word,
                                uint64_t now_ns, uint64_t cost, Sharing s = Sharing::shared) {
  return detail::update_word(word, s, [&](uint64_t cur, uint64_t* next) {
    return sl_fixed_window_decide(&w, cur, now_ns, cost, next) != 0;
  });
}

inline bool sliding_window_charge(const sl_window_profile& w, std::atomic<uint64_t>& word,
                                  uint64_t now_ns, uint64_t cost, Sharing s = Sharing::shared) {
  return detail::update_word(word, s, [&](uint64_t cur, uint64_t* next) {
    return sl_sliding_window_decide(&w, cur, now_ns, cost, next) != 0;
  });
}

inline void fixed_window_refund(const sl_window_profile& w, std::atomic<uint64_t>& word,
                                uint64_t now_ns, uint64_t cost, Sharing s = Sharing::shared) {
  detail::refund_word(word, s,
                      [&](uint64_t cur) { return sl_fixed_window_refund(&w, cur, now_ns, cost); });
}

inline void sliding_window_refund(const sl_window_profile& w, std::atomic<uint64_t>& word,
                                  uint64_t now_ns, uint64_t cost, Sharing s = Sharing::shared) {
  detail::refund_word(
      word, s, [&](uint64_t cur) { return sl_sliding_window_refund(&w, cur, now_ns, cost); });
}

// Meters (128-bit CAS when shared).
//
// srtcm, shared: a green charge on the short path (sl_srtcm_short_path) publishes E_c alone
// with an 8-byte CAS, which costs a fraction of a 16-byte one. That is exact: whether a packet
// is green, and the new E_c, are functions of E_c, t and the cost only, and on the short path
// a green charge leaves X as it is. So the CAS on E_c validates everything the decision read;
// if another thread changed X meanwhile (a yellow charge, whose own 16-byte CAS saw this E_c),
// the outcome is the two charges in the order yellow, then green, which gives the same X. (One
// corner: a yellow charge of exactly EBS can leave X below 0 by the roundings of its cost and
// of EBS, under two time units; the general path would clamp that to 0 on the next green, a
// racing short-path green leaves it to the next general-path decision: only ever stricter.)
// Every other change goes through the 16-byte CAS, which also catches a torn read of the pair.
inline sl_colour srtcm_charge(const sl_meter_profile& m, MeterWord& word, uint64_t now_ns,
                              uint64_t cost, Sharing s = Sharing::shared) {
  return detail::update_meter(
      word, s,
      [&](const sl_meter_state& st, sl_meter_state* next) {
        return sl_srtcm_decide(&m, &st, now_ns, cost, next);
      },
      [&](const sl_meter_state& st, sl_colour colour) {
        return colour == SL_GREEN && sl_srtcm_short_path(&m, &st, now_ns);
      });
}

inline sl_colour trtcm_charge(const sl_meter_profile& m, MeterWord& word, uint64_t now_ns,
                              uint64_t cost, Sharing s = Sharing::shared) {
  return detail::update_meter(word, s, [&](const sl_meter_state& st, sl_meter_state* next) {
    return sl_trtcm_decide(&m, &st, now_ns, cost, next);
  });
}

// ---------------------------------------------------------------------------- bursts
//
// A burst: n <= kMaxBurst packets that reach ONE bucket at one time now_ns (a dataplane
// reads the clock once per received burst). They are decided in order on a local copy of
// the state, with exactly the results of n single charges at now_ns one after the other,
// and the new state is published once: one compare-and-swap for the whole burst (decided
// again as a whole if another thread changed the word meanwhile), or one plain store with
// Sharing::single_writer. Under contention the word's cache line then moves once per burst
// instead of once per packet. The result is a mask: bit i set if packet i conformed (and
// was charged). costs[i] is packet i's cost, as for the single charges.

inline constexpr uint32_t kMaxBurst = 64;

inline uint64_t token_bucket_charge_burst(const sl_rate_profile& p, std::atomic<uint64_t>& word,
                                          uint64_t now_ns, const uint64_t* costs, uint32_t n,
                                          Sharing s = Sharing::shared) {
  const uint64_t t = sl_time_u(&p, now_ns);
  return detail::update_word(word, s, [&](uint64_t cur, uint64_t* next) {
    return detail::police_burst(p, cur, sl_tb_credit(cur, t), costs, n, next,
                                [&](sl_s64 credit) { return sl_tb_pack(t, credit); });
  });
}

inline uint64_t gcra_charge_burst(const sl_rate_profile& p, std::atomic<uint64_t>& word,
                                  uint64_t now_ns, const uint64_t* costs, uint32_t n,
                                  Sharing s = Sharing::shared) {
  const uint64_t t = sl_time_u(&p, now_ns);
  return detail::update_word(word, s, [&](uint64_t cur, uint64_t* next) {
    return detail::police_burst(p, cur, sl_gcra_credit(&p, cur, t), costs, n, next,
                                [&](sl_s64 credit) { return sl_gcra_pack(&p, t, credit); });
  });
}

namespace detail {
// A burst of one-word decisions that each read the word the one before left:
// decide(cur, i, &next) -> conforms. Published once.
template <class Decide>
inline uint64_t word_burst(std::atomic<uint64_t>& word, Sharing s, uint32_t n, Decide&& decide) {
  return update_word(word, s, [&](uint64_t cur, uint64_t* next) {
    uint64_t mask = 0;
    for (uint32_t i = 0; i < n; ++i)
      if (decide(cur, i, &cur)) mask |= burst_bit(i);
    *next = cur;
    return mask;
  });
}
}  // namespace detail

// Shaper: delay_ns[i] is packet i's wait when its bit is set.
inline uint64_t shaper_charge_burst(const sl_shaper_profile& sp, std::atomic<uint64_t>& word,
                                    uint64_t now_ns, const uint64_t* costs, uint32_t n,
                                    uint64_t* delay_ns, Sharing s = Sharing::shared) {
  return detail::word_burst(word, s, n, [&](uint64_t cur, uint32_t i, uint64_t* next) {
    return sl_shaper_decide(&sp, cur, now_ns, costs[i], next, &delay_ns[i]);
  });
}

inline uint64_t fixed_window_charge_burst(const sl_window_profile& w, std::atomic<uint64_t>& word,
                                          uint64_t now_ns, const uint64_t* costs, uint32_t n,
                                          Sharing s = Sharing::shared) {
  return detail::word_burst(word, s, n, [&](uint64_t cur, uint32_t i, uint64_t* next) {
    return sl_fixed_window_decide(&w, cur, now_ns, costs[i], next);
  });
}

inline uint64_t sliding_window_charge_burst(const sl_window_profile& w,
                                            std::atomic<uint64_t>& word, uint64_t now_ns,
                                            const uint64_t* costs, uint32_t n,
                                            Sharing s = Sharing::shared) {
  return detail::word_burst(word, s, n, [&](uint64_t cur, uint32_t i, uint64_t* next) {
    return sl_sliding_window_decide(&w, cur, now_ns, costs[i], next);
  });
}

namespace detail {
// A meter burst: each packet decided on the state the one before left (decide is
// sl_srtcm_decide or sl_trtcm_decide), colours[i] set, the green ones in the mask.
template <class Decide>
inline uint64_t meter_burst(MeterWord& word, Sharing s, const uint64_t* costs, uint32_t n,
                            sl_colour* colours, Decide&& decide) {
  return update_meter(word, s, [&](const sl_meter_state& st, sl_meter_state* next) {
    uint64_t green = 0;
    sl_meter_state cur = st;
    for (uint32_t i = 0; i < n; ++i) {
      colours[i] = decide(&cur, costs[i], next);
      cur = *next;
      if (colours[i] == SL_GREEN) green |= burst_bit(i);
    }
    *next = cur;
    return green;
  });
}
}  // namespace detail

// Meters: colours[i] is packet i's colour; the mask has the green ones.
inline uint64_t srtcm_charge_burst(const sl_meter_profile& m, MeterWord& word, uint64_t now_ns,
                                   const uint64_t* costs, uint32_t n, sl_colour* colours,
                                   Sharing s = Sharing::shared) {
  return detail::meter_burst(word, s, costs, n, colours,
                             [&](const sl_meter_state* st, uint64_t cost, sl_meter_state* next) {
                               return sl_srtcm_decide(&m, st, now_ns, cost, next);
                             });
}

inline uint64_t trtcm_charge_burst(const sl_meter_profile& m, MeterWord& word, uint64_t now_ns,
                                   const uint64_t* costs, uint32_t n, sl_colour* colours,
                                   Sharing s = Sharing::shared) {
  return detail::meter_burst(word, s, costs, n, colours,
                             [&](const sl_meter_state* st, uint64_t cost, sl_meter_state* next) {
                               return sl_trtcm_decide(&m, st, now_ns, cost, next);
                             });
}

inline MeterWord meter_load(MeterWord& word) { return detail::meter_read(word); }

inline void meter_store(MeterWord& word, MeterWord value) {
  MeterWord cur = detail::meter_read(word);
  while (!detail::meter_cas(word, cur, value)) {
  }
}

}  // namespace sluice
