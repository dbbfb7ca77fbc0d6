// Rate, burst and duration parsing (SPEC §2). Every number is kept exact: the text's decimal
// mantissa and the unit's multiplier are combined as a rational in 128-bit arithmetic and
// reduced to lowest terms, so "2.5Gbit" is exactly 312500000 bytes/s and "1bit" exactly 1/8.
#include "rate.hpp"

#include <cstddef>
#include <limits>
#include <string_view>

namespace sluice {
namespace {

using u128 = unsigned __int128;

constexpr u128 kU64Max = std::numeric_limits<uint64_t>::max();

// Mantissas are capped below 10^24 (< 2^80) and fractions at 24 digits, so multiplying by
// any unit multiplier (at most 2^40 or 10^12, both < 2^41) or by 10^24 * 8 stays far below
// 2^128: no intermediate product can overflow.
constexpr u128 kMaxMantissa = u128(1000000000000ull) * 1000000000000ull;  // 10^24
constexpr unsigned kMaxFractionDigits = 24;

u128 pow10(unsigned n) {
  u128 v = 1;
  while (n-- > 0) v *= 10;
  return v;
}

u128 gcd128(u128 a, u128 b) {
  while (b != 0) {
    u128 t = a % b;
    a = b;
    b = t;
  }
  return a;
}

std::string quoted(std::string_view s) { return "\"" + std::string(s) + "\""; }

// A decimal number as written: value = mantissa / 10^fraction_digits.
struct Decimal {
  u128 mantissa = 0;
  unsigned fraction_digits = 0;
};

// Splits "2.5Gbit" into "2.5" and "Gbit": the number is the leading run of digits and dots.
void split_number(std::string_view text, std::string_view* number, std::string_view* unit) {
  size_t i = 0;
  while (i < text.size() && ((text[i] >= '0' && text[i] <= '9') || text[i] == '.')) ++i;
  *number = text.substr(0, i);
  *unit = text.substr(i);
}

bool is_digits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  return true;
}

// Parses "123", "2.5", "0.125" (no sign, no exponent, digits on both sides of a dot).
// Trailing fraction zeros are dropped: they do not change the value.
Result<Decimal> parse_decimal(std::string_view s) {
  size_t dot = s.find('.');
  std::string_view whole = s.substr(0, dot);
  std::string_view frac = dot == std::string_view::npos ? std::string_view() : s.substr(dot + 1);
  if (!is_digits(whole) || (dot != std::string_view::npos && !is_digits(frac)))
    return invalid_input("expected a number such as 10 or 2.5");
  while (!frac.empty() && frac.back() == '0') frac.remove_suffix(1);
  if (frac.size() > kMaxFractionDigits) return invalid_input("too many decimal places");
  u128 m = 0;
  for (std::string_view part : {whole, frac}) {
    for (char c : part) {
      m = m * 10 + u128(c - '0');
      if (m >= kMaxMantissa) return invalid_input("number too large");
    }
  }
  return Decimal{m, unsigned(frac.size())};
}

// A number as written and the unit after it ("" when there is none).
struct Quantity {
  Decimal value;
  std::string_view unit;
};

// Splits text into a decimal and a unit, with the sign and shape errors every parser shares.
Result<Quantity> parse_quantity(std::string_view text) {
  if (!text.empty() && text[0] == '-') return invalid_input("must not be negative");
  std::string_view number, unit;
  split_number(text, &number, &unit);
  if (number.empty()) return invalid_input("expected a number followed by a unit");
  Result<Decimal> value = parse_decimal(number);
  if (!value) return value.error();
  return Quantity{*value, unit};
}

// value * mul_num / mul_den as an exact fraction in lowest terms; false if it does not fit
// in 64-bit numerator and denominator.
bool exact_fraction(const Decimal& d, u128 mul_num, u128 mul_den, u128* num, u128* den) {
  u128 n = d.mantissa * mul_num;
  u128 q = pow10(d.fraction_digits) * mul_den;
  u128 g = gcd128(n, q);
  if (g > 1) {
    n /= g;
    q /= g;
  }
  *num = n;
  *den = q;
  return n <= kU64Max && q <= kU64Max;
}

// value * multiplier as a whole number of `what`; an error when it is not one.
Result<uint64_t> exact_whole(const Decimal& d, u128 multiplier, const char* what) {
  u128 num, den;
  if (!exact_fraction(d, multiplier, 1, &num, &den) || num / den > kU64Max)
    return invalid_input("too large");
  if (den != 1) return invalid_input(std::string("not a whole number of ") + what);
  return uint64_t(num);
}

struct UnitDef {
  std::string_view name;
  CostUnit unit;
  u128 mul_num;  // tokens per second for 1 of this unit = mul_num / mul_den
  u128 mul_den;
};

constexpr u128 kK = 1000, kM = kK * kK, kG = kM * kK, kT = kG * kK;
constexpr u128 kKi = 1024, kMi = kKi * kKi, kGi = kMi * kKi, kTi = kGi * kKi;

// Every spelling parse_rate accepts. Bit rates are converted to bytes (divide by 8) so that
// every byte-costed rule charges frame bytes whichever way its rate was written.
constexpr UnitDef kRateUnits[] = {
    {"pps", CostUnit::packets, 1, 1},   {"kpps", CostUnit::packets, kK, 1},
    {"Mpps", CostUnit::packets, kM, 1}, {"Gpps", CostUnit::packets, kG, 1},
    {"bit", CostUnit::bytes, 1, 8},     {"kbit", CostUnit::bytes, kK, 8},
    {"Mbit", CostUnit::bytes, kM, 8},   {"Gbit", CostUnit::bytes, kG, 8},
    {"Tbit", CostUnit::bytes, kT, 8},   {"bit/s", CostUnit::bytes, 1, 8},
    {"kbit/s", CostUnit::bytes, kK, 8}, {"Mbit/s", CostUnit::bytes, kM, 8},
    {"Gbit/s", CostUnit::bytes, kG, 8}, {"Tbit/s", CostUnit::bytes, kT, 8},
    {"B/s", CostUnit::bytes, 1, 1},     {"kB/s", CostUnit::bytes, kK, 1},
    {"MB/s", CostUnit::bytes, kM, 1},   {"GB/s", CostUnit::bytes, kG, 1},
    {"TB/s", CostUnit::bytes, kT, 1},   {"KiB/s", CostUnit::bytes, kKi, 1},
    {"MiB/s", CostUnit::bytes, kMi, 1}, {"GiB/s", CostUnit::bytes, kGi, 1},
    {"TiB/s", CostUnit::bytes, kTi, 1},
};

constexpr const char* kRateUnitList =
    "pps, kpps, Mpps, Gpps; bit, kbit, Mbit, Gbit, Tbit (or bit/s, kbit/s, ...); "
    "B/s, kB/s, MB/s, GB/s, TB/s, KiB/s, MiB/s, GiB/s, TiB/s";

// Byte-size units for bursts and window limits.
struct SizeUnit {
  std::string_view name;
  u128 bytes;
};
constexpr SizeUnit kSizeUnits[] = {
    {"B", 1},     {"kB", kK},   {"MB", kM},   {"GB", kG},   {"TB", kT},
    {"KiB", kKi}, {"MiB", kMi}, {"GiB", kGi}, {"TiB", kTi},
};
constexpr const char* kSizeUnitList = "B, kB, MB, GB, TB, KiB, MiB, GiB, TiB";

struct DurationUnit {
  std::string_view name;
  u128 ns;
};
constexpr DurationUnit kDurationUnits[] = {
    {"ns", 1}, {"us", kK}, {"ms", kM}, {"s", kG}, {"m", 60 * kG}, {"h", 3600 * kG},
};
constexpr const char* kDurationUnitList = "ns, us, ms, s, m, h";

// A hint for the units people most often write by mistake.
std::string rate_unit_hint(std::string_view unit) {
  if (unit.ends_with("bps"))
    return "; write kbit/Mbit/Gbit for bits per second or kB/s, MB/s for bytes per second";
  for (const SizeUnit& s : kSizeUnits)
    if (unit == s.name)
      return "; \"" + std::string(unit) + "\" is a size, write " +
             quoted(std::string(unit) + "/s") + " for a rate";
  return "";
}

const UnitDef* find_rate_unit(std::string_view unit) {
  for (const UnitDef& u : kRateUnits)
    if (u.name == unit) return &u;
  return nullptr;
}

// Writes num/den (den > 0) in decimal, exactly when den has no prime factors other than 2
// and 5 (every parsed rate), else to 30 fraction digits.
std::string decimal_string(u128 num, u128 den) {
  auto to_digits = [](u128 v) {
    std::string s;
    do {
      s.insert(s.begin(), char('0' + int(v % 10)));
      v /= 10;
    } while (v != 0);
    return s;
  };
  std::string s = to_digits(num / den);
  u128 rem = num % den;
  if (rem == 0) return s;
  s += '.';
  for (int i = 0; i < 30 && rem != 0; ++i) {
    rem *= 10;
    s += char('0' + int(rem / den));
    rem %= den;
  }
  return s;
}

// Number of digits after the decimal point in decimal_string(num, den).
size_t fraction_digits(const std::string& s) {
  size_t dot = s.find('.');
  return dot == std::string::npos ? 0 : s.size() - dot - 1;
}

// Picks the largest prefix that keeps the value >= 1 and at most 3 decimals, so output reads
// like what an operator writes ("2.5Gbit", "64kbit", "1kpps") and parses back exactly.
std::string format_with_prefix(u128 num, u128 den, const char* const* prefixed_units,
                               size_t count) {
  for (size_t i = count; i-- > 1;) {
    u128 scale = pow10(unsigned(3 * i));
    if (num < den * scale) continue;  // value below 1 with this prefix
    std::string s = decimal_string(num, den * scale);
    if (fraction_digits(s) <= 3) return s + prefixed_units[i];
  }
  return decimal_string(num, den) + prefixed_units[0];
}

}  // namespace

