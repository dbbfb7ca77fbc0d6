#include "xdp_flows_top.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <cstring>
#include <string_view>
#include <unordered_map>

#include "../dataplane/core/flow_key_text.hpp"

namespace sluice::xdp {
namespace {

std::string address(const uint8_t* bytes, unsigned version) {
  char text[INET6_ADDRSTRLEN] = {};
  inet_ntop(version == 6 ? AF_INET6 : AF_INET, bytes, text, sizeof text);
  return text;
}

// The source and destination addresses of a key, in wire order (flow_key.hpp's words are
// the wire bytes loaded little-endian, so copying the words back gives the wire bytes on the
// little-endian hosts this project targets).
struct KeyAddrs {
  uint8_t src[16] = {}, dst[16] = {};
};

KeyAddrs addrs_of(const sl_flow_key& k, unsigned version) {
  KeyAddrs a;
  if (version == 6) {
    std::memcpy(a.src, &k.w[1], 16);
    std::memcpy(a.dst, &k.w[3], 16);
  } else {
    std::memcpy(a.src, &k.w[1], 4);
    std::memcpy(a.dst, reinterpret_cast<const uint8_t*>(&k.w[1]) + 4, 4);
  }
  return a;
}

std::string key_bytes(const FlowCount& f) {
  return std::string(reinterpret_cast<const char*>(&f.state), sizeof f.state) +
         std::string(reinterpret_cast<const char*>(&f.key), sizeof f.key);
}

}  // namespace

std::string format_flow_key(const sl_flow_key& key) {
  const uint64_t meta = key.w[0];
  const unsigned mode = meta & 0xff, version = (meta >> 8) & 0xff, bits = (meta >> 16) & 0xff;
  const unsigned proto = (meta >> 24) & 0xff, sport = (meta >> 32) & 0xffff,
                 dport = (meta >> 48) & 0xffff;
  if (version != 4 && version != 6) return "(not IP)";
  const KeyAddrs a = addrs_of(key, version);
  const std::string src = address(a.src, version), dst = address(a.dst, version);
  auto port = [&](const std::string& addr, unsigned p) {
    return version == 6 ? "[" + addr + "]:" + std::to_string(p) : addr + ":" + std::to_string(p);
  };
  switch (mode) {
    case SL_KEY_SRC_IP: return src;
    case SL_KEY_DST_IP: return dst;
    case SL_KEY_SRC_PREFIX: return src + "/" + std::to_string(bits);
    case SL_KEY_DST_PREFIX: return dst + "/" + std::to_string(bits);
    case SL_KEY_SRC_DST: return src + " > " + dst;
    case SL_KEY_FIVE_TUPLE:
      return protocol_name(uint8_t(proto)) + " " + port(src, sport) + " > " + port(dst, dport);
    default: return "(key mode " + std::to_string(mode) + ")";
  }
}

std::vector<uint64_t> active_flows(const std::vector<sl_xdp_rule>& entries,
                                   const FlowSample& sample) {
  std::unordered_map<uint32_t, size_t> rule_of_slot;
  for (size_t i = 0; i < entries.size(); ++i)
    if (entries[i].key_mode != SL_KEY_NONE) rule_of_slot[entries[i].state] = i;
  std::vector<uint64_t> active(entries.size(), 0);
  for (const FlowCount& f : sample.flows) {
    const auto rule = rule_of_slot.find(f.state);
    if (rule == rule_of_slot.end()) continue;
    // the program's rule: idle iff now - last_seen > idle timeout (signed: a clock step back)
    if (int64_t(sample.now_ns - f.last_seen_ns) <= int64_t(entries[rule->second].idle_timeout_ns))
      ++active[rule->second];
  }
  return active;
}

Result<std::vector<FlowRate>> rank_flows(const std::vector<Rule>& rules,
                                         const std::vector<sl_xdp_rule>& entries,
                                         const FlowSample& before, const FlowSample& after,
                                         const TopFlowsQuery& query) {
  if (after.now_ns <= before.now_ns) return make_error("flows top: no time between the samples");
  // State slot -> rule index, for the rules asked about.
  std::unordered_map<uint32_t, size_t> rule_of_slot;
  for (size_t i = 0; i < rules.size() && i < entries.size(); ++i)
    if (query.rule.empty() || rules[i].name == query.rule) rule_of_slot[entries[i].state] = i;
  if (!query.rule.empty() && rule_of_slot.empty())
    return make_error("flows top: no rule named \"" + query.rule + "\"");

  std::unordered_map<std::string, const FlowCount*> earlier;
  earlier.reserve(before.flows.size());
  for (const FlowCount& f : before.flows) earlier.emplace(key_bytes(f), &f);

  struct Ranked {
    FlowRate rate;
    double order;
  };
  std::vector<Ranked> ranked;
  const double seconds = double(after.now_ns - before.now_ns) / 1e9;
  for (const FlowCount& f : after.flows) {
    const auto rule = rule_of_slot.find(f.state);
    if (rule == rule_of_slot.end()) continue;
    uint64_t packets = f.packets, bytes = f.bytes;
    if (auto e = earlier.find(key_bytes(f)); e != earlier.end() && e->second->packets <= packets) {
      packets -= e->second->packets;  // else evicted and created again: all its counts are new
      bytes -= std::min(bytes, e->second->bytes);
    }
    if (packets == 0) continue;
    FlowRate r;
    r.rule = rules[rule->second].name;
    r.key = format_flow_key(f.key);
    r.packets_per_sec = double(packets) / seconds;
    r.bits_per_sec = double(bytes) * 8 / seconds;
    ranked.push_back({std::move(r), 0});
    ranked.back().order = query.by_bytes ? ranked.back().rate.bits_per_sec
                                         : ranked.back().rate.packets_per_sec;
  }
  const size_t n = std::min(query.count, ranked.size());
  auto busier = [](const Ranked& a, const Ranked& b) {
    if (a.order != b.order) return a.order > b.order;
    if (a.rate.rule != b.rate.rule) return a.rate.rule < b.rate.rule;
    return a.rate.key < b.rate.key;
  };
  std::partial_sort(ranked.begin(), ranked.begin() + std::ptrdiff_t(n), ranked.end(), busier);
  std::vector<FlowRate> top;
  top.reserve(n);
  for (size_t i = 0; i < n; ++i) top.push_back(std::move(ranked[i].rate));
  return top;
}

}  // namespace sluice::xdp
