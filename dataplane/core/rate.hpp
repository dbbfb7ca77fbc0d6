// Rates and bursts as the rules file states them, kept as exact rationals so the profile
// builder and the reference model see the same number the operator wrote.
#pragma once

#include <cstdint>
#include <string>

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

// "1000pps", "2.5Mpps", "64kbit", "10Mbit", "2.5Gbit", "125kB/s" -> Rate. Returns false and
// fills *why on anything else (including zero or negative values).
bool parse_rate(const std::string& text, Rate* out, std::string* why);

// A burst in tokens of `unit`: a bare count for pps rates; bytes ("1500", "64KiB", "1MB")
// for byte rates.
bool parse_burst(const std::string& text, CostUnit unit, uint64_t* out, std::string* why);

// "5ms", "60s", "250us", "1m" -> nanoseconds.
bool parse_duration(const std::string& text, uint64_t* out_ns, std::string* why);

std::string format_rate(const Rate& r);

}  // namespace sluice
