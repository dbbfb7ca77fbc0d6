#include "counters_wire.hpp"

#include <charconv>
#include <vector>

#include "counters_json.hpp"

namespace sluice {

namespace {

// " KEY VALUE": one pair of a line.
void append_pair(std::string& out, std::string_view key, uint64_t value) {
  out += ' ';
  out += key;
  out += ' ';
  out += std::to_string(value);
}

void append_counters(std::string& out, const RuleSnapshot& r) {
  for_each_rule_counter(r, [&](const char* key, uint64_t value) { append_pair(out, key, value); });
  out += '\n';
}

std::vector<std::string_view> split_words(std::string_view line) {
  std::vector<std::string_view> words;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && line[i] == ' ') ++i;
    const size_t start = i;
    while (i < line.size() && line[i] != ' ') ++i;
    if (i > start) words.push_back(line.substr(start, i - start));
  }
  return words;
}

bool parse_u64(std::string_view s, uint64_t* out) {
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && end == s.data() + s.size();
}

template <class Fn>
void for_each_counter(RuleSnapshot& r, Fn&& fn) {
  for_each_rule_counter(r, fn);
}
template <class Fn>
void for_each_counter(PortSnapshot& p, Fn&& fn) {
  for_each_port_counter(p, fn);
}

// Calls fn(key, value) for each "KEY VALUE" pair of words[2..].
template <class Fn>
Status for_each_pair(const std::vector<std::string_view>& words, Fn&& fn) {
  if (words.size() % 2 != 0) return make_error("a counter without a value");
  for (size_t i = 2; i < words.size(); i += 2) {
    uint64_t value = 0;
    if (!parse_u64(words[i + 1], &value))
      return make_error("counter " + std::string(words[i]) + ": not a number: " +
                        std::string(words[i + 1]));
    fn(words[i], value);
  }
  return Ok{};
}

// Assigns each pair to the counter of that name in `target`.
template <class Target>
Status read_pairs(const std::vector<std::string_view>& words, Target& target) {
  return for_each_pair(words, [&](std::string_view name, uint64_t value) {
    for_each_counter(target, [&](const char* key, uint64_t& slot) {
      if (name == key) slot = value;
    });
  });
}

}  // namespace

std::string encode_counters(const CountersSnapshot& snapshot) {
  std::string out;
  for (const RuleSnapshot& r : snapshot.rules) {
    out += "rule ";
    out += r.name;
    append_counters(out, r);
  }
  out += "default default";
  append_counters(out, snapshot.default_rule);
  for (const PortSnapshot& p : snapshot.ports) {
    out += "port ";
    out += std::to_string(p.port);
    for_each_port_counter(p, [&](const char* key, uint64_t value) { append_pair(out, key, value); });
    out += '\n';
  }
  for (const bool gauges : {false, true}) {
    std::string line;
    for (const NamedCounter& c : snapshot.dataplane)
      if (c.gauge == gauges) append_pair(line, c.name, c.value);
    if (!line.empty()) out += (gauges ? "dataplane gauges" : "dataplane counters") + line + '\n';
  }
  return out;
}

Result<CountersSnapshot> decode_counters(std::string_view text) {
  CountersSnapshot snap;
  bool have_default = false;
  size_t line_no = 0;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    const std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    ++line_no;
    const auto words = split_words(line);
    if (words.empty()) continue;
    const std::string where = "counters line " + std::to_string(line_no) + ": ";
    if (words.size() < 2) return make_error(where + "expected a kind and a name");
    Status read = Ok{};
    if (words[0] == "rule" || words[0] == "default") {
      RuleSnapshot r;
      r.name = std::string(words[1]);
      read = read_pairs(words, r);
      if (words[0] == "default") {
        snap.default_rule = std::move(r);
        have_default = true;
      } else {
        snap.rules.push_back(std::move(r));
      }
    } else if (words[0] == "port") {
      PortSnapshot p;
      uint64_t id = 0;
      if (!parse_u64(words[1], &id) || id > 0xffff)
        return make_error(where + "not a port number: " + std::string(words[1]));
      p.port = uint16_t(id);
      read = read_pairs(words, p);
      snap.ports.push_back(p);
    } else if (words[0] == "dataplane") {
      if (words[1] != "counters" && words[1] != "gauges")
        return make_error(where + "dataplane: expected counters or gauges, not " +
                          std::string(words[1]));
      const bool gauges = words[1] == "gauges";
      read = for_each_pair(words, [&](std::string_view name, uint64_t value) {
        snap.dataplane.push_back({std::string(name), value, gauges});
      });
    } else {
      return make_error(where + "unknown kind " + std::string(words[0]));
    }
    if (!read) return make_error(where + read.error().message);
  }
  if (!have_default) return make_error("counters: no line for the default rule");
  return snap;
}

}  // namespace sluice
