// Rates and bursts as the rules file states them, kept as exact rationals so the profile
// builder and the reference model see the same number the operator wrote.
#pragma once

#include <cstdint>
#include <string>

#include "result.hpp"

namespace sluice {

enum class CostUnit : uint8_t {
  packets,  // pps rates: every packet costs 1
  bytes,    // bit/s and byte/s rates: a packet costs its frame length (+ overhead)
};

// tokens per second = per_sec_num / per_sec_den (a token is a packet or a byte).
struct Rate {
  CostUnit unit = CostUnit::packets;
  uint64_t per_sec_num = 0;
  uint64_t per_sec_den = 1;

  double tokens_per_sec() const { return double(per_sec_num) / double(per_sec_den); }
  friend bool operator==(const Rate&, const Rate&) = default;
};

// "1000pps", "2.5Mpps", "64kbit", "10Mbit", "2.5Gbit", "125kB/s" -> Rate. An invalid_input
// error saying why on anything else (including zero or negative values).
Result<Rate> parse_rate(const std::string& text);

// A burst in tokens of `unit`: a bare count for pps rates; bytes ("1500", "64KiB", "1MB")
// for byte rates.
Result<uint64_t> parse_burst(const std::string& text, CostUnit unit);

// "5ms", "60s", "250us", "1m" -> nanoseconds.
Result<uint64_t> parse_duration(const std::string& text);

std::string format_rate(const Rate& r);

}  // namespace sluice
