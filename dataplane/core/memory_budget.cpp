#include "memory_budget.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <iterator>

#include "flow_table.hpp"

namespace sluice {

namespace {

using u128 = unsigned __int128;

uint64_t saturated(u128 v) { return v > UINT64_MAX ? UINT64_MAX : uint64_t(v); }

}  // namespace

// The arithmetic of FlowTable's constructor, which memory_budget_test checks against a real
// table's memory_bytes(). In 128 bits, saturating: any capacity has an answer, if absurd.
uint64_t flow_table_bytes(uint64_t capacity, unsigned state_words) {
  const u128 sets = std::max<u128>(
      1, (u128{capacity} * FlowTable::kSlack + FlowTable::kWays - 1) / FlowTable::kWays);
  const u128 set_bytes = u128{FlowTable::kWays} * (1 + state_words) * sizeof(uint64_t);
  const u128 used_bits_bytes = (sets + 63) / 64 * sizeof(uint64_t);  // a bit per set
  return saturated(sets * set_bytes + used_bits_bytes);
}

FlowMemory flow_table_memory(const RuleSet& rules, uint64_t default_max_flows) {
  FlowMemory m;
  for (const Rule& r : rules.rules) {
    if (r.key == KeyMode::none) continue;
    const uint64_t capacity = r.max_flows != 0 ? r.max_flows : default_max_flows;
    m.flows = saturated(u128{m.flows} + capacity);
    m.bytes = saturated(u128{m.bytes} + flow_table_bytes(capacity, r.is_meter() ? 2u : 1u));
  }
  return m;
}

std::string format_memory_size(uint64_t bytes) {
  static const char* const kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
  if (bytes < 1024) return std::to_string(bytes) + " B";
  double v = double(bytes) / 1024;
  size_t unit = 0;
  while (v >= 1024 && unit + 1 < std::size(kUnits)) {
    v /= 1024;
    ++unit;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f %s", v, kUnits[unit]);
  return buf;
}

Status check_flow_memory(const RuleSet& rules, uint64_t default_max_flows,
                         uint64_t available_bytes) {
  FlowMemory m = flow_table_memory(rules, default_max_flows);
  if (m.bytes <= available_bytes) return Ok{};
  return invalid_input("flow tables need " + format_memory_size(m.bytes) + " (" +
                       std::to_string(m.bytes) + " bytes) for " + std::to_string(m.flows) +
                       " flows, more than the " + format_memory_size(available_bytes) + " (" +
                       std::to_string(available_bytes) +
                       " bytes) of memory available; lower max-flows or --flows");
}

std::optional<uint64_t> parse_mem_available(std::string_view meminfo) {
  constexpr std::string_view kKey = "MemAvailable:";
  for (size_t at = 0; at < meminfo.size();) {
    size_t end = meminfo.find('\n', at);
    std::string_view line = meminfo.substr(at, end == std::string_view::npos ? end : end - at);
    at = end == std::string_view::npos ? meminfo.size() : end + 1;
    if (!line.starts_with(kKey)) continue;
    line.remove_prefix(kKey.size());
    while (!line.empty() && line.front() == ' ') line.remove_prefix(1);
    uint64_t kib = 0;
    auto [ptr, ec] = std::from_chars(line.data(), line.data() + line.size(), kib);
    if (ec != std::errc() || ptr == line.data()) return std::nullopt;
    std::string_view unit(ptr, size_t(line.data() + line.size() - ptr));
    if (unit != " kB") return std::nullopt;
    return saturated(u128{kib} * 1024);
  }
  return std::nullopt;
}

Status check_flow_memory_available(const RuleSet& rules, uint64_t default_max_flows) {
  std::FILE* f = std::fopen("/proc/meminfo", "re");
  if (f == nullptr) return Ok{};
  char buf[8192];
  size_t n = std::fread(buf, 1, sizeof buf, f);
  std::fclose(f);
  std::optional<uint64_t> available = parse_mem_available(std::string_view(buf, n));
  if (!available) return Ok{};
  return check_flow_memory(rules, default_max_flows, *available);
}

}  // namespace sluice
