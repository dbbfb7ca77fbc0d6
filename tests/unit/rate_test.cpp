// Rate, burst and duration parsing: exact values, unit conversions and rejections.
#include "rate.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace sluice {
namespace {

struct RateCase {
  std::string text;
  CostUnit unit;
  uint64_t num;
  uint64_t den;
};

// Exact rationals in lowest terms; bit rates become bytes/s = bits / 8.
TEST(ParseRate, ExactValues) {
  const std::vector<RateCase> cases = {
      {"1000pps", CostUnit::packets, 1000, 1},
      {"2.5kpps", CostUnit::packets, 2500, 1},
      {"1Mpps", CostUnit::packets, 1000000, 1},
      {"1Gpps", CostUnit::packets, 1000000000, 1},
      {"2.5pps", CostUnit::packets, 5, 2},
      {"0.001pps", CostUnit::packets, 1, 1000},
      {"1.10pps", CostUnit::packets, 11, 10},
      {"64kbit", CostUnit::bytes, 8000, 1},
      {"10Mbit", CostUnit::bytes, 1250000, 1},
      {"2.5Gbit", CostUnit::bytes, 312500000, 1},
      {"1Tbit", CostUnit::bytes, 125000000000, 1},
      {"500bit", CostUnit::bytes, 125, 2},
      {"1bit", CostUnit::bytes, 1, 8},
      {"10Mbit/s", CostUnit::bytes, 1250000, 1},
      {"1bit/s", CostUnit::bytes, 1, 8},
      {"125kB/s", CostUnit::bytes, 125000, 1},
      {"1MB/s", CostUnit::bytes, 1000000, 1},
      {"3B/s", CostUnit::bytes, 3, 1},
      {"10KiB/s", CostUnit::bytes, 10240, 1},
      {"1.5KiB/s", CostUnit::bytes, 1536, 1},
      {"1MiB/s", CostUnit::bytes, 1048576, 1},
      {"2GiB/s", CostUnit::bytes, 2147483648, 1},
      {"1TiB/s", CostUnit::bytes, 1099511627776, 1},
      {"0.1bit", CostUnit::bytes, 1, 80},
  };
  for (const RateCase& c : cases) {
    Result<Rate> r = parse_rate(c.text);
    ASSERT_TRUE(r) << c.text << ": " << r.error().message;
    EXPECT_EQ(*r, (Rate{c.unit, c.num, c.den}))
        << c.text << " gave " << r->per_sec_num << "/" << r->per_sec_den;
  }
}

struct Rejection {
  std::string text;
  std::string phrase;  // part of the reason
};

TEST(ParseRate, Rejections) {
  const std::vector<Rejection> cases = {
      {"", "expected a number"},
      {"pps", "expected a number"},
      {"0pps", "must be positive"},
      {"0.000Mbit", "must be positive"},
      {"-5pps", "must be positive"},
      {"+5pps", "expected a number"},
      {"1000", "missing unit"},
      {"10Mbps", "bits per second"},
      {"125kB", "is a size"},
      {"10mbit", "unknown unit \"mbit\""},
      {"10 Mbit", "unknown unit \" Mbit\""},
      {"1e3pps", "unknown unit \"e3pps\""},
      {"1.pps", "expected a number"},
      {".5pps", "expected a number"},
      {"1..2pps", "expected a number"},
      {"1000000000000000000000000pps", "too large"},
      {"18446744073709551616pps", "out of range"},
      {"0.0000000000000000000001bit", "out of range"},
      {"1.0000000000000000000000001pps", "too many decimal places"},
  };
  for (const Rejection& c : cases) {
    Result<Rate> r = parse_rate(c.text);
    ASSERT_FALSE(r) << c.text;
    EXPECT_EQ(r.error().kind, ErrorKind::invalid_input) << c.text;
    EXPECT_NE(r.error().message.find(c.phrase), std::string::npos)
        << c.text << ": " << r.error().message;
  }
}

TEST(ParseRate, LargestExactRateFits) {
  Result<Rate> r = parse_rate("18446744073709551615pps");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(*r, (Rate{CostUnit::packets, UINT64_MAX, 1}));
}

struct BurstCase {
  std::string text;
  CostUnit unit;
  uint64_t value;
};

TEST(ParseBurst, Values) {
  const std::vector<BurstCase> cases = {
      {"50", CostUnit::packets, 50},         {"1", CostUnit::packets, 1},
      {"0", CostUnit::packets, 0},           {"1500", CostUnit::bytes, 1500},
      {"1500B", CostUnit::bytes, 1500},      {"64KiB", CostUnit::bytes, 65536},
      {"1MB", CostUnit::bytes, 1000000},     {"2MiB", CostUnit::bytes, 2097152},
      {"1kB", CostUnit::bytes, 1000},        {"1.5KiB", CostUnit::bytes, 1536},
      {"1GiB", CostUnit::bytes, 1073741824}, {"0", CostUnit::bytes, 0},
  };
  for (const BurstCase& c : cases) {
    Result<uint64_t> v = parse_burst(c.text, c.unit);
    ASSERT_TRUE(v) << c.text << ": " << v.error().message;
    EXPECT_EQ(*v, c.value) << c.text;
  }
}

TEST(ParseBurst, Rejections) {
  struct Case {
    std::string text;
    CostUnit unit;
    std::string phrase;
  };
  const std::vector<Case> cases = {
      {"50B", CostUnit::packets, "whole number of packets"},
      {"2.5", CostUnit::packets, "whole number of packets"},
      {"64KiB", CostUnit::packets, "whole number of packets"},
      {"-1", CostUnit::packets, "negative"},
      {"", CostUnit::packets, "expected a number"},
      {"1.5B", CostUnit::bytes, "not a whole number of bytes"},
      {"64KB", CostUnit::bytes, "unknown unit \"KB\""},
      {"10pps", CostUnit::bytes, "unknown unit"},
      {"abc", CostUnit::bytes, "expected a number"},
      {"-64", CostUnit::bytes, "negative"},
      {"99999999999TiB", CostUnit::bytes, "too large"},
  };
  for (const Case& c : cases) {
    Result<uint64_t> v = parse_burst(c.text, c.unit);
    ASSERT_FALSE(v) << c.text;
    EXPECT_EQ(v.error().kind, ErrorKind::invalid_input) << c.text;
    EXPECT_NE(v.error().message.find(c.phrase), std::string::npos)
        << c.text << ": " << v.error().message;
  }
}

TEST(ParseDuration, Values) {
  const std::vector<std::pair<std::string, uint64_t>> cases = {
      {"5ms", 5000000},      {"250us", 250000},
      {"10ns", 10},          {"1s", 1000000000},
      {"60s", 60000000000},  {"2m", 120000000000},
      {"1h", 3600000000000}, {"1.5ms", 1500000},
      {"0.5s", 500000000},   {"0s", 0},
      {"1.001us", 1001},
  };
  for (const auto& [text, ns] : cases) {
    Result<uint64_t> v = parse_duration(text);
    ASSERT_TRUE(v) << text << ": " << v.error().message;
    EXPECT_EQ(*v, ns) << text;
  }
}

TEST(ParseDuration, Rejections) {
  const std::vector<Rejection> cases = {
      {"5", "missing unit"},        {"5sec", "unknown unit \"sec\""},
      {"5MS", "unknown unit"},      {"0.5ns", "not a whole number of nanoseconds"},
      {"-1s", "negative"},          {"s", "expected a number"},
      {"9999999999h", "too large"},
  };
  for (const Rejection& c : cases) {
    Result<uint64_t> v = parse_duration(c.text);
    ASSERT_FALSE(v) << c.text;
    EXPECT_EQ(v.error().kind, ErrorKind::invalid_input) << c.text;
    EXPECT_NE(v.error().message.find(c.phrase), std::string::npos)
        << c.text << ": " << v.error().message;
  }
}

TEST(FormatRate, ReadsLikeTheRulesFile) {
  EXPECT_EQ(format_rate(Rate{CostUnit::packets, 1000, 1}), "1kpps");
  EXPECT_EQ(format_rate(Rate{CostUnit::packets, 50, 1}), "50pps");
  EXPECT_EQ(format_rate(Rate{CostUnit::packets, 1, 2}), "0.5pps");
  EXPECT_EQ(format_rate(Rate{CostUnit::packets, 2500000, 1}), "2.5Mpps");
  EXPECT_EQ(format_rate(Rate{CostUnit::bytes, 312500000, 1}), "2.5Gbit");
  EXPECT_EQ(format_rate(Rate{CostUnit::bytes, 8000, 1}), "64kbit");
  EXPECT_EQ(format_rate(Rate{CostUnit::bytes, 1, 8}), "1bit");
  EXPECT_EQ(format_rate(Rate{CostUnit::bytes, 10240, 1}), "81.92kbit");
}

// Whatever format_rate writes, parse_rate reads back to the same exact rational.
TEST(FormatRate, RoundTripsExactly) {
  const std::vector<std::string> texts = {
      "1000pps", "2.5kpps", "0.001pps", "1.10pps",         "123456789pps", "64kbit",
      "2.5Gbit", "1bit",    "500bit",   "0.1bit",          "10KiB/s",      "1.5KiB/s",
      "125kB/s", "1TiB/s",  "3B/s",     "999999999999pps", "1.000001Gbit", "7bit",
      // More digits as bits than the parser takes (found by fuzz_rules_loader).
      "0.11427788801779539013MiB/s", "0.9999999999999999999KiB/s", "1234.5678901234567MiB/s",
  };
  for (const std::string& t : texts) {
    Result<Rate> a = parse_rate(t);
    ASSERT_TRUE(a) << t << ": " << a.error().message;
    std::string f = format_rate(*a);
    Result<Rate> b = parse_rate(f);
    ASSERT_TRUE(b) << t << " -> " << f << ": " << b.error().message;
    EXPECT_EQ(*a, *b) << t << " -> " << f;
  }
}

// When bits would need more digits than the parser takes, the rate keeps a unit that does.
TEST(FormatRate, FallsBackToAUnitThatReadsBack) {
  Result<Rate> r = parse_rate("0.11427788801779539013MiB/s");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(format_rate(*r), "0.11427788801779539013MiB/s");
}

}  // namespace
}  // namespace sluice
