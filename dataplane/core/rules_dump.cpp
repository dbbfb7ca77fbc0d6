// Writing rules files (SPEC §2): dump_rules_yaml emits exactly the fields the loader requires
// or allows for each rule, in units that load back to the same numbers.
#include <cstddef>
#include <iterator>
#include <ostream>
#include <sstream>
#include <string>
#include <utility>

#include "rules_loader.hpp"
#include "rules_values.hpp"

namespace sluice {
namespace {

using rules_internal::format_ports;
using rules_internal::proto_name;

// A YAML double-quoted scalar. What the dump quotes (names, prefixes) passed the loader's
// checks, so only the quote and the backslash could ever need escaping.
std::string yaml_quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

// Largest unit of `units` (each `base` times the previous) that divides n exactly.
std::pair<uint64_t, const char*> exact_unit(uint64_t n, uint64_t base, const char* const* units,
                                            size_t count) {
  size_t u = 0;
  while (u + 1 < count && n != 0 && n % base == 0) {
    n /= base;
    ++u;
  }
  return {n, units[u]};
}

// Bytes with an explicit unit ("1500B", "64KiB", "1MB"), so a window limit stays a byte
// limit; of the binary and SI spellings, the one with the smaller number.
std::string format_bytes(uint64_t n) {
  static const char* const kBinary[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  static const char* const kSi[] = {"B", "kB", "MB", "GB", "TB"};
  auto bin = exact_unit(n, 1024, kBinary, std::size(kBinary));
  auto si = exact_unit(n, 1000, kSi, std::size(kSi));
  auto best = si.first < bin.first ? si : bin;
  return std::to_string(best.first) + best.second;
}

// A bucket size or window limit: a bare count of packets, or bytes with a unit.
std::string format_tokens(uint64_t n, CostUnit unit) {
  return unit == CostUnit::packets ? std::to_string(n) : format_bytes(n);
}

void dump_match(std::ostream& o, const Match& m) {
  if (m == Match{}) return;
  o << "    match:\n";
  if (m.src) o << "      src: " << yaml_quoted(format_cidr(*m.src)) << "\n";
  if (m.dst) o << "      dst: " << yaml_quoted(format_cidr(*m.dst)) << "\n";
  if (m.proto) o << "      proto: " << proto_name(*m.proto) << "\n";
  if (m.src_port) o << "      src-port: " << format_ports(*m.src_port) << "\n";
  if (m.dst_port) o << "      dst-port: " << format_ports(*m.dst_port) << "\n";
  if (m.vlan) o << "      vlan: " << *m.vlan << "\n";
  if (m.dscp) o << "      dscp: " << unsigned(*m.dscp) << "\n";
  if (m.port) o << "      port: " << *m.port << "\n";
}

// The algorithm's own parameters, exactly the fields the loader requires or allows for it.
void dump_limiter(std::ostream& o, const Rule& r) {
  if (r.is_window()) {
    o << "    window: " << format_duration(r.window_ns) << "\n";
    o << "    limit: " << format_tokens(r.limit, r.limit_unit) << "\n";
    return;
  }
  o << "    rate: " << format_rate(r.rate) << "\n";
  o << "    burst: " << format_tokens(r.burst, r.rate.unit) << "\n";
  if (r.algorithm == Algorithm::srtcm)
    o << "    excess-burst: " << format_tokens(r.excess_burst, r.rate.unit) << "\n";
  if (r.algorithm == Algorithm::trtcm) {
    o << "    peak-rate: " << format_rate(r.peak_rate) << "\n";
    o << "    peak-burst: " << format_tokens(r.peak_burst, r.rate.unit) << "\n";
  }
  if (r.algorithm == Algorithm::leaky_bucket)
    o << "    max-delay: " << format_duration(r.max_delay_ns) << "\n";
}

void dump_actions(std::ostream& o, const Rule& r) {
  if (r.is_meter()) {
    o << "    actions:\n";
    o << "      green: " << format_action(r.colour_actions.green) << "\n";
    o << "      yellow: " << format_action(r.colour_actions.yellow) << "\n";
    o << "      red: " << format_action(r.colour_actions.red) << "\n";
  } else {
    o << "    action: " << format_action(r.action) << "\n";
  }
  if (r.overflow) o << "    overflow: " << format_action(*r.overflow) << "\n";
}

void dump_rule(std::ostream& o, const Rule& r) {
  o << "  - name: " << yaml_quoted(r.name) << "\n";  // quoted: a name like "null" is a YAML word
  dump_match(o, r.match);
  o << "    key: " << key_name(r.key, r.key_prefix_len) << "\n";
  o << "    algorithm: " << algorithm_name(r.algorithm) << "\n";
  dump_limiter(o, r);
  if (r.overhead_bytes != 0) o << "    overhead: " << r.overhead_bytes << "\n";
  dump_actions(o, r);
  if (!r.parent.empty()) o << "    parent: " << yaml_quoted(r.parent) << "\n";
  if (r.max_flows != 0) o << "    max-flows: " << r.max_flows << "\n";
  if (r.idle_timeout_ns != kDefaultIdleTimeoutNs)
    o << "    idle-timeout: " << format_duration(r.idle_timeout_ns) << "\n";
}

}  // namespace

// ---------------------------------------------------------------------------------------
// Public entry points.

std::string dump_rules_yaml(const RuleSet& rules) {
  std::ostringstream o;
  o << "# sluice rules file (SPEC §2)\n";
  o << "default:\n  action: " << format_action(rules.default_action) << "\n";
  if (rules.rules.empty()) {
    o << "rules: []\n";
    return o.str();
  }
  o << "rules:\n";
  for (const Rule& r : rules.rules) dump_rule(o, r);
  return o.str();
}

std::string dump_rule_yaml(const Rule& rule) {
  std::ostringstream o;
  dump_rule(o, rule);
  return o.str();
}

std::string format_duration(uint64_t ns) {
  struct Unit {
    uint64_t ns;
    const char* name;
  };
  static const Unit kUnits[] = {{3600000000000ull, "h"},
                                {60000000000ull, "m"},
                                {1000000000ull, "s"},
                                {1000000ull, "ms"},
                                {1000ull, "us"}};
  for (const Unit& u : kUnits)
    if (ns != 0 && ns % u.ns == 0) return std::to_string(ns / u.ns) + u.name;
  return std::to_string(ns) + "ns";
}

}  // namespace sluice