Result<Rate> parse_rate(const std::string& text) {
  if (!text.empty() && text[0] == '-') return invalid_input("must be positive");
  Result<Quantity> q = parse_quantity(text);
  if (!q) return q.error();
  const auto& [value, unit] = *q;
  if (unit.empty())
    return invalid_input(std::string("missing unit (expected ") + kRateUnitList + ")");
  const UnitDef* u = find_rate_unit(unit);
  if (u == nullptr)
    return invalid_input("unknown unit " + quoted(unit) + " (expected " + kRateUnitList + ")" +
                         rate_unit_hint(unit));
  if (value.mantissa == 0) return invalid_input("must be positive");
  u128 num, den;
  if (!exact_fraction(value, u->mul_num, u->mul_den, &num, &den))
    return invalid_input("out of range");
  return Rate{u->unit, uint64_t(num), uint64_t(den)};
}

Result<uint64_t> parse_burst(const std::string& text, CostUnit unit) {
  Result<Quantity> q = parse_quantity(text);
  if (!q) return q.error();
  const auto& [value, suffix] = *q;
  if (unit == CostUnit::packets) {
    // A pps bucket counts whole packets; anything else is a unit mix-up worth naming.
    if (!suffix.empty() || value.fraction_digits != 0)
      return invalid_input("a burst for a pps rate is a whole number of packets, such as 50");
    return exact_whole(value, 1, "packets");
  }
  u128 multiplier = 0;
  if (suffix.empty()) multiplier = 1;  // a bare number is bytes
  for (const SizeUnit& s : kSizeUnits)
    if (s.name == suffix) multiplier = s.bytes;
  if (multiplier == 0)
    return invalid_input("unknown unit " + quoted(suffix) + " (expected " + kSizeUnitList +
                         "; kB = 1000 bytes, KiB = 1024)");
  return exact_whole(value, multiplier, "bytes");
}

