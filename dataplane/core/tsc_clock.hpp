// Cycle counter -> nanoseconds, for the live dataplane's one clock read per burst (DESIGN
// habit 3). Pure arithmetic: the caller reads the counter (rte_rdtsc) and supplies its rate, so
// this header needs no DPDK and its tests need no EAL (habit 1: pass hz in).
//
// ns = base_ns + (tsc - base_tsc) * 1e9 / hz, computed as ((tsc - base_tsc) * mult) >> shift
// with a multiplier precomputed once: one 64x64->128 multiply and a shift per burst, no
// division. The product of two 64-bit values always fits in 128 bits, so no cycle count
// overflows the intermediate; `shift` is the largest (<= 64) that keeps `mult` below 2^64,
// so mult >= 2^63 (or shift == 64) and its rounding error is below one part in 2^63: the result
// is never above the exact value and at most 1 ns below it for the first 2^63 ns (292 years)
// after base. Past 2^64 ns the result wraps modulo 2^64, which the core treats as a clock wrap.
#pragma once

#include <cstdint>

namespace sluice {

class TscClock {
 public:
  static constexpr uint64_t kNsPerSecond = 1'000'000'000;

  // hz: counter ticks per second (> 0). The counter value base_tsc maps to base_ns.
  static constexpr TscClock make(uint64_t hz, uint64_t base_tsc = 0, uint64_t base_ns = 0) {
    TscClock c;
    c.hz_ = hz == 0 ? 1 : hz;
    c.base_tsc_ = base_tsc;
    c.base_ns_ = base_ns;
    // Largest shift with (1e9 << shift) / hz < 2^64; for hz >= 1e9 that is 64.
    unsigned shift = 64;
    while (shift > 0 && ((static_cast<u128>(kNsPerSecond) << shift) / c.hz_) >> 64 != 0) --shift;
    c.shift_ = shift;
    c.mult_ = static_cast<uint64_t>((static_cast<u128>(kNsPerSecond) << shift) / c.hz_);
    return c;
  }

  // Nanoseconds at counter value `tsc`. A counter below base_tsc is taken as having wrapped.
  constexpr uint64_t to_ns(uint64_t tsc) const {
    const uint64_t delta = tsc - base_tsc_;
    const u128 product = static_cast<u128>(delta) * mult_;
    // shift == 64 must not shift a 64-bit value by 64; on u128 it is well defined.
    return base_ns_ + static_cast<uint64_t>(product >> shift_);
  }

  constexpr uint64_t hz() const { return hz_; }
  constexpr uint64_t mult() const { return mult_; }
  constexpr unsigned shift() const { return shift_; }

 private:
  using u128 = unsigned __int128;

  uint64_t hz_ = 1;
  uint64_t base_tsc_ = 0;
  uint64_t base_ns_ = 0;
  uint64_t mult_ = 0;
  unsigned shift_ = 0;
};

}  // namespace sluice
