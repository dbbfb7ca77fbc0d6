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
#include <cstdint>

#include "bucket_math.h"

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

// A decision that leaves the word as it is (a refusal) writes nothing, so a saturated
// bucket costs its readers no cache-line ownership.
template <class Decide>
inline bool update_word(std::atomic<uint64_t>& word, Sharing sharing, Decide&& decide) {
  uint64_t cur = word.load(std::memory_order_relaxed);
  for (;;) {
    uint64_t next = cur;
    bool ok = decide(cur, &next);
    if (next == cur) return ok;
    if (sharing == Sharing::single_writer) {
      word.store(next, std::memory_order_relaxed);
      return ok;
    }
    // On failure the CAS hands back the fresh word and the decision is taken again on it.
    if (word.compare_exchange_weak(cur, next, std::memory_order_relaxed,
                                   std::memory_order_relaxed))
      return ok;
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

template <class Decide>
inline sl_colour update_meter(MeterWord& word, Sharing sharing, Decide&& decide) {
  // Two 64-bit loads may tear; the 128-bit CAS then fails and returns the whole current
  // value, so a torn read costs one retry, never a wrong decision.
  MeterWord cur = meter_read(word);
  for (;;) {
    sl_meter_state st{cur.e0, cur.e1}, next{};
    sl_colour colour = decide(st, &next);
    if (next.e0 == cur.e0 && next.e1 == cur.e1) return colour;
    if (sharing == Sharing::single_writer) {
      __atomic_store_n(&word.e0, next.e0, __ATOMIC_RELAXED);
      __atomic_store_n(&word.e1, next.e1, __ATOMIC_RELAXED);
      return colour;
    }
    if (meter_cas(word, cur, MeterWord{next.e0, next.e1})) return colour;
  }
}

template <class Refund>
inline void refund_word(std::atomic<uint64_t>& word, Sharing sharing, Refund&& refund) {
  update_word(word, sharing, [&](uint64_t cur, uint64_t* next) {
    *next = refund(cur);
    return true;
  });
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
inline sl_colour srtcm_charge(const sl_meter_profile& m, MeterWord& word, uint64_t now_ns,
                              uint64_t cost, Sharing s = Sharing::shared) {
  return detail::update_meter(word, s, [&](const sl_meter_state& st, sl_meter_state* next) {
    return sl_srtcm_decide(&m, &st, now_ns, cost, next);
  });
}

inline sl_colour trtcm_charge(const sl_meter_profile& m, MeterWord& word, uint64_t now_ns,
                              uint64_t cost, Sharing s = Sharing::shared) {
  return detail::update_meter(word, s, [&](const sl_meter_state& st, sl_meter_state* next) {
    return sl_trtcm_decide(&m, &st, now_ns, cost, next);
  });
}

inline MeterWord meter_load(MeterWord& word) { return detail::meter_read(word); }

inline void meter_store(MeterWord& word, MeterWord value) {
  MeterWord cur = detail::meter_read(word);
  while (!detail::meter_cas(word, cur, value)) {
  }
}

}  // namespace sluice
