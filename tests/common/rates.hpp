// Rates for tests, without going through the rules-file parser.
#pragma once

#include <cstdint>

#include "rate.hpp"

namespace sluice::testing {

inline Rate pps(uint64_t n, uint64_t den = 1) { return Rate{CostUnit::packets, n, den}; }
inline Rate bits_per_sec(uint64_t bits) { return Rate{CostUnit::bytes, bits, 8}; }
inline Rate bytes_per_sec(uint64_t bytes) { return Rate{CostUnit::bytes, bytes, 1}; }

constexpr uint64_t kSec = 1000000000ull;
constexpr uint64_t kMs = 1000000ull;
constexpr uint64_t kUs = 1000ull;

}  // namespace sluice::testing
