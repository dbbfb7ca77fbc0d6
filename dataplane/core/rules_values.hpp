// Internal to the rules loader (rules_loader.hpp is the public interface). The spelling of
// each value a rules file holds: text -> value parsers that give a reason on failure (no YAML,
// no line numbers), and the value -> text names for the ones that have a name table.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "result.hpp"
#include "rules.hpp"

namespace sluice::rules_internal {

// For messages: `s` in double quotes, its first kMaxQuotedBytes bytes only (then "... (N
// bytes)"), with quotes and backslashes escaped and anything outside printable ASCII as \xNN,
// so that no value can flood or garble a terminal or a log.
constexpr size_t kMaxQuotedBytes = 64;
std::string quoted(std::string_view s);
std::string join(const std::vector<std::string_view>& words);  // "a, b, c"

// Decimal digits only: no sign, no hex, no spaces, so "0x10" or "+5" are rejected.
bool parse_uint(std::string_view s, uint64_t max, uint64_t* out);

// A whole number in [lo, hi], with the range in the reason.
Result<uint64_t> parse_ranged(std::string_view s, uint64_t lo, uint64_t hi);

// parse_ranged as a parser for integer type T (the caller's range must fit it).
template <class T>
auto in_range(uint64_t lo, uint64_t hi) {
  return [lo, hi](std::string_view s) -> Result<T> {
    Result<uint64_t> v = parse_ranged(s, lo, hi);
    if (!v) return v.error();
    return T(*v);
  };
}

bool parse_algorithm(std::string_view s, Algorithm* out);
// The key mode and, for src-prefix/N and dst-prefix/N, N (0 for the other modes).
Result<std::pair<KeyMode, uint8_t>> parse_key(std::string_view s);
Result<uint8_t> parse_proto(std::string_view s);
Result<PortRange> parse_port_range(std::string_view s);
Result<uint8_t> parse_dscp(std::string_view s);
Result<Action> parse_action(std::string_view s);
Result<Cidr> parse_cidr(std::string_view s);

// Port protocols: the only ones whose ports the classifier reads.
bool has_ports(uint8_t proto);

// [A-Za-z0-9_.-]{1,63}: names appear in counters, metrics labels and CLI arguments.
bool valid_name(std::string_view s);

std::string proto_name(uint8_t proto);         // "udp", or the number
std::string format_ports(const PortRange& r);  // "53", "1024-65535"

}  // namespace sluice::rules_internal
