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

// ceil(1e9 * den * mult * 2^frac / num): u per token in fixed point, rounded up so costs are
// never under-charged; 0 if it overflows. Exact (no rounding) for an exact multiplier.
uint64_t interval_fp(const Rate& r, uint64_t mult) {
  u128 numer = u128{1000000000} * r.per_sec_den * mult;
  if (numer >> (127 - SL_INTERVAL_FRAC_BITS)) return 0;
  numer <<= SL_INTERVAL_FRAC_BITS;
  u128 q = (numer + r.per_sec_num - 1) / r.per_sec_num;
  return q >> 64 ? 0 : uint64_t(q);
}

// Time units a cost takes (rounded up as sl_cost_u does, before its clamp); u128 so a
// too-large burst is detected rather than wrapped.
u128 cost_u(uint64_t ifp, uint64_t cost) {
  return (u128{cost} * ifp + (uint64_t{1} << SL_INTERVAL_FRAC_BITS) - 1) >> SL_INTERVAL_FRAC_BITS;
}

// floor(B * 1e9 * den * mult / num): the burst in u, rounded down so the bucket never
// holds more than B. Saturates instead of wrapping.
uint64_t burst_u(const Rate& r, uint64_t burst, uint64_t mult) {
  u128 numer = u128{burst} * 1000000000u;
  if (numer >> 96) return UINT64_MAX;
  numer *= r.per_sec_den;
  if (numer >> (127 - SL_MAX_TIME_SHIFT)) return UINT64_MAX;
  u128 q = numer * mult / r.per_sec_num;
  return q >> 64 ? UINT64_MAX : uint64_t(q);
}

u128 gcd(u128 a, u128 b) {
  while (b != 0) {
    u128 t = a % b;
    a = b;
    b = t;
  }
  return a;
}

// The smallest multiplier m (u per ns) at which one token's interval, 1e9 * den / num ns,
// is a whole number of units: num / gcd(1e9 * den, num). 0 if it exceeds SL_MAX_TIME_MULT.
uint64_t exact_mult(const Rate& r) {
  u128 ns_per_token_num = u128{1000000000} * r.per_sec_den;
  u128 m = u128{r.per_sec_num} / gcd(ns_per_token_num, r.per_sec_num);
  return m <= SL_MAX_TIME_MULT ? uint64_t(m) : 0;
}

std::string describe(const Rate& r) { return format_rate(r); }

// Where the interval is not a whole number of units (a fallback profile) and a token is a
// packet, the interval is rounded up to whole units, which every packet's cost is rounded to
// anyway, and the burst is B such intervals: the bucket is then exactly the model's at a
// rate lower by less than 1e-4, so a burst that exactly fills it passes whole. (A byte's
// interval is too short for that: byte-rate fallback profiles keep the fraction bits and
// round the burst down.)
uint64_t profile_interval_fp(const Rate& r, uint64_t mult) {
  constexpr uint64_t one_u = uint64_t{1} << SL_INTERVAL_FRAC_BITS;
  uint64_t ifp = interval_fp(r, mult);
  if (r.unit != CostUnit::packets || ifp % one_u == 0) return ifp;
  return ifp / one_u + 1 >= (uint64_t{1} << (64 - SL_INTERVAL_FRAC_BITS)) ? 0
                                                                            : (ifp / one_u + 1) * one_u;
}

uint64_t profile_burst_u(const Rate& r, uint64_t burst, uint64_t mult) {
  uint64_t ifp = interval_fp(r, mult);
  if (r.unit != CostUnit::packets || ifp % (uint64_t{1} << SL_INTERVAL_FRAC_BITS) == 0)
    return burst_u(r, burst, mult);
  u128 whole = u128{burst} * (profile_interval_fp(r, mult) >> SL_INTERVAL_FRAC_BITS);
  return whole >> 64 ? UINT64_MAX : uint64_t(whole);
}

// The profile at multiplier mult (shift: log2(mult) where mult is a power of two, else 0).
sl_rate_profile build(const Rate& r, uint64_t burst, uint64_t mult, uint32_t shift) {
  sl_rate_profile p{};
  p.time_shift = shift;
  p.time_mult = uint32_t(mult);
  p.interval_fp = profile_interval_fp(r, mult);
  p.burst_u = profile_burst_u(r, burst, mult);
  p.stale_u = SL_STEP_TOLERANCE_NS * mult;
  p.burst_tokens = burst;
  return p;
}

// Whether every rate fits at multiplier mult: the interval is representable and every
// burst lasts at most SL_MAX_BURST_U units (and its cost cannot overflow).
bool fits(const Rate* rates, const uint64_t* bursts, size_t n, uint64_t mult) {
  for (size_t i = 0; i < n; ++i) {
    uint64_t ifp = profile_interval_fp(rates[i], mult);
    if (ifp == 0 || profile_burst_u(rates[i], bursts[i], mult) > SL_MAX_BURST_U ||
        cost_u(ifp, bursts[i]) >> 63)
      return false;
  }
  return true;
}

struct TimeUnit {
  uint64_t mult;
  uint32_t shift;
};

