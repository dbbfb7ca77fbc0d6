#include "flow_rates.hpp"

#include <algorithm>
#include <array>
#include <map>
#include <tuple>

#include "flow_key_text.hpp"

namespace sluice {

Result<std::vector<FlowRate>> rank_flows(const std::vector<FlowWindow>& windows,
                                         const std::vector<Pipeline::RuleIdentity>& running,
                                         const TopFlowsQuery& query) {
  std::map<uint64_t, const std::string*> names;  // state id -> rule name, keyed rules only
  for (const Pipeline::RuleIdentity& r : running) {
    if (!query.rule.empty() && r.name != query.rule) continue;
    if (!query.rule.empty() && !r.keyed)
      return make_error("rule \"" + r.name + "\" has key: none: one aggregate bucket, no "
                        "flows (its rate is in sluicectl stats)");
    if (r.keyed) names.emplace(r.state_id, &r.name);
  }
  if (!query.rule.empty() && names.empty())
    return make_error("no rule named \"" + query.rule + "\" is running");

  struct Sum {
    double packets_per_sec = 0, bits_per_sec = 0;
  };
  using Id = std::pair<uint64_t, std::array<uint64_t, 5>>;
  std::map<Id, Sum> sums;
  for (const FlowWindow& w : windows) {
    if (w.end_ns <= w.start_ns) continue;
    const double seconds = double(w.end_ns - w.start_ns) / 1e9;
    // The sketch ranked by what was asked: its weight is the ranked figure (an upper bound),
    // the other one what the key brought since it took its counter.
    const std::vector<FlowCount>& counts = query.by_bytes ? w.by_bytes : w.by_packets;
    for (const FlowCount& c : counts) {
      if (names.find(c.state_id) == names.end()) continue;
      const double packets = double(query.by_bytes ? c.packets : c.weight);
      const double bytes = double(query.by_bytes ? c.weight : c.bytes);
      Sum& s = sums[Id{c.state_id, {c.key.w[0], c.key.w[1], c.key.w[2], c.key.w[3], c.key.w[4]}}];
      s.packets_per_sec += packets / seconds;
      s.bits_per_sec += 8 * bytes / seconds;
    }
  }

  std::vector<FlowRate> out;
  out.reserve(sums.size());
  for (const auto& [id, s] : sums) {
    FlowKey key;
    std::copy(id.second.begin(), id.second.end(), key.w);
    out.push_back({*names.at(id.first), flow_key_text(key), s.packets_per_sec, s.bits_per_sec});
  }
  auto ranked = [&](const FlowRate& f) { return query.by_bytes ? f.bits_per_sec : f.packets_per_sec; };
  std::sort(out.begin(), out.end(), [&](const FlowRate& a, const FlowRate& b) {
    if (ranked(a) != ranked(b)) return ranked(a) > ranked(b);
    return std::tie(a.rule, a.key) < std::tie(b.rule, b.key);
  });
  if (out.size() > query.count) out.resize(query.count);
  return out;
}

}  // namespace sluice
