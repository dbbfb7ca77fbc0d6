#include "limiter_profile.hpp"

#include <string>

namespace sluice {
namespace {

using u128 = unsigned __int128;

// Interval of the smallest cost, in time units: the hard floor keeps rounding below 1e-4
// relative; the target (2^16, 1.5e-5) is chosen when the burst still fits.
constexpr uint64_t kPrecisionFloorU = 10000;
constexpr uint64_t kPrecisionTargetU = uint64_t{1} << 16;

uint64_t min_cost(const Rate& r) { return r.unit == CostUnit::packets ? 1 : kMinFrameBytes; }

// ceil(1e9 * den * 2^(shift + frac) / num): u per token in fixed point, rounded up so
// costs are never under-charged; 0 if it overflows.
uint64_t interval_fp(const Rate& r, uint32_t shift) {
  u128 numer = u128{1000000000} * r.per_sec_den;
  numer <<= (shift + SL_INTERVAL_FRAC_BITS);
  u128 q = (numer + r.per_sec_num - 1) / r.per_sec_num;
  return q >> 64 ? 0 : uint64_t(q);
}

// Time units a cost takes (rounded up as sl_cost_u does, before its clamp); u128 so a
// too-large burst is detected rather than wrapped.
u128 cost_u(uint64_t ifp, uint64_t cost) {
  return (u128{cost} * ifp + (uint64_t{1} << SL_INTERVAL_FRAC_BITS) - 1) >> SL_INTERVAL_FRAC_BITS;
}

// floor(B * 1e9 * den * 2^shift / num): the burst in u, rounded down so the bucket never
// holds more than B. Saturates instead of wrapping.
uint64_t burst_u(const Rate& r, uint64_t burst, uint32_t shift) {
  u128 numer = u128{burst} * 1000000000u;
  if (numer >> 96) return UINT64_MAX;
  numer *= r.per_sec_den;
  if (numer >> (127 - shift)) return UINT64_MAX;
  u128 q = (numer << shift) / r.per_sec_num;
  return q >> 64 ? UINT64_MAX : uint64_t(q);
}

std::string describe(const Rate& r) { return format_rate(r); }

sl_rate_profile build(const Rate& r, uint64_t burst, uint32_t shift) {
  sl_rate_profile p{};
  p.time_shift = shift;
  p.interval_fp = interval_fp(r, shift);
  p.burst_u = burst_u(r, burst, shift);
  p.stale_u = SL_STEP_TOLERANCE_NS << shift;
  p.burst_tokens = burst;
  return p;
}

// Picks the time shift for rates that must share one: the smallest shift >= min_shift at
// which every rate's smallest packet reaches the precision target, or the largest at which
// every burst still fits.
Result<uint32_t> choose_shift(const Rate* rates, const uint64_t* bursts, size_t n,
                              uint32_t min_shift) {
  for (size_t i = 0; i < n; ++i) {
    if (rates[i].per_sec_num == 0 || rates[i].per_sec_den == 0)
      return make_error("rate must be positive");
    if (bursts[i] < min_cost(rates[i]))
      return make_error(rates[i].unit == CostUnit::packets
                            ? "burst must be at least 1 packet"
                            : "burst must be at least 64 bytes for a byte rate");
    if (interval_fp(rates[i], min_shift) == 0)
      return make_error("rate " + describe(rates[i]) + " is too low (one token per " +
                        "2^44 ns at most)");
  }
  int best = -1;
  for (uint32_t k = min_shift; k <= SL_MAX_TIME_SHIFT; ++k) {
    bool fits = true, precise = true;
    for (size_t i = 0; i < n; ++i) {
      uint64_t ifp = interval_fp(rates[i], k);
      if (ifp == 0 || burst_u(rates[i], bursts[i], k) > SL_MAX_BURST_U ||
          cost_u(ifp, bursts[i]) >> 63)
        fits = false;
      if (ifp != 0 && cost_u(ifp, min_cost(rates[i])) < kPrecisionTargetU) precise = false;
    }
    if (!fits) break;
    best = int(k);
    if (precise) break;
  }
  if (best < 0)
    return make_error("burst of " + std::to_string(bursts[0]) + " at " + describe(rates[0]) +
                      " lasts too long to represent (at most 2^47 time units)");
  for (size_t i = 0; i < n; ++i) {
    if (cost_u(interval_fp(rates[i], uint32_t(best)), min_cost(rates[i])) < kPrecisionFloorU)
      return make_error("rate " + describe(rates[i]) +
                        " with this burst cannot be kept exact to 1e-4 (rate above 800 Mpps / "
                        "400 Gbit/s, or burst too long for it)");
  }
  return uint32_t(best);
}

}  // namespace

Result<sl_rate_profile> make_rate_profile(const Rate& rate, uint64_t burst_tokens,
                                          uint32_t min_shift) {
  auto shift = choose_shift(&rate, &burst_tokens, 1, min_shift);
  if (!shift) return shift.error();
  return build(rate, burst_tokens, *shift);
}

Result<sl_shaper_profile> make_shaper_profile(const Rate& rate, uint64_t burst_tokens,
                                              uint64_t max_delay_ns) {
  if (max_delay_ns == 0 || max_delay_ns > kMaxDelayNs)
    return make_error("max-delay must be between 1 ns and 60 s");
  auto p = make_rate_profile(rate, burst_tokens);
  if (!p) return p.error();
  sl_shaper_profile s{};
  s.rate = *p;
  s.max_delay_u = max_delay_ns << p->time_shift;
  s.max_delay_ns = max_delay_ns;
  return s;
}

Result<sl_meter_profile> make_srtcm_profile(const Rate& cir, uint64_t cbs, uint64_t ebs) {
  // EBS may be 0 (never yellow); for fitting, the longer of the two bursts counts.
  uint64_t fit = ebs > cbs ? ebs : cbs;
  auto shift = choose_shift(&cir, &fit, 1, 0);
  if (!shift) return shift.error();
  sl_meter_profile m{};
  m.committed = build(cir, cbs, *shift);
  m.peak = m.committed;
  m.excess_burst_tokens = ebs;
  m.excess_burst_u = burst_u(cir, ebs, *shift);
  return m;
}

Result<sl_meter_profile> make_trtcm_profile(const Rate& cir, uint64_t cbs, const Rate& pir,
                                            uint64_t pbs) {
  if (cir.unit != pir.unit) return make_error("peak-rate and rate must use the same unit");
  if (u128{pir.per_sec_num} * cir.per_sec_den < u128{cir.per_sec_num} * pir.per_sec_den)
    return make_error("peak-rate must be at least rate (RFC 2698: PIR >= CIR)");
  const Rate rates[2] = {cir, pir};
  const uint64_t bursts[2] = {cbs, pbs};
  auto shift = choose_shift(rates, bursts, 2, 0);
  if (!shift) return shift.error();
  sl_meter_profile m{};
  m.committed = build(cir, cbs, *shift);
  m.peak = build(pir, pbs, *shift);
  return m;
}

Result<sl_window_profile> make_window_profile(uint64_t window_ns, uint64_t limit, bool sliding) {
  if (window_ns < kMinWindowNs || window_ns > SL_MAX_WINDOW_NS)
    return make_error("window must be between 1us and 39h");
  if (limit == 0) return make_error("limit must be positive");
  // Counts that do not fit their field are kept in coarser units (documented rounding up).
  uint64_t field_max = sliding ? SL_SW_COUNT_MASK : SL_FW_COUNT_MASK;
  sl_window_profile w{};
  w.window_ns = window_ns;
  w.unit_cost = limit <= field_max ? 1 : (limit - 1) / field_max + 1;  // ceil, overflow-free
  w.limit_units = limit / w.unit_cost;
  return w;
}

void set_stale_read_tolerance(sl_rate_profile& p, uint64_t tolerance_ns) {
  p.stale_u = tolerance_ns << p.time_shift;
}

Status check_rule_limits(const Rule& rule) {
  auto status = [](const auto& r) -> Status {
    if (!r) return r.error();
    return Ok{};
  };
  switch (rule.algorithm) {
    case Algorithm::token_bucket:
    case Algorithm::gcra:
      return status(make_rate_profile(rule.rate, rule.burst));
    case Algorithm::leaky_bucket:
      return status(make_shaper_profile(rule.rate, rule.burst, rule.max_delay_ns));
    case Algorithm::srtcm:
      return status(make_srtcm_profile(rule.rate, rule.burst, rule.excess_burst));
    case Algorithm::trtcm:
      return status(make_trtcm_profile(rule.rate, rule.burst, rule.peak_rate, rule.peak_burst));
    case Algorithm::sliding_window:
    case Algorithm::fixed_window:
      return status(make_window_profile(rule.window_ns, rule.limit,
                                        rule.algorithm == Algorithm::sliding_window));
  }
  return make_error("unknown algorithm");
}

}  // namespace sluice