// Picks the time unit for rates that must share one. An exact multiplier first: the least
// common multiple of each rate's exact_mult, if it is <= SL_MAX_TIME_MULT (and >= 2^min_shift)
// and every burst fits. Otherwise a power of two 2^k: the smallest k >= min_shift at which
// every rate's smallest packet reaches the precision target, or the largest at which every
// burst still fits.
Result<TimeUnit> choose_unit(const Rate* rates, const uint64_t* bursts, size_t n,
                             uint32_t min_shift) {
  for (size_t i = 0; i < n; ++i) {
    if (rates[i].per_sec_num == 0 || rates[i].per_sec_den == 0)
      return make_error("rate must be positive");
    if (bursts[i] < min_cost(rates[i]))
      return make_error(rates[i].unit == CostUnit::packets
                            ? "burst must be at least 1 packet"
                            : "burst must be at least 64 bytes for a byte rate");
    if (interval_fp(rates[i], uint64_t{1} << min_shift) == 0)
      return make_error("rate " + describe(rates[i]) + " is too low (one token per " +
                        "2^44 ns at most)");
  }
  u128 lcm = 1;
  for (size_t i = 0; i < n && lcm != 0; ++i) {
    uint64_t m = exact_mult(rates[i]);
    lcm = m == 0 ? 0 : lcm / gcd(lcm, m) * m;
    if (lcm > SL_MAX_TIME_MULT) lcm = 0;
  }
  if (lcm != 0) {
    uint64_t m = uint64_t(lcm);
    // Scale up to honour min_shift (a multiple of an exact multiplier is exact too).
    while (m < (uint64_t{1} << min_shift)) m *= 2;
    if (m <= SL_MAX_TIME_MULT && fits(rates, bursts, n, m))
      return TimeUnit{m, (m & (m - 1)) == 0 ? uint32_t(__builtin_ctzll(m)) : 0};
  }
  int best = -1;
  for (uint32_t k = min_shift; k <= SL_MAX_TIME_SHIFT; ++k) {
    if (!fits(rates, bursts, n, uint64_t{1} << k)) break;
    bool precise = true;
    for (size_t i = 0; i < n; ++i)
      if (cost_u(interval_fp(rates[i], uint64_t{1} << k), min_cost(rates[i])) < kPrecisionTargetU)
        precise = false;
    best = int(k);
    if (precise) break;
  }
  if (best < 0)
    return make_error("burst of " + std::to_string(bursts[0]) + " at " + describe(rates[0]) +
                      " lasts too long to represent (at most 2^47 time units)");
  for (size_t i = 0; i < n; ++i) {
    if (cost_u(interval_fp(rates[i], uint64_t{1} << best), min_cost(rates[i])) <
        kPrecisionFloorU)
      return make_error("rate " + describe(rates[i]) +
                        " with this burst cannot be kept exact to 1e-4 (rate above 800 Mpps / "
                        "400 Gbit/s, or burst too long for it)");
  }
  return TimeUnit{uint64_t{1} << best, uint32_t(best)};
}

}  // namespace

Result<sl_rate_profile> make_rate_profile(const Rate& rate, uint64_t burst_tokens,
                                          uint32_t min_shift) {
  auto unit = choose_unit(&rate, &burst_tokens, 1, min_shift);
  if (!unit) return unit.error();
  return build(rate, burst_tokens, unit->mult, unit->shift);
}

Result<sl_shaper_profile> make_shaper_profile(const Rate& rate, uint64_t burst_tokens,
                                              uint64_t max_delay_ns) {
  if (max_delay_ns == 0 || max_delay_ns > kMaxDelayNs)
    return make_error("max-delay must be between 1 ns and 60 s");
  auto p = make_rate_profile(rate, burst_tokens);
  if (!p) return p.error();
  sl_shaper_profile s{};
  s.rate = *p;
  s.max_delay_u = max_delay_ns * p->time_mult;
  s.max_delay_ns = max_delay_ns;
  return s;
}

Result<sl_meter_profile> make_srtcm_profile(const Rate& cir, uint64_t cbs, uint64_t ebs) {
  // EBS may be 0 (never yellow); for fitting, the longer of the two bursts counts.
  uint64_t fit = ebs > cbs ? ebs : cbs;
  auto unit = choose_unit(&cir, &fit, 1, 0);
  if (!unit) return unit.error();
  sl_meter_profile m{};
  m.committed = build(cir, cbs, unit->mult, unit->shift);
  m.peak = m.committed;
  m.excess_burst_tokens = ebs;
  m.excess_burst_u = burst_u(cir, ebs, unit->mult);
  return m;
}

Result<sl_meter_profile> make_trtcm_profile(const Rate& cir, uint64_t cbs, const Rate& pir,
                                            uint64_t pbs) {
  if (cir.unit != pir.unit) return make_error("peak-rate and rate must use the same unit");
  if (u128{pir.per_sec_num} * cir.per_sec_den < u128{cir.per_sec_num} * pir.per_sec_den)
    return make_error("peak-rate must be at least rate (RFC 2698: PIR >= CIR)");
  const Rate rates[2] = {cir, pir};
  const uint64_t bursts[2] = {cbs, pbs};
  auto unit = choose_unit(rates, bursts, 2, 0);
  if (!unit) return unit.error();
  sl_meter_profile m{};
  m.committed = build(cir, cbs, unit->mult, unit->shift);
  m.peak = build(pir, pbs, unit->mult, unit->shift);
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
  p.stale_u = tolerance_ns * p.time_mult;
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
