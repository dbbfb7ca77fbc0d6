#include "limiters.hpp"

namespace sluice {
namespace {

// Load, decide, publish with one CAS; on contention the CAS hands back the fresh word and
// the decision is taken again on it. A decision that leaves the word as it is (a refusal)
// needs no write at all, so a saturated bucket costs readers nothing.
template <class Decide>
bool cas_update(std::atomic<uint64_t>& word, Decide&& decide) {
  uint64_t cur = word.load(std::memory_order_relaxed);
  for (;;) {
    uint64_t next = cur;
    bool ok = decide(cur, &next);
    if (next == cur) return ok;
    if (word.compare_exchange_weak(cur, next, std::memory_order_relaxed,
                                   std::memory_order_relaxed))
      return ok;
  }
}

template <class Refund>
void cas_refund(std::atomic<uint64_t>& word, Refund&& refund) {
  cas_update(word, [&](uint64_t cur, uint64_t* next) {
    *next = refund(cur);
    return true;
  });
}

using u128 = unsigned __int128;

u128 to_u128(MeterWord w) { return u128{w.e0} | (u128{w.e1} << 64); }

bool meter_cas(MeterWord& word, MeterWord& expected, MeterWord desired) {
  auto* p = reinterpret_cast<u128*>(&word);
  u128 exp = to_u128(expected);
  u128 prev = __sync_val_compare_and_swap(p, exp, to_u128(desired));
  if (prev == exp) return true;
  expected = MeterWord{uint64_t(prev), uint64_t(prev >> 64)};
  return false;
}

template <class Decide>
sl_colour meter_update(MeterWord& word, Decide&& decide) {
  // Two plain 64-bit atomic loads may tear; the 128-bit CAS then fails and returns the
  // whole current value, so a torn read only costs one retry.
  MeterWord cur = meter_load(word);
  for (;;) {
    sl_meter_state st{cur.e0, cur.e1}, next{};
    sl_colour colour = decide(st, &next);
    if (next.e0 == cur.e0 && next.e1 == cur.e1) return colour;
    if (meter_cas(word, cur, MeterWord{next.e0, next.e1})) return colour;
  }
}

}  // namespace

bool gcra_charge(const sl_rate_profile& p, std::atomic<uint64_t>& word, uint64_t now_ns,
                 uint64_t cost) {
  return cas_update(word, [&](uint64_t cur, uint64_t* next) {
    return sl_gcra_decide(&p, cur, now_ns, cost, next) != 0;
  });
}

bool token_bucket_charge(const sl_rate_profile& p, std::atomic<uint64_t>& word, uint64_t now_ns,
                         uint64_t cost) {
  return cas_update(word, [&](uint64_t cur, uint64_t* next) {
    return sl_tb_decide(&p, cur, now_ns, cost, next) != 0;
  });
}

void gcra_refund(const sl_rate_profile& p, std::atomic<uint64_t>& word, uint64_t now_ns,
                 uint64_t cost) {
  cas_refund(word, [&](uint64_t cur) { return sl_gcra_refund(&p, cur, now_ns, cost); });
}

void token_bucket_refund(const sl_rate_profile& p, std::atomic<uint64_t>& word, uint64_t now_ns,
                         uint64_t cost) {
  cas_refund(word, [&](uint64_t cur) { return sl_tb_refund(&p, cur, now_ns, cost); });
}

bool shaper_charge(const sl_shaper_profile& s, std::atomic<uint64_t>& word, uint64_t now_ns,
                   uint64_t cost, uint64_t* delay_ns) {
  return cas_update(word, [&](uint64_t cur, uint64_t* next) {
    return sl_shaper_decide(&s, cur, now_ns, cost, next, delay_ns) != 0;
  });
}

void shaper_refund(const sl_shaper_profile& s, std::atomic<uint64_t>& word, uint64_t cost) {
  cas_refund(word, [&](uint64_t cur) { return sl_shaper_refund(&s, cur, cost); });
}

bool fixed_window_charge(const sl_window_profile& w, std::atomic<uint64_t>& word,
                         uint64_t now_ns, uint64_t cost) {
  return cas_update(word, [&](uint64_t cur, uint64_t* next) {
    return sl_fixed_window_decide(&w, cur, now_ns, cost, next) != 0;
  });
}

bool sliding_window_charge(const sl_window_profile& w, std::atomic<uint64_t>& word,
                           uint64_t now_ns, uint64_t cost) {
  return cas_update(word, [&](uint64_t cur, uint64_t* next) {
    return sl_sliding_window_decide(&w, cur, now_ns, cost, next) != 0;
  });
}

void fixed_window_refund(const sl_window_profile& w, std::atomic<uint64_t>& word,
                         uint64_t now_ns, uint64_t cost) {
  cas_refund(word, [&](uint64_t cur) { return sl_fixed_window_refund(&w, cur, now_ns, cost); });
}

void sliding_window_refund(const sl_window_profile& w, std::atomic<uint64_t>& word,
                           uint64_t now_ns, uint64_t cost) {
  cas_refund(word,
             [&](uint64_t cur) { return sl_sliding_window_refund(&w, cur, now_ns, cost); });
}

sl_colour srtcm_charge(const sl_meter_profile& m, MeterWord& word, uint64_t now_ns,
                       uint64_t cost) {
  return meter_update(word, [&](const sl_meter_state& st, sl_meter_state* next) {
    return sl_srtcm_decide(&m, &st, now_ns, cost, next);
  });
}

sl_colour trtcm_charge(const sl_meter_profile& m, MeterWord& word, uint64_t now_ns,
                       uint64_t cost) {
  return meter_update(word, [&](const sl_meter_state& st, sl_meter_state* next) {
    return sl_trtcm_decide(&m, &st, now_ns, cost, next);
  });
}

MeterWord meter_load(MeterWord& word) {
  return MeterWord{__atomic_load_n(&word.e0, __ATOMIC_RELAXED),
                   __atomic_load_n(&word.e1, __ATOMIC_RELAXED)};
}

void meter_store(MeterWord& word, MeterWord value) {
  MeterWord cur = meter_load(word);
  while (!meter_cas(word, cur, value)) {
  }
}

}  // namespace sluice
