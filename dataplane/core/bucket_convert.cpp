#include "bucket_convert.hpp"

#include <algorithm>

namespace sluice {
namespace {

using i128 = __int128;

i128 floor_div(i128 a, i128 b) {  // b > 0
  const i128 q = a / b;
  return (a % b != 0 && a < 0) ? q - 1 : q;
}

// A credit in u of one rate to a credit in u of another with the same tokens (16 fraction
// bits kept in between), capped at cap_tokens and cap_u. interval_fp: u per token, 16
// fraction bits (bucket_math.h). Rounds towards fewer tokens.
sl_s64 carry_credit(sl_s64 d_from, uint64_t interval_from, uint64_t interval_to,
                    uint64_t cap_tokens, uint64_t cap_u) {
  // tokens * 2^16 = d * 2^32 / interval_fp
  i128 tokens_fp = floor_div(i128(d_from) << 32, i128(interval_from));
  tokens_fp = std::min<i128>(tokens_fp, i128(cap_tokens) << 16);
  i128 d_to = floor_div(tokens_fp * i128(interval_to), i128(1) << 32);
  d_to = std::min<i128>(d_to, i128(cap_u));
  return sl_s64(d_to);
}

// The credit of a rate bucket under `from` at t, after the backward-step rule, capped at full.
sl_s64 held_credit(const sl_rate_profile& from, sl_s64 d) {
  return std::min<sl_s64>(sl_rebase(&from, d), sl_s64(from.burst_u));
}

sl_s64 carry(const sl_rate_profile& from, const sl_rate_profile& to, sl_s64 d) {
  return carry_credit(held_credit(from, d), from.interval_fp, to.interval_fp, to.burst_tokens,
                      to.burst_u);
}

uint64_t carry_units(uint64_t units, const sl_window_profile& from, const sl_window_profile& to,
                     uint64_t mask) {
  const unsigned __int128 cost = (unsigned __int128)units * from.unit_cost;
  const unsigned __int128 out = (cost + to.unit_cost - 1) / to.unit_cost;
  return out > mask ? mask : uint64_t(out);
}

}  // namespace

uint64_t convert_token_bucket_word(const sl_rate_profile& from, const sl_rate_profile& to,
                                   uint64_t word, uint64_t now_ns) {
  const sl_s64 d = sl_tb_credit(word, sl_time_u(&from, now_ns));
  return sl_tb_pack(sl_time_u(&to, now_ns), carry(from, to, d));
}

uint64_t convert_gcra_word(const sl_rate_profile& from, const sl_rate_profile& to, uint64_t tat,
                           uint64_t now_ns) {
  const sl_s64 d = sl_credit(sl_time_u(&from, now_ns), tat - from.burst_u);
  return sl_time_u(&to, now_ns) - uint64_t(carry(from, to, d)) + to.burst_u;
}

uint64_t convert_shaper_word(const sl_shaper_profile& from, const sl_shaper_profile& to,
                             uint64_t tat, uint64_t now_ns) {
  const sl_rate_profile& f = from.rate;
  const sl_rate_profile& t = to.rate;
  sl_s64 d = sl_credit(sl_time_u(&f, now_ns), tat - f.burst_u);
  // Queued packets push TAT up to B_u + max_delay ahead; beyond that the clock stepped back.
  if (d < sl_step_limit(&f, from.max_delay_u)) d = 0;
  d = std::min<sl_s64>(d, sl_s64(f.burst_u));
  sl_s64 out = carry_credit(d, f.interval_fp, t.interval_fp, t.burst_tokens, t.burst_u);
  // A backlog the new rate would take longer than its max-delay to drain is cut there: new
  // packets then wait at most max-delay, as under any profile.
  out = std::max<sl_s64>(out, -sl_s64(to.max_delay_u));
  return sl_time_u(&t, now_ns) - uint64_t(out) + t.burst_u;
}

sl_meter_state convert_srtcm_state(const sl_meter_profile& from, const sl_meter_profile& to,
                                   sl_meter_state st, uint64_t now_ns) {
  const sl_rate_profile& c = from.committed;
  const uint64_t t = sl_time_u(&c, now_ns);
  sl_s64 tc = 0, te = 0;
  const sl_s64 dc = sl_credit(t, st.e0);
  if (dc >= sl_step_limit(&c, 0)) {  // else the clock stepped back: both buckets empty
    tc = std::min<sl_s64>(dc, sl_s64(c.burst_u));
    // The excess bucket as sl_srtcm_decide_empty_times reads it (E_e = E_c + CBS_u - X).
    const uint64_t fill = st.e0 + c.burst_u;
    const uint64_t empty_e = fill - st.e1;
    const uint64_t at = sl_s64(fill - t) > 0 ? fill : t;
    te = std::clamp<sl_s64>(sl_credit(at, empty_e), 0, sl_s64(from.excess_burst_u));
  }
  const sl_rate_profile& c2 = to.committed;
  const sl_s64 tc2 = carry_credit(tc, c.interval_fp, c2.interval_fp, c2.burst_tokens, c2.burst_u);
  const sl_s64 te2 = std::max<sl_s64>(
      0, carry_credit(te, c.interval_fp, c2.interval_fp, to.excess_burst_tokens, to.excess_burst_u));
  // In the new profile: E_c' = t - Tc', and X' = Te' (whether or not the committed bucket is
  // full, X = E_c + CBS_u - E_e is the excess credit at the fill time).
  sl_meter_state out;
  out.e0 = sl_time_u(&c2, now_ns) - uint64_t(tc2);
  out.e1 = uint64_t(te2);
  return out;
}

sl_meter_state convert_trtcm_state(const sl_meter_profile& from, const sl_meter_profile& to,
                                   sl_meter_state st, uint64_t now_ns) {
  const uint64_t t = sl_time_u(&from.committed, now_ns);
  const uint64_t t2 = sl_time_u(&to.committed, now_ns);
  sl_meter_state out;
  out.e0 = t2 - uint64_t(carry(from.committed, to.committed, sl_credit(t, st.e0)));
  out.e1 = t2 - uint64_t(carry(from.peak, to.peak, sl_credit(t, st.e1)));
  return out;
}

uint64_t convert_fixed_window_word(const sl_window_profile& from, const sl_window_profile& to,
                                   uint64_t word) {
  const uint64_t count = carry_units(word & SL_FW_COUNT_MASK, from, to, SL_FW_COUNT_MASK);
  return (word & ~SL_FW_COUNT_MASK) | count;
}

uint64_t convert_sliding_window_word(const sl_window_profile& from, const sl_window_profile& to,
                                     uint64_t word) {
  const uint64_t cur = carry_units(word & SL_SW_COUNT_MASK, from, to, SL_SW_COUNT_MASK);
  const uint64_t prev =
      carry_units((word >> SL_SW_COUNT_BITS) & SL_SW_COUNT_MASK, from, to, SL_SW_COUNT_MASK);
  const uint64_t index = word >> (2 * SL_SW_COUNT_BITS);
  return (index << (2 * SL_SW_COUNT_BITS)) | (prev << SL_SW_COUNT_BITS) | cur;
}

int64_t token_bucket_tokens(const sl_rate_profile& p, uint64_t word, uint64_t now_ns) {
  const sl_s64 d = held_credit(p, sl_tb_credit(word, sl_time_u(&p, now_ns)));
  return int64_t(floor_div(i128(d) << 16, i128(p.interval_fp)));
}

int64_t gcra_tokens(const sl_rate_profile& p, uint64_t tat, uint64_t now_ns) {
  const sl_s64 d = std::min<sl_s64>(sl_credit(sl_time_u(&p, now_ns), tat - p.burst_u),
                                    sl_s64(p.burst_u));
  return int64_t(floor_div(i128(d) << 16, i128(p.interval_fp)));
}

}  // namespace sluice
