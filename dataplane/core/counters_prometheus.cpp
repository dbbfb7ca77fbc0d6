#include "counters_prometheus.hpp"

#include <string_view>
#include <vector>

#include "counters_json.hpp"

namespace sluice {

namespace {

// A label value: backslash, double quote and newline escaped, as the format requires.
std::string label(std::string_view value) {
  std::string out;
  for (char c : value) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

void family(std::string& out, const char* name, const char* type, const char* help) {
  out += "# HELP ";
  out += name;
  out += ' ';
  out += help;
  out += "\n# TYPE ";
  out += name;
  out += ' ';
  out += type;
  out += '\n';
}

void sample(std::string& out, const std::string& name, const std::string& labels, uint64_t value) {
  out += name;
  if (!labels.empty()) {
    out += '{';
    out += labels;
    out += '}';
  }
  out += ' ';
  out += std::to_string(value);
  out += '\n';
}

}  // namespace

std::string counters_to_prometheus(const CountersSnapshot& s) {
  std::vector<const RuleSnapshot*> rules;
  for (const RuleSnapshot& r : s.rules) rules.push_back(&r);
  rules.push_back(&s.default_rule);
  auto rule_label = [](const RuleSnapshot* r) {
    return "rule=\"" + label(r->name.empty() ? "default" : r->name) + "\"";
  };

  std::string out;
  family(out, "sluice_packets_total", "counter",
         "Packets per rule and outcome (exceeded: non-conforming, whatever the action).");
  for (const RuleSnapshot* r : rules)
    for (size_t o = 0; o < kOutcomeCount; ++o)
      sample(out, "sluice_packets_total",
             rule_label(r) + ",outcome=\"" + outcome_name(Outcome(o)) + "\"", r->traffic.packets[o]);
  family(out, "sluice_bytes_total", "counter", "Bytes per rule and outcome.");
  for (const RuleSnapshot* r : rules)
    for (size_t o = 0; o < kOutcomeCount; ++o)
      sample(out, "sluice_bytes_total",
             rule_label(r) + ",outcome=\"" + outcome_name(Outcome(o)) + "\"", r->traffic.bytes[o]);
  family(out, "sluice_active_flows", "gauge",
         "Flows holding a bucket now, per rule (1 for a rule keyed none).");
  for (const RuleSnapshot* r : rules) sample(out, "sluice_active_flows", rule_label(r), r->active_flows);
  family(out, "sluice_flows_evicted_total", "counter",
         "Flows evicted to make room for new ones, per rule.");
  for (const RuleSnapshot* r : rules)
    sample(out, "sluice_flows_evicted_total", rule_label(r), r->flows_evicted);

  // One family per port counter, named after for_each_port_counter's keys.
  if (!s.ports.empty()) {
    std::vector<std::string> names;
    for_each_port_counter(s.ports.front(), [&](const char* key, uint64_t) {
      names.push_back(std::string("sluice_port_") + key + "_total");
    });
    for (size_t k = 0; k < names.size(); ++k) {
      family(out, names[k].c_str(), "counter", "Per-port counter of the ethdev (rte_eth_stats).");
      for (const PortSnapshot& p : s.ports) {
        size_t i = 0;
        for_each_port_counter(p, [&](const char*, uint64_t value) {
          if (i++ == k) sample(out, names[k], "port=\"" + std::to_string(p.port) + "\"", value);
        });
      }
    }
  }
  for (const NamedCounter& c : s.dataplane) {
    // A gauge must not end in _total (promtool): the pool's "mbufs_total" is its capacity.
    std::string base = c.name;
    if (c.gauge && base.size() > 6 && base.compare(base.size() - 6, 6, "_total") == 0)
      base.replace(base.size() - 6, 6, "_capacity");
    const std::string name = "sluice_dataplane_" + base + (c.gauge ? "" : "_total");
    family(out, name.c_str(), c.gauge ? "gauge" : "counter",
           "The live dataplane, outside the rules (REPORT.json \"dataplane\").");
    sample(out, name, "", c.value);
  }
  return out;
}

}  // namespace sluice
