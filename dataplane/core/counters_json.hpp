// Renders a CountersSnapshot for people and programs: the JSON of SPEC §5 (REPORT.json of a
// replay, `sluicectl stats --json`) and a compact text table (the demo, `sluicectl stats`).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "counters.hpp"

namespace sluice {

// {"rules": [{"name": ..., "<outcome>_packets": ..., "<outcome>_bytes": ..., ...,
//   "active_flows": ..., "flows_evicted": ...}], "default": {...same keys...},
//  "removed": [...same as rules...], "ports": [...]}  ("removed": rules removed while
// running, only when there are any; "ports" only when the snapshot has any). Ends with a
// newline.
std::string counters_to_json(const CountersSnapshot& snapshot);

// A top-level member added after those above (live mode's "dataplane"): its key and its value,
// already rendered as JSON (object members may span lines, indented by two spaces).
struct JsonMember {
  std::string key;
  std::string json;
};
std::string counters_to_json(const CountersSnapshot& snapshot, const std::vector<JsonMember>& extra);

// Calls fn(key, value) for each of a rule's counters, in the order and under the names of
// counters_to_json(): "<outcome>_packets" and "<outcome>_bytes" per outcome, then
// "active_flows" and "flows_evicted". Whatever else lists a rule's counters (telemetry) goes
// through it, so the names cannot drift apart. `r` may be const (fn reads) or not (fn may
// assign through its second argument, as the wire decoder does).
template <class Rule, class Fn>
void for_each_rule_counter(Rule& r, Fn&& fn) {
  for (size_t i = 0; i < kOutcomeCount; ++i) {
    const std::string base = outcome_name(Outcome(i));
    fn((base + "_packets").c_str(), r.traffic.packets[i]);
    fn((base + "_bytes").c_str(), r.traffic.bytes[i]);
  }
  fn("active_flows", r.active_flows);
  fn("flows_evicted", r.flows_evicted);
}

// The same for a port's counters (after "port", its number).
template <class Port, class Fn>
void for_each_port_counter(Port& p, Fn&& fn) {
  fn("rx_packets", p.rx_packets);
  fn("rx_bytes", p.rx_bytes);
  fn("tx_packets", p.tx_packets);
  fn("tx_bytes", p.tx_bytes);
  fn("missed_packets", p.missed_packets);
}

// One line per rule plus the default, packet counts only, columns aligned.
std::string counters_to_table(const CountersSnapshot& snapshot);

// `text` as a JSON string literal, quotes included.
std::string json_quote(std::string_view text);

}  // namespace sluice
