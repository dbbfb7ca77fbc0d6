#include "counters_json.hpp"

#include <algorithm>
#include <cstdio>
#include <vector>

#include "text_table.hpp"

namespace sluice {

namespace {

void append_field(std::string& out, const char* key, uint64_t value, bool* first) {
  if (!*first) out += ", ";
  *first = false;
  out += '"';
  out += key;
  out += "\": ";
  out += std::to_string(value);
}

void append_rule(std::string& out, const RuleSnapshot& r, const char* indent) {
  out += indent;
  out += "{\"name\": ";
  out += json_quote(r.name);
  bool first = false;
  for_each_rule_counter(r, [&](const char* key, uint64_t value) {
    append_field(out, key, value, &first);
  });
  out += '}';
}

void append_port(std::string& out, const PortSnapshot& p) {
  out += "    {";
  bool first = true;
  append_field(out, "port", p.port, &first);
  for_each_port_counter(p, [&](const char* key, uint64_t value) {
    append_field(out, key, value, &first);
  });
  out += '}';
}

}  // namespace

std::string json_quote(std::string_view text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += char(c);  // UTF-8 passes through unchanged
        }
    }
  }
  out += '"';
  return out;
}

std::string counters_to_json(const CountersSnapshot& s) { return counters_to_json(s, {}); }

std::string counters_to_json(const CountersSnapshot& s, const std::vector<JsonMember>& extra) {
  // One object per line keeps the file diffable and greppable while staying plain JSON.
  std::string out = "{\n  \"rules\": [";
  for (size_t i = 0; i < s.rules.size(); ++i) {
    out += i == 0 ? "\n" : ",\n";
    append_rule(out, s.rules[i], "    ");
  }
  out += s.rules.empty() ? "],\n" : "\n  ],\n";
  out += "  \"default\": ";
  RuleSnapshot def = s.default_rule;
  if (def.name.empty()) def.name = "default";
  append_rule(out, def, "");
  if (!s.removed.empty()) {
    // Only after live rules changes (never in a replay): rules removed while running, with
    // their final counters.
    out += ",\n  \"removed\": [";
    for (size_t i = 0; i < s.removed.size(); ++i) {
      out += i == 0 ? "\n" : ",\n";
      append_rule(out, s.removed[i], "    ");
    }
    out += "\n  ]";
  }
  if (!s.ports.empty()) {
    out += ",\n  \"ports\": [";
    for (size_t i = 0; i < s.ports.size(); ++i) {
      out += i == 0 ? "\n" : ",\n";
      append_port(out, s.ports[i]);
    }
    out += "\n  ]";
  }
  for (const JsonMember& m : extra) {
    out += ",\n  ";
    out += json_quote(m.key);
    out += ": ";
    out += m.json;
  }
  out += "\n}\n";
  return out;
}

std::string counters_to_table(const CountersSnapshot& s) {
  static const Outcome kColumns[] = {Outcome::matched, Outcome::conformed, Outcome::exceeded,
                                     Outcome::passed,  Outcome::dropped,   Outcome::marked,
                                     Outcome::delayed, Outcome::malformed};
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> header = {"rule"};
  for (Outcome o : kColumns) header.push_back(outcome_name(o));
  header.push_back("flows");
  rows.push_back(header);

  auto add_row = [&](const RuleSnapshot& r, const std::string& name) {
    std::vector<std::string> row = {name};
    for (Outcome o : kColumns) row.push_back(std::to_string(r.traffic.pkts(o)));
    row.push_back(std::to_string(r.active_flows));
    rows.push_back(std::move(row));
  };
  for (const RuleSnapshot& r : s.rules) add_row(r, r.name);
  add_row(s.default_rule, s.default_rule.name.empty() ? "default" : s.default_rule.name);

  std::string out = align_columns(rows);
  for (const PortSnapshot& p : s.ports) {
    out += "port " + std::to_string(p.port) + ": rx " + std::to_string(p.rx_packets) + "  tx " +
           std::to_string(p.tx_packets) + "  missed " + std::to_string(p.missed_packets) + "\n";
  }
  return out;
}

}  // namespace sluice
