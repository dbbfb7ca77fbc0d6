#include "memory_budget.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <iterator>
#include <string>

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

void add_flow_table(FlowMemory& m, const Rule& r, uint64_t default_max_flows) {
  if (r.key == KeyMode::none) return;
  const uint64_t capacity = r.max_flows != 0 ? r.max_flows : default_max_flows;
  m.flows = saturated(u128{m.flows} + capacity);
  m.bytes = saturated(u128{m.bytes} + flow_table_bytes(capacity, r.is_meter() ? 2u : 1u));
}

FlowMemory flow_table_memory(const RuleSet& rules, uint64_t default_max_flows) {
  FlowMemory m;
  for (const Rule& r : rules.rules) add_flow_table(m, r, default_max_flows);
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
                         uint64_t available_bytes, std::string_view capacity_option) {
  return check_flow_memory(flow_table_memory(rules, default_max_flows), available_bytes,
                           capacity_option);
}

Status check_flow_memory(const FlowMemory& m, uint64_t available_bytes,
                         std::string_view capacity_option) {
  if (m.bytes <= available_bytes) return Ok{};
  return invalid_input("flow tables need " + format_memory_size(m.bytes) + " (" +
                       std::to_string(m.bytes) + " bytes) for " + std::to_string(m.flows) +
                       " flows, more than the " + format_memory_size(available_bytes) + " (" +
                       std::to_string(available_bytes) +
                       " bytes) of memory available; lower max-flows" +
                       (capacity_option.empty() ? std::string()
                                                : " or " + std::string(capacity_option)));
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

namespace {

// A whole small file, or nullopt.
std::optional<std::string> read_small_file(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "re");
  if (f == nullptr) return std::nullopt;
  char buf[8192];
  const size_t n = std::fread(buf, 1, sizeof buf, f);
  std::fclose(f);
  return std::string(buf, n);
}

// A cgroup file holding one number ("max": no limit, nullopt as unreadable).
std::optional<uint64_t> read_number_file(const std::string& path) {
  auto text = read_small_file(path);
  if (!text) return std::nullopt;
  uint64_t v = 0;
  auto [ptr, ec] = std::from_chars(text->data(), text->data() + text->size(), v);
  if (ec != std::errc() || ptr == text->data()) return std::nullopt;
  return v;
}

}  // namespace

std::optional<uint64_t> cgroup_memory_headroom(std::string_view proc_self_cgroup,
                                               const std::string& root) {
  // "ID:CONTROLLERS:PATH" per hierarchy; v2's line is "0::PATH".
  std::string dir, limit_file, usage_file;
  for (size_t at = 0; at < proc_self_cgroup.size();) {
    size_t end = proc_self_cgroup.find('\n', at);
    if (end == std::string_view::npos) end = proc_self_cgroup.size();
    const std::string_view line = proc_self_cgroup.substr(at, end - at);
    at = end + 1;
    const size_t c1 = line.find(':');
    const size_t c2 = c1 == std::string_view::npos ? c1 : line.find(':', c1 + 1);
    if (c2 == std::string_view::npos) continue;
    const std::string_view controllers = line.substr(c1 + 1, c2 - c1 - 1);
    const std::string_view path = line.substr(c2 + 1);
    bool memory_v1 = false;
    for (size_t p = 0; p <= controllers.size();) {
      size_t comma = controllers.find(',', p);
      if (comma == std::string_view::npos) comma = controllers.size();
      memory_v1 = memory_v1 || controllers.substr(p, comma - p) == "memory";
      p = comma + 1;
    }
    if (memory_v1) {
      dir = root + "/memory" + std::string(path);
      limit_file = "memory.limit_in_bytes", usage_file = "memory.usage_in_bytes";
      break;  // the v1 memory controller, where it is mounted, is the one that limits
    }
    if (controllers.empty() && line.substr(0, c1) == "0") {
      dir = root + std::string(path);
      limit_file = "memory.max", usage_file = "memory.current";
    }
  }
  if (dir.empty()) return std::nullopt;
  std::optional<uint64_t> least;
  for (;;) {  // this cgroup, then each parent up to the mount point
    const auto limit = read_number_file(dir + "/" + limit_file);
    const auto usage = read_number_file(dir + "/" + usage_file);
    if (limit && usage) {
      const uint64_t headroom = *limit > *usage ? *limit - *usage : 0;
      least = least ? std::min(*least, headroom) : headroom;
    }
    const size_t slash = dir.rfind('/');
    if (dir.size() <= root.size() || slash == std::string::npos || slash < root.size()) break;
    dir.resize(slash);
  }
  return least;
}

std::optional<uint64_t> memory_available_now() {
  std::optional<uint64_t> available;
  if (auto meminfo = read_small_file("/proc/meminfo")) available = parse_mem_available(*meminfo);
  std::optional<uint64_t> headroom;
  if (auto cgroup = read_small_file("/proc/self/cgroup")) headroom = cgroup_memory_headroom(*cgroup);
  if (available && headroom) return std::min(*available, *headroom);
  return available ? available : headroom;
}

Status check_flow_memory_available(const RuleSet& rules, uint64_t default_max_flows,
                                   std::string_view capacity_option) {
  std::optional<uint64_t> available = memory_available_now();
  if (!available) return Ok{};
  return check_flow_memory(rules, default_max_flows, *available, capacity_option);
}

}  // namespace sluice