Result<uint64_t> parse_duration(const std::string& text) {
  Result<Quantity> q = parse_quantity(text);
  if (!q) return q.error();
  const auto& [value, unit] = *q;
  if (unit.empty())
    return invalid_input(std::string("missing unit (expected ") + kDurationUnitList + ")");
  for (const DurationUnit& d : kDurationUnits)
    if (d.name == unit) return exact_whole(value, d.ns, "nanoseconds");
  return invalid_input("unknown unit " + quoted(unit) + " (expected " + kDurationUnitList + ")");
}

namespace {

// Whether text parses back to exactly r.
bool reads_back_as(const std::string& text, const Rate& r) {
  Result<Rate> back = parse_rate(text);
  return back.ok() && back->unit == r.unit &&
         u128(back->per_sec_num) * r.per_sec_den == u128(r.per_sec_num) * back->per_sec_den;
}

// The shortest spelling of r in any unit parse_rate knows that reads back exactly. There is
// always one for a rate parse_rate produced: its own unit with its own digits.
std::string shortest_exact_spelling(const Rate& r) {
  std::string best;
  for (const UnitDef& u : kRateUnits) {
    if (u.unit != r.unit || u.name.ends_with("bit/s")) continue;  // "bit/s" = "bit", longer
    // value in this unit = (num / den) / (mul_num / mul_den)
    u128 num = u128(r.per_sec_num) * u.mul_den, den = u128(r.per_sec_den) * u.mul_num;
    std::string s = decimal_string(num, den) + std::string(u.name);
    if ((best.empty() || s.size() < best.size()) && reads_back_as(s, r)) best = std::move(s);
  }
  return best;
}

}  // namespace

std::string format_rate(const Rate& r) {
  if (r.per_sec_den == 0) return "invalid-rate";
  std::string s;
  if (r.unit == CostUnit::packets) {
    static const char* const kPps[] = {"pps", "kpps", "Mpps", "Gpps"};
    s = format_with_prefix(r.per_sec_num, r.per_sec_den, kPps, 4);
  } else {
    // Byte rates print as bits: operators size links in bit/s, and bytes*8 is still exact.
    static const char* const kBits[] = {"bit", "kbit", "Mbit", "Gbit", "Tbit"};
    s = format_with_prefix(u128(r.per_sec_num) * 8, r.per_sec_den, kBits, 5);
  }
  // A rate written with many digits in a binary unit ("0.11427788801779539013MiB/s") has more
  // digits as bits than the parser takes, and a dump must load again: then take the unit
  // that spells it shortest.
  if (reads_back_as(s, r)) return s;
  std::string exact = shortest_exact_spelling(r);
  return exact.empty() ? s : exact;
}

}  // namespace sluice
