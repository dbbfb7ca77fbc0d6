// TscClock: cycle counts to nanoseconds against exact 128-bit arithmetic, for typical and odd
// counter rates, near the top of the 64-bit range, and across the base.
#include "tsc_clock.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <random>
#include <vector>

namespace sluice {
namespace {

using u128 = unsigned __int128;

// The exact value, floor(delta * 1e9 / hz), truncated to 64 bits like the clock.
uint64_t exact_ns(uint64_t delta, uint64_t hz) {
  return static_cast<uint64_t>(static_cast<u128>(delta) * TscClock::kNsPerSecond / hz);
}

// Rates seen in practice (TSC of server and laptop CPUs, the 1 GHz and 25 MHz of arm64
// generic timers), and awkward ones (prime, tiny, huge).
const std::vector<uint64_t> kRates = {
    1'000'000'000, 2'100'000'000, 2'399'999'917, 3'000'000'000, 3'700'000'001,
    25'000'000,    100'000'000,   999'999'937,   1,             7,
    uint64_t{1} << 40, std::numeric_limits<uint64_t>::max(),
};

TEST(TscClock, ZeroDeltaIsBase) {
  for (uint64_t hz : kRates) {
    auto c = TscClock::make(hz, 12345, 777);
    EXPECT_EQ(c.to_ns(12345), 777u) << hz;
  }
}

TEST(TscClock, OneSecondOfTicksIsOneSecond) {
  for (uint64_t hz : kRates) {
    auto c = TscClock::make(hz);
    // Never above the exact value, at most 1 ns below it.
    const uint64_t ns = c.to_ns(hz);
    EXPECT_LE(ns, TscClock::kNsPerSecond) << hz;
    EXPECT_GE(ns + 1, TscClock::kNsPerSecond) << hz;
  }
}

TEST(TscClock, MultiplierUsesTheWholeWord) {
  for (uint64_t hz : kRates) {
    auto c = TscClock::make(hz);
    EXPECT_LE(c.shift(), 64u);
    // Precision: either the largest shift, or a multiplier in [2^63, 2^64).
    if (c.shift() < 64) {
      EXPECT_GE(c.mult(), uint64_t{1} << 63) << hz;
    }
  }
}

TEST(TscClock, WithinOneNanosecondOfExactOverRandomCounts) {
  std::mt19937_64 rng(42);
  for (uint64_t hz : kRates) {
    auto c = TscClock::make(hz);
    for (int i = 0; i < 20000; ++i) {
      // Counts up to the whole 64-bit range where their nanosecond value stays below 2^63.
      uint64_t delta = rng() >> (rng() % 64);
      const u128 exact = static_cast<u128>(delta) * TscClock::kNsPerSecond / hz;
      if (exact >= (u128{1} << 63)) continue;
      const uint64_t ns = c.to_ns(delta);
      ASSERT_LE(ns, uint64_t(exact)) << "hz=" << hz << " delta=" << delta;
      ASSERT_LE(uint64_t(exact) - ns, 1u) << "hz=" << hz << " delta=" << delta;
    }
  }
}

TEST(TscClock, LargeCountsDoNotOverflowTheIntermediate) {
  // A 3 GHz counter after 2^63 cycles (~97 years) and at its very top: a 64-bit multiply by
  // 1e9 or by the multiplier would have overflowed long before; the 128-bit product does not.
  const uint64_t hz = 3'000'000'000;
  auto c = TscClock::make(hz);
  for (uint64_t delta : {uint64_t{1} << 62, uint64_t{1} << 63, std::numeric_limits<uint64_t>::max(),
                         std::numeric_limits<uint64_t>::max() - 1}) {
    const uint64_t exact = exact_ns(delta, hz);
    const uint64_t ns = c.to_ns(delta);
    EXPECT_LE(ns, exact) << delta;
    EXPECT_LE(exact - ns, 1u) << delta;
  }
  // The counter itself near 2^64 with a base just below: only the delta matters.
  const uint64_t base = std::numeric_limits<uint64_t>::max() - 1'000'000;
  auto near_top = TscClock::make(hz, base, 5'000);
  const uint64_t ns = near_top.to_ns(base + 3'000'000);  // the counter wraps past 2^64
  EXPECT_LE(ns, 5'000u + 1'000'000u);
  EXPECT_GE(ns + 1, 5'000u + 1'000'000u);
}

TEST(TscClock, CounterWrapContinuesForward) {
  // A counter that wraps past 2^64 keeps counting forward from base: the delta is modular.
  const uint64_t hz = 2'000'000'000;  // 2 ticks per ns
  const uint64_t base = std::numeric_limits<uint64_t>::max() - 99;  // 100 ticks before wrap
  auto c = TscClock::make(hz, base, 1'000);
  EXPECT_EQ(c.to_ns(base + 100), 1'050u);  // wrapped to 0
  EXPECT_EQ(c.to_ns(999), 1'000u + 1'099u / 2);  // 1099 ticks after base
}

TEST(TscClock, MonotonicInTheCounter) {
  for (uint64_t hz : kRates) {
    auto c = TscClock::make(hz, 1'000, 0);
    uint64_t prev = c.to_ns(1'000);
    uint64_t tsc = 1'000;
    for (int i = 0; i < 10000; ++i) {
      tsc += 1 + uint64_t(i) * 7919;
      // Only where the nanosecond value fits (a 1 Hz counter overflows it within 600 years).
      if (static_cast<u128>(tsc - 1'000) * TscClock::kNsPerSecond / hz >= (u128{1} << 63)) break;
      const uint64_t ns = c.to_ns(tsc);
      ASSERT_GE(ns, prev) << hz;
      prev = ns;
    }
  }
}

TEST(TscClock, UsableInConstantExpressions) {
  constexpr TscClock c = TscClock::make(2'000'000'000);
  static_assert(c.to_ns(2'000'000'000) == 1'000'000'000);
  static_assert(c.to_ns(3) == 1);  // 1.5 ns rounds down
  SUCCEED();
}

}  // namespace
}  // namespace sluice
